// The umbrella header: includes every public cudakit header, and nothing else.
#pragma once

#include "cudakit/context.hpp"
#include "cudakit/device.hpp"
#include "cudakit/driver.hpp"
#include "cudakit/error.hpp"
#include "cudakit/event.hpp"
#include "cudakit/stream.hpp"
#include "cudakit/device_buffer.hpp"
#include "cudakit/device_span.hpp"
#include "cudakit/tracking.hpp"
#include "cudakit/packed_arguments.hpp"
#include "cudakit/graph.hpp"
#include "cudakit/graph_exec.hpp"
#include "cudakit/capture.hpp"
