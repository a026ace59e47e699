// ExclusiveUse (exclusive_use.hpp): the refusal of a second thread.
#include "libraries/exclusive_use.hpp"

#include <sstream>
#include <string>

#include "cudakit/blas_library.hpp"

namespace cudakit::detail {

void ExclusiveUse::refuse(std::thread::id holder_id, const char* operation, const Resource& resource) {
  std::ostringstream holder;
  holder << holder_id;
  std::ostringstream self;
  self << std::this_thread::get_id();
  throw HandleInUse(std::string(operation) + " on " + describe(resource) + " refused: its cuBLAS handle is in use by " +
                    "thread " + holder.str() + " right now (this is thread " + self.str() +
                    "); a handle is used by one thread at a time: give each thread its own object (they may share "
                    "the stream)");
}

}  // namespace cudakit::detail
