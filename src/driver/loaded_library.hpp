// Internal: what the loaders of libraries opened at run time (NVRTC, cuBLAS, NCCL) share:
// opening the first of a list of candidate files, saying why each other one failed; looking
// up their symbols, naming the missing ones; the file the dynamic loader resolved; and an
// entry table loaded once.
#pragma once

#include <dlfcn.h>
#include <link.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace cudakit::detail {

/// The file `library` (a dlopen handle) was loaded from, as the dynamic loader resolved it;
/// `fallback` when it cannot say.
inline std::string loaded_path(void* library, const std::string& fallback) {
  link_map* map = nullptr;
  if (library != nullptr && dlinfo(library, RTLD_DI_LINKMAP, &map) == 0 && map != nullptr && map->l_name != nullptr &&
      map->l_name[0] != '\0')
    return map->l_name;
  return fallback;
}

/// dlopen of `file` (RTLD_NOW | RTLD_LOCAL, so that two versions never clash); on failure
/// null, and "\n  file: why" appended to `tried`.
inline void* open_library(const std::string& file, std::string& tried) {
  dlerror();
  void* library = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    const char* why = dlerror();
    tried += "\n  " + file + ": " + (why != nullptr ? why : "not found");
  }
  return library;
}

/// A library opened from one of several candidate files.
struct OpenedLibrary {
  void* library = nullptr;  // null: none opened
  std::string file;         // the candidate that opened
};

/// The first of `candidates` that opens; every failure before it is appended to `tried`.
inline OpenedLibrary open_first(const std::vector<std::string>& candidates, std::string& tried) {
  for (const std::string& file : candidates)
    if (void* library = open_library(file, tried)) return {library, file};
  return {};
}

/// Looks `name` up in `library` into `slot`. When it is missing and `missing` is given,
/// appends the name to it (", " between names), so that one message lists them all.
template <class Fn>
void resolve_symbol(void* library, const char* name, Fn& slot, std::string* missing) {
  slot = reinterpret_cast<Fn>(dlsym(library, name));
  if (slot == nullptr && missing != nullptr) *missing += (missing->empty() ? "" : ", ") + std::string(name);
}

/// A library's entry table, loaded on its first use: one thread loads while the others
/// wait, and afterwards a use costs one acquire load. A failed load (the loader throws
/// Failure) is remembered and thrown again, not retried. Tables are kept for the process's
/// life: a caller may hold a reference across a test's reset.
template <class Table, class Failure>
class LoadedOnce {
 public:
  /// The table, loaded with `load()` (which returns a std::unique_ptr<Table> or throws
  /// Failure) the first time.
  template <class Load>
  const Table& get(Load&& load) {
    if (const Table* t = ready_.load(std::memory_order_acquire)) [[likely]]
      return *t;
    std::lock_guard lock(mutex_);
    if (const Table* t = ready_.load(std::memory_order_relaxed)) return *t;
    if (failure_) throw *failure_;
    try {
      tables_.push_back(std::forward<Load>(load)());
    } catch (const Failure& e) {
      failure_.emplace(e);
      throw;
    }
    ready_.store(tables_.back().get(), std::memory_order_release);
    return *tables_.back();
  }

  /// The table if it is loaded now, else null; never loads.
  const Table* peek() const noexcept { return ready_.load(std::memory_order_acquire); }

  /// Unit tests: uses `table` from now on (a fake), forgetting a remembered failure.
  void install(std::unique_ptr<Table> table) {
    std::lock_guard lock(mutex_);
    failure_.reset();
    tables_.push_back(std::move(table));
    ready_.store(tables_.back().get(), std::memory_order_release);
  }

  /// Unit tests: forgets the table (a loaded library stays mapped) or the failure, so that
  /// the next get() loads again.
  void reset() {
    std::lock_guard lock(mutex_);
    ready_.store(nullptr, std::memory_order_release);
    failure_.reset();
  }

 private:
  std::mutex mutex_;
  std::atomic<const Table*> ready_{nullptr};
  std::vector<std::unique_ptr<Table>> tables_;
  std::optional<Failure> failure_;
};

}  // namespace cudakit::detail
