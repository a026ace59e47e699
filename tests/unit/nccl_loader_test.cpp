// The NCCL loader (src/libraries/nccl_api.hpp): where it looks, what it says when NCCL is
// missing or is not NCCL, and that it keeps NVLink multicast off before NCCL starts.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>

#include "cudakit/nccl_communicator.hpp"
#include "libraries/nccl_api.hpp"

namespace cudakit {
namespace {

#define EXPECT_HAS(text, part) EXPECT_NE(std::string(text).find(part), std::string::npos) << (text)

// Sets an environment variable for a scope, and the loader forgets what it found.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    setenv(name, value.c_str(), 1);
    nccl::raw::testing::reset();
  }
  ~ScopedEnv() {
    if (old_) setenv(name_, old_->c_str(), 1);
    else unsetenv(name_);
    nccl::raw::testing::reset();
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST(NcclLoader, AMissingLibraryNamesEveryPlaceTried) {
  ScopedEnv env("CUDAKIT_LIBNCCL", "/nonexistent/libnccl.so.2");
  try {
    nccl::version();
    FAIL() << "loaded a library that does not exist";
  } catch (const nccl::NcclUnavailable& e) {
    EXPECT_HAS(e.what(), "NCCL is not available: no libnccl.so.2 could be opened (the path came from CUDAKIT_LIBNCCL)");
    EXPECT_HAS(e.what(), "/nonexistent/libnccl.so.2: ");
    EXPECT_HAS(e.what(), "point CUDAKIT_LIBNCCL at libnccl.so.2");
  }
  // Remembered: the next call says the same without searching again.
  EXPECT_THROW(nccl::version(), nccl::NcclUnavailable);
}

TEST(NcclLoader, ALibraryThatIsNotNcclIsNamedWithWhatItLacks) {
  ScopedEnv env("CUDAKIT_LIBNCCL", CUDAKIT_FAKE_LIBCUDA);  // a shared library without NCCL's entries
  try {
    nccl::version();
    FAIL() << "took a library without NCCL's entries";
  } catch (const nccl::NcclUnavailable& e) {
    EXPECT_HAS(e.what(), "lacks ncclGetVersion, ncclGetErrorString");
    EXPECT_HAS(e.what(), "cudakit needs NCCL 2.18.0 or newer");
  }
}

TEST(NcclLoader, LooksInTheToolkitTheDistributionAndPipWheels) {
  auto dir = std::filesystem::temp_directory_path() / ("cudakit-venv-" + std::to_string(std::random_device{}()));
  auto lib = dir / "lib/python3.12/site-packages/nvidia/nccl/lib";
  std::filesystem::create_directories(lib);
  std::ofstream(lib / "libnccl.so.2") << "";
  {
    ScopedEnv env("VIRTUAL_ENV", dir.string());
    unsetenv("CUDAKIT_LIBNCCL");
    auto c = nccl::raw::testing::candidates();
    ASSERT_FALSE(c.empty());
    EXPECT_EQ(c.front(), "libnccl.so.2") << "the loader's own path first";
    auto has = [&](const std::string& p) { return std::find(c.begin(), c.end(), p) != c.end(); };
    EXPECT_TRUE(has("/usr/local/cuda/lib64/libnccl.so.2"));
    EXPECT_TRUE(has("/usr/lib/x86_64-linux-gnu/libnccl.so.2"));
    EXPECT_TRUE(has((lib / "libnccl.so.2").string())) << "the virtual environment's nvidia-nccl wheel";
  }
  std::filesystem::remove_all(dir);
}

TEST(NcclLoader, LoadsTheToolkitsNcclWhenThereIsOne) {
  for (const char* p : {"/usr/local/cuda/lib64/libnccl.so.2", "/usr/local/cuda/lib/libnccl.so.2"}) {
    if (!std::filesystem::exists(p)) continue;
    ScopedEnv env("CUDAKIT_LIBNCCL", p);
    EXPECT_GE(nccl::version(), nccl::raw::minimum_version);
    EXPECT_NE(nccl::library_path().find("libnccl.so"), std::string::npos);
    EXPECT_STREQ(std::getenv("NCCL_NVLS_ENABLE"), "0") << "set before NCCL was opened";
    return;
  }
  GTEST_SKIP() << "no NCCL in the toolkit here";
}

TEST(NcclLoader, VersionsReadAsNcclWritesThem) {
  EXPECT_EQ(nccl::raw::version_string(22809), "2.28.9");
  EXPECT_EQ(nccl::raw::version_string(21800), "2.18.0");
  EXPECT_EQ(nccl::raw::version_string(2708), "2.7.8");
}

}  // namespace
}  // namespace cudakit
