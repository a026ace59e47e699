// NVRTC for real, without a GPU: cubin and PTX for sm_90, compile errors
// with their log, name expressions of a template kernel, headers and defines, the on-disk
// cache, and the error when libnvrtc is missing. Tests skip where no libnvrtc is installed
// (the GPU machine may run the unit tests without the toolkit).
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "cudakit/launch.hpp"
#include "cudakit/module.hpp"
#include "cudakit/module_image.hpp"
#include "cudakit/program.hpp"
#include "fake_fixture.hpp"
#include "fake_modules.hpp"
#include "nvrtc_present.hpp"
#include "driver/nvrtc.hpp"

namespace cudakit {
namespace {

using testing::message_of;

constexpr const char* saxpy_source = R"(
extern "C" __global__ void saxpy(float a, const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
)";

constexpr const char* template_source = R"(
template <typename T>
__global__ void fill_value(T* out, T value, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = value;
}
)";

struct TempDir {
  std::filesystem::path path = std::filesystem::temp_directory_path() /
                               ("cudakit_program_test_" + std::to_string(::getpid()) + "_" +
                                std::to_string(reinterpret_cast<std::uintptr_t>(this)));
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  std::size_t files() const {
    std::size_t n = 0;
    std::error_code ec;
    for (auto it = std::filesystem::directory_iterator(path, ec); !ec && it != std::filesystem::directory_iterator(); ++it) ++n;
    return n;
  }
};

TEST(Program, CompilesToCubinForSm90) {
  SKIP_WITHOUT_NVRTC();
  CompiledProgram out = Program(saxpy_source, "saxpy.cu").compile({.arch = "sm_90", .use_cache = false});
  EXPECT_EQ(out.output(), ProgramOutput::cubin);
  EXPECT_EQ(out.arch(), "sm_90");
  EXPECT_EQ(out.name(), "saxpy.cu");
  EXPECT_FALSE(out.from_cache());
  auto contents = inspect_image(std::as_bytes(out.image()));
  EXPECT_EQ(contents.format, ImageFormat::cubin);
  EXPECT_EQ(contents.machine_code, std::vector<int>{90});
}

TEST(Program, CompilesToPtxOnRequest) {
  SKIP_WITHOUT_NVRTC();
  CompiledProgram out =
      Program(saxpy_source, "saxpy.cu").compile({.arch = "sm_90", .output = ProgramOutput::ptx, .use_cache = false});
  EXPECT_EQ(out.arch(), "compute_90");
  ASSERT_FALSE(out.image().empty());
  EXPECT_EQ(out.image().back(), 0) << "PTX comes with its NUL";
  auto contents = inspect_image(std::as_bytes(out.image()));
  EXPECT_EQ(contents.format, ImageFormat::ptx);
  EXPECT_EQ(contents.ptx, std::vector<int>{90});
  std::string text(reinterpret_cast<const char*>(out.image().data()));
  EXPECT_NE(text.find(".entry saxpy"), std::string::npos);
}

TEST(Program, CompileErrorCarriesNvrtcsCompleteLog) {
  SKIP_WITHOUT_NVRTC();
  const char* broken = "extern \"C\" __global__ void k(float* y) {\n  y[0] = undefined_thing;\n  y[1] = also_missing;\n}\n";
  try {
    Program(broken, "broken.cu").compile({.arch = "sm_90", .use_cache = false});
    FAIL() << "compiled";
  } catch (const CompileError& e) {
    EXPECT_NE(e.log().find("broken.cu(2)"), std::string::npos) << e.log();
    EXPECT_NE(e.log().find("undefined_thing"), std::string::npos) << e.log();
    EXPECT_NE(e.log().find("also_missing"), std::string::npos) << "the complete log: " << e.log();
    std::string w = e.what();
    EXPECT_NE(w.find("compiling program 'broken.cu' for sm_90 failed (NVRTC_ERROR_COMPILATION"), std::string::npos) << w;
    EXPECT_NE(w.find("undefined_thing"), std::string::npos) << w;
  }
}

TEST(Program, NameExpressionsResolveTemplateKernels) {
  SKIP_WITHOUT_NVRTC();
  Program p(template_source, "fill.cu");
  p.name_expression("fill_value<float>").name_expression("fill_value<int>");
  CompiledProgram out = p.compile({.arch = "sm_90", .use_cache = false});
  EXPECT_EQ(out.lowered_name("fill_value<float>"), "_Z10fill_valueIfEvPT_S0_i");
  EXPECT_EQ(out.lowered_name("fill_value<int>"), "_Z10fill_valueIiEvPT_S0_i");
  auto m = message_of<InvalidArgument>([&] { out.lowered_name("fill_value<double>"); });
  EXPECT_NE(m.find("has no name expression 'fill_value<double>'; it has: fill_value<float>, fill_value<int>"),
            std::string::npos)
      << m;
}

TEST(Program, HeadersDefinesAndFlags) {
  SKIP_WITHOUT_NVRTC();
  const char* source = R"(
#include "scale.cuh"
#ifndef OFFSET
#error OFFSET is not defined
#endif
extern "C" __global__ void k(float* y) { y[0] = SCALE * y[0] + OFFSET; }
)";
  Program p(source, "k.cu");
  p.header("scale.cuh", "#define SCALE 3.0f\n");
  CompiledProgram out = p.compile({.arch = "sm_90", .defines = {"OFFSET=1.0f"}, .flags = {"-lineinfo"}, .use_cache = false});
  EXPECT_FALSE(out.image().empty());
  auto m = message_of<CompileError>([&] { p.compile({.arch = "sm_90", .use_cache = false}); });
  EXPECT_NE(m.find("OFFSET is not defined"), std::string::npos) << m;
  auto missing = message_of<CompileError>([&] { Program(source, "k.cu").compile({.arch = "sm_90", .use_cache = false}); });
  EXPECT_NE(missing.find("scale.cuh"), std::string::npos) << missing;
}

