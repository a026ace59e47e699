#include "cudakit/launch_config.hpp"

#include "cudakit/error.hpp"

namespace cudakit {

std::string to_string(Dim3 d) {
  return "(" + std::to_string(d.x) + ", " + std::to_string(d.y) + ", " + std::to_string(d.z) + ")";
}

namespace detail {

void throw_bad_extent(long long value) {
  throw InvalidArgument("a launch extent of " + std::to_string(value) + " is negative");
}

void throw_bad_extent(unsigned long long value) {
  throw InvalidArgument("a launch extent of " + std::to_string(value) + " does not fit in 32 bits");
}

Dim3 grid_for_count(std::uint64_t n, unsigned block, bool negative) {
  if (negative) throw InvalidArgument("grid_for: a negative item count");
  if (block == 0) throw InvalidArgument("grid_for(" + std::to_string(n) + ", 0): a block of 0 threads");
  std::uint64_t blocks = n / block + (n % block != 0);
  if (blocks > 0xffffffffull)
    throw InvalidArgument("grid_for(" + std::to_string(n) + ", " + std::to_string(block) + ") needs " +
                          std::to_string(blocks) + " blocks, more than a grid dimension holds");
  return Dim3(static_cast<unsigned>(blocks));
}

}  // namespace detail

Dim3 grid_for(Dim3 extent, Dim3 block) {
  if (block.x == 0 || block.y == 0 || block.z == 0)
    throw InvalidArgument("grid_for(" + to_string(extent) + ", " + to_string(block) + "): a block with a zero extent");
  auto cover = [](unsigned n, unsigned b) { return n / b + (n % b != 0); };
  return Dim3(cover(extent.x, block.x), cover(extent.y, block.y), cover(extent.z, block.z));
}

}  // namespace cudakit
