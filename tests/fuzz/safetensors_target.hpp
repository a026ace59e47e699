// Fuzz body: the decoder example's safetensors loader (examples/decoder/safetensors.cpp)
// on a whole file's bytes. A refusal is SafetensorsError; an accepted file's tensors lie
// back to back inside its data, each exactly its shape's elements times its dtype's size.
#pragma once

#include <span>

#include "fuzz_check.hpp"
#include "safetensors.hpp"

namespace cudakit::fuzz {

inline void safetensors_one_input(std::span<const std::byte> bytes) {
  try {
    const auto s = decoder::Safetensors::parse_file(bytes, "fuzz");
    std::size_t next = 0;
    for (const auto& t : s.tensors()) {
      fuzz_check(t.offset == next, "tensor '" + t.name + "' is not back to back");
      fuzz_check(t.bytes <= s.data_bytes() - t.offset, "tensor '" + t.name + "' reaches past the data");
      fuzz_check(t.elements() >= 0, "tensor '" + t.name + "' has a negative element count");
      fuzz_check(static_cast<std::uint64_t>(t.elements()) * decoder::dtype_size(t.dtype) == t.bytes,
                 "tensor '" + t.name + "' disagrees with its shape");
      next = t.offset + t.bytes;
    }
    fuzz_check(next == s.data_bytes(), "the tensors do not cover the data");
  } catch (const decoder::SafetensorsError&) {
    // a refusal with its message
  }
}

}  // namespace cudakit::fuzz
