// Internal: what cudakit knows about one kernel in one context, shared by every Kernel and
// Function handle to it and owned by its Module or Library (which the handles keep alive).
//
// The limits a launch is checked against are copied here when the kernel is looked up, so
// the check reads plain fields: no lock, no driver call, no device-state lookup (DESIGN 8
// and 10). The few things that change later are atomics (the raised dynamic shared memory
// limit, a cooperative-launch occupancy cache) or are set once (parameter info).
#pragma once

#include <cuda.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "cudakit/export.hpp"
#include "cudakit/device.hpp"

namespace cudakit {

/// Where a kernel parameter sits in the parameter block, as cuFuncGetParamInfo says.
struct CUDAKIT_API ParameterInfo {
  std::size_t offset = 0;
  std::size_t size = 0;
  friend bool operator==(const ParameterInfo&, const ParameterInfo&) = default;
};

namespace detail {

enum class ParameterInfoState : std::uint8_t { unknown, known, unavailable };

struct CUDAKIT_API FunctionState {
  CUfunction function = nullptr;
  CUcontext context = nullptr;
  int device = -1;
  /// The name the driver knows (mangled for C++ kernels).
  std::string name;
  /// What messages call the kernel: the name asked for ("fill_value<float>") with the
  /// driver's name where they differ.
  std::string label;
  /// "kernel '<label>'", kept for the life of the process: a launch leaves it in its
  /// stream's state, which may outlive this kernel's module (stream_state.hpp).
  const char* launch_label = "kernel";
  ComputeCapability compute_capability;

  // Launch limits, read at lookup.
  std::uint32_t max_threads = 0;         // min of the two below
  std::uint32_t device_max_threads = 0;  // CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK
  std::uint32_t kernel_max_threads = 0;  // CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK (registers limit it)
  std::uint32_t max_block[3] = {};
  std::uint32_t max_grid[3] = {};
  std::uint32_t shared_per_block = 0;    // without opting in (48 KiB)
  std::uint32_t shared_optin = 0;        // the device's opt-in maximum
  std::uint32_t static_shared = 0;       // CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES
  bool cooperative_supported = false;
  bool clusters_supported = false;
  int multiprocessors = 0;
  int priority_least = 0, priority_greatest = 0;
  std::uint32_t required_cluster[3] = {};  // __cluster_dims__ compiled in, 0 when none
  bool non_portable_cluster_allowed = false;
  bool cluster_size_must_be_set = false;

  // The kernel's CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES as cudakit last set or read it.
  std::atomic<std::uint32_t> dynamic_shared_limit{0};
  std::mutex raise_mutex;  // raising it (not on the hot path: once per new maximum)

  // Cooperative launches: (threads, dynamic shared bytes) -> max active blocks per
  // multiprocessor, the last answer, packed in one word (threads:12 | shared:24 | blocks:16 | valid:1).
  std::atomic<std::uint64_t> cooperative_cache{0};

  // The kernel's parameters: from its image when the image states them (set_parameters,
  // before the state is shared), else read once through cuFuncGetParamInfo (CUDA 12.4+).
  // parameters_state and parameters are written under parameters_mutex, then published by
  // parameters_ready (release). Not a std::call_once: a failed read throws, and
  // ThreadSanitizer's pthread_once is not exception-safe (under TSan,
  // the call after a failed read hangs).
  std::atomic<bool> parameters_ready{false};
  std::mutex parameters_mutex;
  ParameterInfoState parameters_state = ParameterInfoState::unknown;
  std::vector<ParameterInfo> parameters;
};

/// Builds the state of `function` (in device `device`'s primary context, which must be
/// current): reads the device's limits and the kernel's attributes.
CUDAKIT_API void init_function_state(FunctionState& state, CUfunction function, int device, CUcontext context, std::string name,
                         std::string label);

/// Records the kernel's parameters as its image states them (parameter_layout.hpp), so no
/// driver call is needed for them. Only before `state` is shared with other threads.
CUDAKIT_API void set_parameters(FunctionState& state, std::vector<ParameterInfo> parameters);

/// The kernel's parameters; throws FeatureUnavailable on drivers before 12.4.
CUDAKIT_API const std::vector<ParameterInfo>& parameters_of(FunctionState& state);
/// The kernel's parameters, or null on drivers before 12.4.
CUDAKIT_API const std::vector<ParameterInfo>* parameters_if_known(FunctionState& state);

}  // namespace detail
}  // namespace cudakit
