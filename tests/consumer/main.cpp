// Links against an installed cudakit and asks for the devices; without a GPU it says why.
#include <cudakit/cudakit.hpp>

#include <cstdio>

int main() {
  try {
    std::printf("devices: %d\n", cudakit::Device::count());
  } catch (const cudakit::DriverUnavailable& e) {
    std::printf("no driver (expected without a GPU): %s\n", e.what());
  }
  return 0;
}
