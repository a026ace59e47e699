// Fuzz body: module images as a file gives them (src/launch/module_image.cpp: fatbin,
// cubin/ELF and PTX detection; src/launch/parameter_layout.cpp: the kernels' parameter
// records of a cubin). A refusal is InvalidArgument; a result never claims more bytes
// than it was given, nor an architecture no GPU has.
#pragma once

#include <span>

#include "cudakit/error.hpp"
#include "cudakit/module_image.hpp"
#include "fuzz_check.hpp"
#include "launch/parameter_layout.hpp"

namespace cudakit::fuzz {

inline void module_image_one_input(std::span<const std::byte> image) {
  try {
    const ImageContents c = inspect_image(image);
    fuzz_check(c.size <= image.size(), "an image of " + std::to_string(image.size()) + " bytes said it spans " +
                                           std::to_string(c.size));
    for (int arch : c.ptx) fuzz_check(arch >= 0 && arch < 10000, "a PTX target of " + std::to_string(arch));
    for (int arch : c.machine_code)
      fuzz_check(arch >= 0 && arch < 10000, "machine code for architecture " + std::to_string(arch));
    (void)c.describe();
  } catch (const InvalidArgument&) {
    // a refusal with its message: what should happen to most inputs
  }
  for (const auto& [kernel, parameters] : detail::read_parameter_layouts(image)) {
    fuzz_check(!kernel.empty(), "a kernel without a name");
    for (const auto& p : parameters) fuzz_check(p.size > 0, "a parameter of 0 bytes in " + kernel);
  }
}

}  // namespace cudakit::fuzz
