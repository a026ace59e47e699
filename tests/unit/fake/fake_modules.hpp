// The fake driver's modules, libraries and launches.
//
// A fake module image describes host-implemented kernels: each has a name, its parameter
// sizes and alignments, and a host function that runs (synchronously) when the kernel is
// launched. The function sees the parameter block exactly as the GPU would (the bytes
// cudakit packed, at the kernel's offsets), may read and write fake device memory (host
// memory), and records its accesses in the ordering model on the launch's stream, so that a
// launch that is not ordered after a conflicting one on another stream is a hazard.
//
// Images are registered with add_image() and named by an id that the image bytes carry
// (a marker text inside a PTX text, a crafted cubin or a crafted fatbin), so the same
// kernels can be loaded from every format and the format logic stays real.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "fake_driver.hpp"

namespace cudakit::fake {

struct FakeParam {
  std::size_t size = 0;
  std::size_t align = 1;
};

/// The parameter list of a kernel with these C++ parameter types.
template <class... T>
std::vector<FakeParam> params() {
  return {FakeParam{sizeof(T), alignof(T)}...};
}

/// One launch as the fake saw it.
struct FakeLaunch {
  std::string kernel;
  CUstream stream = nullptr;
  unsigned grid[3] = {1, 1, 1};
  unsigned block[3] = {1, 1, 1};
  unsigned shared_bytes = 0;
  std::vector<std::byte> params;       // the parameter block as the GPU sees it
  std::vector<std::size_t> offsets;    // each parameter's offset in it
  bool through_ex = false;             // cuLaunchKernelEx (else cuLaunchKernel)
  std::vector<CUlaunchAttribute> attributes;

  template <class T>
  T param(std::size_t index) const {
    T v;
    std::memcpy(&v, params.data() + offsets.at(index), sizeof v);
    return v;
  }
  /// For kernel bodies: an access by this launch, on its stream.
  void read(const void* device_pointer, std::size_t bytes) const;
  void write(const void* device_pointer, std::size_t bytes) const;
  const CUlaunchAttribute* attribute(CUlaunchAttributeID id) const;
};

struct FakeKernel {
  std::string name;
  std::vector<FakeParam> params;
  std::function<void(const FakeLaunch&)> body;  // may be empty: the kernel does nothing
  /// CUfunction_attribute values other than the defaults (max threads 1024, no static
  /// shared memory, no cluster requirements).
  std::map<int, int> attributes;
};

struct FakeImage {
  std::vector<FakeKernel> kernels;
  std::string info_log;   // written to CU_JIT_INFO_LOG_BUFFER on load
  std::string error_log;  // written to CU_JIT_ERROR_LOG_BUFFER when the load fails
  CUresult load_result = CUDA_SUCCESS;
};

/// Registers an image with the fake in use; returns the id its bytes carry.
int add_image(FakeImage image);

/// Image bytes naming image `id`: PTX text for compute_`target` (no terminating NUL), a
/// cubin for sm_`arch` (ELF ABI version `abi`: 8 puts the arch in e_flags bits 8-15, 7 in
/// the low byte), a fatbin with machine code and PTX entries for the given architectures.
std::vector<unsigned char> ptx_image(int id, int target = 90);
std::vector<unsigned char> cubin_image(int id, int arch = 90, int abi = 8);
/// A cubin that also states its kernels' parameter layouts, as nvcc writes them (a
/// `.nv.info.<kernel>` section per kernel with its EIATTR_KPARAM_INFO records).
std::vector<unsigned char> cubin_image_with_parameter_info(int id, int arch = 90);
/// `parameter_info`: its cubins state the layouts (as above).
std::vector<unsigned char> fatbin_image(int id, const std::vector<int>& machine_code, const std::vector<int>& ptx,
                                        bool parameter_info = false);

/// Every launch so far, oldest first.
std::vector<FakeLaunch> launches();
/// The JIT option keys of the last module or library load.
std::vector<CUjit_option> last_jit_options();

/// For the graph area (fake_graphs.cpp): the parameter sizes of a live fake function
/// (false when `f` is not one), and a graph replay of a kernel node as a launch on `s`.
bool function_parameter_sizes(CUfunction f, std::vector<std::size_t>* sizes);
CUresult replay_kernel(CUfunction f, const unsigned grid[3], const unsigned block[3], unsigned shared, CUstream s,
                       void** params);

}  // namespace cudakit::fake
