// Collectives and point-to-point transfers on cudakit buffers and views and cudakit
// streams, through NCCL (nccl_communicator.hpp).
//
//   nccl::all_reduce(comm, stream, grads, grads_sum);                 // every rank gets the sum
//   nccl::all_reduce_in_place(comm, stream, grads, nccl::ReduceOp::average);
//   nccl::group([&] { nccl::send(comm, s, x, 1); nccl::recv(comm, s, y, 1); });
//
// Each one is declared work (declared_work.hpp): what it sends is declared read, what it
// receives written, so work on other streams before and after it is ordered (DESIGN 5),
// and inside a capture the graph keeps the buffers and the communicator alive (DESIGN 4;
// run each collective once before capturing it, so that NCCL makes its connections
// outside the graph). The stream and every buffer must be on the communicator's device.
//
// Types: float, double, __half, __nv_bfloat16 and the 8, 32 and 64-bit integers. Sizes
// are checked where this rank can see a mismatch (InvalidArgument names both sizes):
// all-reduce (send and receive alike), all-gather (receive = send x ranks),
// reduce-scatter (send = receive x ranks), reduce and broadcast at the root. Roots and
// peers must be ranks of the communicator. A send's count must match the peer's receive:
// only the pair can see that, and NCCL's behaviour on a mismatch is undefined.
//
// In one process over several devices, issue each collective on every communicator
// inside one nccl::group. Thread safety: as the communicator's.
#pragma once

#include <cstdint>
#include <type_traits>

#include "cudakit/declared_work.hpp"
#include "cudakit/device_buffer.hpp"
#include "cudakit/device_span.hpp"
#include "cudakit/export.hpp"
#include "cudakit/nccl_communicator.hpp"

struct __half;          // cuda_fp16.h
struct __nv_bfloat16;   // cuda_bf16.h

