// The cuBLAS loader (cublas_api.hpp): where it looks (CUDA 13 before 12, the toolkit, the
// pip wheels' two layouts, the environment variables), what a missing library says, and
// the toolkit's real libraries resolving every entry cudakit calls.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include "cudakit/blas_library.hpp"
#include "cudakit/driver.hpp"
#include "driver/driver_testing.hpp"
#include "libraries/cublas_api.hpp"

namespace cudakit {
namespace {

namespace fs = std::filesystem;

// Sets environment variables for one test and restores them, with the loader reset.
class BlasLoaderTest : public ::testing::Test {
 protected:
  void set(const char* name, const std::string& value) {
    if (const char* old = std::getenv(name)) saved_.emplace_back(name, old);
    else saved_.emplace_back(name, std::nullopt);
    setenv(name, value.c_str(), 1);
    cublas::testing::reset();
  }
  void TearDown() override {
    for (auto it = saved_.rbegin(); it != saved_.rend(); ++it) {
      if (it->second) setenv(it->first.c_str(), it->second->c_str(), 1);
      else unsetenv(it->first.c_str());
    }
    cublas::testing::reset();
    driver::testing::reset();
  }
  static bool listed(const std::vector<std::pair<std::string, std::string>>& order, const std::string& lt,
                     const std::string& blas) {
    for (const auto& [l, b] : order)
      if (l == lt && b == blas) return true;
    return false;
  }

 private:
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

TEST_F(BlasLoaderTest, CudaThirteenComesBeforeTwelveAndOnlyOnADriverForIt) {
  auto order = cublas::testing::search_order(true);
  ASSERT_GE(order.size(), 4u);
  EXPECT_EQ(order[0].second, "libcublas.so.13");
  EXPECT_EQ(order[0].first, "libcublasLt.so.13") << "cuBLASLt first, from the same place";
  EXPECT_TRUE(listed(order, "/usr/local/cuda/lib64/libcublasLt.so.13", "/usr/local/cuda/lib64/libcublas.so.13"));
  EXPECT_TRUE(listed(order, "libcublasLt.so.12", "libcublas.so.12"));
  for (const auto& [lt, blas] : cublas::testing::search_order(false))
    EXPECT_EQ(blas.find(".so.13"), std::string::npos) << blas << " on a CUDA 12 driver";
}

TEST_F(BlasLoaderTest, ThePipWheelsOfAPythonOnPathAreSearchedInBothLayouts) {
  fs::path root = fs::temp_directory_path() / ("cudakit_wheels_" + std::to_string(getpid()));
  fs::path site = root / "lib" / "python3.12" / "site-packages";
  fs::create_directories(root / "bin");
  fs::create_directories(site / "nvidia" / "cu13" / "lib");
  fs::create_directories(site / "nvidia" / "cublas" / "lib");
  std::ofstream(root / "bin" / "python3").close();
  std::ofstream(site / "nvidia" / "cu13" / "lib" / "libcublas.so.13").close();
  std::ofstream(site / "nvidia" / "cublas" / "lib" / "libcublas.so.12").close();
  set("PATH", (root / "bin").string() + ":" + std::getenv("PATH"));
  auto order = cublas::testing::search_order(true);
  const std::string cu13 = (site / "nvidia" / "cu13" / "lib").string(), cu12 = (site / "nvidia" / "cublas" / "lib").string();
  EXPECT_TRUE(listed(order, cu13 + "/libcublasLt.so.13", cu13 + "/libcublas.so.13")) << "CUDA 13's wheel";
  EXPECT_TRUE(listed(order, cu12 + "/libcublasLt.so.12", cu12 + "/libcublas.so.12")) << "CUDA 12's wheel";
  fs::remove_all(root);
}

TEST_F(BlasLoaderTest, TheEnvironmentVariablesNameTheFilesAlone) {
  set("CUDAKIT_LIBCUBLAS", "/opt/x/libcublas.so.12");
  auto order = cublas::testing::search_order(true);
  ASSERT_EQ(order.size(), 1u);
  EXPECT_EQ(order[0].second, "/opt/x/libcublas.so.12");
  EXPECT_EQ(order[0].first, "/opt/x/libcublasLt.so.12") << "cuBLASLt from the same folder";
  set("CUDAKIT_LIBCUBLASLT", "/opt/y/libcublasLt.so");
  order = cublas::testing::search_order(true);
  ASSERT_EQ(order.size(), 1u);
  EXPECT_EQ(order[0].first, "/opt/y/libcublasLt.so");
}

TEST_F(BlasLoaderTest, AMissingLibraryIsFeatureUnavailableNamingEveryFileTried) {
  set("CUDAKIT_LIBCUBLAS", "/nonexistent/libcublas.so.13");
  EXPECT_FALSE(blas_available());
  try {
    (void)blas_library();
    FAIL() << "loaded a library that does not exist";
  } catch (const FeatureUnavailable& e) {
    std::string m = e.what();
    for (const char* part : {"cuBLAS is not available", "/nonexistent/libcublasLt.so.13",
                             "/nonexistent/libcublas.so.13: not tried", "CUDAKIT_LIBCUBLAS", "pip install nvidia-cublas"})
      EXPECT_NE(m.find(part), std::string::npos) << part << " in: " << m;
  }
  EXPECT_THROW((void)blas_library(), FeatureUnavailable) << "the failure is remembered";
}

TEST_F(BlasLoaderTest, TheToolkitsLibrariesResolveEveryEntryCudakitCalls) {
  const std::string blas = "/usr/local/cuda/lib64/libcublas.so.13";
  if (access(blas.c_str(), R_OK) != 0) GTEST_SKIP() << "no " << blas << " on this machine";
  set("CUDAKIT_LIBCUBLAS", blas);
  BlasLibrary lib = blas_library();  // throws FeatureUnavailable naming a missing entry
  EXPECT_NE(lib.path.find("libcublas.so.13"), std::string::npos) << lib.path;
  EXPECT_NE(lib.lt_path.find("libcublasLt.so.13"), std::string::npos) << lib.lt_path;
  EXPECT_EQ(lib.version.rfind("13.", 0), 0u) << lib.version;
}

}  // namespace
}  // namespace cudakit
