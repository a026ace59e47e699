// The driver's capture rules as the fake driver imitates them: the scenarios of
// tests/scenarios/capture_rules.hpp, run here on the fake and in the device suite on a GPU
// (capture_rules_device_test.cpp).
#include "capture_rules.hpp"

#include "fake_fixture.hpp"

namespace cudakit {
namespace {

class CaptureRulesOnTheFake : public testing::FakeDriverTest {
 protected:
  void run(void (*scenario)(scenarios::DriverRig&)) {
    scenarios::DriverRig rig(Device::get(0));
    scenario(rig);
  }
};

#define CUDAKIT_X(name) \
  TEST_F(CaptureRulesOnTheFake, name) { run(&scenarios::name); }
CUDAKIT_CAPTURE_RULES(CUDAKIT_X)
#undef CUDAKIT_X

}  // namespace
}  // namespace cudakit
