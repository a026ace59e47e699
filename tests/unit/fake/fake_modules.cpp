// Fake driver: modules, libraries, functions, launches and occupancy.
#include "fake_modules.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <set>
#include <string_view>

namespace cudakit::fake {


namespace {

Driver& D() { return Driver::current(); }

constexpr std::string_view marker = "cudakit-fake-module:";

// ---- state ----

struct FakeFunction {
  std::shared_ptr<const FakeImage> image;
  const FakeKernel* kernel = nullptr;
  int device = 0;
  std::map<int, int> attributes;  // set by cuFuncSetAttribute
};

struct FakeModule {
  std::shared_ptr<const FakeImage> image;
  int device = 0;
  std::vector<std::unique_ptr<FakeFunction>> functions;  // one per kernel, in image order
};

struct FakeLibraryKernel {
  std::shared_ptr<const FakeImage> image;
  const FakeKernel* kernel = nullptr;
  std::map<int, std::unique_ptr<FakeFunction>> per_device;
};

struct FakeLibrary {
  std::shared_ptr<const FakeImage> image;
  std::vector<std::unique_ptr<FakeLibraryKernel>> kernels;
};

struct State {
  const Driver* owner = nullptr;
  std::vector<std::shared_ptr<const FakeImage>> images;
  std::set<const void*> functions;  // live CUfunction handles
  std::set<const void*> library_kernels;
  std::vector<FakeLaunch> launches;
  std::vector<CUjit_option> last_jit_options;
  // Modules and libraries not unloaded yet. One whose unload a test made fail stays here
  // until the next fake driver, or the end of the process, deletes it (the fake's own
  // memory is not what LeakSanitizer should report; the handle ledger reports the handle).
  std::set<FakeModule*> modules;
  std::set<FakeLibrary*> libraries;

