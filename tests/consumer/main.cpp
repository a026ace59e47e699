// Links against an installed cudakit and asks for the devices; without a GPU it says why.
#include <cudakit/cudakit.hpp>

#include <cstdio>
#include <string_view>

// Links the graph cache's and DeviceValue's out-of-line parts (not run here).
int run_cached(cudakit::StreamRef stream) {
  cudakit::GraphCache<int> cache;
  cudakit::DeviceValue<int> position(stream, 1);
  position.set(stream, 2);
  return static_cast<int>(cache.run(stream, 1, [] {}));
}

int main() {
  // The headers and the library linked in are the same version.
  if (cudakit::version() != CUDAKIT_VERSION_STRING) {
    std::printf("version mismatch: headers %s, library %.*s\n", CUDAKIT_VERSION_STRING,
                static_cast<int>(cudakit::version().size()), cudakit::version().data());
    return 1;
  }
  try {
    std::printf("cudakit %s, devices: %d\n", CUDAKIT_VERSION_STRING, cudakit::Device::count());
  } catch (const cudakit::DriverUnavailable& e) {
    std::printf("cudakit %s, no driver (expected without a GPU): %s\n", CUDAKIT_VERSION_STRING, e.what());
  }
  return 0;
}
