// Fake driver: modules entries. (Placeholder: this area registers nothing yet, so its
// entries return CUDA_ERROR_NOT_SUPPORTED.)
#include "fake_driver.hpp"

namespace cudakit::fake {
void register_modules(Driver&) {}
}  // namespace cudakit::fake
