// The text of cudakit's device headers (include/cudakit/device/), for kernels compiled at
// run time: an NVRTC program includes them by their usual names once it has been given
// their text.
//
//   Program program(source, "step.cu");
//   add_device_headers(program);   // #include <cudakit/device/programmatic_launch.cuh> now resolves
//
// The headers hold only inline device functions (inline PTX, builtins), so a program
// compiled with nvcc includes the same files from the include path instead.
//
// Thread safety: the texts are constants; use from any thread.
#pragma once

#include <span>
#include <string_view>

#include "cudakit/export.hpp"
#include "cudakit/program.hpp"

namespace cudakit {

/// One device header: its include name ("cudakit/device/programmatic_launch.cuh") and text.
struct CUDAKIT_API DeviceHeader {
  std::string_view include_name;
  std::string_view text;
};

/// Every device header cudakit installs.
CUDAKIT_API std::span<const DeviceHeader> device_headers() noexcept;

/// Gives `program` the text of every device header (Program::header), so its source may
/// include them; returns `program`.
CUDAKIT_API Program& add_device_headers(Program& program);

}  // namespace cudakit
