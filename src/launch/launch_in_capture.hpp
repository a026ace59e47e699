// Internal: how a launch inside a capture hands its kernel to the capture's graph
// (cudakit/detail/launch_in_capture.hpp). The graph is the layer above; it installs the hook.
#pragma once

#include "stream/capture_state.hpp"

namespace cudakit {
class Function;
}

namespace cudakit::detail {

/// Makes `capture`'s graph keep `function` (and so its module) alive, once per kernel.
/// Installed by the layer that makes graphs (the only one that begins captures).
using CapturedKernelHook = void (*)(CaptureState* capture, const Function& function);
extern CapturedKernelHook keep_kernel_for_capture;

}  // namespace cudakit::detail
