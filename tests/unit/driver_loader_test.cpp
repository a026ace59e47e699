// The driver loader against a missing library, the toolkit's stub, an old driver, and a
// driver without an entry (issue 2, point 3).
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>

#include "cudakit/device.hpp"
#include "cudakit/driver.hpp"
#include "cudakit/error.hpp"
#include "fake_fixture.hpp"

namespace cudakit {
namespace {

using testing::message_of;

// Points the real loader at `path` for one test, and restores everything after.
class RealLoaderTest : public ::testing::Test {
 protected:
  void use_library(const char* path) {
    setenv("CUDAKIT_LIBCUDA", path, 1);
    driver::testing::reset();
  }
  void TearDown() override {
    unsetenv("CUDAKIT_LIBCUDA");
    driver::testing::reset();
  }
};

TEST_F(RealLoaderTest, MissingLibrarySaysWhatWasTriedAndThatADriverIsNeeded) {
  use_library("/nonexistent/libcuda.so.1");
  try {
    driver::ensure_loaded();
    FAIL() << "loaded a library that does not exist";
  } catch (const DriverUnavailable& e) {
    EXPECT_EQ(e.reason(), DriverUnavailable::Reason::not_installed);
    std::string m = e.what();
    EXPECT_NE(m.find("dlopen(\"/nonexistent/libcuda.so.1\")"), std::string::npos) << m;
    EXPECT_NE(m.find("NVIDIA driver"), std::string::npos) << m;
    EXPECT_NE(m.find("CUDAKIT_LIBCUDA"), std::string::npos) << m;
  }
}

TEST_F(RealLoaderTest, FailureIsRememberedAndRepeatedForEveryCall) {
  use_library("/nonexistent/libcuda.so.1");
  EXPECT_THROW(Device::count(), DriverUnavailable);
  EXPECT_THROW(driver::cu.StreamQuery(nullptr), DriverUnavailable);
}

TEST_F(RealLoaderTest, ToolkitStubIsRecognisedAndTheRealLibraryLocationNamed) {
  if (access(CUDAKIT_STUB_LIBCUDA, R_OK) != 0) GTEST_SKIP() << "no toolkit stub at " << CUDAKIT_STUB_LIBCUDA;
  use_library(CUDAKIT_STUB_LIBCUDA);
  try {
    driver::ensure_loaded();
    FAIL() << "the stub loaded as if it were a driver";
  } catch (const DriverUnavailable& e) {
    EXPECT_EQ(e.reason(), DriverUnavailable::Reason::stub_library);
    std::string m = e.what();
    EXPECT_NE(m.find("stub"), std::string::npos) << m;
    EXPECT_NE(m.find("CUDA_ERROR_STUB_LIBRARY"), std::string::npos) << m;
    EXPECT_NE(m.find("/usr/lib/x86_64-linux-gnu"), std::string::npos) << m;
  }
}

class OldDriverTest : public testing::FakeDriverTest {
  void configure(fake::Driver& d) override { d.driver_version = 11080; }
};

TEST_F(OldDriverTest, DriverOlderThan12IsRefusedWithBothVersions) {
  auto m = message_of<DriverUnavailable>([] { driver::ensure_loaded(); });
  EXPECT_NE(m.find("11.8"), std::string::npos) << m;
  EXPECT_NE(m.find("12.0"), std::string::npos) << m;
}

class Driver122Test : public testing::FakeDriverTest {
  void configure(fake::Driver& d) override {
    d.driver_version = 12020;
    d.missing = {driver::EntryId::FuncGetParamInfo, driver::EntryId::GraphConditionalHandleCreate};
  }
};

TEST_F(Driver122Test, MissingEntryNamesItselfAndTheVersionThatIntroducedIt) {
  EXPECT_FALSE(driver::has(driver::EntryId::FuncGetParamInfo));
  EXPECT_TRUE(driver::has(driver::EntryId::StreamQuery));
  try {
    driver::require(driver::EntryId::FuncGetParamInfo, "checking launch arguments");
    FAIL();
  } catch (const FeatureUnavailable& e) {
    std::string m = e.what();
    EXPECT_EQ(e.entry(), "cuFuncGetParamInfo");
    EXPECT_EQ(e.introduced_in(), 12040);
    EXPECT_NE(m.find("checking launch arguments needs cuFuncGetParamInfo"), std::string::npos) << m;
    EXPECT_NE(m.find("12.4"), std::string::npos) << m;
    EXPECT_NE(m.find("12.2"), std::string::npos) << m;
  }
}

TEST_F(Driver122Test, CallingAMissingEntryThrowsFeatureUnavailable) {
  EXPECT_THROW(driver::cu.FuncGetParamInfo(nullptr, 0, nullptr, nullptr), FeatureUnavailable);
}

class LoaderWithFakeTest : public testing::FakeDriverTest {};

TEST_F(LoaderWithFakeTest, EntriesResolveOnceAndReportTheDriverVersion) {
  EXPECT_EQ(driver::version(), 13000);
  EXPECT_EQ(driver::version_string(12040), "12.4");
  EXPECT_EQ(driver::version_string(13000), "13.0");
  EXPECT_EQ(Device::count(), 1);
  EXPECT_EQ(fake().calls(driver::EntryId::DeviceGetCount), 1);
}

TEST(DriverTable, EveryEntryIsPinnedToAnAbiNoOlderThanItsIntroduction) {
  for (const auto& e : driver::entry_infos) {
    EXPECT_GE(e.abi_version, e.introduced_in) << e.name;
    EXPECT_EQ(std::string(e.name).rfind("cu", 0), 0u) << e.name;
  }
  EXPECT_STREQ(driver::entry_info(driver::EntryId::EventElapsedTime).name, "cuEventElapsedTime");
  EXPECT_EQ(driver::entry_info(driver::EntryId::MemAlloc).abi_version, 3020);  // cuMemAlloc_v2
}

}  // namespace
}  // namespace cudakit
