// Fake driver: initialisation, devices, primary contexts, streams, events, host callbacks.
#include <cstdio>
#include <cstring>

#include "fake_driver.hpp"

namespace cudakit::fake {

namespace {

char context_storage[16];

Driver& D() { return Driver::current(); }

bool valid_device(CUdevice d) { return d >= 0 && d < static_cast<int>(D().devices.size()); }

int default_attribute(const DeviceConfig& c, int a) {
  if (auto it = c.attributes.find(a); it != c.attributes.end()) return it->second;
  switch (a) {
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: return 1024;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X: return 1024;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y: return 1024;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z: return 64;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X: return 2147483647;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y: return 65535;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z: return 65535;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: return 48 * 1024;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: return 227 * 1024;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: return 132;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE: return 32;
    case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE: return 50 * 1024 * 1024;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: return c.major;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: return c.minor;
    case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES: return CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH: return 1;
    case CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH: return 1;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR: return 2048;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK: return 65536;
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING: return 1;
    case CU_DEVICE_ATTRIBUTE_CLOCK_RATE: return 1980000;
    case CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE: return 2619000;
    case CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH: return 6144;
    case CU_DEVICE_ATTRIBUTE_NUMA_ID: return -1;
    case CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY: return 1;
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS: return 1;
    default: return 0;
  }
}

CUresult Init(unsigned flags) {
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  ++D().initialized;
  return CUDA_SUCCESS;
}

CUresult DriverGetVersion(int* v) {
  if (!v) return CUDA_ERROR_INVALID_VALUE;
  *v = D().driver_version;
  return CUDA_SUCCESS;
}

CUresult DeviceGet(CUdevice* out, int ordinal) {
  if (!out) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(ordinal)) return CUDA_ERROR_INVALID_DEVICE;
  *out = ordinal;
  return CUDA_SUCCESS;
}

CUresult DeviceGetCount(int* n) {
  if (!n) return CUDA_ERROR_INVALID_VALUE;
  *n = static_cast<int>(D().devices.size());
  return CUDA_SUCCESS;
}

CUresult DeviceGetName(char* name, int len, CUdevice d) {
  if (!name || len <= 0) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(d)) return CUDA_ERROR_INVALID_DEVICE;
  std::strncpy(name, D().devices[d].name.c_str(), static_cast<std::size_t>(len));
  name[len - 1] = '\0';
  return CUDA_SUCCESS;
}

CUresult DeviceGetUuid(CUuuid* u, CUdevice d) {
  if (!u) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(d)) return CUDA_ERROR_INVALID_DEVICE;
  for (int i = 0; i < 16; ++i) u->bytes[i] = static_cast<char>(0x10 * d + i);
  return CUDA_SUCCESS;
}

CUresult DeviceGetAttribute(int* v, CUdevice_attribute a, CUdevice d) {
  if (!v) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(d)) return CUDA_ERROR_INVALID_DEVICE;
  if (a < 0 || a >= CU_DEVICE_ATTRIBUTE_MAX) return CUDA_ERROR_INVALID_VALUE;
  const DeviceConfig& c = D().devices[d];
  // Placement by ordinal unless configured: bus 0x19 + d, host NUMA node d / 4.
  if (a == CU_DEVICE_ATTRIBUTE_PCI_BUS_ID && !c.attributes.count(a)) *v = 0x19 + d;
  else if (a == CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID && !c.attributes.count(a)) *v = d / 4;
  else *v = default_attribute(c, a);
  return CUDA_SUCCESS;
}

CUresult DeviceTotalMem(size_t* bytes, CUdevice d) {
  if (!bytes) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(d)) return CUDA_ERROR_INVALID_DEVICE;
  *bytes = D().devices[d].total_memory;
  return CUDA_SUCCESS;
}

CUresult DeviceGetPCIBusId(char* id, int len, CUdevice d) {
  if (!id || len <= 0) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(d)) return CUDA_ERROR_INVALID_DEVICE;
  std::snprintf(id, static_cast<std::size_t>(len), "0000:%02x:00.0", 0x19 + d);
  return CUDA_SUCCESS;
}

