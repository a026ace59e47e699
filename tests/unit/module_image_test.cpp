// Module images without a driver: format detection, the architectures a cubin, PTX or
// fatbin holds, and which code a GPU runs from it (native or JIT) under each JitPolicy.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <span>
#include <vector>

#include "cudakit/module_image.hpp"
#include "fake_fixture.hpp"
#include "fake_modules.hpp"

#ifdef CUDAKIT_HAVE_TEST_KERNELS
#include "test_kernels.hpp"
#endif

namespace cudakit {
namespace {

using testing::message_of;

std::span<const std::byte> bytes(const std::vector<unsigned char>& v) { return std::as_bytes(std::span(v)); }

constexpr ComputeCapability hopper{9, 0}, ampere{8, 0}, ampere86{8, 6}, blackwell{10, 0};

TEST(ModuleImage, DetectsPtxAndItsTarget) {
  auto c = inspect_image(bytes(fake::ptx_image(0, 80)));
  EXPECT_EQ(c.format, ImageFormat::ptx);
  EXPECT_TRUE(c.machine_code.empty());
  EXPECT_EQ(c.ptx, std::vector<int>{80});
  EXPECT_EQ(c.describe(), "PTX with PTX for compute_80");
}

TEST(ModuleImage, ReadsTheCubinArchitectureFromBothElfAbiLayouts) {
  auto v8 = inspect_image(bytes(fake::cubin_image(0, 90, 8)));  // CUDA 13: bits 8-15
  EXPECT_EQ(v8.format, ImageFormat::cubin);
  EXPECT_EQ(v8.machine_code, std::vector<int>{90});
  auto v7 = inspect_image(bytes(fake::cubin_image(0, 86, 7)));  // older: the low byte
  EXPECT_EQ(v7.machine_code, std::vector<int>{86});
}

TEST(ModuleImage, ListsEveryFatbinEntry) {
  auto c = inspect_image(bytes(fake::fatbin_image(0, {80, 90}, {90})));
  EXPECT_EQ(c.format, ImageFormat::fatbin);
  EXPECT_EQ(c.machine_code, (std::vector<int>{80, 90}));
  EXPECT_EQ(c.ptx, std::vector<int>{90});
  EXPECT_EQ(c.describe(), "fatbin with machine code for sm_80, sm_90 and PTX for compute_90");
}

TEST(ModuleImage, RefusesWhatIsNoImageNamingItsFirstBytes) {
  std::vector<unsigned char> junk = {0xde, 0xad, 0xbe, 0xef, 0x00, 0x01};
  auto m = message_of<InvalidArgument>([&] { inspect_image(bytes(junk)); });
  EXPECT_NE(m.find("not a module image"), std::string::npos) << m;
  EXPECT_NE(m.find("de ad be ef 00 01"), std::string::npos) << m;
  std::vector<unsigned char> text = {'h', 'e', 'l', 'l', 'o'};
  EXPECT_THROW(inspect_image(bytes(text)), InvalidArgument) << "text without .version is not PTX";
}

TEST(ModuleImage, RefusesTruncatedImages) {
  auto fat = fake::fatbin_image(0, {90}, {});
  fat.resize(fat.size() - 10);
  EXPECT_NE(message_of<InvalidArgument>([&] { inspect_image(bytes(fat)); }).find("truncated fatbin"), std::string::npos);
  auto cubin = fake::cubin_image(0, 90);
  cubin.resize(40);
  EXPECT_NE(message_of<InvalidArgument>([&] { inspect_image(bytes(cubin)); }).find("truncated"), std::string::npos);
}

TEST(ModuleImage, RefusesAnElfForAnotherMachine) {
  auto elf = fake::cubin_image(0, 90);
  elf[18] = 62;  // EM_X86_64
  auto m = message_of<InvalidArgument>([&] { inspect_image(bytes(elf)); });
  EXPECT_NE(m.find("machine 62 is not a CUDA cubin"), std::string::npos) << m;
}

// Inputs the fuzzer found (tests/fuzz/corpus/module_image keeps them too).
TEST(ModuleImage, RefusesAPtxTargetWithAnArchitectureNumberTooLongForAnInt) {
  std::string ptx = ".version 8.0\n.target sm_4294967386\n";
  std::vector<unsigned char> text(ptx.begin(), ptx.end());
  auto m = message_of<InvalidArgument>([&] { inspect_image(bytes(text)); });
  EXPECT_NE(m.find("'.target sm_4294967386': no GPU architecture has a number of 10 digits"), std::string::npos) << m;
  std::string huge = ".version 8.0\n.target compute_" + std::string(5000, '9');
  std::vector<unsigned char> long_text(huge.begin(), huge.end());
  m = message_of<InvalidArgument>([&] { inspect_image(bytes(long_text)); });
  EXPECT_NE(m.find("compute_999999999999999999999999...'"), std::string::npos) << m;
  std::string four = ".version 8.0\n.target sm_1000\n";
  EXPECT_EQ(inspect_image(bytes(std::vector<unsigned char>(four.begin(), four.end()))).ptx, std::vector<int>{1000});
}

TEST(ModuleImage, RefusesAnElfHeaderTableWhoseOffsetWrapsAround) {
  auto cubin = fake::cubin_image(0, 90);
  cubin.resize(64);
  std::memset(cubin.data() + 56, 0, 2);  // no program headers
  std::memset(cubin.data() + 60, 0, 2);  // no section headers
  const std::uint64_t near_end = ~std::uint64_t{0} - 15;  // 2^64 - 16: offset + 56 wraps to 40
  for (std::size_t table : {32u, 40u}) {  // e_phoff, then e_shoff
    auto image = cubin;
    std::memcpy(image.data() + table, &near_end, sizeof near_end);
    const std::uint16_t entry = 56, one = 1;
    std::memcpy(image.data() + (table == 32 ? 54 : 58), &entry, 2);
    std::memcpy(image.data() + (table == 32 ? 56 : 60), &one, 2);
    auto m = message_of<InvalidArgument>([&] { inspect_image(bytes(image)); });
    EXPECT_NE(m.find("header table (1 entries of 56 bytes at byte 18446744073709551600) does not lie within its 64 "
                     "bytes"),
              std::string::npos)
        << m;
  }
}

TEST(ModuleImage, RefusesAFatbinEntryNamingAnArchitectureNoGpuHas) {
  auto fat = fake::fatbin_image(0, {90}, {});
  const std::uint32_t huge = 83886170;  // read as an int, arithmetic on it could overflow
  std::memcpy(fat.data() + 16 + 28, &huge, sizeof huge);  // the first entry's architecture
  auto m = message_of<InvalidArgument>([&] { inspect_image(bytes(fat)); });
  EXPECT_NE(m.find("malformed fatbin: the entry at byte 16 names architecture 83886170, which no GPU has"),
            std::string::npos)
      << m;
}

TEST(JitPolicy, MachineCodeForTheGpuRunsNative) {
  auto c = inspect_image(bytes(fake::fatbin_image(0, {90}, {90})));
  auto choice = choose_code(c, hopper, JitPolicy::refuse, "image");
  EXPECT_EQ(choice.kind, CodeKind::native);
  EXPECT_EQ(choice.arch, 90);
}

TEST(JitPolicy, MachineCodeRunsOnNewerMinorVersionsOfItsMajorOnly) {
  auto sm80 = inspect_image(bytes(fake::cubin_image(0, 80)));
  EXPECT_EQ(choose_code(sm80, ampere86, JitPolicy::refuse, "image").kind, CodeKind::native);
  auto m = message_of<InvalidArgument>([&] { choose_code(sm80, hopper, JitPolicy::allow, "module image 'k.cubin'"); });
  EXPECT_NE(m.find("module image 'k.cubin' (cubin with machine code for sm_80) has nothing a GPU of sm_90"),
            std::string::npos)
      << m;
  auto sm86 = inspect_image(bytes(fake::cubin_image(0, 86)));
  EXPECT_THROW(choose_code(sm86, ampere, JitPolicy::allow, "image"), InvalidArgument) << "8.6 code does not run on 8.0";
}

TEST(JitPolicy, PicksTheNewestCompatibleMachineCode) {
  auto c = inspect_image(bytes(fake::fatbin_image(0, {80, 86, 90}, {})));
  EXPECT_EQ(choose_code(c, ampere86, JitPolicy::refuse, "image").arch, 86);
}

TEST(JitPolicy, FatbinWithoutMachineCodeForTheGpuFallsBackToPtxWhenAllowed) {
  auto c = inspect_image(bytes(fake::fatbin_image(0, {80}, {80})));
  auto choice = choose_code(c, hopper, JitPolicy::allow, "image");
  EXPECT_EQ(choice.kind, CodeKind::jit);
  EXPECT_EQ(choice.arch, 80);
}

TEST(JitPolicy, RefusePolicyNamesTheArchitecturesTheFatbinHas) {
  auto c = inspect_image(bytes(fake::fatbin_image(0, {80, 86}, {80})));
  auto m = message_of<InvalidArgument>([&] { choose_code(c, hopper, JitPolicy::refuse, "module image from memory"); });
  EXPECT_NE(m.find("fatbin with machine code for sm_80, sm_86 and PTX for compute_80"), std::string::npos) << m;
  EXPECT_NE(m.find("no machine code for a GPU of sm_90"), std::string::npos) << m;
  EXPECT_NE(m.find("JitPolicy::refuse"), std::string::npos) << m;
}

TEST(JitPolicy, PtxRunsOnlyOnGpusAtLeastAsNewAsItsTarget) {
  auto ptx90 = inspect_image(bytes(fake::ptx_image(0, 90)));
  EXPECT_EQ(choose_code(ptx90, blackwell, JitPolicy::allow, "image").kind, CodeKind::jit);
  EXPECT_EQ(choose_code(ptx90, hopper, JitPolicy::allow, "image").kind, CodeKind::jit);
  EXPECT_THROW(choose_code(ptx90, ampere, JitPolicy::allow, "image"), InvalidArgument);
  EXPECT_THROW(choose_code(ptx90, hopper, JitPolicy::refuse, "image"), InvalidArgument) << "PTX always means JIT";
}

TEST(JitPolicy, ForcedPtxJitIsFollowed) {
  auto c = inspect_image(bytes(fake::fatbin_image(0, {90}, {90})));
  ::setenv("CUDA_FORCE_PTX_JIT", "1", 1);
  auto choice = choose_code(c, hopper, JitPolicy::allow, "image");
  ::unsetenv("CUDA_FORCE_PTX_JIT");
  EXPECT_EQ(choice.kind, CodeKind::jit);
}

#ifdef CUDAKIT_HAVE_TEST_KERNELS
std::vector<int> listed(std::span<const int> archs) { return {archs.begin(), archs.end()}; }

// The images nvcc built for the tests: the fatbin has machine code for every architecture
// of the build (CUDAKIT_KERNEL_ARCHS) and PTX for the first of each generation and the
// newest; the cubin is one architecture; the PTX image targets the oldest.
TEST(ModuleImage, ReadsTheImagesNvccBuilt) {
  auto fat = inspect_image(std::as_bytes(cudakit_kernels::test_fatbin()));
  EXPECT_EQ(fat.format, ImageFormat::fatbin);
  EXPECT_EQ(fat.machine_code, listed(cudakit_kernels::test_machine_code_architectures));
  EXPECT_EQ(fat.ptx, listed(cudakit_kernels::test_ptx_architectures));

  auto cubin = inspect_image(std::as_bytes(cudakit_kernels::test_cubin()));
  EXPECT_EQ(cubin.format, ImageFormat::cubin);
  EXPECT_EQ(cubin.machine_code, std::vector<int>{cudakit_kernels::test_cubin_architecture});

  auto ptx = inspect_image(std::as_bytes(cudakit_kernels::test_ptx()));
  EXPECT_EQ(ptx.format, ImageFormat::ptx);
  EXPECT_EQ(ptx.ptx, std::vector<int>{cudakit_kernels::test_ptx_image_architecture});
}

// Every GPU the build lists runs its own machine code from the fatbin, with JIT refused.
TEST(ModuleImage, EveryListedArchitectureRunsNativeCodeFromTheFatbin) {
  auto fat = inspect_image(std::as_bytes(cudakit_kernels::test_fatbin()));
  for (int arch : cudakit_kernels::test_machine_code_architectures) {
    ComputeCapability gpu{arch / 10, arch % 10};
    CodeChoice choice = choose_code(fat, gpu, JitPolicy::refuse, "fatbin");
    EXPECT_EQ(choice.kind, CodeKind::native) << gpu.arch();
    EXPECT_EQ(choice.arch, arch) << gpu.arch();
  }
}
#endif

}  // namespace
}  // namespace cudakit
