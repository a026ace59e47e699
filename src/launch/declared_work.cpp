// Declared work (declared_work.hpp): the checks and the ordering before the callable runs.
#include "cudakit/declared_work.hpp"

#include "cudakit/context.hpp"
#include "cudakit/detail/capture_guard.hpp"
#include "cudakit/error.hpp"
#include "device/device_state.hpp"

namespace cudakit::detail {

void declare_uses(const StreamRef& stream, const DeclaredUse* uses, std::size_t count) {
  stream.require_handle("declared work");
  const int device = stream.device_ordinal();
  check_not_poisoned("declared work", Resource::of(ResourceKind::stream, stream.handle(), device));
  check_capturing_thread(stream.state(), "declared work");  // DESIGN 9
  // DESIGN 5: every declared buffer hears of the access before the work is submitted. A
  // buffer on another device (peer memory) is ordered the same way: the wait is an event
  // recorded on that device's stream, which cuStreamWaitEvent accepts across devices.
  for (std::size_t i = 0; i < count; ++i) uses[i].allocation->use(stream, uses[i].access);
  // Last: ordering a peer buffer may have made its device's context current.
  ContextRef(library_context(device), device).make_current();  // the callable may use the runtime API
}

}  // namespace cudakit::detail
