// cudakit::version(): the version this library was built as (cudakit/version.hpp).
#include "cudakit/version.hpp"

namespace cudakit {

std::string_view version() noexcept { return CUDAKIT_VERSION_STRING; }

}  // namespace cudakit