CUresult DeviceCanAccessPeer(int* can, CUdevice a, CUdevice b) {
  if (!can) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(a) || !valid_device(b)) return CUDA_ERROR_INVALID_DEVICE;
  *can = a != b;
  return CUDA_SUCCESS;
}

CUresult DeviceGetP2PAttribute(int* value, CUdevice_P2PAttribute attribute, CUdevice from, CUdevice to) {
  if (!value) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(from) || !valid_device(to) || from == to) return CUDA_ERROR_INVALID_DEVICE;
  std::lock_guard l(D().mutex);
  if (auto it = D().p2p_attributes.find({from, to, static_cast<int>(attribute)}); it != D().p2p_attributes.end()) {
    *value = it->second;
    return CUDA_SUCCESS;
  }
  switch (attribute) {
    case CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK: *value = 0; return CUDA_SUCCESS;
    case CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED: *value = 1; return CUDA_SUCCESS;
    case CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED: *value = 1; return CUDA_SUCCESS;
    case CU_DEVICE_P2P_ATTRIBUTE_CUDA_ARRAY_ACCESS_SUPPORTED: *value = 1; return CUDA_SUCCESS;
    default: return CUDA_ERROR_INVALID_VALUE;
  }
}

CUresult DevicePrimaryCtxRetain(CUcontext* ctx, CUdevice d) {
  if (!ctx) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(d)) return CUDA_ERROR_INVALID_DEVICE;
  std::lock_guard l(D().mutex);
  if (CUresult r = unsafe_call("cuDevicePrimaryCtxRetain")) return r;  // stricter than the driver, on purpose
  ++D().primary_retains[d];
  *ctx = context_of(d);
  return CUDA_SUCCESS;
}

CUresult DevicePrimaryCtxRelease(CUdevice d) {
  if (!valid_device(d)) return CUDA_ERROR_INVALID_DEVICE;
  std::lock_guard l(D().mutex);
  int& n = D().primary_retains[d];
  if (n <= 0) {
    D().problems.push_back("cuDevicePrimaryCtxRelease of device " + std::to_string(d) + " without a retain");
    return CUDA_ERROR_INVALID_CONTEXT;
  }
  --n;
  return CUDA_SUCCESS;
}

thread_local CUcontext tl_current = nullptr;

CUresult CtxSetCurrent(CUcontext c) {
  if (c != nullptr && device_of(c) < 0) return CUDA_ERROR_INVALID_CONTEXT;
  tl_current = c;
  return CUDA_SUCCESS;
}

CUresult CtxGetCurrent(CUcontext* c) {
  if (!c) return CUDA_ERROR_INVALID_VALUE;
  *c = tl_current;
  return CUDA_SUCCESS;
}

CUresult CtxGetDevice(CUdevice* d) {
  if (!d) return CUDA_ERROR_INVALID_VALUE;
  if (!tl_current) return CUDA_ERROR_INVALID_CONTEXT;
  *d = device_of(tl_current);
  return CUDA_SUCCESS;
}

CUresult CtxSynchronize() {
  if (!tl_current) return CUDA_ERROR_INVALID_CONTEXT;
  if (CUresult r = refuse_context_sync()) return r;
  std::lock_guard l(D().mutex);
  for (auto& [h, s] : D().streams) D().host_waits(s.clock);
  return CUDA_SUCCESS;
}

CUresult CtxGetStreamPriorityRange(int* least, int* greatest) {
  if (least) *least = 0;
  if (greatest) *greatest = -5;
  return CUDA_SUCCESS;
}

CUresult MemGetInfo(size_t* free_bytes, size_t* total) {
  if (!free_bytes || !total) return CUDA_ERROR_INVALID_VALUE;
  if (!tl_current) return CUDA_ERROR_INVALID_CONTEXT;
  std::lock_guard l(D().mutex);
  int d = device_of(tl_current);
  std::size_t used = D().device_memory_used(d);
  *total = D().devices[d].total_memory;
  *free_bytes = *total > used ? *total - used : 0;
  return CUDA_SUCCESS;
}

