// The driver's capture rules on a GPU: the scenarios of tests/scenarios/capture_rules.hpp,
// which the unit tests run on the fake driver (capture_rules_test.cpp). A failure here and
// a pass there means the fake imitates the driver wrongly.
#include "capture_rules.hpp"

#include "gpu_fixture.hpp"

namespace cudakit {
namespace {

class CaptureRulesOnTheGpu : public testing::GpuTest {
 protected:
  void run(void (*scenario)(scenarios::DriverRig&)) {
    scenarios::DriverRig rig(device());
    scenario(rig);
  }
};

#define CUDAKIT_X(name) \
  TEST_F(CaptureRulesOnTheGpu, name) { run(&scenarios::name); }
CUDAKIT_CAPTURE_RULES(CUDAKIT_X)
#undef CUDAKIT_X

}  // namespace
}  // namespace cudakit
