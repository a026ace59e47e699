// The fake driver's machinery: interception (counts, log, faults), the handle ledger
// and the ordering model. The entries themselves live in the fake_*.cpp area files.
#include "fake_driver.hpp"

#include <algorithm>
#include <cstdio>
#include <iterator>
#include <thread>
#include <type_traits>

#include "cudakit/error.hpp"
#include "driver/driver_testing.hpp"

namespace cudakit::fake {

thread_local int inside_fake_driver = 0;

namespace {
Driver* g_current = nullptr;

// Sticky errors: once one is injected, every later call returns it, as a real
// driver does after an illegal address or a failed launch.
CUresult g_sticky = CUDA_SUCCESS;

bool intercept_locked(EntryId id, CUresult* out, bool* became_sticky);

thread_local bool in_host_function = false;

// A sticky error kills the context on a real driver, and every capture with it: the
// streams are no longer capturing. (The fake keeps its other state, so that the tests
// can look at it after clearing the sticky error.)
bool intercept(EntryId id, CUresult* out) {
  bool became_sticky = false;
  bool failed = intercept_locked(id, out, &became_sticky);
  if (became_sticky) end_every_capture();
  return failed;
}

bool intercept_locked(EntryId id, CUresult* out, bool* became_sticky) {
  Driver& d = Driver::current();
  std::lock_guard lock(d.mutex);
  std::size_t i = static_cast<std::size_t>(id);
  int n = ++d.call_counts[i];
  d.call_log.push_back(id);
  // Error names never fail: they are how failures are reported.
  if (id == EntryId::GetErrorName || id == EntryId::GetErrorString) return false;
  if (in_host_function)
    d.problems.push_back(std::string(driver::entry_info(id).name) +
                         " was called from a host function, which runs on a driver thread where no CUDA call is "
                         "allowed");
  if (g_sticky != CUDA_SUCCESS && d.sticky_spares.count(id) == 0) {
    *out = g_sticky;
    d.failed_calls.emplace_back(id, g_sticky);
    return true;
  }
  for (const Fault& f : d.faults) {
    if (f.entry == id && (f.nth == 0 || f.nth == n)) {
      *out = f.code;
      if (cudakit::is_sticky(f.code)) {
        g_sticky = f.code;
        *became_sticky = true;
      }
      d.failed_calls.emplace_back(id, f.code);
      return true;
    }
  }
  return false;
}

template <EntryId Id, class Fn>
struct Wrapper;

// Marks this thread as inside the fake for one entry (inside_fake_driver).
struct InsideFakeDriver {
  InsideFakeDriver() noexcept { ++inside_fake_driver; }
  ~InsideFakeDriver() { --inside_fake_driver; }
  InsideFakeDriver(const InsideFakeDriver&) = delete;
  InsideFakeDriver& operator=(const InsideFakeDriver&) = delete;
};

template <EntryId Id, class R, class... Args>
struct Wrapper<Id, R(CUDAAPI*)(Args...)> {
  static R CUDAAPI call(Args... args) {
    InsideFakeDriver inside;
    CUresult fault = CUDA_SUCCESS;
    if (intercept(Id, &fault)) return fault;
    Driver& d = Driver::current();
    if (d.hooked[static_cast<std::size_t>(Id)].load(std::memory_order_acquire)) d.hooks[static_cast<std::size_t>(Id)]();
    if (int us = d.delays[static_cast<std::size_t>(Id)].load(std::memory_order_relaxed); us > 0)
      std::this_thread::sleep_for(std::chrono::microseconds(us));
    void* impl = d.impls[static_cast<std::size_t>(Id)];
    if (impl == nullptr) return CUDA_ERROR_NOT_SUPPORTED;
    return reinterpret_cast<R(CUDAAPI*)(Args...)>(impl)(args...);
  }
};

void* const wrappers[driver::entry_count] = {
#define CUDAKIT_X(name, abi, since) \
  reinterpret_cast<void*>(&Wrapper<EntryId::name, typename driver::EntryType<EntryId::name>::type>::call),
    CUDAKIT_DRIVER_ENTRIES(CUDAKIT_X)
#undef CUDAKIT_X
};

std::string hex(std::uintptr_t p) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(p));
  return buf;
}
}  // namespace

