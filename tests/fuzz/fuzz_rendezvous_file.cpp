// libFuzzer entry for rendezvous_file_target.hpp.
#include <cstddef>
#include <cstdint>
#include <span>

#include "rendezvous_file_target.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  cudakit::fuzz::rendezvous_file_one_input(std::span<const unsigned char>(data, size));
  return 0;
}
