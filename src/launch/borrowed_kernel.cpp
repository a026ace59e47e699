// Kernels loaded outside cudakit (borrowed_kernel.hpp).
#include "cudakit/borrowed_kernel.hpp"

#include <cxxabi.h>

#include <cstdlib>
#include <memory>
#include <string>

#include "cudakit/context.hpp"
#include "device/capture_tolerant_scope.hpp"
#include "cudakit/driver.hpp"
#include "cudakit/error.hpp"
#include "device/device_state.hpp"

namespace cudakit {

using driver::cu;

namespace {
// The kernel's name as the driver knows it (mangled for C++), where the driver can say.
std::string driver_name(CUkernel kernel, const Resource& res) {
  if (!driver::has(driver::EntryId::KernelGetName)) return "borrowed kernel";
  const char* name = nullptr;
  check(cu.KernelGetName(&name, kernel), cu.KernelGetName.name(), res);
  return name != nullptr ? name : "borrowed kernel";
}

// "saxpy(float, float const*, float*, int)" for "_Z5saxpyfPKfPfi"; the name itself when
// it is not a mangled C++ name.
std::string readable(const std::string& name) {
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> demangled(abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status),
                                                   std::free);
  return status == 0 && demangled ? std::string(demangled.get()) : name;
}
}  // namespace

Function borrow_kernel(CUkernel kernel, const Device& device) {
  if (kernel == nullptr) throw InvalidArgument("borrow_kernel: the kernel handle is null");
  const int ordinal = device.ordinal();
  Resource res = Resource::of(ResourceKind::kernel, kernel, ordinal);
  check_not_poisoned(cu.KernelGetFunction.name(), res);
  CUcontext context = detail::library_context(ordinal);  // DESIGN 4: the kernel's context stays
  ContextRef(context, ordinal).make_current();
  CUfunction function = nullptr;
  {
    detail::CaptureTolerantScope tolerant;  // the driver may load the code now; beside a capture (DESIGN 6)
    check(cu.KernelGetFunction(&function, kernel), cu.KernelGetFunction.name(), res);
  }
  std::string name = driver_name(kernel, res);
  auto state = std::make_shared<detail::FunctionState>();
  detail::init_function_state(*state, function, ordinal, context, name, readable(name));
  return Function(std::move(state));
}

}  // namespace cudakit
