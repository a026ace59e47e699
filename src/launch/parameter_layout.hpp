// Internal: kernel parameter layouts read from a module image, so that a kernel's
// parameters are known without asking the driver.
//
// Asking the driver (cuFuncGetParamInfo) has no "how many" form: the only way to learn the
// count is to ask for one index past the last and get CUDA_ERROR_INVALID_VALUE, which
// compute-sanitizer reports as an API error in a correct program. The image already says
// it: every cubin has, per kernel, a `.nv.info.<kernel>` section whose EIATTR_KPARAM_INFO
// records give each parameter's ordinal, offset and size. Those are read here, from a
// cubin or from each cubin a fatbin carries uncompressed. PTX carries none, and a
// compressed fatbin entry is not unpacked: such kernels are left out, and the driver is
// asked as before (kernel.cpp).
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "cudakit/detail/function_state.hpp"

namespace cudakit::detail {

/// Each kernel's parameters in order, by the name the driver knows (mangled for C++).
using ParameterLayouts = std::map<std::string, std::vector<ParameterInfo>, std::less<>>;

/// The layouts the image states. Never throws for what it cannot read (a truncated or
/// unusual section, a compressed entry): those kernels are left out.
ParameterLayouts read_parameter_layouts(std::span<const std::byte> image);

}  // namespace cudakit::detail
