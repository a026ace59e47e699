// Modules and libraries against the fake driver: loading each format,
// the native/JIT report and policy, JIT logs, cached thread-safe lookups, the missing-kernel
// message, typed lookups checked against parameter info, lifetimes and unloading.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>
#include <unistd.h>

#include "cudakit/library.hpp"
#include "cudakit/module.hpp"
#include "fake_fixture.hpp"
#include "fake_kernels.hpp"

namespace cudakit {
namespace {

using driver::EntryId;
using testing::message_of;

using testing::SaxpySig;

class ModuleTest : public testing::FakeDriverTest {
 protected:
  Device dev() { return Device::get(0); }
};

TEST_F(ModuleTest, LoadsEveryFormatAndSaysWhetherItRunsNativeCodeOrJit) {
  int id = testing::standard_image();
  Module from_ptx = Module::load(dev(), fake::ptx_image(id));
  EXPECT_EQ(from_ptx.report().contents.format, ImageFormat::ptx);
  EXPECT_TRUE(from_ptx.jit_compiled());
  EXPECT_EQ(from_ptx.report().arch, 90);

  Module from_cubin = Module::load(dev(), fake::cubin_image(id, 90));
  EXPECT_EQ(from_cubin.report().contents.format, ImageFormat::cubin);
  EXPECT_FALSE(from_cubin.jit_compiled());

  Module from_fatbin = Module::load(dev(), fake::fatbin_image(id, {90}, {90}));
  EXPECT_EQ(from_fatbin.report().code, CodeKind::native);
  EXPECT_EQ(from_fatbin.report().describe(),
            "fatbin with machine code for sm_90 and PTX for compute_90 from memory: runs native machine code for sm_90");

  Module jit_fatbin = Module::load(dev(), fake::fatbin_image(id, {80}, {80}));
  EXPECT_EQ(jit_fatbin.report().code, CodeKind::jit);
  EXPECT_EQ(jit_fatbin.report().arch, 80);
  EXPECT_EQ(fake().live("module"), 4u);
}

TEST_F(ModuleTest, AcceptsADeviceAContextOrAContextRef) {
  int id = testing::standard_image();
  Context c = Context::primary(dev());
  Module a = Module::load(c, fake::cubin_image(id));
  Module b = Module::load(c.ref(), fake::cubin_image(id));
  EXPECT_EQ(a.device_ordinal(), 0);
  EXPECT_EQ(b.device_ordinal(), 0);
}

TEST_F(ModuleTest, RefusePolicyFailsBeforeTheDriverSeesTheImage) {
  int id = testing::standard_image();
  auto m = message_of<InvalidArgument>([&] {
    Module::load(dev(), fake::fatbin_image(id, {80, 86}, {80}), {.jit_policy = JitPolicy::refuse});
  });
  EXPECT_NE(m.find("module image from memory for device 0 (Fake GPU, sm_90)"), std::string::npos) << m;
  EXPECT_NE(m.find("machine code for sm_80, sm_86 and PTX for compute_80"), std::string::npos) << m;
  EXPECT_EQ(fake().calls(EntryId::ModuleLoadDataEx), 0);
  EXPECT_THROW(Module::load(dev(), fake::ptx_image(id), {.jit_policy = JitPolicy::refuse}), InvalidArgument);
}

TEST_F(ModuleTest, ImageWithNothingTheGpuCanRunFailsBeforeTheDriver) {
  int id = testing::standard_image();
  auto m = message_of<InvalidArgument>([&] { Module::load(dev(), fake::cubin_image(id, 80)); });
  EXPECT_NE(m.find("has nothing a GPU of sm_90"), std::string::npos) << m;
  EXPECT_EQ(fake().calls(EntryId::ModuleLoadDataEx), 0);
}

TEST_F(ModuleTest, JitInfoLogOfAPtxLoadIsInTheReport) {
  fake::FakeImage image;
  image.kernels = {testing::saxpy_kernel()};
  image.info_log = "ptxas info    : Used 12 registers, 380 bytes cmem[0]";
  int id = fake::add_image(image);
  Module m = Module::load(dev(), fake::ptx_image(id), {.jit = {.optimization_level = 3, .line_info = true}});
  EXPECT_EQ(m.report().jit_log, image.info_log);
  auto keys = fake::last_jit_options();
  for (CUjit_option k : {CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES, CU_JIT_ERROR_LOG_BUFFER,
                         CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES, CU_JIT_OPTIMIZATION_LEVEL, CU_JIT_GENERATE_LINE_INFO})
    EXPECT_NE(std::find(keys.begin(), keys.end(), k), keys.end()) << "JIT option " << k;
}

TEST_F(ModuleTest, FailedJitThrowsModuleLoadErrorWithTheErrorLog) {
  fake::FakeImage image;
  image.load_result = CUDA_ERROR_INVALID_PTX;
  image.error_log = "ptxas application ptx input, line 12; error   : Unknown symbol 'foo'";
  int id = fake::add_image(image);
  try {
    Module::load(dev(), fake::ptx_image(id));
    FAIL() << "loaded";
  } catch (const ModuleLoadError& e) {
    EXPECT_EQ(e.code(), CUDA_ERROR_INVALID_PTX);
    EXPECT_EQ(e.log(), image.error_log);
    std::string w = e.what();
    EXPECT_NE(w.find("cuModuleLoadDataEx on device 0"), std::string::npos) << w;
    EXPECT_NE(w.find("CUDA_ERROR_INVALID_PTX"), std::string::npos) << w;
    EXPECT_NE(w.find("Unknown symbol 'foo'"), std::string::npos) << w;
  }
  EXPECT_EQ(fake().live("module"), 0u);
}

TEST_F(ModuleTest, LoadsFromAFileAndNamesAFileItCannotRead) {
  int id = testing::standard_image();
  auto path = std::filesystem::temp_directory_path() / ("cudakit_module_test_" + std::to_string(::getpid()) + ".fatbin");
  {
    auto bytes = fake::fatbin_image(id, {90}, {90});
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  }
  Module m = Module::load(dev(), path);
  std::filesystem::remove(path);
  EXPECT_EQ(m.report().source, "file '" + path.string() + "'");
  EXPECT_TRUE(m.function("saxpy"));
  auto msg = message_of<InvalidArgument>([&] { Module::load(dev(), "/nonexistent/k.cubin"); });
  EXPECT_NE(msg.find("cannot read module file '/nonexistent/k.cubin': No such file or directory"), std::string::npos)
      << msg;
}

TEST_F(ModuleTest, MissingKernelListsTheKernelsTheModuleHas) {
  int id = testing::standard_image();
  Module m = Module::load(dev(), fake::cubin_image(id));
  auto msg = message_of<InvalidArgument>([&] { m.function("saxpi"); });
  EXPECT_NE(msg.find("module from memory on device 0 (Fake GPU, sm_90) has no kernel named 'saxpi'; its kernels are: "
                     "empty, fill, mixed, saxpy, sum"),
            std::string::npos)
      << msg;
  auto names = m.kernel_names();
  EXPECT_EQ(names.size(), 5u);
}

TEST_F(ModuleTest, MissingCxxKernelGetsAHintAboutMangledNames) {
  fake::FakeImage image;
  image.kernels = {{"_Z10fill_valueIfEvPT_S0_i", fake::params<float*, float, int>(), {}}};
  Module m = Module::load(dev(), fake::cubin_image(fake::add_image(image)));
  auto msg = message_of<InvalidArgument>([&] { m.function("fill_value"); });
  EXPECT_NE(msg.find("its kernels are: _Z10fill_valueIfEvPT_S0_i"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'fill_value' is a C++ kernel"), std::string::npos) << msg;
  EXPECT_TRUE(m.kernel<void(float*, float, int)>("_Z10fill_valueIfEvPT_S0_i"));
}

TEST_F(ModuleTest, LookupsAreCachedAcrossThreads) {
  Module m = Module::load(dev(), fake::cubin_image(testing::standard_image()));
  std::vector<std::thread> threads;
  std::atomic<int> mismatches{0};
  CUfunction saxpy = m.function("saxpy").handle();
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 200; ++i) {
        if (m.kernel<SaxpySig>("saxpy").handle() != saxpy) ++mismatches;
        m.function("fill");
        m.function("sum");
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(mismatches.load(), 0);
  EXPECT_EQ(fake().calls(EntryId::ModuleGetFunction), 3) << "each name is looked up once";
}

TEST_F(ModuleTest, KernelsKeepTheirModuleLoaded) {
  Kernel<SaxpySig> k;
  {
    Module m = Module::load(dev(), fake::cubin_image(testing::standard_image()));
    k = m.kernel<SaxpySig>("saxpy");
  }
  EXPECT_EQ(fake().live("module"), 1u) << "the kernel holds the module";
  EXPECT_EQ(k.name(), "saxpy");
  k = {};
  EXPECT_EQ(fake().live("module"), 0u);
  EXPECT_EQ(fake().calls(EntryId::ModuleUnload), 1);
}

TEST_F(ModuleTest, UnloadErrorIsParkedNotThrown) {
  expect_parked_errors();
  CUmodule handle = nullptr;
  {
    Module m = Module::load(dev(), fake::cubin_image(testing::standard_image()));
    handle = m.handle();
    fake().fail(EntryId::ModuleUnload, 1, CUDA_ERROR_INVALID_HANDLE);
  }
  auto parked = drain_parked_errors();
  ASSERT_EQ(parked.size(), 1u);
  EXPECT_EQ(parked[0].origin, "~Module");
  EXPECT_NE(parked[0].message.find("cuModuleUnload"), std::string::npos);
  fake().clear_faults();
  // The fake still holds the module: unload it so the ledger is clean.
  EXPECT_EQ(driver::cu.ModuleUnload(handle), CUDA_SUCCESS);
}

TEST_F(ModuleTest, EmptyModuleSaysSoWhenUsed) {
  Module m;
  EXPECT_FALSE(m);
  EXPECT_THROW(m.function("x"), EmptyHandle);
  Module loaded = Module::load(dev(), fake::cubin_image(testing::standard_image()));
  Module moved = std::move(loaded);
  EXPECT_THROW(loaded.report(), EmptyHandle);  // NOLINT(bugprone-use-after-move): the point of the test
  EXPECT_TRUE(moved.function("saxpy"));
  EXPECT_THROW(Kernel<SaxpySig>{}.state(), EmptyHandle);
}

TEST_F(ModuleTest, TypedLookupChecksTheSignatureAgainstParameterInfo) {
  fake::FakeImage image;
  image.kernels = {testing::saxpy_kernel(), {"packed", {{4, 4}, {8, 4}}, {}}};
  const int id = fake::add_image(image);
  Module m = Module::load(dev(), fake::cubin_image(id));
  EXPECT_TRUE(m.kernel<SaxpySig>("saxpy"));

  // Too few declared: the image's layout says so (the driver would need a failed call).
  Module stated = Module::load(dev(), fake::cubin_image_with_parameter_info(id));
  auto count = message_of<InvalidArgument>([&] { stated.kernel<void(float, const float*, float*)>("saxpy"); });
  EXPECT_NE(count.find("kernel 'saxpy' does not match Kernel<void(float, const float*, float*)>: the kernel takes 4 "
                       "parameters (4, 8, 8, 4 bytes), the signature declares 3 (4, 8, 8 bytes)"),
            std::string::npos)
      << count;
  // Too many declared: the driver says so where the image does not.
  auto more = message_of<InvalidArgument>([&] { m.kernel<void(float, const float*, float*, int, int)>("saxpy"); });
  EXPECT_NE(more.find("the kernel takes 4 parameters (4, 8, 8, 4 bytes), the signature declares 5"), std::string::npos)
      << more;
  auto size = message_of<InvalidArgument>([&] { m.kernel<void(double, const float*, float*, int)>("saxpy"); });
  EXPECT_NE(size.find("parameter #1 is 4 bytes in the kernel, 8 in the signature"), std::string::npos) << size;
  auto offset = message_of<InvalidArgument>([&] { m.kernel<void(int, double)>("packed"); });
  EXPECT_NE(offset.find("parameter #2 sits at byte 4 in the kernel, at 8 in the signature"), std::string::npos)
      << offset;
}

TEST_F(ModuleTest, LibraryLoadsOnceAndHandsOutAKernelPerDevice) {
  int id = testing::standard_image();
  Library lib = Library::load(fake::fatbin_image(id, {90}, {90}));
  auto k = lib.kernel<SaxpySig>(dev(), "saxpy");
  EXPECT_EQ(k.device_ordinal(), 0);
  EXPECT_EQ(lib.kernel<SaxpySig>(dev(), "saxpy").handle(), k.handle()) << "cached";
  EXPECT_EQ(lib.code_for(dev()).kind, CodeKind::native);
  EXPECT_EQ(fake().calls(EntryId::LibraryGetKernel), 1);
  EXPECT_EQ(fake().calls(EntryId::KernelGetFunction), 1);
  auto names = lib.kernel_names();
  EXPECT_EQ(names.size(), 5u);
  auto msg = message_of<InvalidArgument>([&] { lib.function(dev(), "nope"); });
  EXPECT_NE(msg.find("library from memory has no kernel named 'nope'; its kernels are: empty, fill, mixed, saxpy, sum"),
            std::string::npos)
      << msg;
  EXPECT_EQ(fake().live("library"), 1u);
}

class TwoDeviceModuleTest : public ModuleTest {
 protected:
  void configure(fake::Driver& d) override {
    d.devices.resize(2);
    d.devices[1].name = "Older Fake GPU";
    d.devices[1].major = 8;
    d.devices[1].minor = 0;
  }
};

TEST_F(TwoDeviceModuleTest, LibraryAppliesTheJitPolicyPerDevice) {
  int id = testing::standard_image();
  Library lib = Library::load(fake::fatbin_image(id, {90}, {80}), {.jit_policy = JitPolicy::refuse});
  auto on0 = lib.function(Device::get(0), "saxpy");
  EXPECT_EQ(on0.device_ordinal(), 0);
  auto msg = message_of<InvalidArgument>([&] { lib.function(Device::get(1), "saxpy"); });
  EXPECT_NE(msg.find("for device 1 (Older Fake GPU, sm_80)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("JitPolicy::refuse"), std::string::npos) << msg;

  Library allowing = Library::load(fake::fatbin_image(id, {90}, {80}));
  EXPECT_EQ(allowing.code_for(Device::get(1)).kind, CodeKind::jit);
  auto on1 = allowing.function(Device::get(1), "saxpy");
  EXPECT_NE(on1.handle(), allowing.function(Device::get(0), "saxpy").handle());
}

class OldDriverModuleTest : public ModuleTest {
 protected:
  void configure(fake::Driver& d) override {
    d.driver_version = 12020;
    d.missing = {EntryId::ModuleGetFunctionCount, EntryId::ModuleEnumerateFunctions, EntryId::FuncGetParamInfo,
                 EntryId::FuncGetName,           EntryId::LibraryGetKernelCount,    EntryId::LibraryEnumerateKernels,
                 EntryId::KernelGetName};
  }
};

TEST_F(OldDriverModuleTest, MissingKernelSaysTheListIsUnavailable) {
  Module m = Module::load(dev(), fake::cubin_image(testing::standard_image()));
  auto msg = message_of<InvalidArgument>([&] { m.function("saxpi"); });
  EXPECT_NE(msg.find("has no kernel named 'saxpi'; this driver (CUDA 12.2) cannot list a module's kernels (that needs "
                     "CUDA 12.4), so the list is unavailable"),
            std::string::npos)
      << msg;
  auto names = message_of<FeatureUnavailable>([&] { m.kernel_names(); });
  EXPECT_NE(names.find("listing a module's kernels needs cuModuleEnumerateFunctions"), std::string::npos) << names;
}

TEST_F(OldDriverModuleTest, TypedLookupTrustsTheSignatureWithoutParameterInfo) {
  Module m = Module::load(dev(), fake::cubin_image(testing::standard_image()));
  EXPECT_TRUE(m.kernel<void(double)>("saxpy")) << "12.2 cannot say: the signature is the caller's word";
  EXPECT_THROW(m.function("saxpy").parameters(), FeatureUnavailable);
}

}  // namespace
}  // namespace cudakit
