// Declared work (declared_work.hpp): the checks and the ordering before the callable runs.
#include "cudakit/declared_work.hpp"

#include "cudakit/context.hpp"
#include "cudakit/detail/capture_guard.hpp"
#include "cudakit/error.hpp"
#include "device/device_state.hpp"
#include "driver/profiler_names.hpp"

namespace cudakit::detail {

void declare_uses(const StreamRef& stream, const DeclaredUse* uses, std::size_t count) {
  order_declared_uses(stream, uses, count);
  const int device = stream.device_ordinal();
  ContextRef(library_context(device), device).make_current();
}

DeclaredWorkRange::DeclaredWorkRange() noexcept { profiler::push(profiler::Activity::declared_work); }

DeclaredWorkRange::~DeclaredWorkRange() { profiler::pop(); }

}  // namespace cudakit::detail
