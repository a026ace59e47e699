#include "cudakit/kernel_args.hpp"

#include "cudakit/error.hpp"

namespace cudakit {

KernelArgs& KernelArgs::add_bytes(const void* data, std::size_t size, std::size_t alignment) {
  if (size == 0) throw InvalidArgument("KernelArgs::add_bytes: a parameter of 0 bytes");
  if (alignment == 0 || (alignment & (alignment - 1)) != 0)
    throw InvalidArgument("KernelArgs::add_bytes: alignment " + std::to_string(alignment) + " is not a power of two");
  std::size_t offset = (storage_.size() + alignment - 1) / alignment * alignment;
  storage_.resize(offset + size);
  std::memcpy(storage_.data() + offset, data, size);
  entries_.push_back({offset, size, nullptr, -1, Access::read});
  return *this;
}

void KernelArgs::clear() noexcept {
  storage_.clear();
  entries_.clear();
}

}  // namespace cudakit
