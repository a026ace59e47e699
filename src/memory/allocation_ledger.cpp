// The shareable pool's ledger of live allocations (allocation_ledger.hpp).
#include "memory/allocation_ledger.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

#include "cudakit/ipc_error.hpp"

namespace cudakit::detail {

namespace {

// The seals a ledger carries: its size is fixed, so an importer's mapping can never lose
// its pages (a shrunk file would fault the importer's reads).
constexpr int required_seals = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;

[[noreturn]] void system_error(const char* what) {
  throw IpcError(IpcFailure::system, std::string("allocation ledger: ") + what + ": " + std::strerror(errno));
}

[[noreturn]] void malformed(const std::string& why) {
  throw IpcError(IpcFailure::malformed, "allocation ledger refused: " + why);
}

std::atomic<std::uint32_t>* map(int fd, bool writable) {
  void* p = ::mmap(nullptr, AllocationLedger::file_bytes, writable ? PROT_READ | PROT_WRITE : PROT_READ, MAP_SHARED,
                   fd, 0);
  if (p == MAP_FAILED) system_error("mmap");
  return static_cast<std::atomic<std::uint32_t>*>(p);
}

}  // namespace

static_assert(std::atomic<std::uint32_t>::is_always_lock_free, "ledger entries are shared between processes");
static_assert(sizeof(std::atomic<std::uint32_t>) == sizeof(std::uint32_t));

AllocationLedger AllocationLedger::create() {
  FileDescriptor file(::memfd_create("cudakit-allocation-ledger", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (!file) system_error("memfd_create");
  if (::ftruncate(file.get(), static_cast<off_t>(file_bytes)) != 0) system_error("ftruncate");
  if (::fcntl(file.get(), F_ADD_SEALS, required_seals) != 0) system_error("sealing");
  std::atomic<std::uint32_t>* table = map(file.get(), true);
  return AllocationLedger(std::move(file), table, true);
}

AllocationLedger AllocationLedger::open(FileDescriptor file) {
  if (!file) malformed("no file descriptor");
  struct stat st {};
  if (::fstat(file.get(), &st) != 0) system_error("fstat");
  if (!S_ISREG(st.st_mode)) malformed("not a regular file");
  if (static_cast<std::size_t>(st.st_size) != file_bytes)
    malformed(std::to_string(st.st_size) + " bytes, where a ledger has " + std::to_string(file_bytes));
  const int seals = ::fcntl(file.get(), F_GET_SEALS);
  if (seals < 0 || (seals & required_seals) != required_seals)
    malformed("its size is not sealed (a file that could shrink would fault the reader)");
  std::atomic<std::uint32_t>* table = map(file.get(), false);
  return AllocationLedger(std::move(file), table, false);
}

AllocationLedger::AllocationLedger(AllocationLedger&& other) noexcept
    : file_(std::move(other.file_)),
      table_(std::exchange(other.table_, nullptr)),
      writable_(other.writable_),
      free_(std::move(other.free_)),
      next_unused_(other.next_unused_),
      generations_(std::move(other.generations_)) {}

AllocationLedger::~AllocationLedger() {
  if (table_ != nullptr) ::munmap(table_, file_bytes);
}

FileDescriptor AllocationLedger::file() const {
  FileDescriptor copy(::fcntl(file_.get(), F_DUPFD_CLOEXEC, 0));
  if (!copy) system_error("dup");
  return copy;
}

AllocationLedger::Entry AllocationLedger::enter() {
  std::lock_guard lock(mutex_);
  std::uint32_t slot = 0;
  if (!free_.empty()) {
    slot = free_.back();
    free_.pop_back();
  } else if (next_unused_ < slots) {
    generations_.push_back(0);
    // So that leave() never allocates: room for every slot in use, grown as geometrically
    // as generations_ itself.
    if (free_.capacity() < generations_.size()) free_.reserve(generations_.capacity());
    slot = next_unused_++;
  } else {
    return {};
  }
  std::uint32_t& generation = generations_[slot];
  generation = generation == UINT32_MAX ? 1 : generation + 1;  // never 0: 0 means freed
  table_[slot].store(generation, std::memory_order_release);
  return {slot, generation};
}

void AllocationLedger::leave(Entry entry) noexcept {
  if (entry.generation == 0 || !writable_) return;
  table_[entry.slot].store(0, std::memory_order_release);
  std::lock_guard lock(mutex_);
  free_.push_back(entry.slot);
}

bool AllocationLedger::live(Entry entry) const noexcept {
  return entry.generation != 0 && entry.slot < slots &&
         table_[entry.slot].load(std::memory_order_acquire) == entry.generation;
}

}  // namespace cudakit::detail