TEST(Program, ArchitectureErrors) {
  SKIP_WITHOUT_NVRTC();
  Program p(saxpy_source);
  EXPECT_NE(message_of<InvalidArgument>([&] { p.compile({}); }).find("CompileOptions::arch is empty"), std::string::npos);
  EXPECT_NE(message_of<InvalidArgument>([&] { p.compile({.arch = "gfx90a"}); }).find("'gfx90a' is not a GPU architecture"),
            std::string::npos);
  auto m = message_of<InvalidArgument>([&] { p.compile({.arch = "sm_20"}); });
  EXPECT_NE(m.find("cannot compile for sm_20; it compiles for"), std::string::npos) << m;
  auto archs = nvrtc_architectures();
  EXPECT_NE(std::find(archs.begin(), archs.end(), 90), archs.end());
}

TEST(Program, SecondCompileComesFromTheCache) {
  SKIP_WITHOUT_NVRTC();
  TempDir dir;
  Program p(template_source, "fill.cu");
  p.name_expression("fill_value<float>");
  CompileOptions o{.arch = "sm_90", .cache_directory = dir.path};
  CompiledProgram first = p.compile(o);
  EXPECT_FALSE(first.from_cache());
  EXPECT_EQ(dir.files(), 1u) << "one entry, no temporary left behind";
  CompiledProgram second = p.compile(o);
  EXPECT_TRUE(second.from_cache());
  EXPECT_TRUE(std::equal(first.image().begin(), first.image().end(), second.image().begin(), second.image().end()));
  EXPECT_EQ(second.lowered_name("fill_value<float>"), "_Z10fill_valueIfEvPT_S0_i");
  EXPECT_EQ(second.log(), first.log());

  // Anything that changes the output is part of the key.
  CompileOptions other = o;
  other.defines = {"UNUSED=1"};
  EXPECT_FALSE(p.compile(other).from_cache());
  other = o;
  other.output = ProgramOutput::ptx;
  EXPECT_FALSE(p.compile(other).from_cache());
  Program with_header = p;
  with_header.header("x.cuh", "// nothing");
  EXPECT_FALSE(with_header.compile(o).from_cache());
  EXPECT_EQ(dir.files(), 4u);
  other = o;
  other.use_cache = false;
  EXPECT_FALSE(p.compile(other).from_cache());
}

TEST(Program, CacheDirectoryComesFromTheEnvironment) {
  SKIP_WITHOUT_NVRTC();
  TempDir dir;
  ::setenv("CUDAKIT_CACHE_DIR", dir.path.c_str(), 1);
  Program p(saxpy_source, "saxpy.cu");
  bool first = p.compile({.arch = "sm_90"}).from_cache();
  bool second = p.compile({.arch = "sm_90"}).from_cache();
  ::unsetenv("CUDAKIT_CACHE_DIR");
  EXPECT_FALSE(first);
  EXPECT_TRUE(second);
  EXPECT_EQ(dir.files(), 1u);
}

TEST(Program, CorruptCacheEntryIsCompiledAgain) {
  SKIP_WITHOUT_NVRTC();
  TempDir dir;
  Program p(saxpy_source, "saxpy.cu");
  CompileOptions o{.arch = "sm_90", .cache_directory = dir.path};
  CompiledProgram good = p.compile(o);
  for (const auto& e : std::filesystem::directory_iterator(dir.path)) {
    std::ofstream(e.path(), std::ios::binary | std::ios::trunc) << "CUDAKIT-NVRTC-CACHE-1\ntruncated";
  }
  CompiledProgram again = p.compile(o);
  EXPECT_FALSE(again.from_cache());
  EXPECT_TRUE(std::equal(good.image().begin(), good.image().end(), again.image().begin(), again.image().end()));
  EXPECT_TRUE(p.compile(o).from_cache()) << "the entry was written again";
}

