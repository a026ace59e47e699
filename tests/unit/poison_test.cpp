// A poisoned context, the whole sequence on the fake driver: a kernel
// faults (the fake's synchronize answers ILLEGAL_ADDRESS, as a real driver does after a
// write through a bad address); the error names the kernel last launched on the stream;
// every later call of each area fails with ContextPoisoned carrying that original before
// the driver sees it; the destructors of every kind of object neither throw nor hang.
// tests/device/poison_device_test.cpp runs the same sequence on a real GPU.
#include <gtest/gtest.h>

#include <functional>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "cudakit/capture.hpp"
#include "cudakit/copy.hpp"
#include "cudakit/device_buffer.hpp"
#include "cudakit/event.hpp"
#include "cudakit/graph.hpp"
#include "cudakit/graph_exec.hpp"
#include "cudakit/launch.hpp"
#include "cudakit/module.hpp"
#include "cudakit/pinned_buffer.hpp"
#include "cudakit/stream.hpp"
#include "fake_fixture.hpp"
#include "fake_kernels.hpp"
#include "fault_sweep.hpp"

namespace cudakit {
namespace {

using driver::EntryId;

using testing::FillSig;
using testing::SaxpySig;

class PoisonScenarioTest : public testing::FakeDriverTest {
 protected:
  static constexpr CUresult sticky_code = CUDA_ERROR_ILLEGAL_ADDRESS;

  void configure(fake::Driver& d) override {
    // A real driver still answers device-level queries after a sticky error.
    for (std::size_t i = 0; i < driver::entry_count; ++i)
      if (testing::sweep::is_device_level(static_cast<EntryId>(i))) d.sticky_spares.insert(static_cast<EntryId>(i));
  }

  // Calls the driver saw that a poisoned device must not see: neither device-level
  // queries nor how errors are worded count.
  std::size_t context_calls() {
    std::size_t n = 0;
    for (EntryId e : fake().log())
      n += !testing::sweep::is_device_level(e) && e != EntryId::GetErrorName && e != EntryId::GetErrorString;
    return n;
  }

  // `fn` must throw ContextPoisoned whose original is `original` (the fault, naming the
  // kernel), and no context call may reach the driver.
  void expect_poisoned(const std::string& what, const std::function<void()>& fn) {
    std::size_t before = context_calls();
    try {
      fn();
      ADD_FAILURE() << what << ": threw nothing";
    } catch (const ContextPoisoned& e) {
      EXPECT_EQ(e.code(), sticky_code) << what;
      EXPECT_EQ(std::string(e.original().what()), original) << what;
      const std::string m = e.what();
      EXPECT_NE(m.find("poisoned"), std::string::npos) << what << ": " << m;
      EXPECT_NE(m.find("kernel 'saxpy'"), std::string::npos) << what << ": carries the original: " << m;
    } catch (const std::exception& e) {
      ADD_FAILURE() << what << ": threw something else: " << e.what();
    }
    EXPECT_EQ(context_calls(), before) << what << ": the poisoned device saw a driver call";
  }

  std::string original;

  // After a sticky fault: every object is gone (its releases refused and parked); the
  // fake forgets the fault and the handles whose release it refused.
  void clean_up_after_the_fault() {
    cudakit::testing::reset_library_state();
    (void)drain_parked_errors();
    fake().clear_sticky();
    fake().destroy_leftovers();
    std::lock_guard l(fake().mutex);
    for (auto& [kind, handles] : fake().ledger) handles.clear();
    for (auto& [device, retains] : fake().primary_retains) retains = 0;
  }

