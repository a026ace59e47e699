// A small NVTX tool for the tests: loaded by NVTX through NVTX_INJECTION64_PATH, it
// records the domains, registered strings, ranges and stream names it is given, and
// hands them to the test as text through `nvtx_recorder_lines`.
#include <nvtx3/nvToolsExt.h>
#include <nvtx3/nvToolsExtCuda.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <string>

namespace {

std::mutex lock;
std::string lines;                                 // one event a line
std::map<const void*, std::string> domain_names;   // handle -> name
std::map<const void*, std::string> string_names;   // registered handle -> text
std::map<std::string, std::uintptr_t> handles;     // to make handles unique and stable
std::uintptr_t next_handle = 1;

void add(const std::string& line) {
  std::lock_guard<std::mutex> guard(lock);
  lines += line;
  lines += '\n';
}

const void* handle_for(const std::string& key) {
  auto [it, added] = handles.emplace(key, next_handle);
  if (added) ++next_handle;
  return reinterpret_cast<const void*>(it->second);
}

std::string domain_name(nvtxDomainHandle_t domain) {
  auto it = domain_names.find(domain);
  return it == domain_names.end() ? std::string("(no domain)") : it->second;
}

std::string message_of(const nvtxEventAttributes_t* a) {
  if (a == nullptr) return "(no attributes)";
  switch (a->messageType) {
    case NVTX_MESSAGE_TYPE_ASCII: return a->message.ascii ? a->message.ascii : "";
    case NVTX_MESSAGE_TYPE_REGISTERED: {
      auto it = string_names.find(a->message.registered);
      return it == string_names.end() ? std::string("(unregistered)") : it->second;
    }
    default: return "(other message type)";
  }
}

nvtxDomainHandle_t NVTX_API domain_create(const char* name) {
  std::lock_guard<std::mutex> guard(lock);
  auto h = const_cast<void*>(handle_for(std::string("domain:") + name));
  domain_names[h] = name;
  return static_cast<nvtxDomainHandle_t>(h);
}

nvtxStringHandle_t NVTX_API register_string(nvtxDomainHandle_t domain, const char* text) {
  std::lock_guard<std::mutex> guard(lock);
  auto h = const_cast<void*>(handle_for("string:" + domain_name(domain) + ":" + text));
  string_names[h] = text;
  return static_cast<nvtxStringHandle_t>(h);
}

int NVTX_API range_push(nvtxDomainHandle_t domain, const nvtxEventAttributes_t* attributes) {
  std::string line;
  {
    std::lock_guard<std::mutex> guard(lock);
    line = "push " + domain_name(domain) + ": " + message_of(attributes);
  }
  add(line);
  return 0;
}

int NVTX_API range_pop(nvtxDomainHandle_t domain) {
  std::string line;
  {
    std::lock_guard<std::mutex> guard(lock);
    line = "pop " + domain_name(domain);
  }
  add(line);
  return 0;
}

void NVTX_API name_stream(CUstream, const char* name) { add(std::string("stream ") + name); }

template <class F>
void install(NvtxFunctionTable table, unsigned size, unsigned id, F* fn) {
  if (table != nullptr && id < size && table[id] != nullptr) *table[id] = reinterpret_cast<NvtxFunctionPointer>(fn);
}

}  // namespace

extern "C" {

// NVTX calls this once, at the first NVTX call of the process.
__attribute__((visibility("default"))) int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get_export_table) {
  auto callbacks = static_cast<const NvtxExportTableCallbacks*>(get_export_table(NVTX_ETID_CALLBACKS));
  if (callbacks == nullptr) return 0;
  NvtxFunctionTable core2 = nullptr;
  unsigned core2_size = 0;
  if (!callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &core2, &core2_size)) return 0;
  install(core2, core2_size, NVTX_CBID_CORE2_DomainCreateA, &domain_create);
  install(core2, core2_size, NVTX_CBID_CORE2_DomainRegisterStringA, &register_string);
  install(core2, core2_size, NVTX_CBID_CORE2_DomainRangePushEx, &range_push);
  install(core2, core2_size, NVTX_CBID_CORE2_DomainRangePop, &range_pop);
  NvtxFunctionTable cuda = nullptr;
  unsigned cuda_size = 0;
  if (callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CUDA, &cuda, &cuda_size))
    install(cuda, cuda_size, NVTX_CBID_CUDA_NameCuStreamA, &name_stream);
  return 1;  // NVTX keeps the tool
}

// What was recorded so far, one event a line; the test finds this with dlsym.
__attribute__((visibility("default"))) const char* nvtx_recorder_lines() {
  static std::string copy;
  std::lock_guard<std::mutex> guard(lock);
  copy = lines;
  return copy.c_str();
}

}  // extern "C"
