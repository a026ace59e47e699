#include "bench/progress.hpp"

#include <unistd.h>

namespace cudakit::tool::bench {

Progress Progress::on_stderr() { return Progress(stderr, isatty(STDERR_FILENO) != 0); }

void Progress::running(std::size_t index, std::size_t count, const std::string& name) {
  if (!enabled_) return;
  std::fprintf(out_, "\r\033[K[%zu/%zu] %s ...", index + 1, count, name.c_str());
  std::fflush(out_);
  shown_ = true;
}

void Progress::clear() {
  if (!enabled_ || !shown_) return;
  // Carriage return, then erase to the end of the line.
  std::fprintf(out_, "\r\033[K");
  std::fflush(out_);
  shown_ = false;
}

}  // namespace cudakit::tool::bench
