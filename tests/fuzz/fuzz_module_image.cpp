// libFuzzer entry for module_image_target.hpp.
#include <cstddef>
#include <cstdint>
#include <span>

#include "module_image_target.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  cudakit::fuzz::module_image_one_input(std::as_bytes(std::span(data, size)));
  return 0;
}
