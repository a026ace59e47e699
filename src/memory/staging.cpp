// The staging buffers behind pageable copies (memory/staging.hpp).
#include "memory/staging.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <vector>

#include "cudakit/context.hpp"
#include "device/capture_tolerant_scope.hpp"
#include "cudakit/detail/stream_state.hpp"
#include "cudakit/driver.hpp"
#include "cudakit/error.hpp"
#include "cudakit/staging.hpp"
#include "device/device_state.hpp"
#include "memory/memory_testing.hpp"
#include "memory/out_of_memory.hpp"

namespace cudakit::detail {

using driver::cu;

HostAccessHook host_access_hook = nullptr;

// Only its holder (a lease, the thread that parked it, or the pool under its mutex)
// reads or writes a chunk's fields; a hand-over between holders is an acquire/release
// pair (the mutex, or the parking slot's atomic exchange).
struct StagingChunk {
  void* host = nullptr;
  std::size_t bytes = 0;
  CUevent done = nullptr;       // recorded after the last work that used the buffer
  bool pending = false;         // `done` recorded and not yet known complete
  CUstream pending_on = nullptr;  // the stream of that work: a fault its event reports is named after it
};

namespace {

std::atomic<std::size_t> chunk_bytes_setting{default_staging_chunk_bytes};
std::atomic<int> max_chunks_setting{default_staging_max_chunks};

Resource staging_resource(int device) {
  return Resource::of(ResourceKind::pinned_buffer, nullptr, device, "staging buffer");
}

// The resource a failed wait for `chunk`'s event names: the stream of the work it waited
// for, with that stream's last launch, when it is `stream` (whose state cudakit knows);
// a kernel's fault is reported by the first call that waits after it. Otherwise the
// staging buffer.
Resource waited_work(const StagingChunk* chunk, StreamRef stream, int device) {
  if (stream && chunk->pending_on == stream.handle()) {
    Resource res = Resource::of(ResourceKind::stream, stream.handle(), device);
    res.last_launch = last_launch_of(stream.state());
    return res;
  }
  return staging_resource(device);
}

// ---- buffers parked by the thread that used them last ----
//
// One slot per device per thread. The owner thread parks a buffer with a store and takes
// it back with an exchange; a thread that finds every buffer of a device in use takes
// parked ones with an exchange too (steal_parked), so exactly one of them gets it.
struct ParkedChunks {
  std::atomic<StagingChunk*> by_device[max_devices] = {};
  bool registered = false;
  ParkedChunks();
  ~ParkedChunks();
  ParkedChunks(const ParkedChunks&) = delete;
  ParkedChunks& operator=(const ParkedChunks&) = delete;
};

// Every live thread's slots, so that buffers parked by idle threads can be found. Never
// destroyed: threads may end after static destruction began.
struct ParkingRegistry {
  std::mutex mutex;
  std::vector<ParkedChunks*> threads;
};
ParkingRegistry& parking_registry() {
  static ParkingRegistry* registry = new ParkingRegistry;
  return *registry;
}

thread_local ParkedChunks parked;
// Set when this thread's slots are gone (its thread_local destructors ran): trivially
// destructible, so it is valid until the thread ends.
thread_local constinit bool parking_gone = false;

class StagingPool;
std::atomic<StagingPool*> pools[max_devices];

class StagingPool {
 public:
  explicit StagingPool(int device) : device_(device) {}

  StagingChunk* acquire(StreamRef stream, bool may_block);

  // A buffer whose work is done or recorded (c->pending says which) goes back: parked
  // with this thread when its slot is free, else to the shared list.
  void give_back(StagingChunk* c) noexcept {
    if (!parking_gone && parked.registered) {
      std::atomic<StagingChunk*>& slot = parked.by_device[device_];
      if (slot.load(std::memory_order_relaxed) == nullptr) {
        // A thread about to wait for a buffer announces itself in waiters_ and then looks
        // at every slot (wait_for_a_buffer). Parking stores first and reads waiters_ after
        // (both sequentially consistent): either that thread finds this buffer, or this
        // thread sees it waiting and hands the buffer over through the shared list.
        slot.store(c, std::memory_order_seq_cst);
        if (waiters_.load(std::memory_order_seq_cst) == 0) return;
        c = slot.exchange(nullptr, std::memory_order_acq_rel);
        if (c == nullptr) return;  // the waiting thread took it
      }
    }
    share(c);
  }

