// The fake NCCL's entries (fake_nccl.hpp).
#include "fake_nccl.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <deque>
#include <functional>
#include <tuple>

#include "fake_driver.hpp"

namespace cudakit::fake {

namespace {
Nccl* installed = nullptr;
Nccl& N() { return *installed; }
}  // namespace

// One round of a collective: what each rank passed.
struct Part {
  bool present = false;
  const void* send = nullptr;
  void* recv = nullptr;
};
struct Round {
  NcclEntry kind{};
  std::size_t count = 0;
  ncclDataType_t type = ncclFloat32;
  ncclRedOp_t op = ncclSum;
  int root = -1;
  std::vector<Part> parts;
  int arrived = 0;
};
struct P2P {
  void* data = nullptr;
  std::size_t bytes = 0;
};

struct NcclClique {
  int ranks = 0;
  bool placeholder = false;  // holds a split's communicator until every rank has split
  std::map<int, NcclComm*> members;
  std::map<std::uint64_t, Round> rounds;                          // by sequence number
  std::map<std::pair<int, int>, std::deque<P2P>> sends, recvs;    // (from, to)
  // Splits in progress: by the parent's split sequence, each rank's (color, key, new comm).
  std::map<std::uint64_t, std::map<int, std::tuple<int, int, NcclComm*>>> splits;
};

struct NcclComm {
  NcclClique* clique = nullptr;
  int rank = -1;
  int device = 0;
  bool ready = false;
  bool finalized = false;
  int progress_left = 0;
  ncclResult_t async_error = ncclSuccess;
  std::uint64_t next_round = 0;
  std::uint64_t next_split = 0;
  std::set<CUstream> stalled;  // streams its collectives stalled
};

namespace {

thread_local int group_depth = 0;
thread_local std::set<NcclComm*> group_comms;

ncclResult_t enter(NcclEntry e) {
  std::function<void(NcclEntry)> hook;
  {
    std::lock_guard l(N().mutex);
    hook = N().entry_hook;
  }
  if (hook) hook(e);  // outside the lock: it may wait for another thread's calls
  std::lock_guard l(N().mutex);
  auto i = static_cast<std::size_t>(e);
  int n = ++N().call_counts[i];
  N().call_log.push_back(e);
  for (const auto& f : N().faults)
    if (f.entry == e && (f.nth == 0 || f.nth == n)) {
      N().failures.emplace_back(e, f.result);
      N().last_error = std::string("fake NCCL: ") + nccl::raw::entry_name(e) + " failed as scripted";
      return f.result;
    }
  return ncclSuccess;
}

NcclComm* live(ncclComm_t c, const char* call) {
  auto* comm = reinterpret_cast<NcclComm*>(c);
  if (comm == nullptr || !N().comms.count(comm)) {
    N().problems.push_back(std::string(call) + " on a communicator that is not live");
    return nullptr;
  }
  return comm;
}

// The result of a call that may stay in progress.
ncclResult_t maybe_in_progress(NcclComm* c) {
  if (N().progress_polls <= 0) return ncclSuccess;
  c->progress_left = std::max(c->progress_left, N().progress_polls);
  return ncclInProgress;
}

std::size_t type_size(ncclDataType_t t) {
  switch (t) {
    case ncclInt8: case ncclUint8: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    default: return 8;
  }
}

float half_to_float(std::uint16_t h) {
  int sign = h >> 15, exponent = (h >> 10) & 31, mantissa = h & 1023;
  float v = exponent == 0 ? std::ldexp(static_cast<float>(mantissa), -24)
                          : std::ldexp(static_cast<float>(mantissa | 1024), exponent - 25);
  return sign ? -v : v;
}
std::uint16_t float_to_half(float f) {  // round to nearest, finite values in range only
  std::uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  f = std::fabs(f);
  if (f == 0) return sign;
  int e = 0;
  std::frexp(f, &e);  // f = m * 2^e, m in [0.5, 1)
  int exponent = std::max(e + 14, 0);
  float scaled = exponent == 0 ? f * std::ldexp(1.0f, 24) : std::ldexp(f, 25 - exponent) - 1024;
  auto mantissa = static_cast<std::uint16_t>(std::nearbyint(scaled));
  std::uint16_t bits = static_cast<std::uint16_t>((exponent << 10) + mantissa);  // a carry rolls into the exponent
  return sign | bits;
}
float bf16_to_float(std::uint16_t b) {
  std::uint32_t u = static_cast<std::uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
std::uint16_t float_to_bf16(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  u += 0x7fff + ((u >> 16) & 1);
  return static_cast<std::uint16_t>(u >> 16);
}

// Element i of `p` as double, and back: every type the fake reduces goes through double
// (exact for the integers and floats the tests use).
double load(const void* p, std::size_t i, ncclDataType_t t) {
  switch (t) {
    case ncclInt8: return static_cast<const std::int8_t*>(p)[i];
    case ncclUint8: return static_cast<const std::uint8_t*>(p)[i];
    case ncclInt32: return static_cast<const std::int32_t*>(p)[i];
    case ncclUint32: return static_cast<const std::uint32_t*>(p)[i];
    case ncclInt64: return static_cast<double>(static_cast<const std::int64_t*>(p)[i]);
    case ncclUint64: return static_cast<double>(static_cast<const std::uint64_t*>(p)[i]);
    case ncclFloat16: return half_to_float(static_cast<const std::uint16_t*>(p)[i]);
    case ncclBfloat16: return bf16_to_float(static_cast<const std::uint16_t*>(p)[i]);
    case ncclFloat32: return static_cast<const float*>(p)[i];
    default: return static_cast<const double*>(p)[i];
  }
}
void store(void* p, std::size_t i, ncclDataType_t t, double v) {
  switch (t) {
    case ncclInt8: static_cast<std::int8_t*>(p)[i] = static_cast<std::int8_t>(v); break;
    case ncclUint8: static_cast<std::uint8_t*>(p)[i] = static_cast<std::uint8_t>(v); break;
    case ncclInt32: static_cast<std::int32_t*>(p)[i] = static_cast<std::int32_t>(v); break;
    case ncclUint32: static_cast<std::uint32_t*>(p)[i] = static_cast<std::uint32_t>(v); break;
    case ncclInt64: static_cast<std::int64_t*>(p)[i] = static_cast<std::int64_t>(v); break;
    case ncclUint64: static_cast<std::uint64_t*>(p)[i] = static_cast<std::uint64_t>(v); break;
    case ncclFloat16: static_cast<std::uint16_t*>(p)[i] = float_to_half(static_cast<float>(v)); break;
    case ncclBfloat16: static_cast<std::uint16_t*>(p)[i] = float_to_bf16(static_cast<float>(v)); break;
    case ncclFloat32: static_cast<float*>(p)[i] = static_cast<float>(v); break;
    default: static_cast<double*>(p)[i] = v; break;
  }
}
bool is_integer(ncclDataType_t t) { return t <= ncclUint64; }

double combine(double a, double b, ncclRedOp_t op) {
  switch (op) {
    case ncclProd: return a * b;
    case ncclMax: return std::max(a, b);
    case ncclMin: return std::min(a, b);
    default: return a + b;  // sum, and the sum of an average
  }
}

// The reduction over every rank of element `at` of each rank's send buffer, in rank order.
double reduce_at(const Round& r, std::size_t at) {
  double acc = load(r.parts[0].send, at, r.type);
  for (std::size_t k = 1; k < r.parts.size(); ++k) acc = combine(acc, load(r.parts[k].send, at, r.type), r.op);
  if (r.op == ncclAvg) {
    acc /= static_cast<double>(r.parts.size());
    if (is_integer(r.type)) acc = std::trunc(acc);
  }
  return acc;
}

// Runs a round once every rank has called it (fake device memory is host memory).
void execute(const Round& r) {
  const std::size_t n = r.count, ranks = r.parts.size();
  std::vector<double> out;
  switch (r.kind) {
    case NcclEntry::AllReduce:
    case NcclEntry::Reduce:
      for (std::size_t i = 0; i < n; ++i) out.push_back(reduce_at(r, i));
      for (std::size_t k = 0; k < ranks; ++k)
        if (r.kind == NcclEntry::AllReduce || static_cast<int>(k) == r.root)
          for (std::size_t i = 0; i < n; ++i) store(r.parts[k].recv, i, r.type, out[i]);
      break;
    case NcclEntry::Broadcast:
      for (std::size_t i = 0; i < n; ++i) out.push_back(load(r.parts[r.root].send, i, r.type));
      for (std::size_t k = 0; k < ranks; ++k)
        for (std::size_t i = 0; i < n; ++i) store(r.parts[k].recv, i, r.type, out[i]);
      break;
    case NcclEntry::AllGather:
      for (std::size_t j = 0; j < ranks; ++j)
        for (std::size_t i = 0; i < n; ++i) out.push_back(load(r.parts[j].send, i, r.type));
      for (std::size_t k = 0; k < ranks; ++k)
        for (std::size_t i = 0; i < out.size(); ++i) store(r.parts[k].recv, i, r.type, out[i]);
      break;
    case NcclEntry::ReduceScatter: {
      std::vector<std::vector<double>> blocks(ranks);
      for (std::size_t k = 0; k < ranks; ++k)
        for (std::size_t i = 0; i < n; ++i) blocks[k].push_back(reduce_at(r, k * n + i));
      for (std::size_t k = 0; k < ranks; ++k)
        for (std::size_t i = 0; i < n; ++i) store(r.parts[k].recv, i, r.type, blocks[k][i]);
      break;
    }
    default: break;
  }
}

// The bytes of each rank's buffers that a collective reads and writes.
std::pair<std::size_t, std::size_t> extents(NcclEntry kind, std::size_t count, std::size_t size, int ranks, bool root) {
  std::size_t one = count * size, all = one * static_cast<std::size_t>(ranks);
  switch (kind) {
    case NcclEntry::AllGather: return {one, all};
    case NcclEntry::ReduceScatter: return {all, one};
    case NcclEntry::Reduce: return {one, root ? one : 0};
    case NcclEntry::Broadcast: return {root ? one : 0, one};
    case NcclEntry::Send: return {one, 0};
    case NcclEntry::Recv: return {0, one};
    default: return {one, one};
  }
}

void match_p2p(NcclClique& c, std::pair<int, int> pair) {
  auto& s = c.sends[pair];
  auto& r = c.recvs[pair];
  while (!s.empty() && !r.empty()) {
    if (s.front().bytes != r.front().bytes) N().problems.push_back("a send and its receive differ in size");
    std::memcpy(r.front().data, s.front().data, std::min(s.front().bytes, r.front().bytes));
    s.pop_front();
    r.pop_front();
  }
}

// One rank's call of a collective or transfer, on a stream that is not capturing.
ncclResult_t submit(NcclEntry kind, const void* send, void* recv, std::size_t count, ncclDataType_t type,
                    ncclRedOp_t op, int root_or_peer, ncclComm_t handle, CUstream stream) {
  int rank = 0, ranks = 0;
  bool stall = false;
  {
    std::lock_guard l(N().mutex);
    NcclComm* c = live(handle, nccl::raw::entry_name(kind));
    if (c == nullptr) return ncclInvalidArgument;
    rank = c->rank;
    ranks = c->clique->ranks;
    stall = N().stall_collectives;
    if (stall) c->stalled.insert(stream);
  }
  // The ordering model: this rank reads and writes its own buffers on its own stream.
  Driver& d = Driver::current();
  d.tick(stream);
  auto [reads, writes] = extents(kind, count, type_size(type), ranks, rank == root_or_peer);
  std::string what = std::string(nccl::raw::entry_name(kind)) + " of rank " + std::to_string(rank);
  d.access(stream, reinterpret_cast<std::uintptr_t>(send), reads, false, what);
  d.access(stream, reinterpret_cast<std::uintptr_t>(recv), writes, true, what);
  if (stall) {
    std::lock_guard dl(d.mutex);
    d.stalled.insert(stream);
  }
  std::lock_guard l(N().mutex);
  NcclComm* c = live(handle, nccl::raw::entry_name(kind));
  if (c == nullptr) return ncclInvalidArgument;
  NcclClique& q = *c->clique;
  if (kind == NcclEntry::Send || kind == NcclEntry::Recv) {
    auto pair = kind == NcclEntry::Send ? std::pair{rank, root_or_peer} : std::pair{root_or_peer, rank};
    P2P p{kind == NcclEntry::Send ? const_cast<void*>(send) : recv, count * type_size(type)};
    (kind == NcclEntry::Send ? q.sends : q.recvs)[pair].push_back(p);
    match_p2p(q, pair);
    return maybe_in_progress(c);
  }
  Round& r = q.rounds[c->next_round++];
  if (r.parts.empty()) {
    r.kind = kind, r.count = count, r.type = type, r.op = op, r.root = root_or_peer;
    r.parts.resize(static_cast<std::size_t>(q.ranks));
  } else if (r.kind != kind || r.count != count || r.type != type || r.root != root_or_peer) {
    N().problems.push_back(std::string("rank ") + std::to_string(rank) + " called " + nccl::raw::entry_name(kind) +
                           " where another rank called " + nccl::raw::entry_name(r.kind) + " (or other arguments)");
  }
  r.parts[static_cast<std::size_t>(rank)] = {true, send, recv};
  if (++r.arrived == q.ranks) {
    execute(r);
    q.rounds.erase(c->next_round - 1);
  }
  return maybe_in_progress(c);
}

// A collective call: recorded into the capture when its stream captures, run otherwise.
ncclResult_t collective(NcclEntry kind, const void* send, void* recv, std::size_t count, ncclDataType_t type,
                        ncclRedOp_t op, int root_or_peer, ncclComm_t comm, CUstream s) {
  if (ncclResult_t r = enter(kind)) return r;
  {
    std::lock_guard l(N().mutex);
    NcclComm* c = live(comm, nccl::raw::entry_name(kind));
    if (c == nullptr) return ncclInvalidArgument;
    if (!c->ready) {
      N().problems.push_back(std::string(nccl::raw::entry_name(kind)) + " on a communicator not yet made");
      return ncclInvalidUsage;
    }
    if (group_depth > 0) group_comms.insert(c);
    N().contexts_at_collectives.push_back(current_context());
  }
  auto stream = reinterpret_cast<CUstream>(s);
  CUresult captured = CUDA_SUCCESS;
  auto replay = [=](CUstream on) {
    return submit(kind, send, recv, count, type, op, root_or_peer, comm, on) == ncclSuccess ? CUDA_SUCCESS
                                                                                           : CUDA_ERROR_UNKNOWN;
  };
  if (capture_operation(stream, CU_GRAPH_NODE_TYPE_KERNEL, nccl::raw::entry_name(kind), replay, &captured))
    return captured == CUDA_SUCCESS ? ncclSuccess : ncclUnhandledCudaError;
  return submit(kind, send, recv, count, type, op, root_or_peer, comm, stream);
}

// ---- the entries ----

ncclResult_t GetVersion(int* v) {
  if (ncclResult_t r = enter(NcclEntry::GetVersion)) return r;
  *v = N().version;
  return ncclSuccess;
}

const char* GetErrorString(ncclResult_t r) {
  enter(NcclEntry::GetErrorString);
  switch (r) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError: return "internal error - please report this issue to the NCCL developers";
    case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
  }
}

const char* GetLastError(ncclComm_t) {
  enter(NcclEntry::GetLastError);
  return N().last_error.c_str();
}

ncclResult_t GetUniqueId(ncclUniqueId* id) {
  if (ncclResult_t r = enter(NcclEntry::GetUniqueId)) return r;
  std::lock_guard l(N().mutex);
  std::memset(id->internal, 0, sizeof id->internal);
  std::uint64_t n = N().next_id++ * 0x9E3779B97F4A7C15ull;
  std::memcpy(id->internal, &n, sizeof n);
  std::memcpy(id->internal + 8, &installed, sizeof installed);
  return ncclSuccess;
}

ncclResult_t CommInitRankConfig(ncclComm_t* out, int ranks, ncclUniqueId id, int rank, ncclConfig_t* config) {
  if (ncclResult_t r = enter(NcclEntry::CommInitRankConfig)) return r;
  std::lock_guard l(N().mutex);
  if (config == nullptr || config->blocking != 0 || rank < 0 || rank >= ranks) return ncclInvalidArgument;
  std::string key(id.internal, sizeof id.internal);
  NcclClique*& q = N().cliques[key];
  if (q == nullptr) {
    q = new NcclClique;
    q->ranks = ranks;
  }
  if (q->ranks != ranks || q->members.count(rank)) return ncclInvalidUsage;
  auto* c = new NcclComm;
  c->clique = q;
  c->rank = rank;
  c->device = device_of(current_context());
  q->members[rank] = c;
  N().comms.insert(c);
  if (static_cast<int>(q->members.size()) == ranks)
    for (auto& [r, m] : q->members) m->ready = true;
  c->progress_left = N().progress_polls;
  *out = reinterpret_cast<ncclComm_t>(c);
  return ncclInProgress;
}

// The communicator's registrations go with it (a destroy or an abort releases them).
void forget(NcclComm* c) {
  N().comms.erase(c);
  for (auto it = N().registrations.begin(); it != N().registrations.end();)
    if (it->second == c) {
      delete static_cast<const int*>(it->first);
      it = N().registrations.erase(it);
    } else {
      ++it;
    }
  NcclClique* q = c->clique;
  q->members.erase(c->rank);
  if (q->members.empty()) {
    for (auto it = N().cliques.begin(); it != N().cliques.end(); ++it)
      if (it->second == q) {
        N().cliques.erase(it);
        break;
      }
    delete q;
  }
  delete c;
}

ncclResult_t CommSplit(ncclComm_t comm, int color, int key, ncclComm_t* out, ncclConfig_t* config) {
  if (ncclResult_t r = enter(NcclEntry::CommSplit)) return r;
  std::lock_guard l(N().mutex);
  NcclComm* parent = live(comm, "ncclCommSplit");
  if (parent == nullptr || config == nullptr || config->blocking != 0) return ncclInvalidArgument;
  NcclComm* made = nullptr;
  if (color != NCCL_SPLIT_NOCOLOR) {
    made = new NcclComm;
    made->device = parent->device;
    N().comms.insert(made);
  }
  *out = reinterpret_cast<ncclComm_t>(made);
  NcclClique& q = *parent->clique;
  auto& round = q.splits[parent->next_split++];
  round[parent->rank] = {color, key, made};
  if (static_cast<int>(round.size()) == q.ranks) {
    std::map<int, std::vector<std::tuple<int, int, NcclComm*>>> by_color;  // color -> (key, old rank, comm)
    for (auto& [old_rank, entry] : round) {
      auto [c, k, m] = entry;
      if (c != NCCL_SPLIT_NOCOLOR) by_color[c].emplace_back(k, old_rank, m);
    }
    for (auto& [c, members] : by_color) {
      std::sort(members.begin(), members.end());
      auto* clique = new NcclClique;
      clique->ranks = static_cast<int>(members.size());
      N().cliques["split " + std::to_string(N().next_id++)] = clique;
      for (std::size_t i = 0; i < members.size(); ++i) {
        NcclComm* m = std::get<2>(members[i]);
        if (m->clique != nullptr && m->clique->placeholder) {
          for (auto it = N().cliques.begin(); it != N().cliques.end(); ++it)
            if (it->second == m->clique) {
              N().cliques.erase(it);
              break;
            }
          delete m->clique;
        }
        m->clique = clique;
        m->rank = static_cast<int>(i);
        m->ready = true;
        clique->members[m->rank] = m;
      }
    }
    q.splits.erase(parent->next_split - 1);
  } else if (made != nullptr) {
    // Not made until every rank has split: a placeholder clique of its own meanwhile.
    auto* waiting = new NcclClique;
    waiting->ranks = 1;
    waiting->placeholder = true;
    N().cliques["waiting " + std::to_string(N().next_id++)] = waiting;
    made->clique = waiting;
    made->rank = 0;
    waiting->members[0] = made;
  }
  return ncclInProgress;
}

ncclResult_t CommFinalize(ncclComm_t comm) {
  if (ncclResult_t r = enter(NcclEntry::CommFinalize)) return r;
  std::lock_guard l(N().mutex);
  NcclComm* c = live(comm, "ncclCommFinalize");
  if (c == nullptr) return ncclInvalidArgument;
  c->finalized = true;
  return maybe_in_progress(c);
}

ncclResult_t CommDestroy(ncclComm_t comm) {
  if (ncclResult_t r = enter(NcclEntry::CommDestroy)) return r;
  std::lock_guard l(N().mutex);
  NcclComm* c = live(comm, "ncclCommDestroy");
  if (c == nullptr) return ncclInvalidArgument;
  forget(c);
  return ncclSuccess;
}

ncclResult_t CommAbort(ncclComm_t comm) {
  if (ncclResult_t r = enter(NcclEntry::CommAbort)) return r;
  std::set<CUstream> release;
  {
    std::lock_guard l(N().mutex);
    NcclComm* c = live(comm, "ncclCommAbort");
    if (c == nullptr) return ncclInvalidArgument;
    release = c->stalled;
    forget(c);
  }
  Driver& d = Driver::current();  // the aborted kernels end: their streams move on
  {
    std::lock_guard dl(d.mutex);
    for (CUstream s : release) d.stalled.erase(s);
  }
  // Counted once its streams move on, so a test that sees the count also sees them free.
  std::lock_guard l(N().mutex);
  ++N().abort_count;
  return ncclSuccess;
}

ncclResult_t CommGetAsyncError(ncclComm_t comm, ncclResult_t* state) {
  if (ncclResult_t r = enter(NcclEntry::CommGetAsyncError)) return r;
  std::lock_guard l(N().mutex);
  NcclComm* c = live(comm, "ncclCommGetAsyncError");
  if (c == nullptr) return ncclInvalidArgument;
  if (c->async_error != ncclSuccess) *state = c->async_error;
  else if (!c->ready) *state = ncclInProgress;
  else if (c->progress_left > 0) --c->progress_left, *state = ncclInProgress;
  else *state = ncclSuccess;
  return ncclSuccess;
}

ncclResult_t CommCount(const ncclComm_t comm, int* count) {
  if (ncclResult_t r = enter(NcclEntry::CommCount)) return r;
  std::lock_guard l(N().mutex);
  NcclComm* c = live(comm, "ncclCommCount");
  if (c == nullptr) return ncclInvalidArgument;
  *count = c->clique->ranks;
  return ncclSuccess;
}

ncclResult_t CommCuDevice(const ncclComm_t comm, int* device) {
  if (ncclResult_t r = enter(NcclEntry::CommCuDevice)) return r;
  std::lock_guard l(N().mutex);
  NcclComm* c = live(comm, "ncclCommCuDevice");
  if (c == nullptr) return ncclInvalidArgument;
  *device = c->device;
  return ncclSuccess;
}

ncclResult_t CommUserRank(const ncclComm_t comm, int* rank) {
  if (ncclResult_t r = enter(NcclEntry::CommUserRank)) return r;
  std::lock_guard l(N().mutex);
  NcclComm* c = live(comm, "ncclCommUserRank");
  if (c == nullptr) return ncclInvalidArgument;
  *rank = c->rank;
  return ncclSuccess;
}

ncclResult_t AllReduce(const void* s, void* r, size_t n, ncclDataType_t t, ncclRedOp_t op, ncclComm_t c, CUstream st) {
  return collective(NcclEntry::AllReduce, s, r, n, t, op, -1, c, st);
}
ncclResult_t Reduce(const void* s, void* r, size_t n, ncclDataType_t t, ncclRedOp_t op, int root, ncclComm_t c,
                    CUstream st) {
  return collective(NcclEntry::Reduce, s, r, n, t, op, root, c, st);
}
ncclResult_t Broadcast(const void* s, void* r, size_t n, ncclDataType_t t, int root, ncclComm_t c, CUstream st) {
  return collective(NcclEntry::Broadcast, s, r, n, t, ncclSum, root, c, st);
}
ncclResult_t AllGather(const void* s, void* r, size_t n, ncclDataType_t t, ncclComm_t c, CUstream st) {
  return collective(NcclEntry::AllGather, s, r, n, t, ncclSum, -1, c, st);
}
ncclResult_t ReduceScatter(const void* s, void* r, size_t n, ncclDataType_t t, ncclRedOp_t op, ncclComm_t c,
                           CUstream st) {
  return collective(NcclEntry::ReduceScatter, s, r, n, t, op, -1, c, st);
}
ncclResult_t Send(const void* s, size_t n, ncclDataType_t t, int peer, ncclComm_t c, CUstream st) {
  return collective(NcclEntry::Send, s, nullptr, n, t, ncclSum, peer, c, st);
}
ncclResult_t Recv(void* r, size_t n, ncclDataType_t t, int peer, ncclComm_t c, CUstream st) {
  return collective(NcclEntry::Recv, nullptr, r, n, t, ncclSum, peer, c, st);
}

ncclResult_t GroupStart() {
  if (ncclResult_t r = enter(NcclEntry::GroupStart)) return r;
  ++group_depth;
  return ncclSuccess;
}

ncclResult_t GroupEnd() {
  ncclResult_t r = enter(NcclEntry::GroupEnd);
  if (group_depth > 0 && --group_depth > 0) return r;
  std::lock_guard l(N().mutex);
  std::set<NcclComm*> comms = std::move(group_comms);
  group_comms.clear();
  if (r != ncclSuccess) return r;
  if (N().progress_polls <= 0) return ncclSuccess;
  for (NcclComm* c : comms)
    if (N().comms.count(c)) maybe_in_progress(c);
  return ncclInProgress;
}

ncclResult_t CommRegister(const ncclComm_t comm, void* buffer, size_t bytes, void** handle) {
  if (ncclResult_t r = enter(NcclEntry::CommRegister)) return r;
  std::lock_guard l(N().mutex);
  NcclComm* c = live(comm, "ncclCommRegister");
  if (c == nullptr || buffer == nullptr || bytes == 0) return ncclInvalidArgument;
  auto* h = new int(0);
  N().registrations[h] = c;
  *handle = h;
  return ncclSuccess;
}

ncclResult_t CommDeregister(const ncclComm_t comm, void* handle) {
  if (ncclResult_t r = enter(NcclEntry::CommDeregister)) return r;
  std::lock_guard l(N().mutex);
  if (live(comm, "ncclCommDeregister") == nullptr) return ncclInvalidArgument;
  if (!N().registrations.erase(handle)) {
    N().problems.push_back("ncclCommDeregister of a handle that is not registered");
    return ncclInvalidArgument;
  }
  delete static_cast<int*>(handle);
  return ncclSuccess;
}

}  // namespace

// ---- the fake's own interface ----

Nccl::Nccl() = default;

Nccl::~Nccl() {
  nccl::raw::testing::reset();
  for (NcclComm* c : std::set<NcclComm*>(comms)) forget(c);
  for (auto& [h, c] : registrations) delete static_cast<const int*>(h);
  if (installed == this) installed = nullptr;
}

Nccl& Nccl::current() { return *installed; }

void Nccl::install() {
  installed = this;
  nccl::raw::Api api;
#define CUDAKIT_X(name, required) \
  if (!missing.count(NcclEntry::name)) api.name = &name;
  CUDAKIT_NCCL_ENTRIES(CUDAKIT_X)
#undef CUDAKIT_X
  api.version = version;
  api.path = "(fake NCCL)";
  nccl::raw::testing::install(api);
}

void Nccl::fail(NcclEntry entry, int nth, ncclResult_t result) {
  std::lock_guard l(mutex);
  faults.push_back({entry, nth, result});
}
void Nccl::clear_faults() {
  std::lock_guard l(mutex);
  faults.clear();
}
void Nccl::set_async_error(ncclComm_t comm, ncclResult_t result) {
  std::lock_guard l(mutex);
  auto* c = reinterpret_cast<NcclComm*>(comm);
  if (comms.count(c)) c->async_error = result;
}
void Nccl::on_entry(std::function<void(NcclEntry)> hook) {
  std::lock_guard l(mutex);
  entry_hook = std::move(hook);
}
int Nccl::calls(NcclEntry e) const {
  std::lock_guard l(mutex);
  return call_counts[static_cast<std::size_t>(e)];
}
std::vector<NcclEntry> Nccl::log() const {
  std::lock_guard l(mutex);
  return call_log;
}
void Nccl::clear_log() {
  std::lock_guard l(mutex);
  call_log.clear();
  for (int& c : call_counts) c = 0;
}
std::size_t Nccl::live_communicators() const {
  std::lock_guard l(mutex);
  return comms.size();
}
std::size_t Nccl::live_registrations() const {
  std::lock_guard l(mutex);
  return registrations.size();
}
int Nccl::aborts() const {
  std::lock_guard l(mutex);
  return abort_count;
}
std::vector<std::pair<NcclEntry, ncclResult_t>> Nccl::failed_calls() const {
  std::lock_guard l(mutex);
  return failures;
}
std::vector<CUcontext> Nccl::collective_contexts() const {
  std::lock_guard l(mutex);
  return contexts_at_collectives;
}
std::vector<std::string> Nccl::ledger_problems() const {
  std::lock_guard l(mutex);
  std::vector<std::string> out = problems;
  if (!comms.empty()) out.push_back(std::to_string(comms.size()) + " NCCL communicator(s) leaked");
  if (!registrations.empty()) out.push_back(std::to_string(registrations.size()) + " NCCL registration(s) leaked");
  return out;
}

}  // namespace cudakit::fake
