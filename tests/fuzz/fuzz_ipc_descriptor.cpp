// libFuzzer entry for ipc_descriptor_target.hpp.
#include <cstddef>
#include <cstdint>
#include <span>

#include "ipc_descriptor_target.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  cudakit::fuzz::ipc_descriptor_one_input(std::as_bytes(std::span(data, size)));
  return 0;
}
