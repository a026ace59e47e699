// Which code each GPU runs from the kernels the command embeds (tools/cudakit/
// kernel_path.hpp), on a fake driver whose GPUs span every generation: the doctor says
// "native sm_XY" where the image has machine code for the GPU, "PTX JIT from compute_XY"
// where only PTX runs (a GPU newer than the build) or CUDA_FORCE_PTX_JIT=1 asks for it,
// and the check fails when the driver's account of a kernel disagrees.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "cudakit/device.hpp"
#include "fake_fixture.hpp"
#include "fake_modules.hpp"
#include "kernel_path.hpp"

#ifdef CUDAKIT_HAVE_TEST_KERNELS
#include "test_kernels.hpp"
#endif

namespace cudakit::tool {
namespace {

std::span<const std::byte> bytes(const std::vector<unsigned char>& v) { return std::as_bytes(std::span(v)); }

// GPUs of compute capability 7.5, 8.0, 8.6, 8.9, 9.0, 10.0, 12.0 and 13.0.
class ManyGenerationsTest : public testing::FakeDriverTest {
 protected:
  void configure(fake::Driver& d) override {
    d.devices.clear();
    for (auto [major, minor] : std::vector<std::pair<int, int>>{{7, 5}, {8, 0}, {8, 6}, {8, 9}, {9, 0}, {10, 0}, {12, 0}, {13, 0}}) {
      fake::DeviceConfig c;
      c.name = "Fake GPU " + std::to_string(major) + "." + std::to_string(minor);
      c.major = major;
      c.minor = minor;
      d.devices.push_back(c);
    }
  }
  void TearDown() override {
    ::unsetenv("CUDA_FORCE_PTX_JIT");
    FakeDriverTest::TearDown();
  }
  // The image a build for sm_75, sm_80, sm_86, sm_90 and sm_120 makes: PTX for the first
  // of each generation and the newest.
  ImageContents image() { return inspect_image(bytes(fake::fatbin_image(0, {75, 80, 86, 90, 120}, {75, 80, 90, 120}))); }
  std::string path_on(int ordinal) { return kernel_path(image(), Device::get(ordinal).compute_capability()).describe(); }
};

TEST_F(ManyGenerationsTest, EachGpuWithMachineCodeRunsItNatively) {
  EXPECT_EQ(path_on(0), "native sm_75");
  EXPECT_EQ(path_on(1), "native sm_80");
  EXPECT_EQ(path_on(2), "native sm_86");
  EXPECT_EQ(path_on(3), "native sm_86") << "8.9 runs 8.6 code: same major, older minor";
  EXPECT_EQ(path_on(4), "native sm_90");
  EXPECT_EQ(path_on(6), "native sm_120");
}

TEST_F(ManyGenerationsTest, AGpuWithoutMachineCodeJitsTheNewestPtxItCanRun) {
  EXPECT_EQ(path_on(5), "PTX JIT from compute_90 (the image has no machine code for sm_100)");
  EXPECT_EQ(path_on(7), "PTX JIT from compute_120 (the image has no machine code for sm_130)");
  KernelPath p = kernel_path(image(), Device::get(7).compute_capability());
  EXPECT_EQ(p.choice.kind, CodeKind::jit);
  EXPECT_FALSE(p.forced_jit);
}

TEST_F(ManyGenerationsTest, ForcedPtxJitUsesThePtxOfTheGpusOwnGeneration) {
  ::setenv("CUDA_FORCE_PTX_JIT", "1", 1);
  EXPECT_EQ(path_on(0), "PTX JIT from compute_75 (CUDA_FORCE_PTX_JIT=1)");
  EXPECT_EQ(path_on(2), "PTX JIT from compute_80 (CUDA_FORCE_PTX_JIT=1)");
  EXPECT_EQ(path_on(4), "PTX JIT from compute_90 (CUDA_FORCE_PTX_JIT=1)");
  EXPECT_TRUE(kernel_path(image(), Device::get(4).compute_capability()).forced_jit);
  ::setenv("CUDA_FORCE_PTX_JIT", "0", 1);
  EXPECT_EQ(path_on(4), "native sm_90") << "only the value 1 forces the JIT";
}

TEST_F(ManyGenerationsTest, AnImageNothingOfWhichRunsIsRefusedNamingWhatItHas) {
  ImageContents hopper_only = inspect_image(bytes(fake::fatbin_image(0, {90}, {90})));
  try {
    kernel_path(hopper_only, Device::get(1).compute_capability());
    FAIL() << "sm_90 code and compute_90 PTX do not run on sm_80";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("sm_90 and PTX for compute_90"), std::string::npos) << e.what();
  }
}

TEST(KernelPathDriver, AgreesWhenTheDriversAttributesMatchThePrediction) {
  KernelPath native{{CodeKind::native, 90}, false, 90};
  EXPECT_EQ(driver_disagreement(native, 90, 90), "");
  EXPECT_EQ(driver_disagreement(native, 0, 90), "") << "old cubins report PTX version 0";
  KernelPath jit{{CodeKind::jit, 75}, true, 90};
  EXPECT_EQ(driver_disagreement(jit, 75, 90), "");
}

TEST(KernelPathDriver, SaysWhatTheDriverRanWhenItDisagrees) {
  KernelPath native{{CodeKind::native, 90}, false, 90};
  EXPECT_EQ(driver_disagreement(native, 75, 90),
            "cudakit predicted native sm_90, but the driver ran machine code for sm_90 built from compute_75");
  KernelPath jit{{CodeKind::jit, 75}, true, 90};
  EXPECT_NE(driver_disagreement(jit, 90, 90), "") << "native code where cudakit predicted the JIT";
  EXPECT_NE(driver_disagreement(jit, 75, 80), "") << "JIT output is for the GPU's own architecture";
}

#ifdef CUDAKIT_HAVE_TEST_KERNELS
// The command's own image: every GPU the build lists runs native code, the GPU after the
// newest JITs the newest PTX, and under CUDA_FORCE_PTX_JIT=1 each GPU JITs PTX of its own
// generation (so an sm_90 GPU keeps clusters).
TEST(KernelPathOfTheEmbeddedKernels, NativeForEveryListedGpuAndPtxForTheNext) {
  ImageContents fat = inspect_image(std::as_bytes(cudakit_kernels::test_fatbin()));
  for (int arch : cudakit_kernels::test_machine_code_architectures)
    EXPECT_EQ(kernel_path(fat, {arch / 10, arch % 10}).describe(), "native sm_" + std::to_string(arch));
  int newest_ptx = std::end(cudakit_kernels::test_ptx_architectures)[-1];
  int next_major = std::end(cudakit_kernels::test_machine_code_architectures)[-1] / 10 + 1;
  KernelPath future = kernel_path(fat, {next_major, 0});
  EXPECT_EQ(future.choice.kind, CodeKind::jit);
  EXPECT_EQ(future.choice.arch, newest_ptx);

  ::setenv("CUDA_FORCE_PTX_JIT", "1", 1);
  for (int arch : cudakit_kernels::test_machine_code_architectures) {
    KernelPath forced = kernel_path(fat, {arch / 10, arch % 10});
    EXPECT_EQ(forced.choice.kind, CodeKind::jit) << arch;
    EXPECT_EQ(forced.choice.arch / 10, arch / 10) << "PTX of the GPU's own generation for sm_" << arch;
    EXPECT_TRUE(forced.forced_jit);
  }
  ::unsetenv("CUDA_FORCE_PTX_JIT");
}
#endif

}  // namespace
}  // namespace cudakit::tool