  // To the shared list, waking one thread waiting for a buffer.
  void share(StagingChunk* c) noexcept {
    {
      std::lock_guard lock(mutex_);
      free_.push_back(c);  // within the capacity reserved for every buffer (grow): no allocation
    }
    returned_.notify_one();
  }

  // A buffer whose state is unknown after a failed driver call: never handed out again.
  void abandon(StagingChunk*) noexcept { returned_.notify_one(); }

  StagingUsage usage() {
    std::lock_guard lock(mutex_);
    StagingUsage u;
    u.buffers = static_cast<int>(chunks_.size());
    for (const StagingChunk* c : chunks_) u.bytes += c->bytes;
    return u;
  }

  void reserve(std::size_t bytes);
  std::size_t release_idle();
  void free_all() noexcept;

 private:
  StagingChunk* create();
  void destroy(StagingChunk* c) noexcept;
  bool can_grow() const {
    return !cannot_grow_ && static_cast<int>(chunks_.size()) + creating_ < max_chunks_setting.load();
  }
  StagingChunk* grow(std::unique_lock<std::mutex>& lock);
  StagingChunk* take_idle();
  bool oldest_in_flight_completed(StreamRef stream);
  StagingChunk* wait_for_oldest_in_flight(std::unique_lock<std::mutex>& lock, StreamRef stream);
  bool steal_parked();
  void wait_for_a_buffer(std::unique_lock<std::mutex>& lock);
  void make_current() { ContextRef(library_context(device_), device_).make_current(); }

  // True when the work recorded on `c` has completed. Not ready (or a passing failure)
  // counts as busy: a real failure shows at the wait. A sticky error does not: the
  // context is dead, and the call that saw it must say so (and poison the device with it).
  bool completed(StagingChunk* c, StreamRef stream) {
    CUresult r = cu.EventQuery(c->done);
    if (r == CUDA_SUCCESS) {
      c->pending = false;
      return true;
    }
    if (is_sticky(r)) check(r, cu.EventQuery.name(), waited_work(c, stream, device_));
    return false;
  }

