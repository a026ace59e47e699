// Internal: a capture as cudakit begins it (capture.cpp): the stream layer's books
// (src/stream/capture_state.hpp), and what the capture hands to its graph at the end.
#pragma once

#include <unordered_set>

#include "cudakit/detail/function_state.hpp"
#include "cudakit/detail/ref.hpp"
#include "graph/graph_resources.hpp"
#include "stream/capture_state.hpp"

namespace cudakit::detail {

struct GraphCapture : CaptureState {
  // What the graph keeps alive: the buffers its nodes touch, its host callables, its
  // kernels' handles, and what libraries hand over (a communicator). Handed to the graph
  // at the end.
  Ref<GraphResources> resources;
  // The kernels launched in the capture (their state), each kept once by the graph.
  std::unordered_set<const FunctionState*> kernels;
};

/// The capture a stream's mark names. Every capture cudakit marks a stream with is a
/// GraphCapture: Capture's constructor is the only place one begins.
inline GraphCapture& graph_capture(CaptureState* c) { return static_cast<GraphCapture&>(*c); }

}  // namespace cudakit::detail