// ---- streams ----

struct StreamTag {
  char c;
};

CUresult StreamCreateWithPriority(CUstream* out, unsigned flags, int priority) {
  if (!out) return CUDA_ERROR_INVALID_VALUE;
  if (!tl_current) return CUDA_ERROR_INVALID_CONTEXT;
  if (flags & ~unsigned(CU_STREAM_NON_BLOCKING)) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard l(D().mutex);
  if (CUresult r = unsafe_call("cuStreamCreateWithPriority")) return r;  // stricter than the driver, on purpose
  auto h = reinterpret_cast<CUstream>(new StreamTag);
  FakeStream s;
  s.id = D().next_stream_id++;
  s.device = device_of(tl_current);
  s.flags = flags;
  s.priority = priority < -5 ? -5 : (priority > 0 ? 0 : priority);
  s.clock[s.id] = 0;
  D().streams[h] = s;
  D().created("stream", h);
  *out = h;
  return CUDA_SUCCESS;
}

bool is_special(CUstream s) { return s == nullptr || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD; }

CUresult StreamDestroy(CUstream s) {
  std::lock_guard l(D().mutex);
  if (is_special(s)) {
    D().problems.push_back("cuStreamDestroy on the legacy/default stream");
    return CUDA_ERROR_INVALID_HANDLE;
  }
  if (!D().destroyed("stream", s)) return CUDA_ERROR_INVALID_HANDLE;
  stream_destroyed_while_capturing(s);
  D().streams.erase(s);
  delete reinterpret_cast<StreamTag*>(s);
  return CUDA_SUCCESS;
}

// DESIGN 1: cudakit never uses the legacy stream; the fake refuses it so a test sees it.
CUresult check_stream(CUstream s) {
  if (is_special(s)) {
    D().problems.push_back("a driver call was given the legacy/default stream (DESIGN 1)");
    return CUDA_ERROR_INVALID_HANDLE;
  }
  if (!D().stream(s)) return CUDA_ERROR_INVALID_HANDLE;
  return CUDA_SUCCESS;
}

CUresult StreamQuery(CUstream s) {
  std::lock_guard l(D().mutex);
  if (CUresult r = check_stream(s)) return r;
  if (CUresult r = refuse_if_capturing(s)) return r;
  if (D().stalled.count(s)) return CUDA_ERROR_NOT_READY;
  D().host_waits(D().stream(s)->clock);
  return CUDA_SUCCESS;
}

CUresult StreamSynchronize(CUstream s) {
  std::lock_guard l(D().mutex);
  if (CUresult r = check_stream(s)) return r;
  if (CUresult r = refuse_if_capturing(s)) return r;
  D().host_waits(D().stream(s)->clock);
  return CUDA_SUCCESS;
}

CUresult StreamWaitEvent(CUstream s, CUevent e, unsigned flags) {
  std::lock_guard l(D().mutex);
  if (CUresult r = check_stream(s)) return r;
  FakeEvent* ev = D().event(e);
  if (!ev || flags != 0) return CUDA_ERROR_INVALID_HANDLE;
  if (CUresult r; capture_event_wait(s, e, &r)) return r;
  Clock& c = D().stream(s)->clock;
  for (const auto& [k, v] : ev->snapshot) c[k] = std::max(c[k], v);
  return CUDA_SUCCESS;
}

CUresult LaunchHostFunc(CUstream s, CUhostFn fn, void* data) {
  {
    std::lock_guard l(D().mutex);
    if (CUresult r = check_stream(s)) return r;
    if (!fn) return CUDA_ERROR_INVALID_VALUE;
    CUresult captured = CUDA_SUCCESS;
    auto replay = [fn, data](CUstream on) {
      D().tick(on);
      run_host_function(fn, data);
      return CUDA_SUCCESS;
    };
    if (capture_operation(s, CU_GRAPH_NODE_TYPE_HOST, "cuLaunchHostFunc", replay, &captured)) return captured;
    D().tick(s);
  }
  if (defer_host_function_behind_replays(fn, data)) return CUDA_SUCCESS;
  run_host_function(fn, data);  // synchronous stream: the callback runs now, outside the fake's lock
  return CUDA_SUCCESS;
}

