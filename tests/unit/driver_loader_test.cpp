// The driver loader against a missing library, the toolkit's stub, an old driver, and a
// driver without an entry.
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

TEST_F(RealLoaderTest, LibraryWithoutCuInitIsNotADriver) {
  use_library("libm.so.6");
  try {
    driver::ensure_loaded();
    FAIL() << "libm loaded as a driver";
  } catch (const DriverUnavailable& e) {
    EXPECT_EQ(e.reason(), DriverUnavailable::Reason::not_installed);
    std::string m = e.what();
    EXPECT_NE(m.find("does not export cuInit; it is not a CUDA driver library"), std::string::npos) << m;
  }
}

// The paths that need a real driver, on a stand-in libcuda (tests/fake_libcuda).
class StandInDriverTest : public RealLoaderTest {
 protected:
  void use_mode(const char* mode) {
    setenv("CUDAKIT_FAKE_LIBCUDA_MODE", mode, 1);
    use_library(CUDAKIT_FAKE_LIBCUDA);
  }
  void TearDown() override {
    unsetenv("CUDAKIT_FAKE_LIBCUDA_MODE");
    RealLoaderTest::TearDown();
  }
  DriverUnavailable load_failure() {
    try {
      driver::ensure_loaded();
    } catch (const DriverUnavailable& e) {
      return e;
    }
    ADD_FAILURE() << "the driver loaded";
    return DriverUnavailable(DriverUnavailable::Reason::not_installed, "");
  }
};

TEST_F(StandInDriverTest, DriverWithoutADeviceIsDriverUnavailableNoDevice) {
  use_mode("no_device");
  auto e = load_failure();
  EXPECT_EQ(e.reason(), DriverUnavailable::Reason::no_device);
  std::string m = e.what();
  EXPECT_NE(m.find("no CUDA device: the driver (CUDA 12.8, "), std::string::npos) << m;
  EXPECT_NE(m.find("is installed but cuInit found no GPU (CUDA_ERROR_NO_DEVICE)"), std::string::npos) << m;
  EXPECT_THROW(Device::count(), DriverUnavailable);
}

// cuInit failing for another reason (in containers: CUDA_ERROR_OPERATING_SYSTEM,
// CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE, ...) names the code. (Naming it once
// deadlocked: the name was asked of the driver being loaded, under the loader's lock.)
TEST_F(StandInDriverTest, FailingCuInitNamesItsCode) {
  use_mode("init_failed");
  auto e = load_failure();
  EXPECT_EQ(e.reason(), DriverUnavailable::Reason::init_failed);
  std::string m = e.what();
  EXPECT_NE(m.find("cuInit failed: CUDA_ERROR_OPERATING_SYSTEM: "), std::string::npos) << m;
  EXPECT_NE(m.find("CUDA 12.8"), std::string::npos) << m;
}

TEST_F(StandInDriverTest, OldDriverIsRefusedWithBothVersions) {
  use_mode("old");
  auto e = load_failure();
  EXPECT_EQ(e.reason(), DriverUnavailable::Reason::too_old);
  std::string m = e.what();
  EXPECT_NE(m.find("is version 11.8, older than the 12.0 that cudakit needs"), std::string::npos) << m;
}

TEST_F(StandInDriverTest, EntryTheDriverLacksIsFeatureUnavailableAndHasSaysFalse) {
  use_mode("");
  EXPECT_EQ(driver::version(), 12080);
  EXPECT_FALSE(driver::has(driver::EntryId::FuncGetParamInfo));
  try {
    driver::cu.FuncGetParamInfo(nullptr, 0, nullptr, nullptr);
    FAIL() << "called an entry the driver lacks";
  } catch (const FeatureUnavailable& e) {
    std::string m = e.what();
    EXPECT_EQ(e.driver_version(), 12080);
    EXPECT_NE(m.find("cuFuncGetParamInfo, which this driver (CUDA 12.8) does not have; it came with CUDA 12.4"),
              std::string::npos)
        << m;
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
