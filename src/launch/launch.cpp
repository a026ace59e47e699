#include "cudakit/launch.hpp"

#include <vector>

#include "cudakit/context.hpp"
#include "cudakit/driver.hpp"
#include "cudakit/error.hpp"
#include "driver/checked_call.hpp"
#include "launch/driver_launch_config.hpp"
#include "cudakit/peer_access.hpp"
#include "launch/module_loading.hpp"
#include "stream/event_pool.hpp"

namespace cudakit {

using driver::cu;

namespace detail {

namespace {

constexpr const char* axis[3] = {"x", "y", "z"};

std::string launch_words(const FunctionState& f) {
  return "launch of kernel '" + f.label + "' on " + device_words_for_messages(f.device);
}

[[noreturn]] void refuse(const FunctionState& f, const std::string& why) {
  throw InvalidArgument(launch_words(f) + ": " + why);
}

unsigned at(Dim3 d, int i) { return i == 0 ? d.x : (i == 1 ? d.y : d.z); }

std::string kib(std::uint64_t bytes) {
  return std::to_string(bytes) + " bytes" + (bytes % 1024 == 0 ? " (" + std::to_string(bytes / 1024) + " KiB)" : "");
}

// The most blocks of this shape that fit on one multiprocessor at once (for cooperative
// launches): the last answer is cached in one atomic word.
int max_blocks_per_multiprocessor(FunctionState& f, std::uint64_t threads, std::uint64_t shared) {
  const bool packable = threads < (1u << 12) && shared < (1u << 24);
  const std::uint64_t key = (threads << 41) | (shared << 17);
  if (packable) {
    std::uint64_t cached = f.cooperative_cache.load(std::memory_order_relaxed);
    if ((cached & 1) && (cached & ~0x1ffffull) == key) return static_cast<int>((cached >> 1) & 0xffff);
  }
  int blocks = 0;
  checked_call(cu.OccupancyMaxActiveBlocksPerMultiprocessor, Resource::of(ResourceKind::kernel, f.function, f.device, f.label.c_str()),
               &blocks, f.function, static_cast<int>(threads), static_cast<std::size_t>(shared));
  if (packable && blocks >= 0 && blocks < (1 << 16))
    f.cooperative_cache.store(key | (static_cast<std::uint64_t>(blocks) << 1) | 1, std::memory_order_relaxed);
  return blocks;
}

void check_shape(const FunctionState& f, const LaunchConfig& c) {
  for (int i = 0; i < 3; ++i) {
    if (at(c.block, i) == 0) refuse(f, "block " + to_string(c.block) + " has a zero extent; each must be at least 1");
    if (at(c.grid, i) == 0) refuse(f, "grid " + to_string(c.grid) + " has a zero extent; each must be at least 1");
  }
  for (int i = 0; i < 3; ++i)
    if (at(c.block, i) > f.max_block[i])
      refuse(f, "block." + std::string(axis[i]) + " = " + std::to_string(at(c.block, i)) +
                    " exceeds the device's maximum block dimension " + axis[i] + " of " +
                    std::to_string(f.max_block[i]));
  const std::uint64_t threads = c.block.count();
  if (threads > f.device_max_threads)
    refuse(f, "block " + to_string(c.block) + " has " + std::to_string(threads) +
                  " threads, more than the device's limit of " + std::to_string(f.device_max_threads) +
                  " threads per block");
  if (threads > f.kernel_max_threads)
    refuse(f, "block " + to_string(c.block) + " has " + std::to_string(threads) + " threads, more than the " +
                  std::to_string(f.kernel_max_threads) +
                  " this kernel can run per block (its register use limits it: CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK)");
  for (int i = 0; i < 3; ++i)
    if (at(c.grid, i) > f.max_grid[i])
      refuse(f, "grid." + std::string(axis[i]) + " = " + std::to_string(at(c.grid, i)) +
                    " exceeds the device's maximum grid dimension " + axis[i] + " of " + std::to_string(f.max_grid[i]));
}

void check_shared_memory(FunctionState& f, const LaunchConfig& c) {
  const std::uint64_t asked = c.shared_memory_bytes;
  if (asked <= f.dynamic_shared_limit.load(std::memory_order_relaxed)) return;
  const std::uint64_t room = f.shared_optin > f.static_shared ? f.shared_optin - f.static_shared : 0;
  const std::string statics =
      f.static_shared ? " (the kernel also uses " + std::to_string(f.static_shared) + " bytes of static shared memory)"
                      : std::string();
  if (asked > room)
    refuse(f, "asks for " + kib(asked) + " of dynamic shared memory, more than the " + kib(room) +
                  " a block of this kernel can have on this device" + statics + "; the device's opt-in maximum is " +
                  kib(f.shared_optin) + " per block");
  if (!c.allow_large_shared_memory)
    refuse(f, "asks for " + kib(asked) + " of dynamic shared memory, more than the kernel's current limit of " +
                  kib(f.dynamic_shared_limit.load(std::memory_order_relaxed)) + " (a block gets " +
                  kib(f.shared_per_block) + " without opting in)" + statics +
                  "; set LaunchConfig::allow_large_shared_memory = true to raise the kernel's limit (up to " +
                  kib(room) + " here)");
  // Raise CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES: once per new maximum.
  std::lock_guard lock(f.raise_mutex);
  if (asked <= f.dynamic_shared_limit.load(std::memory_order_relaxed)) return;
  ContextRef(f.context, f.device).make_current();
  check(cu.FuncSetAttribute(f.function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, static_cast<int>(asked)),
        "cuFuncSetAttribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES)",
        Resource::of(ResourceKind::kernel, f.function, f.device, f.label.c_str()));
  f.dynamic_shared_limit.store(static_cast<std::uint32_t>(asked), std::memory_order_relaxed);
}

void check_cluster(const FunctionState& f, const LaunchConfig& c) {
  const bool compiled_in = f.required_cluster[0] != 0;
  if (!c.cluster) {
    if (f.cluster_size_must_be_set && !compiled_in)
      refuse(f, "the kernel must be launched with a thread-block cluster (CU_FUNC_ATTRIBUTE_CLUSTER_SIZE_MUST_BE_SET); "
                "set LaunchConfig::cluster");
    return;
  }
  const Dim3 cl = *c.cluster;
  if (!f.clusters_supported)
    refuse(f, "thread-block clusters need compute capability 9.0 or newer; this device is " +
                  f.compute_capability.arch());
  for (int i = 0; i < 3; ++i)
    if (at(cl, i) == 0) refuse(f, "cluster " + to_string(cl) + " has a zero extent; each must be at least 1");
  if (compiled_in) {
    Dim3 required(f.required_cluster[0], f.required_cluster[1] ? f.required_cluster[1] : 1,
                  f.required_cluster[2] ? f.required_cluster[2] : 1);
    if (!(required == cl))
      refuse(f, "cluster " + to_string(cl) + " differs from the " + to_string(required) +
                    " the kernel was compiled with (__cluster_dims__)");
  }
  for (int i = 0; i < 3; ++i)
    if (at(c.grid, i) % at(cl, i) != 0)
      refuse(f, "grid." + std::string(axis[i]) + " = " + std::to_string(at(c.grid, i)) +
                    " is not a multiple of cluster." + axis[i] + " = " + std::to_string(at(cl, i)));
  const std::uint64_t size = cl.count();
  const std::uint64_t limit = f.non_portable_cluster_allowed ? 16 : 8;
  if (size > limit)
    refuse(f, "cluster " + to_string(cl) + " has " + std::to_string(size) + " blocks, more than the " +
                  (f.non_portable_cluster_allowed ? std::string("non-portable maximum of 16")
                                                  : std::string("portable maximum of 8 (a kernel may allow up to 16 "
                                                                "with CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED)")));
}

void check_cooperative(FunctionState& f, const LaunchConfig& c) {
  if (!f.cooperative_supported) refuse(f, "the device does not support cooperative launches");
  const int per_sm = max_blocks_per_multiprocessor(f, c.block.count(), c.shared_memory_bytes);
  const std::uint64_t most = static_cast<std::uint64_t>(per_sm) * static_cast<std::uint64_t>(f.multiprocessors);
  if (c.grid.count() > most)
    refuse(f, "a cooperative launch needs every block resident at once, but grid " + to_string(c.grid) + " has " +
                  std::to_string(c.grid.count()) + " blocks and at most " + std::to_string(most) + " fit (" +
                  std::to_string(per_sm) + " per multiprocessor with blocks of " + std::to_string(c.block.count()) +
                  " threads and " + std::to_string(c.shared_memory_bytes) + " bytes of dynamic shared memory, times " +
                  std::to_string(f.multiprocessors) + " multiprocessors)");
}

}  // namespace

void check_launch_config(FunctionState& f, const LaunchConfig& c) {
  check_shape(f, c);
  check_shared_memory(f, c);
  check_cluster(f, c);
  if (c.cooperative) check_cooperative(f, c);
  if (c.priority && (*c.priority > f.priority_least || *c.priority < f.priority_greatest))
    refuse(f, "priority " + std::to_string(*c.priority) + " is outside the device's range [" +
                  std::to_string(f.priority_greatest) + " (most urgent), " + std::to_string(f.priority_least) +
                  " (least urgent)]");
  if (c.programmatic_dependent_launch && f.compute_capability.major < 9)
    refuse(f, "programmatic dependent launch needs compute capability 9.0 or newer; this device is " +
                  f.compute_capability.arch());
}

namespace {
// The cross-stream waits made on this thread when a programmatic dependent launch was
// prepared (step 1), compared when it is submitted (step 5): ordering its buffers in
// between (step 4) on this thread made any wait between the two.
thread_local std::uint64_t waits_at_programmatic_prepare = 0;
}  // namespace

void prepare_launch(FunctionState& f, StreamRef stream, const LaunchConfig& c) {
  stream.require_handle(cu.LaunchKernel.name());
  if (stream.device_ordinal() != f.device) [[unlikely]]
    refuse(f, "the stream is on device " + std::to_string(stream.device_ordinal()) + ", the kernel was loaded on device " +
                  std::to_string(f.device));
  // DESIGN 10, against limits cached at lookup. (x - 1 < max) is (1 <= x <= max) in unsigned.
  const Dim3 b = c.block, g = c.grid;
  const bool fits = b.x - 1u < f.max_block[0] && b.y - 1u < f.max_block[1] && b.z - 1u < f.max_block[2] &&
                    b.count() <= f.max_threads && g.x - 1u < f.max_grid[0] && g.y - 1u < f.max_grid[1] &&
                    g.z - 1u < f.max_grid[2] &&
                    c.shared_memory_bytes <= f.dynamic_shared_limit.load(std::memory_order_relaxed);
  check_not_poisoned(cu.LaunchKernel.name(), Resource::of(ResourceKind::kernel, f.function, f.device, f.label.c_str()));
  if (!fits || c.has_attributes() || f.cluster_size_must_be_set) [[unlikely]] {
    check_launch_config(f, c);
    if (c.programmatic_dependent_launch) waits_at_programmatic_prepare = cross_stream_waits_on_this_thread();
  }
  ContextRef(f.context, f.device).make_current();  // DESIGN 8: no driver call when already current
}

namespace {
// A later synchronize or query names this kernel if it faults (stream_state.hpp): one
// relaxed store, nothing else on the hot path. A ref built from a raw handle has no state.
inline void note_last_launch(const FunctionState& f, StreamRef stream) noexcept {
  if (StreamState* s = stream.state()) s->last_launch.store(f.launch_label, std::memory_order_relaxed);
}
}  // namespace

void submit_launch(const FunctionState& f, StreamRef stream, const LaunchConfig& c, void** params) {
  const auto shared = static_cast<unsigned>(c.shared_memory_bytes);
  if (!c.has_attributes()) [[likely]] {
    CUresult r = cu.LaunchKernel(f.function, c.grid.x, c.grid.y, c.grid.z, c.block.x, c.block.y, c.block.z, shared,
                                 stream.handle(), params, nullptr);
    if (r != CUDA_SUCCESS) [[unlikely]]
      check(r, cu.LaunchKernel.name(), Resource::of(ResourceKind::kernel, f.function, f.device, f.label.c_str()));
    note_last_launch(f, stream);
    return;
  }
  // A programmatic dependent whose buffers were handed over from another stream (step 4
  // waited for that stream) is submitted as a full dependency: a hand-off between streams
  // is never a programmatic edge (docs/launch.md).
  const bool handed_over =
      c.programmatic_dependent_launch && cross_stream_waits_on_this_thread() != waits_at_programmatic_prepare;
  LaunchConfig full;
  if (handed_over) {
    full = c;
    full.programmatic_dependent_launch = false;
  }
  DriverLaunchConfig driver_config(handed_over ? full : c, stream.handle());
  CUresult r = cu.LaunchKernelEx(&driver_config.config(), f.function, params, nullptr);
  if (r != CUDA_SUCCESS) [[unlikely]]
    check(r, cu.LaunchKernelEx.name(), Resource::of(ResourceKind::kernel, f.function, f.device, f.label.c_str()));
  note_last_launch(f, stream);
}

void check_untyped_arguments(FunctionState& f, std::span<const std::size_t> sizes) {
  const auto* params = parameters_if_known(f);
  if (params == nullptr) {
    driver::require(driver::EntryId::FuncGetParamInfo,
                    "an untyped kernel launch (checked against the kernel's parameter info)");
    refuse(f, "the driver could not describe the kernel's parameters; use a typed Kernel<void(...)>");
  }
  auto words = [](auto count_of, std::size_t n) {
    std::string s;
    for (std::size_t i = 0; i < n; ++i) s += (i ? ", " : "") + std::to_string(count_of(i));
    return s;
  };
  if (params->size() != sizes.size())
    refuse(f, "the kernel takes " + std::to_string(params->size()) + " parameter" + (params->size() == 1 ? "" : "s") +
                  " (" + words([&](std::size_t i) { return (*params)[i].size; }, params->size()) +
                  " bytes), the launch passes " + std::to_string(sizes.size()) + " (" +
                  words([&](std::size_t i) { return sizes[i]; }, sizes.size()) + " bytes)");
  for (std::size_t i = 0; i < sizes.size(); ++i)
    if ((*params)[i].size != sizes[i])
      refuse(f, "argument #" + std::to_string(i + 1) + " is " + std::to_string(sizes[i]) +
                    " bytes, but the kernel's parameter #" + std::to_string(i + 1) + " is " +
                    std::to_string((*params)[i].size) + " bytes");
}

void use_peer_buffer(const FunctionState& f, Allocation* allocation, StreamRef stream, Access access) {
  allocation->use(stream, access);
  ContextRef(f.context, f.device).make_current();
}

void require_peer_buffer(const FunctionState& f, std::size_t position, int buffer_device, int stream_device) {
  if (peer_access_enabled(stream_device, buffer_device)) return;
  refuse(f, "argument #" + std::to_string(position) + " is a buffer on device " + std::to_string(buffer_device) +
                ", but the launch runs on device " + std::to_string(stream_device) +
                " (enable_peer_access(device " + std::to_string(stream_device) + ", device " +
                std::to_string(buffer_device) + ") lets its kernels use that memory)");
}

}  // namespace detail

void launch(StreamRef stream, const Function& function, const LaunchConfig& config, const KernelArgs& args) {
  detail::FunctionState& f = function.state();
  detail::prepare_launch(f, stream, config);
  detail::note_launch(stream, function);  // a capture keeps the module (graph.hpp)
  const auto& entries = args.entries();
  constexpr std::size_t on_stack = 64;
  std::size_t sizes_stack[on_stack];
  void* pointers_stack[on_stack];
  std::vector<std::size_t> sizes_heap;
  std::vector<void*> pointers_heap;
  std::size_t* sizes = sizes_stack;
  void** pointers = pointers_stack;
  if (entries.size() > on_stack) {
    sizes_heap.resize(entries.size());
    pointers_heap.resize(entries.size());
    sizes = sizes_heap.data();
    pointers = pointers_heap.data();
  }
  for (std::size_t i = 0; i < entries.size(); ++i) {
    sizes[i] = entries[i].size;
    pointers[i] = args.value_pointer(i);
    if (entries[i].allocation != nullptr && entries[i].device != stream.device_ordinal())
      detail::require_peer_buffer(f, i + 1, entries[i].device, stream.device_ordinal());
  }
  detail::check_untyped_arguments(f, std::span<const std::size_t>(sizes, entries.size()));
  for (const auto& e : entries)  // DESIGN 5: before the driver sees the launch
    if (e.allocation != nullptr) {
      if (e.device == stream.device_ordinal()) e.allocation->use(stream, e.access);
      else detail::use_peer_buffer(f, e.allocation, stream, e.access);
    }
  detail::submit_launch(f, stream, config, entries.empty() ? nullptr : pointers);
}

}  // namespace cudakit
