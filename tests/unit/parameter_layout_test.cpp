// Kernel parameter layouts read from images (launch/parameter_layout.hpp): what nvcc's
// own images state, what cudakit does with a stated layout (no cuFuncGetParamInfo call at
// all), and that without one it never asks the driver past the declared parameters (the
// failed call compute-sanitizer reports in a correct program).
#include <gtest/gtest.h>

#include <span>
#include <vector>

#include "cudakit/launch.hpp"
#include "cudakit/library.hpp"
#include "cudakit/module.hpp"
#include "fake_fixture.hpp"
#include "fake_kernels.hpp"
#include "launch/parameter_layout.hpp"

#ifdef CUDAKIT_HAVE_TEST_KERNELS
#include "test_kernels.hpp"
#endif

namespace cudakit {
namespace {

using driver::EntryId;
using testing::message_of;
using testing::SaxpySig;
using Layout = std::vector<ParameterInfo>;

std::span<const std::byte> bytes(const std::vector<unsigned char>& v) { return std::as_bytes(std::span(v)); }

#ifdef CUDAKIT_HAVE_TEST_KERNELS
// saxpy(float a, const float* x, float* y, int n), as the C++ ABI lays it out.
const Layout saxpy_layout = {{0, 4}, {8, 8}, {16, 8}, {24, 4}};

TEST(ParameterLayout, TheCubinNvccBuiltStatesEveryKernelsParameters) {
  auto layouts = detail::read_parameter_layouts(std::as_bytes(cudakit_kernels::test_cubin()));
  EXPECT_EQ(layouts.at("saxpy"), saxpy_layout);
  EXPECT_EQ(layouts.at("empty_kernel"), Layout{}) << "a kernel without parameters is known to have none";
  // (const float*, float*, int, int, float, float, long long, long long)
  EXPECT_EQ(layouts.at("empty_kernel_8"),
            (Layout{{0, 8}, {8, 8}, {16, 4}, {20, 4}, {24, 4}, {28, 4}, {32, 8}, {40, 8}}));
  EXPECT_EQ(layouts.at("spin_kernel"), (Layout{{0, 8}}));
  // Template instances under their mangled names: fill_value<float>(float*, float, int).
  EXPECT_EQ(layouts.at("_Z10fill_valueIfEvPT_S0_i"), (Layout{{0, 8}, {8, 4}, {12, 4}}));
}

TEST(ParameterLayout, TheFatbinNvccBuiltStatesTheSameAsItsCubin) {
  auto from_fatbin = detail::read_parameter_layouts(std::as_bytes(cudakit_kernels::test_fatbin()));
  auto from_cubin = detail::read_parameter_layouts(std::as_bytes(cudakit_kernels::test_cubin()));
  EXPECT_FALSE(from_fatbin.empty()) << "nvcc stores a fatbin's cubins uncompressed";
  EXPECT_EQ(from_fatbin, from_cubin);
}

TEST(ParameterLayout, PtxStatesNoLayout) {
  EXPECT_TRUE(detail::read_parameter_layouts(std::as_bytes(cudakit_kernels::test_ptx())).empty());
}

TEST(ParameterLayout, ATruncatedImageIsReadAsFarAsItGoesAndNeverThrows) {
  for (auto image : {cudakit_kernels::test_cubin(), cudakit_kernels::test_fatbin()}) {
    for (std::size_t cut = 0; cut < image.size(); cut += 97) {
      auto layouts = detail::read_parameter_layouts(std::as_bytes(image.first(cut)));
      if (auto it = layouts.find("saxpy"); it != layouts.end()) EXPECT_EQ(it->second, saxpy_layout) << cut;
    }
  }
}
#endif  // CUDAKIT_HAVE_TEST_KERNELS

TEST(ParameterLayout, BytesThatAreNoImageStateNothing) {
  std::vector<unsigned char> garbage(300, 0xab);
  EXPECT_TRUE(detail::read_parameter_layouts(bytes(garbage)).empty());
  std::vector<unsigned char> elf_header_only = {0x7f, 'E', 'L', 'F'};
  EXPECT_TRUE(detail::read_parameter_layouts(bytes(elf_header_only)).empty());
  EXPECT_TRUE(detail::read_parameter_layouts({}).empty());
}

class ParameterLayoutTest : public testing::FakeDriverTest {
 protected:
  Device dev() { return Device::get(0); }
  int param_info_calls() { return fake().calls(EntryId::FuncGetParamInfo); }
};

TEST_F(ParameterLayoutTest, TheFakesCubinStatesItsKernelsLayoutsLikeNvccs) {
  auto layouts = detail::read_parameter_layouts(bytes(fake::cubin_image_with_parameter_info(testing::standard_image())));
  EXPECT_EQ(layouts.at("saxpy"), (Layout{{0, 4}, {8, 8}, {16, 8}, {24, 4}}));
  EXPECT_EQ(layouts.at("empty"), Layout{});
  // mixed(char, double, short, float*, int, long long)
  EXPECT_EQ(layouts.at("mixed"), (Layout{{0, 1}, {8, 8}, {16, 2}, {24, 8}, {32, 4}, {40, 8}}));
}

TEST_F(ParameterLayoutTest, CutOrCorruptedRecordsAreSkippedNeverReadPastTheirEnd) {
  // Every cut of a cubin and of a fatbin holding it, and every byte of the cubin replaced
  // in turn: what is read is either right or left out (run under AddressSanitizer in CI).
  const int id = testing::standard_image();
  const Layout saxpy = {{0, 4}, {8, 8}, {16, 8}, {24, 4}};
  for (const auto& image : {fake::cubin_image_with_parameter_info(id), fake::fatbin_image(id, {90}, {}, true)}) {
    for (std::size_t cut = 0; cut <= image.size(); ++cut) {
      std::vector<unsigned char> part(image.begin(), image.begin() + static_cast<std::ptrdiff_t>(cut));
      auto layouts = detail::read_parameter_layouts(bytes(part));
      if (auto it = layouts.find("saxpy"); it != layouts.end()) EXPECT_EQ(it->second, saxpy) << cut;
    }
  }
  std::vector<unsigned char> cubin = fake::cubin_image_with_parameter_info(id);
  for (std::size_t at = 0; at < cubin.size(); ++at) {
    std::vector<unsigned char> changed = cubin;
    changed[at] ^= 0xff;
    (void)detail::read_parameter_layouts(bytes(changed));
  }
}

TEST_F(ParameterLayoutTest, AStatedLayoutChecksTypedLookupsAndUntypedLaunchesWithoutTheDriver) {
  const int id = testing::standard_image();
  Module m = Module::load(dev(), fake::cubin_image_with_parameter_info(id));
  Stream s(dev());
  DeviceBuffer<float> x(s, 4, zeroed), y(s, 4, zeroed);
  launch(s, m.kernel<SaxpySig>("saxpy"), {1, 4}, 2.0f, x, y, 4);
  launch(s, m.function("fill"), {1, 4}, y, 1.0f, 4);
  EXPECT_EQ(m.function("mixed").parameters().size(), 6u);
  EXPECT_THROW(m.kernel<void(float, const float*, float*)>("saxpy"), InvalidArgument);
  EXPECT_EQ(param_info_calls(), 0);
  s.synchronize();
}

TEST_F(ParameterLayoutTest, ALibraryUsesTheLayoutItsFatbinStates) {
  Library lib = Library::load(fake::fatbin_image(testing::standard_image(), {90}, {90}, true));
  auto saxpy = lib.kernel<SaxpySig>(dev(), "saxpy");
  EXPECT_EQ(saxpy.parameters().size(), 4u);
  EXPECT_THROW(lib.kernel<void(float, const float*)>(dev(), "saxpy"), InvalidArgument);
  EXPECT_EQ(param_info_calls(), 0);
}

TEST_F(ParameterLayoutTest, WithoutAStatedLayoutATypedLookupAsksOnlyForTheDeclaredParameters) {
  Module m = Module::load(dev(), fake::cubin_image(testing::standard_image()));
  (void)m.kernel<SaxpySig>("saxpy");
  EXPECT_EQ(param_info_calls(), 4) << "indices 0 to 3 of 4: never one past the last";
  (void)m.kernel<void()>("empty");
  EXPECT_EQ(param_info_calls(), 4) << "no parameter declared, none asked for";
}

TEST_F(ParameterLayoutTest, WithoutAStatedLayoutASignatureDeclaringTooManyIsStillRefused) {
  Module m = Module::load(dev(), fake::cubin_image(testing::standard_image()));
  auto msg = message_of<InvalidArgument>([&] { (void)m.kernel<void(float*, float, int, int)>("fill"); });
  EXPECT_NE(msg.find("the kernel takes 3 parameters (8, 4, 4 bytes), the signature declares 4"), std::string::npos)
      << msg;
}

class OldDriverParameterLayoutTest : public ParameterLayoutTest {
  void configure(fake::Driver& d) override {
    d.driver_version = 12020;
    d.missing = {EntryId::FuncGetParamInfo};
  }
};

TEST_F(OldDriverParameterLayoutTest, AStatedLayoutChecksUntypedLaunchesOnDriversWithoutParameterInfo) {
  Module m = Module::load(dev(), fake::cubin_image_with_parameter_info(testing::standard_image()));
  Stream s(dev());
  DeviceBuffer<float> y(s, 4, zeroed);
  launch(s, m.function("fill"), {1, 4}, y, 1.0f, 4);
  auto msg = message_of<InvalidArgument>([&] { launch(s, m.function("fill"), {1, 4}, y, 1.0f); });
  EXPECT_NE(msg.find("the kernel takes 3 parameters"), std::string::npos) << msg;
  EXPECT_THROW(m.kernel<void(float*, float)>("fill"), InvalidArgument);
  s.synchronize();
}

}  // namespace
}  // namespace cudakit
