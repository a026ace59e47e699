// libFuzzer entry for safetensors_target.hpp.
#include <cstddef>
#include <cstdint>
#include <span>

#include "safetensors_target.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  cudakit::fuzz::safetensors_one_input(std::as_bytes(std::span(data, size)));
  return 0;
}
