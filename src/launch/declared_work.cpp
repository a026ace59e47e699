// Declared work (declared_work.hpp): the checks and the ordering before the callable runs.
#include "cudakit/declared_work.hpp"

#include "cudakit/context.hpp"
#include "cudakit/detail/capture_guard.hpp"
#include "cudakit/error.hpp"
#include "device/device_state.hpp"

namespace cudakit::detail {

namespace {

// The checks, then the ordering of every use; the caller makes a context current after.
void order_uses(const StreamRef& stream, const DeclaredUse* uses, std::size_t count) {
  stream.require_handle("declared work");
  check_not_poisoned("declared work", Resource::of(ResourceKind::stream, stream.handle(), stream.device_ordinal()));
  check_capturing_thread(stream.state(), "declared work");  // DESIGN 9
  // DESIGN 5: every declared buffer hears of the access before the work is submitted. A
  // buffer on another device (peer memory) is ordered the same way: the wait is an event
  // recorded on that device's stream, which cuStreamWaitEvent accepts across devices.
  for (std::size_t i = 0; i < count; ++i) uses[i].allocation->use(stream, uses[i].access);
}

}  // namespace

// The context is made current last: ordering a peer buffer may have made its device's
// context current, and the callable may use the runtime API.
void declare_uses(const StreamRef& stream, const DeclaredUse* uses, std::size_t count) {
  order_uses(stream, uses, count);
  const int device = stream.device_ordinal();
  ContextRef(library_context(device), device).make_current();
}

void declare_uses(const StreamRef& stream, const DeclaredUse* uses, std::size_t count, ContextRef current) {
  order_uses(stream, uses, count);
  current.make_current();
}

}  // namespace cudakit::detail
