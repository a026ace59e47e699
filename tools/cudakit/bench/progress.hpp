// The progress of a `cudakit bench` run on a terminal: "[3/41] graph replay ..." on
// stderr while a benchmark runs, erased before its rows are printed. Only on a
// terminal: a log or a pipe gets nothing from it.
#pragma once

#include <cstddef>
#include <cstdio>
#include <string>

namespace cudakit::tool::bench {

class Progress {
 public:
  /// Writes to `out` when `enabled`, else nothing at all.
  Progress(std::FILE* out, bool enabled) : out_(out), enabled_(enabled) {}

  /// Progress on stderr when stderr is a terminal.
  static Progress on_stderr();

  /// Shows that benchmark `index` (from 0) of `count`, `name`, is running.
  void running(std::size_t index, std::size_t count, const std::string& name);
  /// Erases the line `running` wrote.
  void clear();

 private:
  std::FILE* out_;
  bool enabled_;
  bool shown_ = false;
};

}  // namespace cudakit::tool::bench