Driver::Driver() {
  g_current = this;
  g_sticky = CUDA_SUCCESS;
}

Driver::~Driver() {
  if (g_current == this) g_current = nullptr;
  g_sticky = CUDA_SUCCESS;
  forget_ipc_state();
  for (auto& [base, a] : allocations)
    if (!a.mapped && !a.shared_mapping) ::operator delete(reinterpret_cast<void*>(base), std::align_val_t(256));
  release_virtual_memory_left_behind(*this);
}

Driver& Driver::current() {
  if (g_current == nullptr) {
    std::fprintf(stderr, "fake driver: used with no fake::Driver alive\n");
    std::abort();
  }
  return *g_current;
}

void Driver::install() {
  register_core(*this);
  register_memory(*this);
  register_virtual_memory(*this);
  register_managed_memory(*this);
  register_modules(*this);
  register_graphs(*this);
  register_ipc(*this);
  void* table[driver::entry_count];
  for (std::size_t i = 0; i < driver::entry_count; ++i) table[i] = wrappers[i];
  for (EntryId id : missing) table[static_cast<std::size_t>(id)] = nullptr;
  driver::testing::install(table, driver_version);
}

void Driver::clear_sticky() {
  std::lock_guard l(mutex);
  g_sticky = CUDA_SUCCESS;
}

CUresult Driver::sticky() const {
  std::lock_guard l(mutex);
  return g_sticky;
}

void Driver::destroy_leftovers() {
  std::vector<CUstream> ss;
  std::vector<CUevent> es;
  {
    std::lock_guard l(mutex);
    for (auto& [h, s] : streams) ss.push_back(h);
    for (auto& [h, e] : events) es.push_back(h);
  }
  for (CUstream s : ss) driver::cu.StreamDestroy(s);
  for (CUevent e : es) driver::cu.EventDestroy(e);
}

int Driver::calls(EntryId entry) const {
  std::lock_guard l(mutex);
  return call_counts[static_cast<std::size_t>(entry)];
}

std::vector<EntryId> Driver::log() const {
  std::lock_guard l(mutex);
  return call_log;
}

void Driver::clear_log() {
  std::lock_guard l(mutex);
  call_log.clear();
  std::fill(std::begin(call_counts), std::end(call_counts), 0);
}

std::vector<Hazard> Driver::hazards() const {
  std::lock_guard l(mutex);
  return found_hazards;
}

void Driver::created(const std::string& kind, const void* handle) {
  std::lock_guard l(mutex);
  if (!ledger[kind].insert(handle).second) problems.push_back("created " + kind + " " + hex(reinterpret_cast<std::uintptr_t>(handle)) + " twice");
}

bool Driver::destroyed(const std::string& kind, const void* handle) {
  std::lock_guard l(mutex);
  if (ledger[kind].erase(handle) == 0) {
    problems.push_back("destroyed " + kind + " " + hex(reinterpret_cast<std::uintptr_t>(handle)) +
                       " which is not live (double destroy or never created)");
    return false;
  }
  return true;
}

bool Driver::is_live(const std::string& kind, const void* handle) const {
  std::lock_guard l(mutex);
  auto it = ledger.find(kind);
  return it != ledger.end() && it->second.count(handle) != 0;
}

std::size_t Driver::live(const std::string& kind) const {
  std::lock_guard l(mutex);
  auto it = ledger.find(kind);
  return it == ledger.end() ? 0 : it->second.size();
}

