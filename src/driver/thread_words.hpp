// Internal: a thread as error messages name it.
#pragma once

#include <sstream>
#include <string>
#include <thread>

namespace cudakit::detail {

/// "thread <id>": for messages that name the threads a refusal is about (a capture's
/// owner and the caller, a busy cache's user and the caller).
inline std::string thread_words(std::thread::id id) {
  std::ostringstream out;
  out << "thread " << id;
  return out.str();
}

}  // namespace cudakit::detail