CUresult StreamGetPriority(CUstream s, int* p) {
  std::lock_guard l(D().mutex);
  if (CUresult r = check_stream(s)) return r;
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  *p = D().stream(s)->priority;
  return CUDA_SUCCESS;
}

CUresult StreamGetFlags(CUstream s, unsigned* f) {
  std::lock_guard l(D().mutex);
  if (CUresult r = check_stream(s)) return r;
  if (!f) return CUDA_ERROR_INVALID_VALUE;
  *f = D().stream(s)->flags;
  return CUDA_SUCCESS;
}

CUresult StreamGetCtx(CUstream s, CUcontext* c) {
  std::lock_guard l(D().mutex);
  if (CUresult r = check_stream(s)) return r;
  if (!c) return CUDA_ERROR_INVALID_VALUE;
  *c = context_of(D().stream(s)->device);
  return CUDA_SUCCESS;
}

CUresult StreamGetId(CUstream s, unsigned long long* id) {
  std::lock_guard l(D().mutex);
  if (CUresult r = check_stream(s)) return r;
  if (!id) return CUDA_ERROR_INVALID_VALUE;
  *id = D().stream(s)->id;
  return CUDA_SUCCESS;
}

// ---- events ----

struct EventTag {
  char c;
};

CUresult EventCreate(CUevent* out, unsigned flags) {
  if (!out) return CUDA_ERROR_INVALID_VALUE;
  if (!tl_current) return CUDA_ERROR_INVALID_CONTEXT;
  std::lock_guard l(D().mutex);
  if (CUresult r = unsafe_call("cuEventCreate")) return r;  // stricter than the driver, on purpose
  auto h = reinterpret_cast<CUevent>(new EventTag);
  FakeEvent e;
  e.device = device_of(tl_current);
  e.flags = flags;
  D().events[h] = e;
  D().created("event", h);
  *out = h;
  return CUDA_SUCCESS;
}

CUresult EventDestroy(CUevent e) {
  std::lock_guard l(D().mutex);
  if (!D().destroyed("event", e)) return CUDA_ERROR_INVALID_HANDLE;
  D().events.erase(e);
  delete reinterpret_cast<EventTag*>(e);
  return CUDA_SUCCESS;
}

CUresult EventRecord(CUevent e, CUstream s) {
  std::lock_guard l(D().mutex);
  if (CUresult r = check_stream(s)) return r;
  FakeEvent* ev = D().event(e);
  if (!ev) return CUDA_ERROR_INVALID_HANDLE;
  if (CUresult r; capture_event_record(e, s, &r)) return r;
  ev->recorded = true;
  ev->snapshot = D().stream(s)->clock;
  ev->stalled_on = D().stalled.count(s) ? s : nullptr;
  return CUDA_SUCCESS;
}

CUresult EventQuery(CUevent e) {
  std::lock_guard l(D().mutex);
  FakeEvent* ev = D().event(e);
  if (!ev) return CUDA_ERROR_INVALID_HANDLE;
  if (CUresult r = refuse_captured_event(e)) return r;
  if (ev->stalled_on != nullptr && D().stalled.count(ev->stalled_on)) return CUDA_ERROR_NOT_READY;
  D().host_waits(ev->snapshot);
  return CUDA_SUCCESS;
}

CUresult EventSynchronize(CUevent e) {
  {
    std::lock_guard l(D().mutex);
    if (!D().event(e)) return CUDA_ERROR_INVALID_HANDLE;
    if (CUresult r = refuse_captured_event(e)) return r;
  }
  // Then the driver refuses it on a thread whose own capture is not relaxed, and
  // invalidates that capture (seen on an H200: CaptureLifetimeGpuTest).
  if (CUresult r = unsafe_call("cuEventSynchronize")) return r;
  std::lock_guard l(D().mutex);
  FakeEvent* ev = D().event(e);
  if (!ev) return CUDA_ERROR_INVALID_HANDLE;
  D().host_waits(ev->snapshot);
  return CUDA_SUCCESS;
}