std::vector<std::string> Driver::ledger_problems() const {
  std::lock_guard l(mutex);
  std::vector<std::string> out = problems;
  for (const auto& [kind, handles] : ledger)
    for (const void* h : handles) out.push_back("leaked " + kind + " " + hex(reinterpret_cast<std::uintptr_t>(h)));
  for (const auto& [device, n] : primary_retains)
    if (n != 0) out.push_back("primary context of device " + std::to_string(device) + " retained " + std::to_string(n) + " more time(s) than released");
  return out;
}

FakeStream* Driver::stream(CUstream s) {
  auto it = streams.find(s);
  return it == streams.end() ? nullptr : &it->second;
}

FakeEvent* Driver::event(CUevent e) {
  auto it = events.find(e);
  return it == events.end() ? nullptr : &it->second;
}

namespace {
void merge(Clock& into, const Clock& from) {
  for (const auto& [k, v] : from) into[k] = std::max(into[k], v);
}
}  // namespace

void Driver::tick(CUstream s) {
  std::lock_guard l(mutex);
  FakeStream* fs = stream(s);
  if (fs == nullptr) return;
  merge(fs->clock, host_clock);  // the host submits after what it already waited for
  ++fs->clock[fs->id];
}

void Driver::host_waits(const Clock& c) {
  std::lock_guard l(mutex);
  merge(host_clock, c);
}

void Driver::access(CUstream s, std::uintptr_t begin, std::size_t bytes, bool write, const std::string& what) {
  std::lock_guard l(mutex);
  if (bytes == 0) return;
  std::uint64_t sid = 0;
  const Clock* clock = &host_clock;
  if (s != nullptr) {
    FakeStream* fs = stream(s);
    if (fs == nullptr) return;
    sid = fs->id;
    clock = &fs->clock;
  }
  std::uintptr_t end = begin + bytes;
  // Use after free: the range overlaps freed memory that nothing has taken since.
  auto after = freed.lower_bound(end);  // the first freed range starting at or past the end
  if (after != freed.begin() && std::prev(after)->first + std::prev(after)->second > begin)
    found_hazards.push_back({what + " (" + (write ? "write" : "read") + ") uses freed memory at " +
                             hex(std::max(begin, std::prev(after)->first))});
  for (const Access& a : accesses) {
    if (a.end <= begin || end <= a.begin) continue;
    if (!a.write && !write) continue;
    if (a.stream == sid) continue;  // stream order
    auto it = clock->find(a.stream);
    std::uint64_t known = it == clock->end() ? 0 : it->second;
    if (known >= a.tick) continue;
    found_hazards.push_back({what + " (" + (write ? "write" : "read") + " on " + (sid ? "stream #" + std::to_string(sid) : std::string("the host")) +
                             ") is not ordered after " + a.what + " (" + (a.write ? "write" : "read") + " on " +
                             (a.stream ? "stream #" + std::to_string(a.stream) : std::string("the host")) + ") at " + hex(std::max(begin, a.begin))});
  }
  std::uint64_t t = 0;
  if (auto it = clock->find(sid); it != clock->end()) t = it->second;
  accesses.push_back({begin, end, write, sid, t, what});
}

void Driver::forget_freed(std::uintptr_t begin, std::size_t bytes) {
  std::lock_guard l(mutex);
  std::uintptr_t end = begin + bytes;
  auto it = freed.upper_bound(begin);
  if (it != freed.begin() && std::prev(it)->first + std::prev(it)->second > begin) --it;
  while (it != freed.end() && it->first < end) it = freed.erase(it);
}

const Allocation* Driver::allocation_of(std::uintptr_t ptr, std::uintptr_t* base) const {
  std::lock_guard l(mutex);
  auto it = allocations.upper_bound(ptr);
  if (it == allocations.begin()) return nullptr;
  --it;
  if (ptr >= it->first + std::max<std::size_t>(it->second.bytes, 1)) return nullptr;
  if (base) *base = it->first;
  return &it->second;
}

void run_host_function(CUhostFn fn, void* data) {
  in_host_function = true;
  fn(data);
  in_host_function = false;
}

}  // namespace cudakit::fake
