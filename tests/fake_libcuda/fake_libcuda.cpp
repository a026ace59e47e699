// A stand-in libcuda.so.1 for the real loader's unit tests (driver_loader_test.cpp):
// it exports what the loader looks up with dlsym, and nothing else, so the loader's
// paths that need a real driver (no device, a failing cuInit, an old driver, an entry
// the driver lacks) run on a machine without one. CUDAKIT_FAKE_LIBCUDA_MODE picks:
//   ""            a CUDA 12.8 driver whose cuGetProcAddress finds only cuInit and
//                 cuDriverGetVersion
//   "no_device"   cuInit returns CUDA_ERROR_NO_DEVICE
//   "init_failed" cuInit returns CUDA_ERROR_OPERATING_SYSTEM
//   "old"         the driver is CUDA 11.8
#include <cuda.h>

#include <cstdlib>
#include <cstring>

namespace {
bool mode_is(const char* m) {
  const char* mode = std::getenv("CUDAKIT_FAKE_LIBCUDA_MODE");
  return std::strcmp(mode ? mode : "", m) == 0;
}
}  // namespace

extern "C" {

CUresult CUDAAPI cuInit(unsigned int) {
  if (mode_is("no_device")) return CUDA_ERROR_NO_DEVICE;
  if (mode_is("init_failed")) return CUDA_ERROR_OPERATING_SYSTEM;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDriverGetVersion(int* version) {
  if (version == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *version = mode_is("old") ? 11080 : 12080;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGetProcAddress_v2(const char* symbol, void** pfn, int, cuuint64_t,
                                     CUdriverProcAddressQueryResult* status) {
  if (symbol == nullptr || pfn == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *pfn = nullptr;
  if (std::strcmp(symbol, "cuInit") == 0) *pfn = reinterpret_cast<void*>(&cuInit);
  if (std::strcmp(symbol, "cuDriverGetVersion") == 0) *pfn = reinterpret_cast<void*>(&cuDriverGetVersion);
  if (status != nullptr) *status = *pfn ? CU_GET_PROC_ADDRESS_SUCCESS : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  return *pfn ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

}  // extern "C"
