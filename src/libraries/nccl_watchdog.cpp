// The watchdog (nccl_communicator.hpp: "No call hangs forever"): one thread per process,
// started with the first communicator, that polls every live communicator's asynchronous
// error and the last collective submitted to each of its streams. A communicator whose
// error is set, or whose watched collective has not completed within its timeout, is
// aborted; its error is kept for its next use and parked.
//
// The thread sleeps while no communicator lives, and wakes every poll interval otherwise:
// a tenth of the shortest timeout, between 1 ms and 50 ms.
#include <algorithm>
#include <condition_variable>
#include <thread>

#include "cudakit/driver.hpp"
#include "libraries/nccl_comm_state.hpp"

namespace cudakit::nccl::detail {

using driver::cu;

namespace {

class Watchdog {
 public:
  ~Watchdog() {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

  void add(CommState* s) {
    std::lock_guard lock(mutex_);
    watched_.push_back(s);
    if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
    wake_.notify_all();
  }

  void remove(CommState* s) noexcept {
    std::lock_guard lock(mutex_);  // a poll in progress finishes first: it may be using `s`
    watched_.erase(std::remove(watched_.begin(), watched_.end(), s), watched_.end());
  }

 private:
  void run() {
    std::unique_lock lock(mutex_);
    while (!stop_) {
      if (watched_.empty()) {
        wake_.wait(lock, [&] { return stop_ || !watched_.empty(); });
        continue;
      }
      auto interval = std::chrono::milliseconds(50);
      for (CommState* s : watched_) {
        poll(*s);
        interval = std::min(interval, std::max(std::chrono::milliseconds(1), s->options.timeout / 10));
      }
      wake_.wait_for(lock, interval);
    }
  }

  // With the registry locked: `s` stays alive meanwhile (remove waits for the lock).
  static void poll(CommState& s) noexcept {
    if (s.ended.load(std::memory_order_acquire)) return;
    std::unique_lock call(s.call_lock, std::try_to_lock);
    if (!call.owns_lock() || s.comm == nullptr) return;  // a call in progress has its own deadline
    try {
      ncclResult_t state = ncclSuccess;
      ncclResult_t r = raw::api().CommGetAsyncError(s.comm, &state);
      if (r != ncclSuccess) {  // the communicator cannot even say how it is: treated as broken
        s.end(std::make_shared<const NcclError>(
                  s.error(r, "ncclCommGetAsyncError", "the watchdog could not poll the communicator; it was aborted")),
              true);
        return;
      }
      if (state != ncclSuccess && state != ncclInProgress) {
        s.end(std::make_shared<const NcclError>(
                  s.error(state, "ncclCommGetAsyncError", "NCCL reported an asynchronous error; the communicator was aborted")),
              true);
        return;
      }
      std::lock_guard watch(s.watch_mutex);
      for (StreamWatch& w : s.watches) {
        if (!w.pending) continue;
        CUresult r = cu.EventQuery(w.event);
        if (r != CUDA_ERROR_NOT_READY) {
          w.pending = false;  // completed (or a driver error the stream's own user will see)
          continue;
        }
        if (Clock::now() - w.submitted > s.options.timeout) {
          char stream[32];
          std::snprintf(stream, sizeof stream, "%p", static_cast<void*>(w.stream));
          NcclError base = s.error(ncclInProgress, "the collectives on stream " + std::string(stream),
                                   "they did not complete within " + duration_words(s.options.timeout) +
                                       " (Options::timeout): a rank that never joined them, or ranks that called "
                                       "collectives in different orders; the communicator was aborted");
          s.end(std::make_shared<const NcclTimeout>(base.result(), base.operation(), s.rank, s.ranks, s.device,
                                                    base.last_error(), base.what()),
                true);
          return;
        }
      }
    } catch (const std::exception& e) {
      park_error({CUDA_SUCCESS, "NCCL watchdog", e.what()});
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_;
  std::vector<CommState*> watched_;
  std::thread thread_;
  bool stop_ = false;
};

Watchdog& watchdog() {
  static Watchdog w;
  return w;
}

}  // namespace

void watch_communicator(CommState* state) { watchdog().add(state); }
void unwatch_communicator(CommState* state) noexcept { watchdog().remove(state); }

}  // namespace cudakit::nccl::detail
