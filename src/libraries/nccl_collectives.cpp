// Collectives (nccl_collectives.hpp): the checks before the call, the NCCL call, the
// capture's hold on the communicator and the watch after the call.
#include <string>

#include "cudakit/context.hpp"
#include "cudakit/nccl_collectives.hpp"
#include "graph/graph_capture.hpp"
#include "stream/stream_state_of.hpp"
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

bool has_root(CollectiveKind k) { return k == CollectiveKind::reduce || k == CollectiveKind::broadcast; }
bool has_peer(CollectiveKind k) { return k == CollectiveKind::send || k == CollectiveKind::recv; }

ncclResult_t call(const raw::Api& api, ncclComm_t comm, CUstream stream, const Collective& c) {
  auto* send = reinterpret_cast<const void*>(c.send);
  auto* recv = reinterpret_cast<void*>(c.recv);
  auto type = static_cast<ncclDataType_t>(c.type);
  auto op = static_cast<ncclRedOp_t>(c.op);
  switch (c.kind) {
    case CollectiveKind::all_reduce: return api.AllReduce(send, recv, c.count, type, op, comm, stream);
    case CollectiveKind::reduce: return api.Reduce(send, recv, c.count, type, op, c.root_or_peer, comm, stream);
    case CollectiveKind::broadcast: return api.Broadcast(send, recv, c.count, type, c.root_or_peer, comm, stream);
    case CollectiveKind::all_gather: return api.AllGather(send, recv, c.count, type, comm, stream);
    case CollectiveKind::reduce_scatter: return api.ReduceScatter(send, recv, c.count, type, op, comm, stream);
    case CollectiveKind::send: return api.Send(send, c.count, type, c.root_or_peer, comm, stream);
    case CollectiveKind::recv: return api.Recv(recv, c.count, type, c.root_or_peer, comm, stream);
  }
  return ncclInvalidArgument;
}

// A capture of `stream` in progress (cudakit's) keeps the communicator alive in its graph;
// returns whether the stream is capturing.
bool hold_in_capture(const StreamRef& stream, const std::shared_ptr<CommState>& state) {
  using namespace cudakit::detail;
  if (active_captures.load(std::memory_order_relaxed) == 0) [[likely]]
    return false;
  StreamState* s = stream_state_of(stream);
  auto* c = s->marks.capture();
  if (c == nullptr) return false;
  graph_capture(c).resources->keep(state);
  return true;
}

// The checks before anything is declared or submitted; the messages, and the call's name
// in them, are made only when a check fails. Inlined into submit, so that a collective's
// host path is one function: on one rank its host time is all of its cost.
[[gnu::always_inline]] inline const CommState& check(const Communicator& comm, const StreamRef& stream, const Collective& c) {
  auto name = [&] { return std::string(call_name(c.kind)); };
  if (!comm) [[unlikely]]
    throw EmptyHandle(name() + " on an empty nccl::Communicator");
  if (!stream) [[unlikely]]
    stream.require_handle(call_name(c.kind));
  const CommState& s = *comm.state();
  s.throw_if_ended();
  auto on = [&](int device) { return "device " + std::to_string(device); };
  if (stream.device_ordinal() != s.device) [[unlikely]]
    throw InvalidArgument(name() + " on " + s.words() + ": the stream is on " + on(stream.device_ordinal()));
  for (auto [device, words] : {std::pair{c.send_device, "send"}, std::pair{c.recv_device, "receive"}})
    if (device >= 0 && device != s.device) [[unlikely]]
      throw InvalidArgument(name() + " on " + s.words() + ": the " + words + " buffer is on " + on(device));
  if ((has_root(c.kind) || has_peer(c.kind)) && (c.root_or_peer < 0 || c.root_or_peer >= s.ranks)) [[unlikely]]
    throw InvalidArgument(name() + " on " + s.words() + ": " + (has_root(c.kind) ? "root " : "peer ") +
                          std::to_string(c.root_or_peer) + " is not a rank of the communicator");
  // A buffer the call reads or writes must exist where this rank uses it.
  const bool reads = c.kind != CollectiveKind::recv && (c.kind != CollectiveKind::broadcast || s.rank == c.root_or_peer);
  const bool writes = c.kind != CollectiveKind::send && (c.kind != CollectiveKind::reduce || s.rank == c.root_or_peer);
  if (c.count > 0 && ((reads && c.send == 0) || (writes && c.recv == 0))) [[unlikely]]
    throw InvalidArgument(name() + " on " + s.words() + ": the " + (reads && c.send == 0 ? "send" : "receive") +
                          " buffer is empty, and this rank uses it");
  return s;
}

// The NCCL call itself, with the communicator's call_lock held (Note [NCCL calls and the
// watchdog]); the declared uses are ordered and the context is current.
void call_locked(const std::shared_ptr<CommState>& state, const StreamRef& stream, CUstream handle, const Collective& c) {
  CommState& s = *state;
  std::lock_guard lock(s.call_lock);
  s.throw_if_ended();
  const bool capturing = hold_in_capture(stream, state);
  ncclResult_t r = call(*s.api, s.comm, handle, c);
  if (in_group()) [[unlikely]] {
    // NCCL launches the group's work at its end, which waits for progress and watches.
    if (r != ncclSuccess && r != ncclInProgress) throw s.error(r, call_name(c.kind));
    note_in_group({state, capturing ? StreamRef() : stream, false});
    return;
  }
  if (r != ncclSuccess) [[unlikely]]
    s.check_call(r, call_name(c.kind));
  if (!capturing && s.needs_watch()) s.watch(stream);
}

}  // namespace

void throw_count_mismatch(const char* what, const char* a_words, std::size_t a, const char* b_words, std::size_t b) {
  throw InvalidArgument(std::string(what) + ": " + a_words + " has " + std::to_string(a) + " elements, " + b_words + " " +
                        std::to_string(b));
}

void submit(const Communicator& comm, const StreamRef& stream, const Collective& c, const Reads<1>& read,
            const Writes<1>& write) {
  const CommState& s = check(comm, stream, c);
  const auto declared = cudakit::detail::declared_uses(read, write);
  cudakit::detail::declare_uses(stream, declared.uses.data(), declared.count, ContextRef(s.context, s.device));
  call_locked(comm.state(), stream, stream.handle(), c);
}

}  // namespace detail

}  // namespace cudakit::nccl
