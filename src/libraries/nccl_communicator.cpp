// Communicators (nccl_communicator.hpp): creation with a deadline, split, abort, destroy,
// and the checks and waits every NCCL call goes through.
#include <algorithm>
#include <cstdio>
#include <thread>

#include "cudakit/context.hpp"
#include "cudakit/driver.hpp"
#include "cudakit/error.hpp"
#include "cudakit/nccl_communicator.hpp"
#include "device/device_state.hpp"
#include "libraries/nccl_comm_state.hpp"

namespace cudakit::nccl {

using driver::cu;

std::string result_name(int result) {
  switch (result) {
    case ncclSuccess: return "ncclSuccess";
    case ncclUnhandledCudaError: return "ncclUnhandledCudaError";
    case ncclSystemError: return "ncclSystemError";
    case ncclInternalError: return "ncclInternalError";
    case ncclInvalidArgument: return "ncclInvalidArgument";
    case ncclInvalidUsage: return "ncclInvalidUsage";
    case ncclRemoteError: return "ncclRemoteError";
    case ncclInProgress: return "ncclInProgress";
    default: return "ncclResult " + std::to_string(result);
  }
}

std::string NcclError::result_name() const { return nccl::result_name(result_); }

int version() { return raw::api().version; }
std::string version_string() { return raw::version_string(raw::api().version); }
std::string library_path() { return raw::api().path; }

// ---- unique ids ----

UniqueId UniqueId::generate() {
  const raw::Api& api = raw::api();
  ncclUniqueId id;
  ncclResult_t r = api.GetUniqueId(&id);
  if (r != ncclSuccess) {
    const char* last = api.GetLastError(nullptr);
    throw NcclError(r, "ncclGetUniqueId", -1, 0, -1, last ? last : "",
                    "ncclGetUniqueId: " + result_name(r) + ": " + api.GetErrorString(r) +
                        (last && *last ? std::string("; NCCL says: ") + last : std::string()));
  }
  static_assert(sizeof(id.internal) == sizeof(UniqueId::bytes));
  UniqueId out;
  std::copy(std::begin(id.internal), std::end(id.internal), out.bytes.begin());
  return out;
}

std::string UniqueId::to_hex() const {
  static constexpr char digits[] = "0123456789abcdef";
  std::string s;
  s.reserve(bytes.size() * 2);
  for (unsigned char b : bytes) {
    s += digits[b >> 4];
    s += digits[b & 15];
  }
  return s;
}

UniqueId UniqueId::from_hex(std::string_view hex) {
  auto value = [](char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  UniqueId id;
  bool ok = hex.size() == id.bytes.size() * 2;
  for (std::size_t i = 0; ok && i < id.bytes.size(); ++i) {
    int hi = value(hex[2 * i]), lo = value(hex[2 * i + 1]);
    ok = hi >= 0 && lo >= 0;
    if (ok) id.bytes[i] = static_cast<unsigned char>(hi * 16 + lo);
  }
  if (!ok)
    throw InvalidArgument("UniqueId::from_hex: expected 256 hex digits (a UniqueId::to_hex), got " +
                          std::to_string(hex.size()) + " characters");
  return id;
}

namespace detail {

std::string duration_words(std::chrono::milliseconds d) {
  char buf[32];
  if (d.count() >= 1000 && d.count() % 1000 == 0) std::snprintf(buf, sizeof buf, "%lld s", static_cast<long long>(d.count() / 1000));
  else if (d.count() >= 1000) std::snprintf(buf, sizeof buf, "%.1f s", d.count() / 1000.0);
  else std::snprintf(buf, sizeof buf, "%lld ms", static_cast<long long>(d.count()));
  return buf;
}

namespace {

ncclConfig_t make_config(const Options& options) {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // every wait is cudakit's, with a deadline
  if (!options.name.empty()) config.commName = options.name.c_str();
  return config;
}

// NCCL makes communicators on the calling thread's current device (the runtime's, which
// is the current context's device).
void make_device_current(int device) { ContextRef(cudakit::detail::library_context(device), device).make_current(); }

void pause(int round) {
  if (round < 64) std::this_thread::yield();
  else std::this_thread::sleep_for(std::chrono::microseconds(round < 1000 ? 50 : 500));
}

}  // namespace

std::string CommState::words() const {
  std::string s = "rank " + std::to_string(rank) + " of " + std::to_string(ranks);
  if (device >= 0) s += " (device " + std::to_string(device) + ")";
  return s;
}

NcclError CommState::error(ncclResult_t result, const std::string& operation, const std::string& detail) const {
  const raw::Api& api = raw::api();
  const char* last = api.GetLastError(comm);
  std::string last_text = last != nullptr ? last : "";
  const char* description = api.GetErrorString(result);
  std::string message = operation + " on " + words() + ": " + result_name(result) + ": " +
                        (description ? description : "") + (detail.empty() ? "" : "; " + detail) +
                        (last_text.empty() ? "" : "; NCCL says: " + last_text);
  return NcclError(result, operation, rank, ranks, device, last_text, std::move(message));
}

void CommState::throw_ended() const {
  if (auto* t = dynamic_cast<const NcclTimeout*>(end_error.get())) throw *t;
  throw *end_error;
}

void CommState::end(std::shared_ptr<const NcclError> error, bool park) noexcept {
  std::lock_guard lock(call_lock);  // recursive: callers may hold it already
  if (ended.load(std::memory_order_relaxed)) return;
  end_error = std::move(error);
  ended.store(true, std::memory_order_release);
  if (comm != nullptr) {
    try {
      ncclResult_t r = raw::api().CommAbort(comm);
      if (r != ncclSuccess)
        park_error({CUDA_SUCCESS, "NCCL communicator abort",
                    "ncclCommAbort on " + words() + ": " + result_name(r) + " (its resources may leak)"});
    } catch (const std::exception& e) {
      park_error({CUDA_SUCCESS, "NCCL communicator abort", e.what()});
    }
    comm = nullptr;
  }
  if (park) park_error({CUDA_SUCCESS, "NCCL watchdog", end_error->what()});
}

void CommState::wait_for_progress(const char* operation, Clock::time_point deadline) {
  const raw::Api& api = raw::api();
  for (int round = 0;; ++round) {
    ncclResult_t state = ncclSuccess;
    ncclResult_t r = api.CommGetAsyncError(comm, &state);
    if (r != ncclSuccess) throw error(r, "ncclCommGetAsyncError", std::string("while waiting for ") + operation);
    if (state == ncclSuccess) return;
    if (state != ncclInProgress) {
      auto e = std::make_shared<const NcclError>(error(state, operation));
      end(e, false);
      throw_ended();
    }
    if (Clock::now() > deadline) {
      NcclError base = error(ncclInProgress, operation,
                             "it did not finish within " + duration_words(options.timeout) +
                                 " (Options::timeout); the communicator was aborted");
      end(std::make_shared<const NcclTimeout>(base.result(), base.operation(), rank, ranks, device, base.last_error(),
                                              base.what()),
          false);
      throw_ended();
    }
    pause(round);
  }
}

void CommState::check_call(ncclResult_t result, const char* operation) {
  if (result == ncclSuccess) [[likely]]
    return;
  if (result == ncclInProgress) {
    wait_for_progress(operation, deadline_after(options));
    return;
  }
  throw error(result, operation);
}

void CommState::watch(StreamRef stream) {
  std::lock_guard lock(watch_mutex);
  StreamWatch* w = nullptr;
  for (auto& existing : watches)
    if (existing.stream == stream.handle()) w = &existing;
  if (w == nullptr) {
    CUevent event = nullptr;
    make_device_current(stream.device_ordinal());
    check(cu.EventCreate(&event, CU_EVENT_DISABLE_TIMING), cu.EventCreate.name(), Resource::of_device(stream.device_ordinal()));
    w = &watches.emplace_back(StreamWatch{stream.handle(), event, {}, false});
  }
  check(cu.EventRecord(w->event, stream.handle()), cu.EventRecord.name(),
        Resource::of(ResourceKind::stream, stream.handle(), stream.device_ordinal()));
  w->submitted = Clock::now();
  w->pending = true;
}

void CommState::finalize_and_destroy() {
  std::lock_guard lock(call_lock);
  if (comm == nullptr) return;
  const raw::Api& api = raw::api();
  check_call(api.CommFinalize(comm), "ncclCommFinalize");
  ncclResult_t r = api.CommDestroy(comm);
  if (r != ncclSuccess) throw error(r, "ncclCommDestroy");
  comm = nullptr;
}

CommState::~CommState() {
  unwatch_communicator(this);
  try {
    finalize_and_destroy();
  } catch (const std::exception& e) {
    park_error({CUDA_SUCCESS, "NCCL communicator destroy", e.what()});
    if (comm != nullptr) end(std::make_shared<const NcclError>(ncclInternalError, "ncclCommDestroy", rank, ranks, device,
                                                               "", e.what()),
                             false);
  }
  for (auto& w : watches) {
    CUresult r = cu.EventDestroy(w.event);
    if (r != CUDA_SUCCESS) park_driver_error(r, cu.EventDestroy.name(), Resource::of_device(device), "NCCL communicator destroy");
  }
}

namespace {

// Reads rank, size and device from NCCL, then hands the communicator to the watchdog.
void describe_and_watch(CommState& s) {
  const raw::Api& api = raw::api();
  int cu_device = -1;
  if (ncclResult_t r = api.CommUserRank(s.comm, &s.rank); r != ncclSuccess) throw s.error(r, "ncclCommUserRank");
  if (ncclResult_t r = api.CommCount(s.comm, &s.ranks); r != ncclSuccess) throw s.error(r, "ncclCommCount");
  if (ncclResult_t r = api.CommCuDevice(s.comm, &cu_device); r != ncclSuccess) throw s.error(r, "ncclCommCuDevice");
  watch_communicator(&s);
}

std::shared_ptr<CommState> new_state(int ranks, int rank, int device, const Options& options) {
  auto s = std::make_shared<CommState>();
  s->api = &raw::api();
  s->ranks = ranks;
  s->rank = rank;
  s->device = device;
  s->context = cudakit::detail::library_context(device);
  s->options = options;
  return s;
}

void require_rank(int ranks, int rank, const char* what) {
  if (ranks < 1 || rank < 0 || rank >= ranks)
    throw InvalidArgument(std::string(what) + ": rank " + std::to_string(rank) + " is outside a communicator of " +
                          std::to_string(ranks) + " rank" + (ranks == 1 ? "" : "s"));
}

}  // namespace

void finish_creation(const std::vector<std::shared_ptr<CommState>>& states, const char* operation) {
  try {
    for (const auto& s : states) {
      std::lock_guard lock(s->call_lock);
      s->wait_for_progress(operation, deadline_after(s->options));
    }
    for (const auto& s : states) describe_and_watch(*s);
  } catch (...) {
    for (const auto& s : states)
      s->end(std::make_shared<const NcclError>(ncclInternalError, operation, s->rank, s->ranks, s->device, "",
                                               std::string(operation) + " on " + s->words() +
                                                   " was abandoned: another communicator made with it failed"),
             false);
    throw;
  }
}

}  // namespace detail

using detail::CommState;

Communicator::Communicator(const UniqueId& id, int ranks, int rank, Device device, const Options& options) {
  detail::require_rank(ranks, rank, "Communicator");
  if (detail::in_group())
    throw InvalidArgument("Communicator: make communicators outside nccl::group (create_all makes several at once)");
  const raw::Api& api = raw::api();
  auto s = detail::new_state(ranks, rank, device.ordinal(), options);
  ncclUniqueId nid;
  std::copy(id.bytes.begin(), id.bytes.end(), std::begin(nid.internal));
  ncclConfig_t config = detail::make_config(options);
  detail::make_device_current(device.ordinal());
  {
    std::lock_guard lock(s->call_lock);
    ncclResult_t r = api.CommInitRankConfig(&s->comm, ranks, nid, rank, &config);
    if (r != ncclSuccess && r != ncclInProgress) {
      NcclError e = s->error(r, "ncclCommInitRankConfig");
      if (s->comm != nullptr) s->end(std::make_shared<const NcclError>(e), false);
      throw e;
    }
  }
  detail::finish_creation({s}, "ncclCommInitRankConfig");
  state_ = std::move(s);
}

std::vector<Communicator> Communicator::create_all(const std::vector<Device>& devices, const Options& options) {
  if (devices.empty()) throw InvalidArgument("Communicator::create_all: no devices given");
  for (std::size_t i = 0; i < devices.size(); ++i)
    for (std::size_t j = 0; j < i; ++j)
      if (devices[i] == devices[j])
        throw InvalidArgument("Communicator::create_all: device " + std::to_string(devices[i].ordinal()) +
                              " is given twice; NCCL runs one rank per device");
  if (detail::in_group()) throw InvalidArgument("Communicator::create_all: call it outside nccl::group");
  const raw::Api& api = raw::api();
  UniqueId id = UniqueId::generate();
  ncclUniqueId nid;
  std::copy(id.bytes.begin(), id.bytes.end(), std::begin(nid.internal));
  const int n = static_cast<int>(devices.size());
  std::vector<std::shared_ptr<CommState>> states;
  for (int r = 0; r < n; ++r) states.push_back(detail::new_state(n, r, devices[r].ordinal(), options));
  std::vector<std::unique_lock<detail::CallLock>> locks;
  for (auto& s : states) locks.emplace_back(s->call_lock);
  // In one group: each init would otherwise wait for the others (NCCL's rule).
  ncclResult_t started = api.GroupStart();
  if (started != ncclSuccess) throw states[0]->error(started, "ncclGroupStart");
  ncclResult_t failed = ncclSuccess;
  int failed_rank = 0;
  for (int r = 0; r < n && failed == ncclSuccess; ++r) {
    detail::make_device_current(devices[r].ordinal());
    ncclConfig_t config = detail::make_config(options);
    ncclResult_t result = api.CommInitRankConfig(&states[r]->comm, n, nid, r, &config);
    if (result != ncclSuccess && result != ncclInProgress) failed = result, failed_rank = r;
  }
  ncclResult_t ended = api.GroupEnd();
  locks.clear();
  auto abandon = [&](const NcclError& e) {
    for (auto& s : states)
      if (s->comm != nullptr) s->end(std::make_shared<const NcclError>(e), false);
    throw e;
  };
  if (failed != ncclSuccess) abandon(states[failed_rank]->error(failed, "ncclCommInitRankConfig"));
  if (ended != ncclSuccess && ended != ncclInProgress) abandon(states[0]->error(ended, "ncclGroupEnd"));
  detail::finish_creation(states, "ncclCommInitRankConfig");
  std::vector<Communicator> out;
  for (auto& s : states) out.push_back(CommState::adopt(std::move(s)));
  return out;
}

Communicator::~Communicator() = default;
Communicator::Communicator(Communicator&&) noexcept = default;
Communicator& Communicator::operator=(Communicator&&) noexcept = default;

namespace {
CommState& require(const std::shared_ptr<CommState>& s, const char* what) {
  if (!s) throw EmptyHandle(std::string(what) + " on an empty nccl::Communicator (moved from, or split off with no_color)");
  return *s;
}
}  // namespace

Communicator Communicator::split(int color, int key, const Options& options) const {
  CommState& parent = require(state_, "Communicator::split");
  parent.throw_if_ended();
  if (color < 0 && color != no_color)
    throw InvalidArgument("Communicator::split: color " + std::to_string(color) +
                          " is negative; use Communicator::no_color to leave this rank out");
  const raw::Api& api = raw::api();
  auto s = detail::new_state(0, -1, parent.device, options);
  ncclConfig_t config = detail::make_config(options);
  {
    std::lock_guard lock(parent.call_lock);
    parent.throw_if_ended();  // the watchdog may have aborted it while this waited for the lock
    detail::make_device_current(parent.device);
    ncclResult_t r = api.CommSplit(parent.comm, color == no_color ? NCCL_SPLIT_NOCOLOR : color, key, &s->comm, &config);
    if (r != ncclSuccess && r != ncclInProgress) throw parent.error(r, "ncclCommSplit");
    if (!detail::in_group()) parent.wait_for_progress("ncclCommSplit", detail::deadline_after(parent.options));
  }
  if (s->comm == nullptr && color == no_color) return {};
  if (detail::in_group()) {
    // The group's end waits for it (NCCL creates it then) and describes it.
    detail::note_in_group({state_, StreamRef(), false});
    detail::note_in_group({s, StreamRef(), true});
    return CommState::adopt(std::move(s));
  }
  if (s->comm == nullptr) throw parent.error(ncclInternalError, "ncclCommSplit", "NCCL made no communicator");
  detail::finish_creation({s}, "ncclCommSplit");
  return CommState::adopt(std::move(s));
}

int Communicator::rank() const { return require(state_, "Communicator::rank").rank; }
int Communicator::size() const { return require(state_, "Communicator::size").ranks; }
Device Communicator::device() const { return Device::get(require(state_, "Communicator::device").device); }
const Options& Communicator::options() const { return require(state_, "Communicator::options").options; }
ncclComm* Communicator::handle() const { return state_ ? state_->comm : nullptr; }

void Communicator::check() const {
  CommState& s = require(state_, "Communicator::check");
  s.throw_if_ended();
  std::lock_guard lock(s.call_lock);
  s.throw_if_ended();
  ncclResult_t state = ncclSuccess;
  ncclResult_t r = raw::api().CommGetAsyncError(s.comm, &state);
  if (r != ncclSuccess) throw s.error(r, "ncclCommGetAsyncError");
  if (state != ncclSuccess && state != ncclInProgress) {
    s.end(std::make_shared<const NcclError>(s.error(state, "ncclCommGetAsyncError", "an asynchronous error")), false);
    s.throw_ended();
  }
}

void Communicator::synchronize(StreamRef stream) const {
  CommState& s = require(state_, "Communicator::synchronize");
  stream.require_handle("Communicator::synchronize");
  const auto deadline = detail::deadline_after(s.options);
  for (int round = 0;; ++round) {
    check();
    if (stream.query()) {
      check();  // the stream may have finished because the communicator was aborted
      return;
    }
    if (detail::Clock::now() > deadline) {
      NcclError base = s.error(ncclInProgress, "Communicator::synchronize",
                               "the stream's work did not finish within " + detail::duration_words(s.options.timeout) +
                                   " (Options::timeout); the communicator was aborted");
      s.end(std::make_shared<const NcclTimeout>(base.result(), base.operation(), s.rank, s.ranks, s.device,
                                                base.last_error(), base.what()),
            false);
      s.throw_ended();
    }
    detail::pause(round);
  }
}

void Communicator::abort() noexcept {
  if (!state_) return;
  state_->end(std::make_shared<const NcclError>(ncclInvalidUsage, "Communicator::abort", state_->rank, state_->ranks,
                                                state_->device, "",
                                                "the communicator of " + state_->words() + " was aborted by its user"),
              false);
}

void Communicator::destroy() {
  CommState& s = require(state_, "Communicator::destroy");
  if (state_.use_count() > 1)
    throw InvalidArgument("Communicator::destroy: a graph (or its executables) still holds the communicator of " +
                          s.words() + "; destroy them first, or let the communicator go and the last holder destroys it");
  detail::unwatch_communicator(&s);
  try {
    s.finalize_and_destroy();
  } catch (...) {
    if (s.comm != nullptr)
      s.end(std::make_shared<const NcclError>(ncclInternalError, "ncclCommDestroy", s.rank, s.ranks, s.device, "",
                                              "destroy failed"),
            false);
    state_.reset();
    throw;
  }
  state_.reset();
}

}  // namespace cudakit::nccl
