// The staging buffers behind pageable copies (detail/staging.hpp).
#include "memory/staging.hpp"

#include <atomic>
#include <condition_variable>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <vector>

#include "cudakit/detail/capture_guard.hpp"
#include "cudakit/context.hpp"
#include "cudakit/driver.hpp"
#include "cudakit/error.hpp"
#include "device/device_state.hpp"
#include "memory/memory_testing.hpp"
#include "memory/out_of_memory.hpp"

namespace cudakit::detail {

using driver::cu;

HostAccessHook host_access_hook = nullptr;

struct StagingChunk {
  void* host = nullptr;
  std::size_t bytes = 0;
  CUevent done = nullptr;  // recorded after the last work that used the buffer
  bool pending = false;    // `done` recorded and not yet known complete
};

namespace {

std::atomic<std::size_t> chunk_bytes_setting{default_staging_chunk_bytes};
std::atomic<int> max_chunks_setting{default_staging_max_chunks};

Resource staging_resource(int device) {
  return Resource::of(ResourceKind::pinned_buffer, nullptr, device, "staging buffer");
}

class StagingPool {
 public:
  explicit StagingPool(int device) : device_(device) {}

  StagingChunk* acquire(bool may_block);

  void give_back(StagingChunk* c, bool pending) noexcept {
    {
      std::lock_guard lock(mutex_);
      c->pending = pending;
      try {
        free_.push_back(c);
      } catch (...) {
        // Out of host memory for one pointer: the buffer is no longer handed out, and is
        // freed with the others at teardown (it stays in chunks_).
      }
    }
    returned_.notify_one();
  }

  // A buffer whose state is unknown after a failed driver call: never handed out again.
  void abandon(StagingChunk*) noexcept { returned_.notify_one(); }

  int count() {
    std::lock_guard lock(mutex_);
    return static_cast<int>(chunks_.size());
  }

  void free_all() noexcept {
    std::lock_guard lock(mutex_);
    try {
      if (!chunks_.empty()) ContextRef(library_context(device_), device_).make_current();
    } catch (...) {
    }
    Resource res = staging_resource(device_);
    for (StagingChunk* c : chunks_) {
      if (c->pending) (void)cu.EventSynchronize(c->done);  // a copy may still use it
      if (CUresult r = cu.EventDestroy(c->done); r != CUDA_SUCCESS)
        park_driver_error(r, cu.EventDestroy.name(), res, "staging buffers");
      if (CUresult r = cu.MemFreeHost(c->host); r != CUDA_SUCCESS)
        park_driver_error(r, cu.MemFreeHost.name(), res, "staging buffers");
      delete c;
    }
    chunks_.clear();
    free_.clear();
  }

 private:
  StagingChunk* create() {
    Resource res = staging_resource(device_);
    check_not_poisoned(cu.MemHostAlloc.name(), res);
    ContextRef(library_context(device_), device_).make_current();
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

  bool completed(StagingChunk* c) {
    CUresult r = cu.EventQuery(c->done);
    if (r == CUDA_SUCCESS) {
      c->pending = false;
      return true;
    }
    // Not ready, or failing: treat as busy (a real failure shows at the wait). Except a
    // sticky error: the context is dead, and the call that saw it must say so (and poison
    // the device with it); treated as busy, the next call would fail naming itself.
    if (is_sticky(r)) check(r, cu.EventQuery.name(), staging_resource(device_));
    return false;
  }

  int device_;
  std::mutex mutex_;
  std::condition_variable returned_;
  std::vector<StagingChunk*> chunks_;  // every buffer made, for teardown
  std::deque<StagingChunk*> free_;     // given back, oldest first
  int creating_ = 0;
  bool cannot_grow_ = false;  // page-locking another buffer failed: make do with these
};

StagingChunk* StagingPool::acquire(bool may_block) {
  std::unique_lock lock(mutex_);
  for (;;) {
    bool can_grow = !cannot_grow_ && static_cast<int>(chunks_.size()) + creating_ < max_chunks_setting.load();
    if (!free_.empty()) {
      // The oldest buffer is the most likely to be done. While the pool may grow, one
      // still in flight is left for later rather than waited for.
      StagingChunk* c = free_.front();
      if (!c->pending || !can_grow || completed(c)) {
        free_.pop_front();
        lock.unlock();
        if (c->pending) {
          CUresult r = cu.EventSynchronize(c->done);
          if (r != CUDA_SUCCESS) {
            abandon(c);
            check(r, cu.EventSynchronize.name(), staging_resource(device_));
          }
          c->pending = false;
        }
        return c;
      }
    }
    if (can_grow) {
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
          chunks_.push_back(c);
        } catch (...) {
          (void)cu.EventDestroy(c->done);
          (void)cu.MemFreeHost(c->host);
          delete c;
          throw;
        }
        return c;
      }
      // Out of page-locked memory: carry on with the buffers there are, if any.
      if (chunks_.empty()) std::rethrow_exception(out_of_memory);
      cannot_grow_ = true;
      continue;
    }
    if (!may_block) return nullptr;
    returned_.wait(lock);
  }
}

std::mutex pools_mutex;
std::atomic<StagingPool*> pools[max_devices];

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

void StagingLease::wait() {
  CUresult r = cu.EventSynchronize(chunk_->done);
  if (r != CUDA_SUCCESS) {
    chunk_->pending = true;  // its event is recorded: teardown waits for it before freeing
    pool_of(device_).abandon(chunk_);
    chunk_ = nullptr;
    check(r, cu.EventSynchronize.name(), staging_resource(device_));
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
  pool->give_back(c, recorded_);
}

StagingLease acquire_staging(int device, bool may_block) {
  StagingChunk* c = pool_of(device).acquire(may_block);
  return c != nullptr ? StagingLease(device, c) : StagingLease();
}

std::size_t staging_chunk_bytes() noexcept { return chunk_bytes_setting.load(std::memory_order_relaxed); }

void set_staging_limits_for_testing(std::size_t chunk_bytes, int max_chunks) {
  chunk_bytes_setting.store(chunk_bytes);
  max_chunks_setting.store(max_chunks);
}

int staging_chunk_count(int device) {
  StagingPool* p = device >= 0 && device < max_devices ? pools[device].load() : nullptr;
  return p != nullptr ? p->count() : 0;
}

void reset_staging_for_testing() {
  std::lock_guard lock(pools_mutex);
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