  // Launches saxpy on a stream with buffers made there, scripts `fault` as the next
  // failure of `entry` (a kernel's fault, reported by the first call that waits for the
  // stream's work), and returns the message of what `after` throws.
  std::string fault_reported_by(EntryId entry, const std::function<void(StreamRef, DeviceBuffer<float>&)>& after) {
    std::string message;
    {
      Device d = Device::get(0);
      Module module = Module::load(d, fake::fatbin_image(testing::standard_image(), {80, 90}, {}));
      auto saxpy = module.kernel<SaxpySig>("saxpy");
      const int n = 500;
      std::vector<float> hx(n, 1.5f), hy(n, -2.0f);
      Stream s(d);
      DeviceBuffer<float> x = upload(s, hx);  // its staging buffer stays with this thread, recorded on s
      DeviceBuffer<float> y = upload(s, hy);
      launch(s, saxpy, LaunchConfig{grid_for(n, 256), 256}, 2.0f, x, y, n);
      fake().fail(entry, 0, sticky_code);
      message = testing::message_of<DriverError>([&] { after(s, y); });
    }
    clean_up_after_the_fault();
    return message;
  }
};

TEST_F(PoisonScenarioTest, TheFaultNamesTheKernelAndEveryLaterCallFailsBeforeTheDriverThenEverythingIsReleased) {
  expect_parked_errors();
  std::mt19937 rng(std::random_device{}());
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  const int n = 1000 + static_cast<int>(rng() % 1000);
  std::vector<float> hx(n), hy(n);
  for (auto& v : hx) v = value(rng);
  for (auto& v : hy) v = value(rng);

  Device d = Device::get(0);
  {
    int image = testing::standard_image();
    Module module = Module::load(d, fake::fatbin_image(image, {80, 90}, {}));
    auto saxpy = module.kernel<SaxpySig>("saxpy");
    auto fill_k = module.kernel<FillSig>("fill");
    Stream s(d), other(d);
    Event e(d);
    DeviceBuffer<float> x = upload(s, hx), y = upload(s, hy);
    PinnedBuffer<float> pinned(n, zeroed);
    // A graph made before the fault, instantiated after it. It holds no buffer or module,
    // so that the count below is only of handles.
    launch(other, fill_k, LaunchConfig{grid_for(n, 256), 256}, y, 1.0f, n);
    Graph g(d);
    (void)g.add_empty();
    std::optional<GraphExec> exec;
    exec.emplace(g);
    other.synchronize();
    for (int i = 0; i < n; ++i) ASSERT_EQ(y.data()[i], 1.0f) << "the context worked before the fault";

    // A launch whose fault the next synchronize reports.
    launch(s, saxpy, LaunchConfig{grid_for(n, 256), 256}, 2.0f, x, y, n);
    EXPECT_EQ(detail::poison_of(0), nullptr);
    fake().fail(EntryId::StreamSynchronize, 0, sticky_code);
    try {
      s.synchronize();
      FAIL() << "the fault was not reported";
    } catch (const ContextPoisoned& e) {
      FAIL() << "the first error is the original, not a poisoned-context error: " << e.what();
    } catch (const DriverError& e) {
      EXPECT_EQ(e.code(), sticky_code);
      EXPECT_EQ(e.call(), "cuStreamSynchronize");
      original = e.what();
      EXPECT_NE(original.find("(last launch on it: kernel 'saxpy')"), std::string::npos) << original;
      EXPECT_NE(original.find("CUDA_ERROR_ILLEGAL_ADDRESS"), std::string::npos) << original;
    }
    fake().clear_faults();
    ASSERT_NE(fake().sticky(), CUDA_SUCCESS) << "the fake, like a real driver, fails every call from now on";

    // Every later call on that context, area by area.
    expect_poisoned("Stream(Device)", [&] { Stream t(d); });
    expect_poisoned("StreamRef::synchronize", [&] { s.synchronize(); });
    expect_poisoned("StreamRef::query", [&] { (void)other.query(); });
    expect_poisoned("Event(Device)", [&] { Event t(d); });
    expect_poisoned("EventRef::record", [&] { e.record(other); });
    expect_poisoned("DeviceBuffer(pool)", [&] { DeviceBuffer<float> t(s, n, uninitialized); });
    expect_poisoned("DeviceBuffer(plain, zeroed)", [&] { DeviceBuffer<float> t(s, n, zeroed, Allocator::plain); });
    expect_poisoned("PinnedBuffer", [&] { PinnedBuffer<float> t(n, uninitialized); });
    expect_poisoned("upload", [&] { (void)upload(s, hx); });
    expect_poisoned("copy (host to device)", [&] { copy(s, hx, x); });
    expect_poisoned("copy (device to host)", [&] { copy(s, x, hy); });
    expect_poisoned("copy (pinned to device)", [&] { copy(s, pinned, x); });
    expect_poisoned("copy (device to device)", [&] { copy(s, x, y); });
    expect_poisoned("download", [&] { (void)download(s, x); });
    expect_poisoned("fill", [&] { fill(s, x, 3.0f); });
    expect_poisoned("launch (typed)", [&] { launch(s, saxpy, LaunchConfig{grid_for(n, 256), 256}, 2.0f, x, y, n); });
    expect_poisoned("Module::load", [&] { (void)Module::load(d, fake::fatbin_image(image, {80, 90}, {})); });
    expect_poisoned("capture", [&] { (void)capture(s, [&] { fill(s, x, 1.0f); }); });
    expect_poisoned("Graph::instantiate", [&] { (void)g.instantiate(); });
    expect_poisoned("GraphExec::launch", [&] { exec->launch(s); });
    expect_poisoned("Device::memory_info", [&] { (void)d.memory_info(); });
    // Device-level queries are not context calls: they still answer.
    EXPECT_EQ(d.name(), "Fake GPU");
    EXPECT_GT(d.multiprocessor_count(), 0);
    EXPECT_NE(detail::poison_of(0), nullptr);

    // Leaving the scope destroys the executable, graph, buffers, pinned memory, event,
    // streams and module while the driver fails every call: nothing throws or hangs.
  }
  cudakit::testing::reset_library_state();  // the pools, staging, event pool, library retain
  auto parked = drain_parked_errors();
  EXPECT_FALSE(parked.empty()) << "the refused releases say so";
  for (const auto& p : parked) {
    EXPECT_EQ(p.code, sticky_code) << p.origin << ": " << p.message;
    EXPECT_NE(p.message.find("kernel 'saxpy'"), std::string::npos) << "carries the original: " << p.message;
  }
  // Every handle still live is one whose release the driver refused (not cudakit's
  // leak); clean them for the fixture's ledger check.
  std::size_t failed_releases = 0, live = 0;
  for (const auto& [entry, code] : fake().failed_calls)
    failed_releases += testing::sweep::is_release(entry) && entry != EntryId::DevicePrimaryCtxRelease;
  {
    std::lock_guard l(fake().mutex);
    for (const auto& [kind, handles] : fake().ledger) live += handles.size();
  }
  std::string words;
  {
    std::lock_guard l(fake().mutex);
    for (const auto& [kind, handles] : fake().ledger)
      if (!handles.empty()) words += " " + std::to_string(handles.size()) + " " + kind;
    words += "; failed:";
    for (const auto& [entry, code] : fake().failed_calls) words += std::string(" ") + driver::entry_info(entry).name;
  }
  EXPECT_EQ(live, failed_releases) << "a handle leaked: live" << words;
  fake().clear_sticky();
  fake().destroy_leftovers();
  std::lock_guard l(fake().mutex);
  for (auto& [kind, handles] : fake().ledger) handles.clear();
  for (auto& [device, retains] : fake().primary_retains) retains = 0;
}

// A fault first reported by a download names the kernel last launched on its stream, as
// a synchronize does; so does one first reported by the next upload's staging buffer.
TEST_F(PoisonScenarioTest, AFaultFirstReportedByADownloadNamesTheKernel) {
  expect_parked_errors();
  const std::string m =
      fault_reported_by(EntryId::EventSynchronize, [](StreamRef s, DeviceBuffer<float>& y) { (void)download(s, y); });
  EXPECT_NE(m.find("cuEventSynchronize on stream"), std::string::npos) << m;
  EXPECT_NE(m.find("(last launch on it: kernel 'saxpy')"), std::string::npos) << m;
  EXPECT_NE(m.find("CUDA_ERROR_ILLEGAL_ADDRESS"), std::string::npos) << m;
  EXPECT_EQ(m.find("staging buffer"), std::string::npos) << m;
}

TEST_F(PoisonScenarioTest, AFaultFirstReportedByADownloadIntoAVectorNamesTheKernel) {
  expect_parked_errors();
  const std::string m = fault_reported_by(EntryId::EventSynchronize, [](StreamRef s, DeviceBuffer<float>& y) {
    std::vector<float> out(y.size());
    download(s, y, out);
  });
  EXPECT_NE(m.find("(last launch on it: kernel 'saxpy')"), std::string::npos) << m;
}

TEST_F(PoisonScenarioTest, AFaultFirstReportedByADownloadsCopyCallNamesTheKernelNotTheBuffer) {
  expect_parked_errors();
  const std::string m =
      fault_reported_by(EntryId::MemcpyDtoHAsync, [](StreamRef s, DeviceBuffer<float>& y) { (void)download(s, y); });
  EXPECT_NE(m.find("cuMemcpyDtoHAsync on stream"), std::string::npos) << m;
  EXPECT_NE(m.find("(last launch on it: kernel 'saxpy')"), std::string::npos) << m;
}

TEST_F(PoisonScenarioTest, AFaultFirstReportedByTheNextAllocationNamesTheKernel) {
  expect_parked_errors();
  const std::string m = fault_reported_by(EntryId::MemAllocAsync, [](StreamRef s, DeviceBuffer<float>& y) {
    (void)upload(s, std::vector<float>(y.size(), 3.0f));
  });
  EXPECT_NE(m.find("cuMemAllocAsync on stream"), std::string::npos) << m;
  EXPECT_NE(m.find("(last launch on it: kernel 'saxpy')"), std::string::npos) << m;
}

TEST_F(PoisonScenarioTest, AFaultFirstReportedByTheNextUploadNamesTheKernel) {
  expect_parked_errors();
  const std::string m = fault_reported_by(EntryId::EventQuery, [](StreamRef s, DeviceBuffer<float>& y) {
    copy(s, std::vector<float>(y.size(), 3.0f), y);
  });
  EXPECT_NE(m.find("cuEventQuery on stream"), std::string::npos) << m;
  EXPECT_NE(m.find("(last launch on it: kernel 'saxpy')"), std::string::npos) << m;
}

// The name is the kernel's own label, kept past its module's life, and each launch
// replaces it; a ref built from a raw handle has no state and names none.
TEST_F(PoisonScenarioTest, TheLastLaunchIsNamedEvenAfterItsModuleIsGone) {
  Device d = Device::get(0);
  Stream s(d);
  {
    Module module = Module::load(d, fake::fatbin_image(testing::standard_image(), {80, 90}, {}));
    DeviceBuffer<float> y(s, 64, zeroed);
    launch(s, module.kernel<FillSig>("fill"), LaunchConfig{1, 64}, y, 2.0f, 64);
    launch(s, module.kernel<void()>("empty"), LaunchConfig{1, 1});
    s.synchronize();
  }
  fake().fail(EntryId::StreamQuery, 0, CUDA_ERROR_INVALID_VALUE);  // not sticky: the stream stays usable
  const std::string m = testing::message_of<DriverError>([&] { (void)s.query(); });
  EXPECT_NE(m.find("cuStreamQuery on stream"), std::string::npos) << m;
  EXPECT_NE(m.find("(last launch on it: kernel 'empty')"), std::string::npos) << m;
  EXPECT_EQ(m.find("'fill'"), std::string::npos) << "the latest launch, not an earlier one: " << m;
  fake().clear_faults();
  // A stream with no launch yet names none.
  Stream fresh(d);
  fake().fail(EntryId::StreamSynchronize, 0, CUDA_ERROR_INVALID_VALUE);
  const std::string none = testing::message_of<DriverError>([&] { fresh.synchronize(); });
  EXPECT_EQ(none.find("last launch"), std::string::npos) << none;
  fake().clear_faults();
}

}  // namespace
}  // namespace cudakit