namespace cudakit::nccl {

/// NCCL's element types (ncclDataType_t values).
enum class DataType : int {
  int8 = 0,
  uint8 = 1,
  int32 = 2,
  uint32 = 3,
  int64 = 4,
  uint64 = 5,
  float16 = 6,
  float32 = 7,
  float64 = 8,
  bfloat16 = 9,
};

/// NCCL's reductions (ncclRedOp_t values). `average` divides the sum by the ranks.
enum class ReduceOp : int { sum = 0, product = 1, max = 2, min = 3, average = 4 };

namespace detail {
template <class T>
constexpr DataType data_type_of() {
  using U = std::remove_cv_t<T>;
  if constexpr (std::is_same_v<U, float>) return DataType::float32;
  else if constexpr (std::is_same_v<U, double>) return DataType::float64;
  else if constexpr (std::is_same_v<U, __half>) return DataType::float16;
  else if constexpr (std::is_same_v<U, __nv_bfloat16>) return DataType::bfloat16;
  else {
    static_assert(std::is_integral_v<U> && !std::is_same_v<U, bool> && sizeof(U) != 2 && sizeof(U) <= 8,
                  "NCCL reduces float, double, __half, __nv_bfloat16 and 8, 32 and 64-bit integers");
    constexpr bool is_signed = std::is_signed_v<U>;
    if constexpr (sizeof(U) == 1) return is_signed ? DataType::int8 : DataType::uint8;
    else if constexpr (sizeof(U) == 4) return is_signed ? DataType::int32 : DataType::uint32;
    else return is_signed ? DataType::int64 : DataType::uint64;
  }
}
}  // namespace detail

/// The NCCL element type of T (a compile error for a type NCCL cannot reduce).
template <class T>
inline constexpr DataType data_type_v = detail::data_type_of<T>();

namespace detail {

/// What one NCCL call does.
enum class CollectiveKind : std::uint8_t { all_reduce, reduce, broadcast, all_gather, reduce_scatter, send, recv };

/// One NCCL call: its kind, buffers, element count (per rank as NCCL counts it), type,
/// reduction and root or peer.
struct Collective {
  CollectiveKind kind;
  CUdeviceptr send = 0;
  CUdeviceptr recv = 0;
  std::size_t count = 0;
  DataType type = DataType::float32;
  ReduceOp op = ReduceOp::sum;
  int root_or_peer = -1;
  int send_device = -1;  // -1: no buffer
  int recv_device = -1;
};

/// Throws InvalidArgument: "<what>: <a_words> has <a> elements, <b_words> <b>".
[[noreturn]] CUDAKIT_API void throw_count_mismatch(const char* what, const char* a_words, std::size_t a,
                                                   const char* b_words, std::size_t b);
/// InvalidArgument (throw_count_mismatch) unless a == b.
inline void require_count(const char* what, const char* a_words, std::size_t a, const char* b_words, std::size_t b) {
  if (a != b) [[unlikely]]
    throw_count_mismatch(what, a_words, a, b_words, b);
}
/// Checks the call (the communicator, the stream, the devices, the root or peer, the
/// buffers this rank uses), then submits it as declared work: `read` and `write` are
/// ordered on `stream`, NCCL is called with the stream's context current, a capture keeps
/// the communicator, and the stream is watched (nccl_communicator.hpp). One out-of-line
/// call per collective, one function per kind K (c.kind): on one rank a collective costs
/// a few microseconds of host time, so cudakit's part must stay small, with no dispatch on
/// the kind at run time. Throws what the checks and NCCL report.
template <CollectiveKind K>
CUDAKIT_API void submit(const Communicator& comm, const StreamRef& stream, const Collective& c, const Reads<1>& read,
                        const Writes<1>& write);

/// submit<c.kind>. Inline: the collectives below build `c` with a constant kind, so the
/// compiler keeps only the one call.
[[gnu::always_inline]] inline void submit_collective(const Communicator& comm, const StreamRef& stream,
                                                     const Collective& c, const Reads<1>& read,
                                                     const Writes<1>& write) {
  switch (c.kind) {
    case CollectiveKind::all_reduce:
      return submit<CollectiveKind::all_reduce>(comm, stream, c, read, write);
    case CollectiveKind::reduce:
      return submit<CollectiveKind::reduce>(comm, stream, c, read, write);
    case CollectiveKind::broadcast:
      return submit<CollectiveKind::broadcast>(comm, stream, c, read, write);
    case CollectiveKind::all_gather:
      return submit<CollectiveKind::all_gather>(comm, stream, c, read, write);
    case CollectiveKind::reduce_scatter:
      return submit<CollectiveKind::reduce_scatter>(comm, stream, c, read, write);
    case CollectiveKind::send:
      return submit<CollectiveKind::send>(comm, stream, c, read, write);
    case CollectiveKind::recv:
      return submit<CollectiveKind::recv>(comm, stream, c, read, write);
  }
}

template <class T>
DeviceSpan<const T> read_view(const DeviceBuffer<T>& b) {
  return b.span();  // EmptyHandle for a moved-from buffer
}
template <class T>
DeviceSpan<const T> read_view(DeviceSpan<T> s) noexcept {
  return s;
}
template <class T>
  requires(!std::is_const_v<T>)
DeviceSpan<T> write_view(DeviceBuffer<T>& b) {
  return b.span();  // EmptyHandle for a moved-from buffer
}
template <class T>
  requires(!std::is_const_v<T>)
DeviceSpan<T> write_view(DeviceSpan<T> s) noexcept {
  return s;
}

/// Buffers and views a collective may take.
template <class B>
concept device_range = requires(B&& b) { read_view(b); };

template <class In, class Out>
[[gnu::always_inline]] inline void run(const Communicator& comm, const StreamRef& stream, Collective c,
                                       DeviceSpan<const In> in, DeviceSpan<Out> out) {
  static_assert(std::is_same_v<In, Out>, "the send and receive buffers must hold the same element type");
  c.type = data_type_v<Out>;
  c.send = in.device_pointer();
  c.recv = out.device_pointer();
  c.send_device = in.device_ordinal();
  c.recv_device = out.device_ordinal();
  submit_collective(comm, stream, c, reads(in), writes(out));
}

}  // namespace detail

// The collectives are always inlined into the caller, which then calls submit<K> directly:
// on one rank a collective's host time is all of its cost, and one more function between
// the caller and NCCL measured 11 to 48 ns a call on an H200's host (its code is cold
// after NCCL's own microseconds of host work).

/// Every rank's `recv` becomes the reduction of every rank's `send` (same sizes).
template <detail::device_range Send, detail::device_range Recv>
[[gnu::always_inline]] inline void all_reduce(const Communicator& comm, StreamRef stream, const Send& send, Recv&& recv,
                                              ReduceOp op = ReduceOp::sum) {
  auto in = detail::read_view(send);
  auto out = detail::write_view(recv);
  detail::require_count("all_reduce", "the send buffer", in.size(), "the receive buffer", out.size());
  detail::run(comm, stream, {detail::CollectiveKind::all_reduce, 0, 0, out.size(), {}, op}, in, out);
}

/// all_reduce with `data` as both send and receive buffer.
template <detail::device_range Data>
[[gnu::always_inline]] inline void all_reduce_in_place(const Communicator& comm, StreamRef stream, Data&& data,
                                                       ReduceOp op = ReduceOp::sum) {
  auto d = detail::write_view(data);
  detail::run(comm, stream, {detail::CollectiveKind::all_reduce, 0, 0, d.size(), {}, op}, detail::read_view(d), d);
}

/// The root's `recv` becomes the reduction of every rank's `send`; other ranks' `recv`
/// is not touched and may be empty.
template <detail::device_range Send, detail::device_range Recv>
[[gnu::always_inline]] inline void reduce(const Communicator& comm, StreamRef stream, const Send& send, Recv&& recv,
                                          int root, ReduceOp op = ReduceOp::sum) {
  auto in = detail::read_view(send);
  auto out = detail::write_view(recv);
  if (comm && comm.rank() == root)
    detail::require_count("reduce at the root", "the send buffer", in.size(), "the receive buffer", out.size());
  detail::run(comm, stream, {detail::CollectiveKind::reduce, 0, 0, in.size(), {}, op, root}, in, out);
}

/// Every rank's `recv` becomes the root's `send`; other ranks' `send` is not read and may
/// be empty.
template <detail::device_range Send, detail::device_range Recv>
[[gnu::always_inline]] inline void broadcast(const Communicator& comm, StreamRef stream, const Send& send, Recv&& recv,
                                             int root) {
  auto in = detail::read_view(send);
  auto out = detail::write_view(recv);
  if (comm && comm.rank() == root)
    detail::require_count("broadcast at the root", "the send buffer", in.size(), "the receive buffer", out.size());
  detail::run(comm, stream, {detail::CollectiveKind::broadcast, 0, 0, out.size(), {}, {}, root}, in, out);
}

/// broadcast with `data` as both: the root's data goes to every rank's.
template <detail::device_range Data>
[[gnu::always_inline]] inline void broadcast_in_place(const Communicator& comm, StreamRef stream, Data&& data,
                                                      int root) {
  auto d = detail::write_view(data);
  detail::run(comm, stream, {detail::CollectiveKind::broadcast, 0, 0, d.size(), {}, {}, root}, detail::read_view(d), d);
}

/// Every rank's `recv` becomes every rank's `send`, in rank order (receive = send x ranks).
template <detail::device_range Send, detail::device_range Recv>
[[gnu::always_inline]] inline void all_gather(const Communicator& comm, StreamRef stream, const Send& send,
                                              Recv&& recv) {
  auto in = detail::read_view(send);
  auto out = detail::write_view(recv);
  if (comm)
    detail::require_count("all_gather", "the receive buffer", out.size(), "the send buffer times the ranks",
                          in.size() * static_cast<std::size_t>(comm.size()));
  detail::run(comm, stream, {detail::CollectiveKind::all_gather, 0, 0, in.size()}, in, out);
}

/// Rank r's `recv` becomes the reduction of block r of every rank's `send`
/// (send = receive x ranks).
template <detail::device_range Send, detail::device_range Recv>
[[gnu::always_inline]] inline void reduce_scatter(const Communicator& comm, StreamRef stream, const Send& send,
                                                  Recv&& recv, ReduceOp op = ReduceOp::sum) {
  auto in = detail::read_view(send);
  auto out = detail::write_view(recv);
  if (comm)
    detail::require_count("reduce_scatter", "the send buffer", in.size(), "the receive buffer times the ranks",
                          out.size() * static_cast<std::size_t>(comm.size()));
  detail::run(comm, stream, {detail::CollectiveKind::reduce_scatter, 0, 0, out.size(), {}, op}, in, out);
}

/// Sends `data` to rank `peer`, which receives it with recv() of the same count. Pair
/// sends and receives inside one nccl::group.
template <detail::device_range Data>
[[gnu::always_inline]] inline void send(const Communicator& comm, StreamRef stream, const Data& data, int peer) {
  auto in = detail::read_view(data);
  detail::run(comm, stream, {detail::CollectiveKind::send, 0, 0, in.size(), {}, {}, peer}, in,
              DeviceSpan<std::remove_const_t<typename decltype(in)::element_type>>());
}

/// Receives `data` from rank `peer` (see send()).
template <detail::device_range Data>
[[gnu::always_inline]] inline void recv(const Communicator& comm, StreamRef stream, Data&& data, int peer) {
  auto out = detail::write_view(data);
  detail::run(comm, stream, {detail::CollectiveKind::recv, 0, 0, out.size(), {}, {}, peer},
              DeviceSpan<const typename decltype(out)::element_type>(), out);
}

}  // namespace cudakit::nccl