CUresult EventElapsedTime(float* ms, CUevent a, CUevent b) {
  std::lock_guard l(D().mutex);
  FakeEvent* ea = D().event(a);
  FakeEvent* eb = D().event(b);
  if (!ms || !ea || !eb) return CUDA_ERROR_INVALID_HANDLE;
  if ((ea->flags | eb->flags) & CU_EVENT_DISABLE_TIMING) return CUDA_ERROR_INVALID_HANDLE;
  if (!ea->recorded || !eb->recorded) return CUDA_ERROR_INVALID_HANDLE;
  *ms = 0.5f;
  return CUDA_SUCCESS;
}

}  // namespace

CUcontext context_of(int device) { return reinterpret_cast<CUcontext>(&context_storage[device]); }

CUcontext current_context() { return tl_current; }

int device_of(CUcontext context) {
  auto p = reinterpret_cast<char*>(context);
  if (p < context_storage || p >= context_storage + sizeof context_storage) return -1;
  return static_cast<int>(p - context_storage);
}

void register_core(Driver& d) {
  using E = EntryId;
  d.implement<E::Init>(&Init);
  d.implement<E::DriverGetVersion>(&DriverGetVersion);
  d.implement<E::DeviceGet>(&DeviceGet);
  d.implement<E::DeviceGetCount>(&DeviceGetCount);
  d.implement<E::DeviceGetName>(&DeviceGetName);
  d.implement<E::DeviceGetUuid>(&DeviceGetUuid);
  d.implement<E::DeviceGetAttribute>(&DeviceGetAttribute);
  d.implement<E::DeviceTotalMem>(&DeviceTotalMem);
  d.implement<E::DeviceGetPCIBusId>(&DeviceGetPCIBusId);
  d.implement<E::DeviceCanAccessPeer>(&DeviceCanAccessPeer);
  d.implement<E::DeviceGetP2PAttribute>(&DeviceGetP2PAttribute);
  d.implement<E::DevicePrimaryCtxRetain>(&DevicePrimaryCtxRetain);
  d.implement<E::DevicePrimaryCtxRelease>(&DevicePrimaryCtxRelease);
  d.implement<E::CtxSetCurrent>(&CtxSetCurrent);
  d.implement<E::CtxGetCurrent>(&CtxGetCurrent);
  d.implement<E::CtxGetDevice>(&CtxGetDevice);
  d.implement<E::CtxSynchronize>(&CtxSynchronize);
  d.implement<E::CtxGetStreamPriorityRange>(&CtxGetStreamPriorityRange);
  d.implement<E::MemGetInfo>(&MemGetInfo);
  d.implement<E::StreamCreateWithPriority>(&StreamCreateWithPriority);
  d.implement<E::StreamDestroy>(&StreamDestroy);
  d.implement<E::StreamQuery>(&StreamQuery);
  d.implement<E::StreamSynchronize>(&StreamSynchronize);
  d.implement<E::StreamWaitEvent>(&StreamWaitEvent);
  d.implement<E::LaunchHostFunc>(&LaunchHostFunc);
  d.implement<E::StreamGetPriority>(&StreamGetPriority);
  d.implement<E::StreamGetFlags>(&StreamGetFlags);
  d.implement<E::StreamGetCtx>(&StreamGetCtx);
  d.implement<E::StreamGetId>(&StreamGetId);
  d.implement<E::EventCreate>(&EventCreate);
  d.implement<E::EventDestroy>(&EventDestroy);
  d.implement<E::EventRecord>(&EventRecord);
  d.implement<E::EventQuery>(&EventQuery);
  d.implement<E::EventSynchronize>(&EventSynchronize);
  d.implement<E::EventElapsedTime>(&EventElapsedTime);
}

}  // namespace cudakit::fake