TEST(Program, ACacheEntryOthersMayWriteOrALinkIsCompiledAgain) {
  SKIP_WITHOUT_NVRTC();
  TempDir dir;
  Program p(saxpy_source, "saxpy.cu");
  CompileOptions o{.arch = "sm_90", .cache_directory = dir.path};
  CompiledProgram good = p.compile(o);
  ASSERT_TRUE(p.compile(o).from_cache());
  std::filesystem::path entry = std::filesystem::directory_iterator(dir.path)->path();
  // Writable by others: anyone could have put their code there.
  ::chmod(entry.c_str(), 0666);
  EXPECT_FALSE(p.compile(o).from_cache());
  ::chmod(entry.c_str(), 0644);
  ASSERT_TRUE(p.compile(o).from_cache());
  // A symbolic link in the entry's place, to a valid entry elsewhere.
  std::filesystem::path elsewhere = entry;
  elsewhere += ".elsewhere";
  std::filesystem::rename(entry, elsewhere);
  std::filesystem::create_symlink(elsewhere, entry);
  CompiledProgram again = p.compile(o);
  EXPECT_FALSE(again.from_cache());
  EXPECT_TRUE(std::equal(good.image().begin(), good.image().end(), again.image().begin(), again.image().end()));
}

TEST(Program, MissingNvrtcIsAClearError) {
  ::setenv("CUDAKIT_LIBNVRTC", "/nonexistent/libnvrtc.so.13", 1);
  nvrtc::reset_for_testing();
  auto m = message_of<CompilerUnavailable>([] { Program(saxpy_source).compile({.arch = "sm_90"}); });
  ::unsetenv("CUDAKIT_LIBNVRTC");
  nvrtc::reset_for_testing();
  EXPECT_NE(m.find("NVRTC (runtime compilation) is not available"), std::string::npos) << m;
  EXPECT_NE(m.find("/nonexistent/libnvrtc.so.13"), std::string::npos) << m;
  EXPECT_NE(m.find("CUDAKIT_LIBNVRTC"), std::string::npos) << m;
}

// ---- with the fake driver: the architecture of a Device, and a module from NVRTC's output ----

class ProgramOnFakeTest : public testing::FakeDriverTest {};

TEST_F(ProgramOnFakeTest, CompilesForTheDevicesArchitecture) {
  SKIP_WITHOUT_NVRTC();
  CompiledProgram out = Program(saxpy_source).compile(Device::get(0), {.use_cache = false});
  EXPECT_EQ(out.arch(), "sm_90");
}

TEST_F(ProgramOnFakeTest, ModuleFromAProgramFindsKernelsByNameExpression) {
  SKIP_WITHOUT_NVRTC();
  // The fake finds its image by a marker the cubin carries as data.
  fake::FakeImage image;
  image.kernels = {{"_Z10fill_valueIfEvPT_S0_i", fake::params<float*, float, int>(), [](const fake::FakeLaunch& l) {
                      auto* out = l.param<float*>(0);
                      l.write(out, l.param<int>(2) * sizeof(float));
                      for (int i = 0; i < l.param<int>(2); ++i) out[i] = l.param<float>(1);
                    }}};
  int id = fake::add_image(image);
  std::string source = std::string("extern \"C\" __device__ const char fake_marker[] = \"cudakit-fake-module:") +
                       std::to_string(id) + ";\";\n" + template_source;
  Program p(source, "fill.cu");
  p.name_expression("fill_value<float>");
  CompiledProgram out = p.compile(Device::get(0), {.use_cache = false});
  Module m = Module::load(Device::get(0), out);
  EXPECT_EQ(m.report().source, "program 'fill.cu'");
  EXPECT_FALSE(m.jit_compiled());
  auto fill = m.kernel<void(float*, float, int)>("fill_value<float>");
  EXPECT_EQ(fill.name(), "_Z10fill_valueIfEvPT_S0_i");
  Stream s(Device::get(0));
  DeviceBuffer<float> y(s, 8, zeroed);
  launch(s, fill, {1, 8}, y, 4.5f, 8);
  s.synchronize();
  EXPECT_EQ(y.data()[7], 4.5f);
  auto missing = message_of<InvalidArgument>([&] { m.function("fill_value<int>"); });
  EXPECT_NE(missing.find("its kernels are: _Z10fill_valueIfEvPT_S0_i (fill_value<float>)"), std::string::npos) << missing;
}

}  // namespace
}  // namespace cudakit
