// What every example shares: main's error handling. Without a usable driver or GPU an
// example prints one line saying why and exits 2; a wrong result or an error exits 1.
#pragma once

#include <cstdio>
#include <exception>

#include "cudakit/cudakit.hpp"

namespace example {

/// Runs `body` (returns 0 on success, nonzero on a wrong result) and maps exceptions to
/// exit codes: DriverUnavailable 2, anything else 1.
template <class Body>
int run(const char* name, Body&& body) {
  try {
    cudakit::driver::ensure_loaded();
    if (cudakit::Device::count() == 0) {
      std::printf("%s: no GPU: the driver reports no CUDA device\n", name);
      return 2;
    }
    return body();
  } catch (const cudakit::DriverUnavailable& e) {
    std::printf("%s: no GPU: %s\n", name, e.what());
    return 2;
  } catch (const std::exception& e) {
    std::printf("%s: FAILED: %s\n", name, e.what());
    return 1;
  }
}

}  // namespace example