  int device_;
  std::mutex mutex_;
  std::condition_variable returned_;
  std::atomic<int> waiters_{0};        // threads waiting in wait_for_a_buffer
  std::vector<StagingChunk*> chunks_;  // every buffer made, for teardown
  std::vector<StagingChunk*> free_;    // the shared list, oldest first
  int creating_ = 0;
  bool cannot_grow_ = false;  // page-locking another buffer failed: make do with these
};

ParkedChunks::ParkedChunks() {
  try {
    ParkingRegistry& r = parking_registry();
    std::lock_guard lock(r.mutex);
    r.threads.push_back(this);
    registered = true;
  } catch (...) {
    // Without a registry entry no other thread could find a parked buffer: this thread
    // gives every buffer back to the shared list instead.
  }
}

ParkedChunks::~ParkedChunks() {
  parking_gone = true;
  if (!registered) return;
  {
    ParkingRegistry& r = parking_registry();
    std::lock_guard lock(r.mutex);
    std::erase(r.threads, this);
  }
  registered = false;
  for (int d = 0; d < max_devices; ++d)
    if (StagingChunk* c = by_device[d].exchange(nullptr, std::memory_order_acq_rel))
      if (StagingPool* pool = pools[d].load(std::memory_order_acquire)) pool->share(c);
}

StagingChunk* StagingPool::acquire(StreamRef stream, bool may_block) {
  // The buffer this thread used last, without a lock.
  StagingChunk* mine = parking_gone ? nullptr : parked.by_device[device_].exchange(nullptr, std::memory_order_acquire);
  if (StagingChunk* c = mine) {
    bool ready = !c->pending;
    if (!ready) {
      try {
        ready = completed(c, stream);
      } catch (...) {
        share(c);
        throw;
      }
    }
    if (ready) return c;
    share(c);  // still in flight: the shared list looks at it again later
  }

  std::unique_lock lock(mutex_);
  for (;;) {
    if (StagingChunk* c = take_idle()) return c;
    if (oldest_in_flight_completed(stream)) continue;
    if (can_grow()) {
      if (StagingChunk* c = grow(lock)) return c;
      continue;
    }
    // Every buffer is made: take those idle threads keep, then wait for the oldest in flight.
    if (steal_parked()) continue;
    if (StagingChunk* c = wait_for_oldest_in_flight(lock, stream)) return c;
    // Every buffer is leased by a copy running now.
    if (!may_block) return nullptr;
    wait_for_a_buffer(lock);
  }
}

// The most recently returned idle buffer (the warmest in the caches), under the mutex.
StagingChunk* StagingPool::take_idle() {
  for (auto it = free_.rbegin(); it != free_.rend(); ++it) {
    if ((*it)->pending) continue;
    StagingChunk* c = *it;
    free_.erase(std::next(it).base());
    return c;
  }
  return nullptr;
}

// Under the mutex: one query of the oldest buffer in flight; true when it completed
// (it is idle now).
bool StagingPool::oldest_in_flight_completed(StreamRef stream) {
  auto it = std::find_if(free_.begin(), free_.end(), [](const StagingChunk* c) { return c->pending; });
  return it != free_.end() && completed(*it, stream);
}

// Takes the oldest buffer in flight and waits for it outside the mutex; null when none.
StagingChunk* StagingPool::wait_for_oldest_in_flight(std::unique_lock<std::mutex>& lock, StreamRef stream) {
  auto it = std::find_if(free_.begin(), free_.end(), [](const StagingChunk* c) { return c->pending; });
  if (it == free_.end()) return nullptr;
  StagingChunk* c = *it;
  free_.erase(it);
  lock.unlock();
  CUresult r = cu.EventSynchronize(c->done);
  if (r != CUDA_SUCCESS) {
    abandon(c);
    check(r, cu.EventSynchronize.name(), waited_work(c, stream, device_));
  }
  c->pending = false;
  return c;
}

// Under the mutex: moves every buffer that threads keep parked for this device to the
// shared list. True when it found any.
bool StagingPool::steal_parked() {
  bool found = false;
  ParkingRegistry& r = parking_registry();
  std::lock_guard registry_lock(r.mutex);
  for (ParkedChunks* t : r.threads) {
    if (StagingChunk* c = t->by_device[device_].exchange(nullptr, std::memory_order_seq_cst)) {
      free_.push_back(c);  // within the capacity reserved for every buffer (grow)
      found = true;
    }
  }
  return found;
}

// Under the mutex: sleeps until a buffer comes back. The thread first says it waits, then
// looks at the parked buffers once more; a thread parking a buffer meanwhile sees it
// waiting and shares the buffer instead (give_back), so no buffer is parked unseen.
void StagingPool::wait_for_a_buffer(std::unique_lock<std::mutex>& lock) {
  waiters_.fetch_add(1, std::memory_order_seq_cst);
  if (!steal_parked()) returned_.wait(lock);
  waiters_.fetch_sub(1, std::memory_order_seq_cst);
}

// Makes a buffer outside the mutex. Null when page-locking more memory failed but other
// buffers exist (the pool stops growing); throws when there are none.
StagingChunk* StagingPool::grow(std::unique_lock<std::mutex>& lock) {
  ++creating_;
  lock.unlock();
  StagingChunk* c = nullptr;
  std::exception_ptr out_of_memory;
  try {
    c = create();
  } catch (const OutOfMemory&) {
    out_of_memory = std::current_exception();
  } catch (...) {
    lock.lock();
    --creating_;
    returned_.notify_all();
    throw;
  }
  lock.lock();
  --creating_;
  if (c != nullptr) {
    try {
      // The shared list can then take every buffer back without allocating (share).
      free_.reserve(chunks_.size() + 1);
      chunks_.push_back(c);
    } catch (...) {
      destroy(c);
      throw;
    }
    return c;
  }
  if (chunks_.empty()) std::rethrow_exception(out_of_memory);
  cannot_grow_ = true;
  return nullptr;
}

StagingChunk* StagingPool::create() {
  Resource res = staging_resource(device_);
  check_not_poisoned(cu.MemHostAlloc.name(), res);
  make_current();
  auto c = std::make_unique<StagingChunk>();
  c->bytes = chunk_bytes_setting.load(std::memory_order_relaxed);
  detail::CaptureTolerantScope tolerant;  // beside a capture: relaxed mode leaves it valid (DESIGN 6)
  CUresult r = cu.MemHostAlloc(&c->host, c->bytes, CU_MEMHOSTALLOC_PORTABLE);
  if (r == CUDA_ERROR_OUT_OF_MEMORY) throw_host_out_of_memory(cu.MemHostAlloc.name(), res, c->bytes);
  check(r, cu.MemHostAlloc.name(), res);
  r = cu.EventCreate(&c->done, CU_EVENT_DISABLE_TIMING);
  if (r != CUDA_SUCCESS) {
    (void)cu.MemFreeHost(c->host);
    check(r, cu.EventCreate.name(), res);
  }
  return c.release();
}

// Frees one buffer nobody uses (its work completed); failures are parked.
void StagingPool::destroy(StagingChunk* c) noexcept {
  Resource res = staging_resource(device_);
  if (CUresult r = cu.EventDestroy(c->done); r != CUDA_SUCCESS)
    park_driver_error(r, cu.EventDestroy.name(), res, "staging buffers");
  if (CUresult r = cu.MemFreeHost(c->host); r != CUDA_SUCCESS)
    park_driver_error(r, cu.MemFreeHost.name(), res, "staging buffers");
  delete c;
}

void StagingPool::reserve(std::size_t bytes) {
  std::unique_lock lock(mutex_);
  std::size_t have = 0;
  for (const StagingChunk* c : chunks_) have += c->bytes;
  while (have < bytes && can_grow()) {
    StagingChunk* c = grow(lock);
    if (c == nullptr) return;  // out of page-locked memory: keep what there is
    have += c->bytes;
    free_.push_back(c);
  }
  lock.unlock();
  returned_.notify_all();
}

std::size_t StagingPool::release_idle() {
  std::lock_guard lock(mutex_);
  steal_parked();
  std::size_t freed = 0;
  std::vector<StagingChunk*> keep;
  keep.reserve(free_.size());
  bool current = false;
  for (StagingChunk* c : free_) {
    // Still in flight (or its state unknown after a failure): kept.
    if (c->pending && cu.EventQuery(c->done) != CUDA_SUCCESS) {
      keep.push_back(c);
      continue;
    }
    if (!current) {
      make_current();
      current = true;
    }
    freed += c->bytes;
    std::erase(chunks_, c);
    destroy(c);
  }
  free_ = std::move(keep);
  free_.reserve(chunks_.size());  // every buffer can come back without an allocation (share)
  if (freed != 0) cannot_grow_ = false;
  return freed;
}

// A staging buffer kept because a copy may still use it (free_all): held for the
// process's life, so that it stays reachable (a leak that is reported, not lost).
void keep_for_the_process(StagingChunk* chunk) noexcept {
  static std::mutex mutex;
  static auto* kept = new std::vector<StagingChunk*>;
  try {
    std::lock_guard lock(mutex);
    kept->push_back(chunk);
  } catch (...) {
    // Out of memory: the chunk is lost instead, as reported.
  }
}

// The buffers are taken out under the mutex and waited for outside it (no driver call
// waits under the mutex). A buffer whose copy cannot be waited for is kept, reported: a
// copy may still use it, unless the context is dead (DESIGN 7: nothing runs any more).
void StagingPool::free_all() noexcept {
  std::vector<StagingChunk*> chunks;
  {
    std::lock_guard lock(mutex_);
    chunks.swap(chunks_);
    free_.clear();
  }
  try {
    if (!chunks.empty()) make_current();
  } catch (...) {
  }
  for (StagingChunk* c : chunks) {
    if (c->pending) {
      if (CUresult r = cu.EventSynchronize(c->done); r != CUDA_SUCCESS) {
        park_driver_error(r, cu.EventSynchronize.name(), staging_resource(device_), "staging buffers");
        if (poison_of(device_) == nullptr) {
          park_error({r, "staging buffers",
                      "a staging buffer of " + describe(staging_resource(device_)) +
                          " is kept (a leak): the copy that used it could not be waited for, and freeing it now "
                          "could pull it from under that copy"});
          keep_for_the_process(c);
          continue;
        }
      }
    }
    destroy(c);
  }
}

std::mutex pools_mutex;

StagingPool* existing_pool(int device) {
  return device >= 0 && device < max_devices ? pools[device].load(std::memory_order_acquire) : nullptr;
}

StagingPool& pool_of(int device) {
  if (device < 0 || device >= max_devices)
    throw InvalidArgument("staging buffers for device " + std::to_string(device) + ": no such device");
  StagingPool* p = pools[device].load(std::memory_order_acquire);
  if (p != nullptr) [[likely]]
    return *p;
  std::lock_guard lock(pools_mutex);
  p = pools[device].load(std::memory_order_relaxed);
  if (p == nullptr) {
    p = new StagingPool(device);  // never destroyed while the process runs
    pools[device].store(p, std::memory_order_release);
  }
  return *p;
}

}  // namespace

void* StagingLease::host() const noexcept { return chunk_->host; }
std::size_t StagingLease::capacity() const noexcept { return chunk_->bytes; }

void StagingLease::record() {
  CUstream stream = stream_;
  CUresult r = cu.EventRecord(chunk_->done, stream);
  if (r != CUDA_SUCCESS) {
    // Without the event, only the stream's completion says the buffer is free again.
    if (cu.StreamSynchronize(stream_) == CUDA_SUCCESS) {
      stream_ = nullptr;
    } else {
      pool_of(device_).abandon(chunk_);
      chunk_ = nullptr;
    }
    check(r, cu.EventRecord.name(), Resource::of(ResourceKind::stream, stream, device_));
  }
  recorded_ = true;
}

void StagingLease::wait(StreamRef stream) {
  CUresult r = cu.EventSynchronize(chunk_->done);
  if (r != CUDA_SUCCESS) {
    StagingChunk* c = std::exchange(chunk_, nullptr);
    c->pending = true;  // its event is recorded: teardown waits for it before freeing
    c->pending_on = stream_;
    Resource res = waited_work(c, stream, device_);
    pool_of(device_).abandon(c);
    check(r, cu.EventSynchronize.name(), res);
  }
  stream_ = nullptr;
  recorded_ = false;
}

void StagingLease::give_back() noexcept {
  if (chunk_ == nullptr) return;
  StagingChunk* c = std::exchange(chunk_, nullptr);
  StagingPool* pool = pools[device_].load(std::memory_order_acquire);
  if (stream_ != nullptr && !recorded_) {
    // An exception left work on the stream that uses the buffer: order its reuse after it.
    if (cu.EventRecord(c->done, stream_) == CUDA_SUCCESS) {
      recorded_ = true;
    } else if (cu.StreamSynchronize(stream_) != CUDA_SUCCESS) {
      pool->abandon(c);
      return;
    }
  }
  c->pending = recorded_;
  c->pending_on = recorded_ ? stream_ : nullptr;
  pool->give_back(c);
}

StagingLease acquire_staging(StreamRef stream, bool may_block) {
  const int device = stream.device_ordinal();
  StagingChunk* c = pool_of(device).acquire(stream, may_block);
  return c != nullptr ? StagingLease(device, c) : StagingLease();
}

std::size_t staging_chunk_bytes() noexcept { return chunk_bytes_setting.load(std::memory_order_relaxed); }

void set_staging_limits_for_testing(std::size_t chunk_bytes, int max_chunks) {
  chunk_bytes_setting.store(chunk_bytes);
  max_chunks_setting.store(max_chunks);
}

int staging_chunk_count(int device) {
  StagingPool* p = existing_pool(device);
  return p != nullptr ? p->usage().buffers : 0;
}

void reset_staging_for_testing() {
  std::lock_guard lock(pools_mutex);
  {
    // Buffers parked by live threads belong to the pools freed below.
    ParkingRegistry& r = parking_registry();
    std::lock_guard registry_lock(r.mutex);
    for (ParkedChunks* t : r.threads)
      for (auto& slot : t->by_device) slot.store(nullptr, std::memory_order_relaxed);
  }
  for (auto& slot : pools) {
    StagingPool* p = slot.exchange(nullptr);
    if (p == nullptr) continue;
    p->free_all();
    delete p;
  }
  chunk_bytes_setting.store(default_staging_chunk_bytes);
  max_chunks_setting.store(default_staging_max_chunks);
}

}  // namespace cudakit::detail

namespace cudakit {

StagingUsage staging_usage(const Device& device) {
  detail::StagingPool* p = detail::existing_pool(device.ordinal());
  return p != nullptr ? p->usage() : StagingUsage{};
}

void reserve_staging(const Device& device, std::size_t bytes) {
  if (bytes == 0) return;
  detail::pool_of(device.ordinal()).reserve(bytes);
}

std::size_t release_idle_staging(const Device& device) {
  detail::StagingPool* p = detail::existing_pool(device.ordinal());
  return p != nullptr ? p->release_idle() : 0;
}

}  // namespace cudakit
