// Module images: what a cubin, PTX or fatbin holds, read from its headers without a
// driver, and which code a GPU would run from it.
//
// The driver loads three formats, which cudakit tells apart by their first bytes:
//   cubin   an ELF file for EM_CUDA: machine code (SASS) for one architecture
//   fatbin  magic 0xBA55ED50: several entries, each SASS for an sm_XY or PTX for a compute_XY
//   PTX     text (".version", ".target sm_XY", ...): compiled by the driver's JIT at load
//
// choose_code() predicts what the driver runs on a given GPU, by the driver's own rules:
// machine code runs on GPUs of its major architecture with an equal or newer minor
// version (sm_80 code runs on sm_86, not on sm_90); PTX runs, JIT-compiled, on any GPU at
// least as new as its target. Native code wins when there is any. JitPolicy::refuse makes
// the silent fallback to JIT an error that names what the image does have.
//
// Thread safety: free functions on values; use from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "cudakit/export.hpp"
#include "cudakit/device.hpp"

namespace cudakit {

/// The three image formats the driver loads.
enum class ImageFormat : std::uint8_t {
  cubin,   ///< an ELF file with machine code for one architecture
  ptx,     ///< PTX text
  fatbin,  ///< a bundle of cubins and PTX for several architectures
};

/// "cubin", "PTX", "fatbin".
CUDAKIT_API const char* to_string(ImageFormat format) noexcept;

/// What an image holds, read from its headers.
struct CUDAKIT_API ImageContents {
  ImageFormat format = ImageFormat::cubin;
  /// Architectures with machine code, as numbers: 90 for sm_90.
  std::vector<int> machine_code;
  /// PTX targets, as numbers: 90 for compute_90.
  std::vector<int> ptx;
  /// Bytes the image spans (PTX: the text without its terminating NUL).
  std::size_t size = 0;

  /// "fatbin with machine code for sm_90 and PTX for compute_90".
  std::string describe() const;
};

/// Reads an image's headers. Throws InvalidArgument for an image that is none of the
/// three formats (naming its first bytes), is truncated, or is an ELF file for another
/// machine.
CUDAKIT_API ImageContents inspect_image(std::span<const std::byte> image);

/// Whether the driver may JIT-compile PTX when an image has no machine code for the GPU.
enum class JitPolicy : std::uint8_t {
  allow,   ///< run PTX through the JIT when there is no machine code for the GPU (the driver's default)
  refuse,  ///< an image without machine code for the GPU is an error
};

/// What the driver runs from an image.
enum class CodeKind : std::uint8_t {
  native,  ///< machine code built for this GPU's architecture
  jit,     ///< PTX, JIT-compiled by the driver at load time
};

/// "native machine code" / "JIT-compiled PTX".
CUDAKIT_API const char* to_string(CodeKind kind) noexcept;

/// What the driver runs from an image on one GPU (choose_code()).
struct CUDAKIT_API CodeChoice {
  CodeKind kind = CodeKind::native;
  /// The machine code's architecture (native) or the PTX target (jit), e.g. 90.
  int arch = 0;
};

/// What a GPU of compute capability `device` runs from `contents`. Throws InvalidArgument
/// when nothing in the image can run there, or when only PTX can and `policy` refuses JIT;
/// the message starts with `what` ("module image 'k.fatbin'") and names the architectures
/// the image has and the GPU's. CUDA_FORCE_PTX_JIT=1 in the environment makes the driver
/// prefer PTX, and this function follows it.
CUDAKIT_API CodeChoice choose_code(const ImageContents& contents, ComputeCapability device, JitPolicy policy,
                       const std::string& what);

}  // namespace cudakit
