// Collectives (nccl_collectives.hpp): the checks before the call, the NCCL call, the
// capture's hold on the communicator and the watch after the call.
#include <string>

#include "cudakit/context.hpp"
#include "cudakit/nccl_collectives.hpp"
#include "graph/graph_capture.hpp"
#include "stream/stream_state_of.hpp"
#include "driver/profiler_names.hpp"
#include "libraries/nccl_comm_state.hpp"

namespace cudakit::nccl {

// The public enums carry NCCL's own values, so they are passed through unchanged.
static_assert(static_cast<int>(DataType::int8) == ncclInt8 && static_cast<int>(DataType::uint8) == ncclUint8 &&
              static_cast<int>(DataType::int32) == ncclInt32 && static_cast<int>(DataType::uint32) == ncclUint32 &&
              static_cast<int>(DataType::int64) == ncclInt64 && static_cast<int>(DataType::uint64) == ncclUint64 &&
              static_cast<int>(DataType::float16) == ncclFloat16 && static_cast<int>(DataType::float32) == ncclFloat32 &&
              static_cast<int>(DataType::float64) == ncclFloat64 && static_cast<int>(DataType::bfloat16) == ncclBfloat16);
static_assert(static_cast<int>(ReduceOp::sum) == ncclSum && static_cast<int>(ReduceOp::product) == ncclProd &&
              static_cast<int>(ReduceOp::max) == ncclMax && static_cast<int>(ReduceOp::min) == ncclMin &&
              static_cast<int>(ReduceOp::average) == ncclAvg);

namespace detail {

namespace {

const char* call_name(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::all_reduce: return "ncclAllReduce";
    case CollectiveKind::reduce: return "ncclReduce";
    case CollectiveKind::broadcast: return "ncclBroadcast";
    case CollectiveKind::all_gather: return "ncclAllGather";
    case CollectiveKind::reduce_scatter: return "ncclReduceScatter";
    case CollectiveKind::send: return "ncclSend";
    case CollectiveKind::recv: return "ncclRecv";
  }
  return "nccl";
}

constexpr bool has_root(CollectiveKind k) { return k == CollectiveKind::reduce || k == CollectiveKind::broadcast; }
constexpr bool has_peer(CollectiveKind k) { return k == CollectiveKind::send || k == CollectiveKind::recv; }

// The NCCL call of kind K: chosen at compile time, so a collective's host path has no
// dispatch on its kind (an indirect jump, mispredicted once NCCL's own microseconds of host
// work have evicted the predictor's entry).
template <CollectiveKind K>
ncclResult_t call(const raw::Api& api, ncclComm_t comm, CUstream stream, const Collective& c) {
  auto* send = reinterpret_cast<const void*>(c.send);
  auto* recv = reinterpret_cast<void*>(c.recv);
  auto type = static_cast<ncclDataType_t>(c.type);
  auto op = static_cast<ncclRedOp_t>(c.op);
  if constexpr (K == CollectiveKind::all_reduce) return api.AllReduce(send, recv, c.count, type, op, comm, stream);
  else if constexpr (K == CollectiveKind::reduce)
    return api.Reduce(send, recv, c.count, type, op, c.root_or_peer, comm, stream);
  else if constexpr (K == CollectiveKind::broadcast)
    return api.Broadcast(send, recv, c.count, type, c.root_or_peer, comm, stream);
  else if constexpr (K == CollectiveKind::all_gather) return api.AllGather(send, recv, c.count, type, comm, stream);
  else if constexpr (K == CollectiveKind::reduce_scatter)
    return api.ReduceScatter(send, recv, c.count, type, op, comm, stream);
  else if constexpr (K == CollectiveKind::send) return api.Send(send, c.count, type, c.root_or_peer, comm, stream);
  else return api.Recv(recv, c.count, type, c.root_or_peer, comm, stream);
}

// A capture of `stream` in progress (cudakit's) keeps the communicator alive in its graph;
// returns whether the stream is capturing. The test for no capture at all is inline; the
// rest is out of line.
[[gnu::noinline]] bool hold_in_active_capture(const StreamRef& stream, const std::shared_ptr<CommState>& state) {
  using namespace cudakit::detail;
  StreamState* s = stream_state_of(stream);
  auto* c = capture_owned_here(s, [] { return std::string("an NCCL collective"); });
  if (c == nullptr) return false;
  graph_capture(c).resources->keep(state);
  return true;
}
inline bool hold_in_capture(const StreamRef& stream, const std::shared_ptr<CommState>& state) {
  if (cudakit::detail::active_captures.load(std::memory_order_relaxed) == 0) [[likely]]
    return false;
  return hold_in_active_capture(stream, state);
}

// The checks before anything is declared or submitted, and their messages, made only when
// one fails: out of line, so that a collective's host path holds none of this code.
[[noreturn, gnu::cold, gnu::noinline]] void refuse(const Communicator& comm, const StreamRef& stream,
                                                   const Collective& c) {
  auto name = [&] { return std::string(call_name(c.kind)); };
  if (!comm) throw EmptyHandle(name() + " on an empty nccl::Communicator");
  stream.require_handle(call_name(c.kind));
  const CommState& s = *comm.state();
  s.throw_if_ended();
  auto on = [&](int device) { return "device " + std::to_string(device); };
  if (stream.device_ordinal() != s.device)
    throw InvalidArgument(name() + " on " + s.words() + ": the stream is on " + on(stream.device_ordinal()));
  for (auto [device, words] : {std::pair{c.send_device, "send"}, std::pair{c.recv_device, "receive"}})
    if (device >= 0 && device != s.device)
      throw InvalidArgument(name() + " on " + s.words() + ": the " + words + " buffer is on " + on(device));
  if ((has_root(c.kind) || has_peer(c.kind)) && (c.root_or_peer < 0 || c.root_or_peer >= s.ranks))
    throw InvalidArgument(name() + " on " + s.words() + ": " + (has_root(c.kind) ? "root " : "peer ") +
                          std::to_string(c.root_or_peer) + " is not a rank of the communicator");
  const bool reads =
      c.kind != CollectiveKind::recv && (c.kind != CollectiveKind::broadcast || s.rank == c.root_or_peer);
  throw InvalidArgument(name() + " on " + s.words() + ": the " + (reads && c.send == 0 ? "send" : "receive") +
                        " buffer is empty, and this rank uses it");
}

// Whether a call of kind K passes every check refuse() makes: evaluated without a branch
// per check, so that the common case takes one.
template <CollectiveKind K>
[[gnu::always_inline]] inline bool acceptable(const CommState& s, const StreamRef& stream, const Collective& c) {
  bool ok = !s.ended.load(std::memory_order_acquire);
  ok &= stream.device_ordinal() == s.device;
  ok &= (c.send_device < 0) | (c.send_device == s.device);
  ok &= (c.recv_device < 0) | (c.recv_device == s.device);
  if constexpr (has_root(K) || has_peer(K)) ok &= (c.root_or_peer >= 0) & (c.root_or_peer < s.ranks);
  // A buffer the call reads or writes must exist where this rank uses it.
  bool reads = K != CollectiveKind::recv;
  bool writes = K != CollectiveKind::send;
  if constexpr (K == CollectiveKind::broadcast) reads = s.rank == c.root_or_peer;
  if constexpr (K == CollectiveKind::reduce) writes = s.rank == c.root_or_peer;
  ok &= (c.count == 0) | !((reads & (c.send == 0)) | (writes & (c.recv == 0)));
  return ok;
}

// Whether ordering the declared uses needs nothing: each buffer is used on this stream
// alone, no capture is in progress and the device is not poisoned (tracking's fast path,
// DESIGN 5). Tested for both buffers at once, so the common case takes one branch.
[[gnu::always_inline]] inline bool uses_need_nothing(const StreamRef& stream, const Reads<1>& read,
                                                     const Writes<1>& write) {
  using namespace cudakit::detail;
  const Allocation* in = read.allocations[0];
  const Allocation* out = write.allocations[0];
  if ((in == nullptr) | (out == nullptr)) [[unlikely]]
    return false;  // a rank that only sends or receives, or an empty buffer: ordered out of line
  const auto d = static_cast<unsigned>(stream.device_ordinal());
  return (d < max_devices) & !poisoned_flags[d % max_devices].load(std::memory_order_relaxed) &
         in->use_needs_nothing(stream) & out->use_needs_nothing(stream);
}

// The declared uses when something must be done (DeclaredWork's ordering, out of line).
[[gnu::noinline]] void order_uses(const StreamRef& stream, const Reads<1>& read, const Writes<1>& write) {
  const auto declared = cudakit::detail::declared_uses(read, write);
  cudakit::detail::order_declared_uses(stream, declared.uses.data(), declared.count);
}

// What follows an NCCL call that is in a group, failed, or is watched.
[[gnu::noinline]] void after_call(const std::shared_ptr<CommState>& state, const StreamRef& stream,
                                  const Collective& c, ncclResult_t r, bool capturing) {
  CommState& s = *state;
  if (in_group()) {
    // NCCL launches the group's work at its end, which waits for progress and watches.
    if (r != ncclSuccess && r != ncclInProgress) throw s.error(r, call_name(c.kind));
    note_in_group({state, capturing ? StreamRef() : stream, false});
    return;
  }
  if (r != ncclSuccess) s.check_call(r, call_name(c.kind));
  if (!capturing && s.needs_watch()) s.watch(stream);
}

}  // namespace

void throw_count_mismatch(const char* what, const char* a_words, std::size_t a, const char* b_words, std::size_t b) {
  throw InvalidArgument(std::string(what) + ": " + a_words + " has " + std::to_string(a) + " elements, " + b_words + " " +
                        std::to_string(b));
}

// The whole host path of a collective in one function, its common case straight through
// and everything else out of line: on one rank NCCL's own host work evicts this code from
// the CPU's first-level caches between calls, so each cache line of it costs a fetch.
template <CollectiveKind K>
void submit(const Communicator& comm, const StreamRef& stream, const Collective& c, const Reads<1>& read,
            const Writes<1>& write) {
  cudakit::detail::profiler::Range range(cudakit::detail::profiler::Activity::collective);
  const std::shared_ptr<CommState>& state = comm.state();
  if (!state || !stream || !acceptable<K>(*state, stream, c)) [[unlikely]]
    refuse(comm, stream, c);
  if (!uses_need_nothing(stream, read, write)) [[unlikely]]
    order_uses(stream, read, write);
  CommState& s = *state;
  ContextRef(s.context, s.device).make_current();  // after the uses: a peer buffer's may change it
  // The NCCL call, with the communicator's call_lock held (Note [NCCL calls and the watchdog]).
  std::lock_guard lock(s.call_lock);
  s.throw_if_ended();
  const bool capturing = hold_in_capture(stream, state);
  const ncclResult_t r = call<K>(*s.api, s.comm, stream.handle(), c);
  if (in_group() | (r != ncclSuccess) | (s.needs_watch() & !capturing)) [[unlikely]]
    after_call(state, stream, c, r, capturing);
}

#define CUDAKIT_NCCL_SUBMIT(kind)                                                                                 \
  template CUDAKIT_API void submit<CollectiveKind::kind>(const Communicator&, const StreamRef&, const Collective&, \
                                                         const Reads<1>&, const Writes<1>&);
CUDAKIT_NCCL_SUBMIT(all_reduce)
CUDAKIT_NCCL_SUBMIT(reduce)
CUDAKIT_NCCL_SUBMIT(broadcast)
CUDAKIT_NCCL_SUBMIT(all_gather)
CUDAKIT_NCCL_SUBMIT(reduce_scatter)
CUDAKIT_NCCL_SUBMIT(send)
CUDAKIT_NCCL_SUBMIT(recv)
#undef CUDAKIT_NCCL_SUBMIT

}  // namespace detail

}  // namespace cudakit::nccl
