// Kernels loaded outside cudakit (borrowed_kernel.hpp) on the fake driver: a CUkernel of a
// library cudakit did not load, which is what the CUDA runtime hands out for the program's
// own `__global__` functions (cudaGetKernel), launched typed and tracked like a module's
// kernel. The runtime's own part (interop/runtime_kernel.hpp) runs on the GPU only
// (tests/device/runtime_kernel_device_test.cu).
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "cudakit/borrowed_kernel.hpp"
#include "cudakit/graph_exec.hpp"
#include "cudakit/launch.hpp"
#include "fake_kernels.hpp"
#include "graph_fixture.hpp"

namespace cudakit {
namespace {

using driver::cu;
using driver::EntryId;
using testing::message_of;
using testing::SaxpySig;

// A library loaded with raw driver calls, as the runtime loads the program's kernels.
class OutsideLibrary {
 public:
  explicit OutsideLibrary(const std::vector<unsigned char>& image) {
    EXPECT_EQ(cu.LibraryLoadData(&library_, image.data(), nullptr, nullptr, 0, nullptr, nullptr, 0), CUDA_SUCCESS);
  }
  ~OutsideLibrary() { EXPECT_EQ(cu.LibraryUnload(library_), CUDA_SUCCESS); }
  OutsideLibrary(const OutsideLibrary&) = delete;
  OutsideLibrary& operator=(const OutsideLibrary&) = delete;
  CUkernel kernel(const char* name) const {
    CUkernel k = nullptr;
    EXPECT_EQ(cu.LibraryGetKernel(&k, library_, name), CUDA_SUCCESS);
    return k;
  }

 private:
  CUlibrary library_ = nullptr;
};

// scale(const float* in, float* out, float factor, int n) under its C++ (mangled) name.
fake::FakeKernel scale_kernel() {
  return {"_Z5scalePKfPffi", fake::params<const float*, float*, float, int>(), [](const fake::FakeLaunch& l) {
            auto* in = l.param<const float*>(0);
            auto* out = l.param<float*>(1);
            auto factor = l.param<float>(2);
            auto n = l.param<int>(3);
            l.read(in, n * sizeof(float));
            l.write(out, n * sizeof(float));
            for (int i = 0; i < n; ++i) out[i] = factor * in[i];
          }};
}
using ScaleSig = void(const float*, float*, float, int);

class BorrowedKernelTest : public testing::GraphTestBase {
 protected:
  std::vector<unsigned char> image() { return fake::fatbin_image(testing::standard_image({scale_kernel()}), {90}, {}); }
};

TEST_F(BorrowedKernelTest, ABorrowedKernelLaunchesTypedAndOrdersItsBuffersAcrossStreams) {
  OutsideLibrary lib(image());
  Stream s1(dev()), s2(dev());
  DeviceBuffer<float> in(s1, 64, uninitialized), out(s2, 64, uninitialized);
  fill(in, s1, 3.0f);  // written on s1
  auto scale = borrow_kernel<ScaleSig>(lib.kernel("_Z5scalePKfPffi"), dev());
  launch(s2, scale, {1, 64}, in, out, 2.0f, 64);  // reads `in` on s2: waits for s1
  EXPECT_EQ(waits(), 1);
  s2.synchronize();
  EXPECT_EQ(at(out, 63), 6.0f);
}

TEST_F(BorrowedKernelTest, MessagesNameTheKernelReadably) {
  OutsideLibrary lib(image());
  auto scale = borrow_kernel<ScaleSig>(lib.kernel("_Z5scalePKfPffi"), dev());
  EXPECT_EQ(scale.name(), "_Z5scalePKfPffi");
  Stream s(dev());
  DeviceBuffer<float> in(s, 4, zeroed), out(s, 4, zeroed);
  auto m = message_of<InvalidArgument>([&] { launch(s, scale, {1, 4096}, in, out, 2.0f, 4); });
  EXPECT_NE(m.find("kernel 'scale(float const*, float*, float, int)' ('_Z5scalePKfPffi'"), std::string::npos) << m;
}

TEST_F(BorrowedKernelTest, TheSignatureIsCheckedAskingOnlyForTheDeclaredParameters) {
  OutsideLibrary lib(image());
  CUkernel k = lib.kernel("saxpy");
  (void)borrow_kernel<SaxpySig>(k, dev());
  EXPECT_EQ(fake().calls(EntryId::FuncGetParamInfo), 4);
  auto m = message_of<InvalidArgument>([&] { (void)borrow_kernel<void(double, const float*, float*, int)>(k, dev()); });
  EXPECT_NE(m.find("parameter #1 is 4 bytes in the kernel, 8 in the signature"), std::string::npos) << m;
}

TEST_F(BorrowedKernelTest, ANullHandleIsRefusedBeforeTheDriver) {
  auto m = message_of<InvalidArgument>([&] { (void)borrow_kernel(CUkernel{}, dev()); });
  EXPECT_NE(m.find("borrow_kernel: the kernel handle is null"), std::string::npos) << m;
  EXPECT_EQ(fake().calls(EntryId::KernelGetFunction), 0);
}

TEST_F(BorrowedKernelTest, ACapturedLaunchReplaysAndTheGraphKeepsItsBuffers) {
  OutsideLibrary lib(image());
  auto scale = borrow_kernel<ScaleSig>(lib.kernel("_Z5scalePKfPffi"), dev());
  Stream s(dev());
  auto in = std::make_unique<DeviceBuffer<float>>(s, 64, uninitialized);
  DeviceBuffer<float> out(s, 64, uninitialized);
  fill(*in, s, 5.0f);
  Graph g = capture_nonempty(s, [&] { launch(s, scale, {1, 64}, *in, out, -1.0f, 64); });
  in.reset();  // the graph keeps it
  GraphExec exec = g.instantiate();
  for (int i = 0; i < 3; ++i) exec.launch(s);
  s.synchronize();
  EXPECT_EQ(at(out, 0), -5.0f);
}

class OldDriverBorrowedKernelTest : public BorrowedKernelTest {
  void configure(fake::Driver& d) override {
    d.driver_version = 12020;
    d.missing = {EntryId::KernelGetName, EntryId::FuncGetParamInfo};
  }
};

TEST_F(OldDriverBorrowedKernelTest, WithoutNamesOrParameterInfoTheKernelStillLaunches) {
  OutsideLibrary lib(image());
  auto scale = borrow_kernel<ScaleSig>(lib.kernel("_Z5scalePKfPffi"), dev());
  EXPECT_EQ(scale.name(), "borrowed kernel");
  Stream s(dev());
  DeviceBuffer<float> in(s, 8, uninitialized), out(s, 8, uninitialized);
  fill(in, s, 1.5f);
  launch(s, scale, {1, 8}, in, out, 2.0f, 8);
  s.synchronize();
  EXPECT_EQ(at(out, 7), 3.0f);
}

}  // namespace
}  // namespace cudakit