  State() = default;
  State(const State&) = delete;
  State& operator=(const State&) = delete;
  ~State() { delete_leftovers(); }
  void delete_leftovers() {
    for (FakeModule* m : modules) delete m;
    for (FakeLibrary* lib : libraries) delete lib;
    modules.clear();
    libraries.clear();
  }
};

State& S() {
  static State s;
  return s;
}

struct LaunchScope {
  LaunchScope() { ++inside_fake_driver; }
  ~LaunchScope() { --inside_fake_driver; }
};

// ---- image bytes ----

void put32(std::vector<unsigned char>& b, std::size_t at, std::uint32_t v) { std::memcpy(b.data() + at, &v, 4); }
void put16(std::vector<unsigned char>& b, std::size_t at, std::uint16_t v) { std::memcpy(b.data() + at, &v, 2); }
void put64(std::vector<unsigned char>& b, std::size_t at, std::uint64_t v) { std::memcpy(b.data() + at, &v, 8); }
template <class T>
T get(const unsigned char* p, std::size_t at) {
  T v;
  std::memcpy(&v, p + at, sizeof v);
  return v;
}

std::string marker_text(int id) { return std::string(marker) + std::to_string(id) + ";"; }

// How far the image at `p` reaches, by its format (as the driver would read it).
std::size_t image_extent(const unsigned char* p) {
  if (get<std::uint32_t>(p, 0) == 0xBA55ED50u) return get<std::uint16_t>(p, 6) + get<std::uint64_t>(p, 8);
  if (std::memcmp(p, "\x7f" "ELF", 4) == 0) {
    std::uint64_t end = 64;
    std::uint64_t shoff = get<std::uint64_t>(p, 40);
    std::uint16_t shentsize = get<std::uint16_t>(p, 58), shnum = get<std::uint16_t>(p, 60);
    if (shnum) end = std::max<std::uint64_t>(end, shoff + std::uint64_t(shentsize) * shnum);
    return static_cast<std::size_t>(end);
  }
  return std::strlen(reinterpret_cast<const char*>(p));  // PTX: must be NUL-terminated
}

std::shared_ptr<const FakeImage> find_image(const void* code) {
  if (code == nullptr) return nullptr;
  auto p = static_cast<const unsigned char*>(code);
  std::string_view bytes(reinterpret_cast<const char*>(p), image_extent(p));
  std::size_t at = bytes.find(marker);
  if (at == std::string_view::npos) return nullptr;
  std::size_t id = 0;
  for (at += marker.size(); at < bytes.size() && bytes[at] >= '0' && bytes[at] <= '9'; ++at) id = id * 10 + (bytes[at] - '0');
  return id < S().images.size() ? S().images[id] : nullptr;
}

// ---- limits ----

int device_limit(int device, int attribute, int fallback) {
  const auto& a = D().devices.at(static_cast<std::size_t>(device)).attributes;
  auto it = a.find(attribute);
  return it == a.end() ? fallback : it->second;
}

int function_attribute(const FakeFunction& f, int attribute) {
  if (auto it = f.attributes.find(attribute); it != f.attributes.end()) return it->second;
  if (auto it = f.kernel->attributes.find(attribute); it != f.kernel->attributes.end()) return it->second;
  switch (attribute) {
    case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK: return 1024;
    case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES:
      return device_limit(f.device, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK, 48 * 1024) -
             function_attribute(f, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES);
    case CU_FUNC_ATTRIBUTE_NUM_REGS: return 32;
    case CU_FUNC_ATTRIBUTE_PTX_VERSION:
    case CU_FUNC_ATTRIBUTE_BINARY_VERSION: return 90;
    default: return 0;
  }
}

FakeFunction* live_function(CUfunction f) {
  return S().functions.count(f) ? reinterpret_cast<FakeFunction*>(f) : nullptr;
}

std::unique_ptr<FakeFunction> make_function(const std::shared_ptr<const FakeImage>& image, const FakeKernel& k,
                                            int device) {
  auto f = std::make_unique<FakeFunction>();
  f->image = image;
  f->kernel = &k;
  f->device = device;
  S().functions.insert(f.get());
  return f;
}

void forget_function(const FakeFunction* f) { S().functions.erase(f); }

std::vector<std::size_t> offsets_of(const FakeKernel& k) {
  std::vector<std::size_t> offsets;
  std::size_t at = 0;
  for (const auto& p : k.params) {
    at = (at + p.align - 1) / p.align * p.align;
    offsets.push_back(at);
    at += p.size;
  }
  return offsets;
}

int current_device() {
  CUcontext c = current_context();
  return c ? device_of(c) : -1;
}

// ---- JIT options ----

void apply_jit(const FakeImage& image, unsigned n, const CUjit_option* keys, void** values, bool failed) {
  S().last_jit_options.assign(keys, keys + n);
  auto fill = [&](CUjit_option buffer_key, CUjit_option size_key, const std::string& text) {
    char* buffer = nullptr;
    int size_slot = -1;
    for (unsigned i = 0; i < n; ++i) {
      if (keys[i] == buffer_key) buffer = static_cast<char*>(values[i]);
      if (keys[i] == size_key) size_slot = static_cast<int>(i);
    }
    if (buffer == nullptr || size_slot < 0) return;
    auto capacity = reinterpret_cast<std::uintptr_t>(values[size_slot]);
    if (capacity == 0) return;
    std::size_t len = std::min<std::size_t>(text.size(), capacity - 1);
    std::memcpy(buffer, text.data(), len);
    buffer[len] = '\0';
    values[size_slot] = reinterpret_cast<void*>(static_cast<std::uintptr_t>(len + 1));  // as the driver does
  };
  fill(CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES, image.info_log);
  if (failed) fill(CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES, image.error_log);
}

// ---- modules ----

CUresult ModuleLoadDataEx(CUmodule* out, const void* code, unsigned n, CUjit_option* keys, void** values) {
  std::lock_guard l(D().mutex);
  if (CUresult r = unsafe_call("a module load or unload")) return r;  // stricter than the driver, on purpose
  if (!out || !code) return CUDA_ERROR_INVALID_VALUE;
  int device = current_device();
  if (device < 0) return CUDA_ERROR_INVALID_CONTEXT;
  auto image = find_image(code);
  if (!image) return CUDA_ERROR_INVALID_IMAGE;
  apply_jit(*image, n, keys, values, image->load_result != CUDA_SUCCESS);
  if (image->load_result != CUDA_SUCCESS) return image->load_result;
  auto m = new FakeModule;
  m->image = image;
  m->device = device;
  for (const auto& k : image->kernels) m->functions.push_back(make_function(image, k, device));
  D().created("module", m);
  S().modules.insert(m);
  *out = reinterpret_cast<CUmodule>(m);
  return CUDA_SUCCESS;
}

CUresult ModuleUnload(CUmodule mod) {
  std::lock_guard l(D().mutex);
  if (CUresult r = unsafe_call("a module load or unload")) return r;  // stricter than the driver, on purpose
  if (!D().destroyed("module", mod)) return CUDA_ERROR_INVALID_HANDLE;
  auto m = reinterpret_cast<FakeModule*>(mod);
  for (const auto& f : m->functions) forget_function(f.get());
  S().modules.erase(m);
  delete m;
  return CUDA_SUCCESS;
}

FakeModule* live_module(CUmodule mod) {
  return D().is_live("module", mod) ? reinterpret_cast<FakeModule*>(mod) : nullptr;
}

CUresult ModuleGetFunction(CUfunction* out, CUmodule mod, const char* name) {
  std::lock_guard l(D().mutex);
  FakeModule* m = live_module(mod);
  if (!m || !out || !name) return CUDA_ERROR_INVALID_VALUE;
  for (const auto& f : m->functions)
    if (f->kernel->name == name) {
      *out = reinterpret_cast<CUfunction>(f.get());
      return CUDA_SUCCESS;
    }
  return CUDA_ERROR_NOT_FOUND;
}

CUresult ModuleGetFunctionCount(unsigned* count, CUmodule mod) {
  std::lock_guard l(D().mutex);
  FakeModule* m = live_module(mod);
  if (!m || !count) return CUDA_ERROR_INVALID_VALUE;
  *count = static_cast<unsigned>(m->functions.size());
  return CUDA_SUCCESS;
}

CUresult ModuleEnumerateFunctions(CUfunction* functions, unsigned n, CUmodule mod) {
  std::lock_guard l(D().mutex);
  FakeModule* m = live_module(mod);
  if (!m || !functions) return CUDA_ERROR_INVALID_VALUE;
  for (unsigned i = 0; i < n && i < m->functions.size(); ++i) functions[i] = reinterpret_cast<CUfunction>(m->functions[i].get());
  return CUDA_SUCCESS;
}

CUresult ModuleGetLoadingMode(CUmoduleLoadingMode* mode) {
  if (!mode) return CUDA_ERROR_INVALID_VALUE;
  *mode = CU_MODULE_LAZY_LOADING;
  return CUDA_SUCCESS;
}

// ---- libraries ----

CUresult LibraryLoadData(CUlibrary* out, const void* code, CUjit_option* keys, void** values, unsigned n,
                         CUlibraryOption*, void**, unsigned) {
  std::lock_guard l(D().mutex);
  if (CUresult r = unsafe_call("a module load or unload")) return r;  // stricter than the driver, on purpose
  if (!out || !code) return CUDA_ERROR_INVALID_VALUE;
  auto image = find_image(code);
  if (!image) return CUDA_ERROR_INVALID_IMAGE;
  apply_jit(*image, n, keys, values, image->load_result != CUDA_SUCCESS);
  if (image->load_result != CUDA_SUCCESS) return image->load_result;
  auto lib = new FakeLibrary;
  lib->image = image;
  for (const auto& k : image->kernels) {
    auto lk = std::make_unique<FakeLibraryKernel>();
    lk->image = image;
    lk->kernel = &k;
    S().library_kernels.insert(lk.get());
    lib->kernels.push_back(std::move(lk));
  }
  D().created("library", lib);
  S().libraries.insert(lib);
  *out = reinterpret_cast<CUlibrary>(lib);
  return CUDA_SUCCESS;
}

CUresult LibraryUnload(CUlibrary library) {
  std::lock_guard l(D().mutex);
  if (!D().destroyed("library", library)) return CUDA_ERROR_INVALID_HANDLE;
  auto lib = reinterpret_cast<FakeLibrary*>(library);
  for (const auto& k : lib->kernels) {
    S().library_kernels.erase(k.get());
    for (const auto& [d, f] : k->per_device) forget_function(f.get());
  }
  S().libraries.erase(lib);
  delete lib;
  return CUDA_SUCCESS;
}

FakeLibrary* live_library(CUlibrary library) {
  return D().is_live("library", library) ? reinterpret_cast<FakeLibrary*>(library) : nullptr;
}

FakeLibraryKernel* live_library_kernel(CUkernel k) {
  return S().library_kernels.count(k) ? reinterpret_cast<FakeLibraryKernel*>(k) : nullptr;
}

CUresult LibraryGetKernel(CUkernel* out, CUlibrary library, const char* name) {
  std::lock_guard l(D().mutex);
  FakeLibrary* lib = live_library(library);
  if (!lib || !out || !name) return CUDA_ERROR_INVALID_VALUE;
  for (const auto& k : lib->kernels)
    if (k->kernel->name == name) {
      *out = reinterpret_cast<CUkernel>(k.get());
      return CUDA_SUCCESS;
    }
  return CUDA_ERROR_NOT_FOUND;
}

CUresult LibraryGetKernelCount(unsigned* count, CUlibrary library) {
  std::lock_guard l(D().mutex);
  FakeLibrary* lib = live_library(library);
  if (!lib || !count) return CUDA_ERROR_INVALID_VALUE;
  *count = static_cast<unsigned>(lib->kernels.size());
  return CUDA_SUCCESS;
}

CUresult LibraryEnumerateKernels(CUkernel* kernels, unsigned n, CUlibrary library) {
  std::lock_guard l(D().mutex);
  FakeLibrary* lib = live_library(library);
  if (!lib || !kernels) return CUDA_ERROR_INVALID_VALUE;
  for (unsigned i = 0; i < n && i < lib->kernels.size(); ++i) kernels[i] = reinterpret_cast<CUkernel>(lib->kernels[i].get());
  return CUDA_SUCCESS;
}

CUresult KernelGetName(const char** name, CUkernel k) {
  std::lock_guard l(D().mutex);
  FakeLibraryKernel* lk = live_library_kernel(k);
  if (!lk || !name) return CUDA_ERROR_INVALID_VALUE;
  *name = lk->kernel->name.c_str();
  return CUDA_SUCCESS;
}

CUresult KernelGetFunction(CUfunction* out, CUkernel k) {
  std::lock_guard l(D().mutex);
  FakeLibraryKernel* lk = live_library_kernel(k);
  if (!lk || !out) return CUDA_ERROR_INVALID_VALUE;
  int device = current_device();
  if (device < 0) return CUDA_ERROR_INVALID_CONTEXT;
  auto& f = lk->per_device[device];
  if (!f) f = make_function(lk->image, *lk->kernel, device);
  *out = reinterpret_cast<CUfunction>(f.get());
  return CUDA_SUCCESS;
}

// ---- functions ----

CUresult FuncGetName(const char** name, CUfunction fn) {
  std::lock_guard l(D().mutex);
  FakeFunction* f = live_function(fn);
  if (!f || !name) return CUDA_ERROR_INVALID_VALUE;
  *name = f->kernel->name.c_str();
  return CUDA_SUCCESS;
}

CUresult FuncGetAttribute(int* value, CUfunction_attribute attribute, CUfunction fn) {
  std::lock_guard l(D().mutex);
  FakeFunction* f = live_function(fn);
  if (!f) return CUDA_ERROR_INVALID_HANDLE;
  if (!value || attribute < 0 || attribute >= CU_FUNC_ATTRIBUTE_MAX) return CUDA_ERROR_INVALID_VALUE;
  *value = function_attribute(*f, attribute);
  return CUDA_SUCCESS;
}

CUresult FuncSetAttribute(CUfunction fn, CUfunction_attribute attribute, int value) {
  std::lock_guard l(D().mutex);
  FakeFunction* f = live_function(fn);
  if (!f) return CUDA_ERROR_INVALID_HANDLE;
  if (attribute == CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES) {
    int optin = device_limit(f->device, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, 227 * 1024);
    if (value < 0 || value > optin - function_attribute(*f, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES))
      return CUDA_ERROR_INVALID_VALUE;
  }
  f->attributes[attribute] = value;
  return CUDA_SUCCESS;
}

CUresult FuncGetParamInfo(CUfunction fn, size_t index, size_t* offset, size_t* size) {
  std::lock_guard l(D().mutex);
  FakeFunction* f = live_function(fn);
  if (!f) return CUDA_ERROR_INVALID_HANDLE;
  if (index >= f->kernel->params.size()) return CUDA_ERROR_INVALID_VALUE;
  if (offset) *offset = offsets_of(*f->kernel)[index];
  if (size) *size = f->kernel->params[index].size;
  return CUDA_SUCCESS;
}

// ---- launches ----

int blocks_per_multiprocessor(const FakeFunction& f, int threads, std::size_t shared) {
  int by_threads = 2048 / std::max(threads, 1);
  int blocks = std::min(by_threads, 32);
  std::size_t per_block = shared + static_cast<std::size_t>(function_attribute(f, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES));
  if (per_block > 0) blocks = std::min<int>(blocks, static_cast<int>((228 * 1024) / per_block));
  return blocks;
}

CUresult launch(CUfunction fn, const unsigned grid[3], const unsigned block[3], unsigned shared, CUstream s,
                void** params, void** extra, const CUlaunchAttribute* attrs, unsigned nattrs, bool through_ex) {
  std::lock_guard l(D().mutex);
  if (s == nullptr || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD) {
    D().problems.push_back("a launch was given the legacy/default stream (DESIGN 1)");
    return CUDA_ERROR_INVALID_HANDLE;
  }
  FakeStream* stream = D().stream(s);
  FakeFunction* f = live_function(fn);
  if (!stream || !f) return CUDA_ERROR_INVALID_HANDLE;
  int device = current_device();
  if (device < 0) return CUDA_ERROR_INVALID_CONTEXT;
  if (device != f->device || stream->device != f->device) return CUDA_ERROR_INVALID_CONTEXT;
  if (extra != nullptr) return CUDA_ERROR_INVALID_VALUE;
  // The driver's own checks (cudakit should have refused these before).
  const int max_block[3] = {device_limit(device, CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X, 1024),
                            device_limit(device, CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y, 1024),
                            device_limit(device, CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z, 64)};
  const int max_grid[3] = {device_limit(device, CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X, 2147483647),
                           device_limit(device, CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y, 65535),
                           device_limit(device, CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z, 65535)};
  std::uint64_t threads = std::uint64_t(block[0]) * block[1] * block[2];
  for (int i = 0; i < 3; ++i) {
    if (block[i] == 0 || grid[i] == 0) return CUDA_ERROR_INVALID_VALUE;
    if (block[i] > unsigned(max_block[i]) || grid[i] > unsigned(max_grid[i])) return CUDA_ERROR_INVALID_VALUE;
  }
  if (threads > unsigned(device_limit(device, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, 1024)) ||
      threads > unsigned(function_attribute(*f, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK)))
    return CUDA_ERROR_INVALID_VALUE;
  if (shared > unsigned(function_attribute(*f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES)))
    return CUDA_ERROR_INVALID_VALUE;
  for (unsigned i = 0; i < nattrs; ++i) {
    if (attrs[i].id == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION) {
      const auto& c = attrs[i].value.clusterDim;
      if (!c.x || !c.y || !c.z || grid[0] % c.x || grid[1] % c.y || grid[2] % c.z) return CUDA_ERROR_INVALID_CLUSTER_SIZE;
    }
    if (attrs[i].id == CU_LAUNCH_ATTRIBUTE_COOPERATIVE && attrs[i].value.cooperative) {
      std::uint64_t most = std::uint64_t(blocks_per_multiprocessor(*f, int(threads), shared)) *
                           device_limit(device, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 132);
      if (std::uint64_t(grid[0]) * grid[1] * grid[2] > most) return CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE;
    }
  }
  const FakeKernel& k = *f->kernel;
  if (!k.params.empty() && params == nullptr) return CUDA_ERROR_INVALID_VALUE;

  {
    // On a capturing stream the launch becomes a kernel node that replays it (fake_graphs.cpp).
    std::vector<std::vector<unsigned char>> values;
    for (std::size_t i = 0; i < k.params.size(); ++i) {
      auto* p = static_cast<const unsigned char*>(params[i]);
      values.emplace_back(p, p + k.params[i].size);
    }
    std::vector<CUlaunchAttribute> attributes(attrs, attrs + nattrs);
    std::array<unsigned, 3> g{grid[0], grid[1], grid[2]}, b{block[0], block[1], block[2]};
    auto replay = [fn, g, b, shared, values, attributes, through_ex](CUstream on) mutable {
      LaunchScope scope;
      std::vector<void*> pointers;
      for (auto& v : values) pointers.push_back(v.data());
      return launch(fn, g.data(), b.data(), shared, on, pointers.empty() ? nullptr : pointers.data(), nullptr,
                    attributes.data(), static_cast<unsigned>(attributes.size()), through_ex);
    };
    bool programmatic = false;
    for (const CUlaunchAttribute& a : attributes)
      if (a.id == CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION && a.value.programmaticStreamSerializationAllowed)
        programmatic = true;
    if (CUresult r; capture_operation(s, CU_GRAPH_NODE_TYPE_KERNEL, "cuLaunchKernel", replay, &r, programmatic)) return r;
  }
  FakeLaunch launch;
  launch.kernel = k.name;
  launch.stream = s;
  std::copy(grid, grid + 3, launch.grid);
  std::copy(block, block + 3, launch.block);
  launch.shared_bytes = shared;
  launch.through_ex = through_ex;
  launch.attributes.assign(attrs, attrs + nattrs);
  launch.offsets = offsets_of(k);
  std::size_t total = k.params.empty() ? 0 : launch.offsets.back() + k.params.back().size;
  launch.params.assign(total, std::byte{0xEE});  // padding stays visible as 0xEE
  for (std::size_t i = 0; i < k.params.size(); ++i) std::memcpy(launch.params.data() + launch.offsets[i], params[i], k.params[i].size);
  D().tick(s);
  if (k.body) k.body(launch);
  S().launches.push_back(std::move(launch));
  return CUDA_SUCCESS;
}

CUresult LaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                      unsigned shared, CUstream s, void** params, void** extra) {
  LaunchScope scope;
  const unsigned grid[3] = {gx, gy, gz}, block[3] = {bx, by, bz};
  return launch(f, grid, block, shared, s, params, extra, nullptr, 0, false);
}

CUresult LaunchKernelEx(const CUlaunchConfig* c, CUfunction f, void** params, void** extra) {
  LaunchScope scope;
  if (!c || (c->numAttrs && !c->attrs)) return CUDA_ERROR_INVALID_VALUE;
  const unsigned grid[3] = {c->gridDimX, c->gridDimY, c->gridDimZ};
  const unsigned block[3] = {c->blockDimX, c->blockDimY, c->blockDimZ};
  return launch(f, grid, block, c->sharedMemBytes, c->hStream, params, extra, c->attrs, c->numAttrs, true);
}

// ---- occupancy ----

CUresult OccupancyMaxActiveBlocksPerMultiprocessor(int* n, CUfunction fn, int block, size_t shared) {
  std::lock_guard l(D().mutex);
  FakeFunction* f = live_function(fn);
  if (!f) return CUDA_ERROR_INVALID_HANDLE;
  if (!n || block <= 0) return CUDA_ERROR_INVALID_VALUE;
  *n = block > function_attribute(*f, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK) ? 0 : blocks_per_multiprocessor(*f, block, shared);
  return CUDA_SUCCESS;
}

CUresult OccupancyMaxPotentialBlockSize(int* min_grid, int* block, CUfunction fn, CUoccupancyB2DSize, size_t shared,
                                        int limit) {
  std::lock_guard l(D().mutex);
  FakeFunction* f = live_function(fn);
  if (!f) return CUDA_ERROR_INVALID_HANDLE;
  if (!min_grid || !block) return CUDA_ERROR_INVALID_VALUE;
  int b = function_attribute(*f, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
  if (limit > 0) b = std::min(b, limit);
  *block = b;
  *min_grid = blocks_per_multiprocessor(*f, b, shared) * device_limit(f->device, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 132);
  return CUDA_SUCCESS;
}

unsigned cluster_size(const CUlaunchConfig* c) {
  for (unsigned i = 0; i < c->numAttrs; ++i)
    if (c->attrs[i].id == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION) {
      const auto& d = c->attrs[i].value.clusterDim;
      return d.x * d.y * d.z;
    }
  return 1;
}

CUresult OccupancyMaxActiveClusters(int* n, CUfunction fn, const CUlaunchConfig* c) {
  std::lock_guard l(D().mutex);
  FakeFunction* f = live_function(fn);
  if (!f) return CUDA_ERROR_INVALID_HANDLE;
  if (!n || !c) return CUDA_ERROR_INVALID_VALUE;
  int threads = static_cast<int>(c->blockDimX * c->blockDimY * c->blockDimZ);
  int per_sm = blocks_per_multiprocessor(*f, threads, c->sharedMemBytes);
  *n = per_sm * device_limit(f->device, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 132) / static_cast<int>(cluster_size(c));
  return CUDA_SUCCESS;
}

CUresult OccupancyMaxPotentialClusterSize(int* n, CUfunction fn, const CUlaunchConfig* c) {
  std::lock_guard l(D().mutex);
  FakeFunction* f = live_function(fn);
  if (!f) return CUDA_ERROR_INVALID_HANDLE;
  if (!n || !c) return CUDA_ERROR_INVALID_VALUE;
  *n = function_attribute(*f, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED) ? 16 : 8;
  return CUDA_SUCCESS;
}

}  // namespace

// ---- for the graph area ----

bool function_parameter_sizes(CUfunction fn, std::vector<std::size_t>* sizes) {
  std::lock_guard l(D().mutex);
  FakeFunction* f = live_function(fn);
  if (f == nullptr) return false;
  sizes->clear();
  for (const FakeParam& p : f->kernel->params) sizes->push_back(p.size);
  return true;
}

CUresult replay_kernel(CUfunction fn, const unsigned grid[3], const unsigned block[3], unsigned shared, CUstream s,
                       void** params) {
  LaunchScope scope;
  return launch(fn, grid, block, shared, s, params, nullptr, nullptr, 0, false);
}

// ---- the test-facing API ----

void FakeLaunch::read(const void* p, std::size_t bytes) const {
  D().access(stream, reinterpret_cast<std::uintptr_t>(p), bytes, false, "kernel " + kernel);
}

void FakeLaunch::write(const void* p, std::size_t bytes) const {
  D().access(stream, reinterpret_cast<std::uintptr_t>(p), bytes, true, "kernel " + kernel);
}

const CUlaunchAttribute* FakeLaunch::attribute(CUlaunchAttributeID id) const {
  for (const auto& a : attributes)
    if (a.id == id) return &a;
  return nullptr;
}

int add_image(FakeImage image) {
  std::lock_guard l(D().mutex);
  S().images.push_back(std::make_shared<const FakeImage>(std::move(image)));
  return static_cast<int>(S().images.size() - 1);
}

std::vector<unsigned char> ptx_image(int id, int target) {
  std::string text = "//\n// " + marker_text(id) + "\n//\n.version 8.0\n.target sm_" + std::to_string(target) +
                     "\n.address_size 64\n";
  return {text.begin(), text.end()};
}

std::vector<unsigned char> cubin_image(int id, int arch, int abi) {
  std::string m = marker_text(id);
  std::size_t text_end = (64 + m.size() + 7) / 8 * 8;
  std::vector<unsigned char> b(text_end + 64, 0);
  std::memcpy(b.data(), "\x7f" "ELF", 4);
  b[4] = 2;  // 64-bit
  b[5] = 1;  // little-endian
  b[6] = 1;  // ELF version
  b[7] = 0x41;
  b[8] = static_cast<unsigned char>(abi);
  put16(b, 16, 2);    // ET_EXEC
  put16(b, 18, 190);  // EM_CUDA
  put32(b, 20, 1);
  put32(b, 48, abi >= 8 ? (std::uint32_t(arch) << 8) | 0x4u : std::uint32_t(arch) | (std::uint32_t(arch) << 16));
  put16(b, 52, 64);  // e_ehsize
  put64(b, 40, text_end);  // e_shoff: one (empty) section header after the marker
  put16(b, 58, 64);
  put16(b, 60, 1);
  std::memcpy(b.data() + 64, m.data(), m.size());
  return b;
}

std::vector<unsigned char> cubin_image_with_parameter_info(int id, int arch) {
  std::vector<unsigned char> b = cubin_image(id, arch);
  std::vector<FakeKernel> kernels;
  {
    std::lock_guard l(D().mutex);
    kernels = S().images.at(static_cast<std::size_t>(id))->kernels;
  }
  // Sections after the marker, each 8-aligned: the section names, then one .nv.info.<kernel>
  // per kernel with an EIATTR_KPARAM_INFO record per parameter (listed last to first, as
  // nvcc writes them) and the total (EIATTR_CBANK_PARAM_SIZE).
  auto align8 = [&] { b.resize((b.size() + 7) / 8 * 8, 0); };
  b.resize(static_cast<std::size_t>(get<std::uint64_t>(b.data(), 40)));  // drop the empty header table
  std::string names(1, '\0');
  std::vector<std::pair<std::uint32_t, std::pair<std::size_t, std::size_t>>> sections;  // name, (offset, size)
  names += ".shstrtab";
  names += '\0';
  for (const FakeKernel& k : kernels) {
    std::vector<unsigned char> info;
    std::size_t at = 0;
    std::vector<std::pair<std::size_t, std::size_t>> offsets;  // offset, size
    for (const FakeParam& p : k.params) {
      at = (at + p.align - 1) / p.align * p.align;
      offsets.push_back({at, p.size});
      at += p.size;
    }
    for (std::size_t i = offsets.size(); i-- > 0;) {
      std::vector<unsigned char> r(16, 0);
      r[0] = 4;  // a size value
      r[1] = 0x17;
      put16(r, 2, 12);
      put16(r, 8, static_cast<std::uint16_t>(i));
      put16(r, 10, static_cast<std::uint16_t>(offsets[i].first));
      put32(r, 12, static_cast<std::uint32_t>(offsets[i].second << 18) | 0x1f000u);
      info.insert(info.end(), r.begin(), r.end());
    }
    if (at > 0) info.insert(info.end(), {3, 0x19, static_cast<unsigned char>(at & 0xff), static_cast<unsigned char>(at >> 8)});
    align8();
    sections.push_back({static_cast<std::uint32_t>(names.size()), {b.size(), info.size()}});
    names += ".nv.info." + k.name;
    names += '\0';
    b.insert(b.end(), info.begin(), info.end());
  }
  align8();
  std::size_t names_at = b.size();
  b.insert(b.end(), names.begin(), names.end());
  align8();
  std::size_t table = b.size();
  std::size_t count = 2 + sections.size();
  b.resize(table + 64 * count, 0);
  auto header = [&](std::size_t index, std::uint32_t name, std::uint32_t type, std::size_t offset, std::size_t size) {
    std::size_t h = table + 64 * index;
    put32(b, h, name);
    put32(b, h + 4, type);
    put64(b, h + 24, offset);
    put64(b, h + 32, size);
  };
  header(1, 1, 3, names_at, names.size());  // SHT_STRTAB
  for (std::size_t i = 0; i < sections.size(); ++i)
    header(2 + i, sections[i].first, 0x70000000u, sections[i].second.first, sections[i].second.second);
  put64(b, 40, table);
  put16(b, 60, static_cast<std::uint16_t>(count));
  put16(b, 62, 1);
  return b;
}

std::vector<unsigned char> fatbin_image(int id, const std::vector<int>& machine_code, const std::vector<int>& ptx,
                                        bool parameter_info) {
  std::vector<unsigned char> entries;
  auto add = [&](std::uint16_t kind, int arch, std::vector<unsigned char> payload) {
    payload.resize((payload.size() + 1 + 7) / 8 * 8, 0);  // NUL-terminated, padded
    std::vector<unsigned char> h(64, 0);
    put16(h, 0, kind);
    put16(h, 2, 0x0101);
    put32(h, 4, 64);
    put64(h, 8, payload.size());
    put32(h, 28, static_cast<std::uint32_t>(arch));
    put32(h, 32, 64);
    entries.insert(entries.end(), h.begin(), h.end());
    entries.insert(entries.end(), payload.begin(), payload.end());
  };
  for (int arch : ptx) add(1, arch, ptx_image(id, arch));
  for (int arch : machine_code)
    add(2, arch, parameter_info ? cubin_image_with_parameter_info(id, arch) : cubin_image(id, arch));
  std::vector<unsigned char> b(16, 0);
  put32(b, 0, 0xBA55ED50u);
  put16(b, 4, 1);
  put16(b, 6, 16);
  put64(b, 8, entries.size());
  b.insert(b.end(), entries.begin(), entries.end());
  return b;
}

std::vector<FakeLaunch> launches() {
  std::lock_guard l(D().mutex);
  return S().launches;
}

std::vector<CUjit_option> last_jit_options() {
  std::lock_guard l(D().mutex);
  return S().last_jit_options;
}

void register_modules(Driver& d) {
  {
    std::lock_guard l(d.mutex);
    State& s = S();
    s.delete_leftovers();  // left by an earlier fake (an unload that failed)
    s.owner = nullptr;
    s.images.clear();
    s.functions.clear();
    s.library_kernels.clear();
    s.launches.clear();
    s.last_jit_options.clear();
    s.owner = &d;
  }
  using E = EntryId;
  d.implement<E::ModuleLoadDataEx>(&ModuleLoadDataEx);
  d.implement<E::ModuleUnload>(&ModuleUnload);
  d.implement<E::ModuleGetFunction>(&ModuleGetFunction);
  d.implement<E::ModuleGetFunctionCount>(&ModuleGetFunctionCount);
  d.implement<E::ModuleEnumerateFunctions>(&ModuleEnumerateFunctions);
  d.implement<E::ModuleGetLoadingMode>(&ModuleGetLoadingMode);
  d.implement<E::LibraryLoadData>(&LibraryLoadData);
  d.implement<E::LibraryUnload>(&LibraryUnload);
  d.implement<E::LibraryGetKernel>(&LibraryGetKernel);
  d.implement<E::LibraryGetKernelCount>(&LibraryGetKernelCount);
  d.implement<E::LibraryEnumerateKernels>(&LibraryEnumerateKernels);
  d.implement<E::KernelGetFunction>(&KernelGetFunction);
  d.implement<E::KernelGetName>(&KernelGetName);
  d.implement<E::FuncGetName>(&FuncGetName);
  d.implement<E::FuncGetAttribute>(&FuncGetAttribute);
  d.implement<E::FuncSetAttribute>(&FuncSetAttribute);
  d.implement<E::FuncGetParamInfo>(&FuncGetParamInfo);
  d.implement<E::LaunchKernel>(&LaunchKernel);
  d.implement<E::LaunchKernelEx>(&LaunchKernelEx);
  d.implement<E::OccupancyMaxActiveBlocksPerMultiprocessor>(&OccupancyMaxActiveBlocksPerMultiprocessor);
  d.implement<E::OccupancyMaxPotentialBlockSize>(&OccupancyMaxPotentialBlockSize);
  d.implement<E::OccupancyMaxActiveClusters>(&OccupancyMaxActiveClusters);
  d.implement<E::OccupancyMaxPotentialClusterSize>(&OccupancyMaxPotentialClusterSize);
}

}  // namespace cudakit::fake
