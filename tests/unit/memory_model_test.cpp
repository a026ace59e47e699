// The randomized model-based tests.
//
// MemoryModelTest, the memory layer: random sequences of
// allocations, uploads (pageable and pinned), downloads (blocking and stream-ordered),
// fills, device-to-device copies, frees and synchronizes over several streams and
// buffers, with fixed seeds. The fake driver's ordering model checks every conflicting
// pair of accesses was ordered (device memory, pinned memory and staging buffers alike);
// host mirrors check every value; buffers confined to one stream never cost a wait; and
// nothing leaks, events included.
//
// LaunchGraphModelTest adds typed kernel launches (reads and writes through the fake's
// saxpy and fill), graph capture of a few operations and replays of the executable on
// random streams, and buffers freed (and executables destroyed) while other streams still
// use them. The fake's model checks every hazard was ordered and that nothing touched
// freed memory; the ledger that nothing leaked; host mirrors every value.
//
// Seeds: a fixed set in CI; CUDAKIT_MODEL_SEEDS=N runs N more (model_seeds.hpp).
#include <gtest/gtest.h>

#include <list>
#include <memory>
#include <random>
#include <vector>

#include "cudakit/capture.hpp"
#include "cudakit/graph_exec.hpp"
#include "cudakit/launch.hpp"
#include "cudakit/module.hpp"
#include "cudakit/tracking.hpp"
#include "fake_kernels.hpp"
#include "memory_fixture.hpp"
#include "model_seeds.hpp"

namespace cudakit {
namespace {

using driver::EntryId;

constexpr std::size_t elements = 40;  // 160 bytes: three 64-byte staging buffers

class MemoryModelTest : public testing::MemoryTest, public ::testing::WithParamInterface<unsigned> {
 protected:
  struct Slot {
    DeviceBuffer<float> buffer;
    std::vector<float> mirror;  // what the buffer holds once every submitted operation ran
  };
  // A stream-ordered download into pageable memory, checked when its stream is synchronized.
  struct PendingDownload {
    int stream;
    std::unique_ptr<std::vector<float>> into;
    std::vector<float> expected;
  };

  std::mt19937 rng;
  std::vector<Stream> streams;
  std::vector<PinnedBuffer<float>> pinned;  // one per stream
  std::vector<Slot> slots;
  std::list<PendingDownload> pending;
  int next_value = 1;
  bool confined = false;

  std::vector<float> fresh() {
    std::vector<float> v(elements);
    for (auto& x : v) x = static_cast<float>(next_value++);
    return v;
  }

  void synchronize(int si) {
    streams[si].synchronize();
    for (auto it = pending.begin(); it != pending.end();)
      if (it->stream == si) {
        EXPECT_EQ(*it->into, it->expected) << "a stream-ordered download, checked after its stream";
        it = pending.erase(it);
      } else {
        ++it;
      }
  }

  // Stream si's own pinned buffer when confined, any of them otherwise.
  PinnedBuffer<float>& pick_pinned(int si) {
    return pinned[confined ? static_cast<std::size_t>(si) : rng() % pinned.size()];
  }

  // One random operation on slot `bi` using stream `si`.
  void step(int bi, int si) {
    Slot& slot = slots[bi];
    StreamRef s = streams[si];
    int op = static_cast<int>(rng() % 11);
    if (!slot.buffer) op = 0;
    switch (op) {
      case 0: {  // allocate (again): by upload from pageable memory
        slot.mirror = fresh();
        slot.buffer = upload(s, slot.mirror);
        break;
      }
      case 1: {  // upload from pageable memory that is overwritten at once
        auto data = fresh();
        copy(s, data, slot.buffer);
        slot.mirror = data;
        std::fill(data.begin(), data.end(), -1.0f);
        break;
      }
      case 2: {  // upload from pinned memory: the host refills it only after its copies
        PinnedBuffer<float>& p = pick_pinned(si);
        p.synchronize();
        fake().access(nullptr, reinterpret_cast<std::uintptr_t>(p.data()), p.size_bytes(), true, "host fills pinned");
        auto data = fresh();
        std::copy(data.begin(), data.end(), p.begin());
        copy(s, p, slot.buffer);
        slot.mirror = data;
        break;
      }
      case 3: {  // blocking download
        EXPECT_EQ(download(s, slot.buffer), slot.mirror);
        break;
      }
      case 4: {  // stream-ordered download into pinned memory, read after synchronize()
        PinnedBuffer<float>& p = pick_pinned(si);
        p.synchronize();
        copy(s, slot.buffer, p);
        p.synchronize();
        fake().access(nullptr, reinterpret_cast<std::uintptr_t>(p.data()), p.size_bytes(), false, "host reads pinned");
        EXPECT_TRUE(std::equal(p.begin(), p.end(), slot.mirror.begin()));
        break;
      }
      case 5: {  // stream-ordered download into pageable memory, checked later
        auto into = std::make_unique<std::vector<float>>(elements, 0.0f);
        copy(s, slot.buffer, *into);
        pending.push_back({si, std::move(into), slot.mirror});
        break;
      }
      case 6: {  // fill
        float v = static_cast<float>(next_value++);
        fill(s, slot.buffer, v);
        slot.mirror.assign(elements, v);
        break;
      }
      case 7: {  // device-to-device copy from another live buffer
        std::size_t fi = rng() % slots.size();
        if (confined) fi = fi - fi % streams.size() + static_cast<std::size_t>(si);  // a partner on the same stream
        if (fi >= slots.size()) break;
        Slot& from = slots[fi];
        if (&from == &slot || !from.buffer) break;
        copy(s, from.buffer, slot.buffer);
        slot.mirror = from.mirror;
        break;
      }
      case 8: {  // copy between halves
        copy(s, slot.buffer.first(elements / 2), slot.buffer.last(elements / 2));
        std::copy(slot.mirror.begin(), slot.mirror.begin() + elements / 2, slot.mirror.begin() + elements / 2);
        break;
      }
      case 9: slot.buffer.reset(); break;
      case 10: synchronize(si); break;
    }
  }

  void set_up(int n_streams, int n_buffers) {
    rng.seed(GetParam());
    small_staging(64, 3);
    for (int i = 0; i < n_streams; ++i) {
      streams.emplace_back(dev());
      pinned.emplace_back(elements, zeroed);
    }
    slots.resize(static_cast<std::size_t>(n_buffers));
  }

  void tear_down() {
    for (int i = 0; i < static_cast<int>(streams.size()); ++i) synchronize(i);
    EXPECT_TRUE(pending.empty());
    slots.clear();
    pinned.clear();
    streams.clear();
    cudakit::testing::reset_library_state();  // frees staging buffers and pooled events
    EXPECT_EQ(fake().live("event"), 0u) << "no event leaked";
    EXPECT_EQ(fake().live("pinned host memory"), 0u);
    EXPECT_EQ(fake().live("device memory"), 0u);
  }
};

TEST_P(MemoryModelTest, BuffersConfinedToOneStreamNeverWait) {
  set_up(3, 6);
  confined = true;  // buffer i, its copy partners and its pinned buffer live on stream i % 3
  for (int i = 0; i < 300; ++i) {
    int bi = static_cast<int>(rng() % slots.size());
    step(bi, bi % 3);
  }
  EXPECT_EQ(calls(EntryId::StreamWaitEvent), 0) << "stream order suffices: no cross-stream wait";
  tear_down();
}

TEST_P(MemoryModelTest, RandomOperationsOnSeveralStreamsAreOrderedAndCorrect) {
  set_up(4, 6);
  for (int i = 0; i < 400; ++i) step(static_cast<int>(rng() % slots.size()), static_cast<int>(rng() % streams.size()));
  tear_down();
}

INSTANTIATE_TEST_SUITE_P(FixedSeeds, MemoryModelTest, ::testing::ValuesIn(testing::model_seeds()));

// ---- kernels, graphs and frees in flight ----

using testing::SaxpySig;
using testing::FillSig;

class LaunchGraphModelTest : public testing::MemoryTest, public ::testing::WithParamInterface<unsigned> {
 protected:
  using Mirror = std::shared_ptr<std::vector<float>>;
  // A live buffer and what it holds once every submitted operation ran. The mirror is
  // shared with the graphs that use the buffer: they keep the buffer alive after its slot
  // dropped it, and their replays change it.
  struct Slot {
    DeviceBuffer<float> buffer;
    Mirror mirror;
  };
  // One operation of a captured graph, replayed on the mirrors at each launch.
  struct Effect {
    enum Kind { fill_kernel, saxpy_kernel, memset, copy } kind;
    float value;  // the fill value or saxpy's a
    Mirror from, to;
  };
  struct Replayable {
    GraphExec exec;
    std::vector<Effect> effects;
  };

  std::mt19937 rng;
  Module module_;
  Kernel<SaxpySig> saxpy;
  Kernel<FillSig> fill_k;
  std::vector<Stream> streams;
  std::vector<Slot> slots;
  std::list<Replayable> graphs;
  int next_value = 1;
  int launches = 0, captures = 0, replays = 0, frees = 0;

  static constexpr int n = static_cast<int>(elements);
  static LaunchConfig config() { return {grid_for(n, 16), 16}; }

  std::vector<float> fresh() {
    std::vector<float> v(elements);
    for (auto& x : v) x = static_cast<float>(next_value++ % 1000);  // small: saxpy stays exact
    return v;
  }

  // A live slot other than `not_this`, or null.
  Slot* other_live(const Slot* not_this) {
    Slot& s = slots[rng() % slots.size()];
    return (&s == not_this || !s.buffer) ? nullptr : &s;
  }

  static void apply(const Effect& e) {
    auto& to = *e.to;
    switch (e.kind) {
      case Effect::fill_kernel:
      case Effect::memset: to.assign(elements, e.value); break;
      case Effect::saxpy_kernel:
        for (std::size_t i = 0; i < elements; ++i) to[i] = e.value * (*e.from)[i] + to[i];
        break;
      case Effect::copy: to = *e.from; break;
    }
  }

  // Submits one random operation writing `to` on `s` (in a capture or not); returns what it
  // does to the mirrors, or nothing when it found no partner buffer.
  std::optional<Effect> submit(Slot& to, StreamRef s) {
    switch (rng() % 4) {
      case 0: {
        float v = static_cast<float>(next_value++ % 1000);
        launch(s, fill_k, config(), to.buffer, v, n);
        ++launches;
        return Effect{Effect::fill_kernel, v, nullptr, to.mirror};
      }
      case 1: {
        Slot* from = other_live(&to);
        if (!from) return std::nullopt;
        float a = rng() % 2 ? 1.0f : -1.0f;
        launch(s, saxpy, config(), a, from->buffer, to.buffer, n);  // from: const float*, a read
        ++launches;
        return Effect{Effect::saxpy_kernel, a, from->mirror, to.mirror};
      }
      case 2: {
        float v = static_cast<float>(next_value++ % 1000);
        fill(s, to.buffer, v);
        return Effect{Effect::memset, v, nullptr, to.mirror};
      }
      default: {
        Slot* from = other_live(&to);
        if (!from) return std::nullopt;
        copy(s, from->buffer, to.buffer);
        return Effect{Effect::copy, 0.0f, from->mirror, to.mirror};
      }
    }
  }

  // One random operation on slot `bi` using stream `si`.
  void step(int bi, int si) {
    Slot& slot = slots[static_cast<std::size_t>(bi)];
    StreamRef s = streams[static_cast<std::size_t>(si)];
    int op = static_cast<int>(rng() % 10);
    if (!slot.buffer && op < 7) op = 0;
    switch (op) {
      case 0: {  // allocate (again), dropping the old buffer while other streams may use it
        auto data = fresh();
        slot.buffer = upload(s, data);
        slot.mirror = std::make_shared<std::vector<float>>(std::move(data));
        break;
      }
      case 1:
      case 2: {  // a kernel, a memset or a copy writing the slot
        if (auto e = submit(slot, s)) apply(*e);
        break;
      }
      case 3: {  // read it back on this stream, whoever wrote it last
        auto got = download(s, slot.buffer);
        EXPECT_TRUE(same(got, *slot.mirror)) << "download of slot " << bi << " on stream " << si;
        break;
      }
      case 4: {  // capture 1 to 3 operations on this stream into a graph, then replay it
        std::vector<Effect> effects;
        std::optional<Graph> graph = capture(s, [&] {
          int count = 1 + static_cast<int>(rng() % 3);
          for (int i = 0; i < count; ++i) {
            Slot& to = slots[rng() % slots.size()];
            if (!to.buffer) continue;
            if (auto e = submit(to, s)) effects.push_back(*e);
          }
        });
        ++captures;
        if (!graph) break;  // nothing captured
        graphs.push_back({graph->instantiate(), std::move(effects)});
        if (graphs.size() > 3) graphs.pop_front();  // destroyed while its replays may be in flight
        break;
      }
      case 5:
      case 6: {  // replay a graph on this stream
        if (graphs.empty()) break;
        auto it = std::next(graphs.begin(), static_cast<long>(rng() % graphs.size()));
        it->exec.launch(s);
        for (const Effect& e : it->effects) apply(e);
        ++replays;
        break;
      }
      case 7: {  // free it (graphs may still hold it; other streams may still use it)
        if (slot.buffer) ++frees;
        slot.buffer.reset();
        slot.mirror.reset();
        break;
      }
      case 8: {  // destroy a graph
        if (!graphs.empty()) graphs.erase(std::next(graphs.begin(), static_cast<long>(rng() % graphs.size())));
        break;
      }
      default: streams[static_cast<std::size_t>(si)].synchronize(); break;
    }
  }

  // Equal, with NaN equal to NaN (a long chain of saxpys may overflow the same way on both).
  static bool same(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() &&
           std::equal(a.begin(), a.end(), b.begin(), [](float x, float y) { return x == y || (x != x && y != y); });
  }

  void SetUp() override {
    MemoryTest::SetUp();
    if (HasFatalFailure() || IsSkipped()) return;
    rng.seed(GetParam());
    small_staging(64, 3);
    module_ = Module::load(Device::get(0), fake::fatbin_image(testing::standard_image(), {80, 90}, {}));
    saxpy = module_.kernel<SaxpySig>("saxpy");
    fill_k = module_.kernel<FillSig>("fill");
  }

  void run(int n_streams, int n_buffers, int steps) {
    for (int i = 0; i < n_streams; ++i) streams.emplace_back(dev());
    slots.resize(static_cast<std::size_t>(n_buffers));
    for (int i = 0; i < steps; ++i)
      step(static_cast<int>(rng() % slots.size()), static_cast<int>(rng() % streams.size()));
    // Every live buffer holds what the model says, read on a random stream.
    for (std::size_t i = 0; i < slots.size(); ++i)
      if (slots[i].buffer)
        EXPECT_TRUE(same(download(streams[rng() % streams.size()], slots[i].buffer), *slots[i].mirror)) << "slot " << i;
  }

  void tear_down() {
    graphs.clear();
    slots.clear();
    for (auto& s : streams) s.synchronize();
    streams.clear();
    saxpy = {};  // a kernel keeps its module loaded
    fill_k = {};
    module_ = {};
    cudakit::testing::reset_library_state();
    EXPECT_EQ(fake().live("event"), 0u) << "no event leaked";
    EXPECT_EQ(fake().live("device memory"), 0u) << "no buffer leaked (graphs release theirs)";
    EXPECT_EQ(fake().live("graph"), 0u);
    EXPECT_EQ(fake().live("graph exec"), 0u);
  }
};

TEST_P(LaunchGraphModelTest, RandomLaunchesCapturesReplaysAndFreesAreOrderedAndCorrect) {
  run(4, 6, 400);
  EXPECT_GT(launches, 0);
  EXPECT_GT(captures, 0);
  EXPECT_GT(replays, 0);
  EXPECT_GT(frees, 0);
  tear_down();
  // The fixture fails the test on any hazard (unordered or after free) and on any leak.
}

// The model is not blind: the same random sequences with cudakit's cross-stream ordering
// turned off (ManualOrdering, no ordering by hand) are flagged as hazards.
TEST_P(LaunchGraphModelTest, WithoutOrderingTheSameSequencesAreFlagged) {
  ignore_hazards();
  {
    ManualOrdering off;
    run(4, 6, 400);
    graphs.clear();
    slots.clear();
  }
  EXPECT_FALSE(fake().hazards().empty()) << "seed " << GetParam() << ": the model saw no unordered access";
  tear_down();
}

INSTANTIATE_TEST_SUITE_P(FixedSeeds, LaunchGraphModelTest, ::testing::ValuesIn(testing::model_seeds()));

// The lifetime half of the model: an access to freed memory is flagged. (The access is
// declared to the model only: running work on freed host memory would be a real use
// after free in the test.)
class FreedMemoryModelTest : public testing::MemoryTest {};

TEST_F(FreedMemoryModelTest, AnAccessToFreedMemoryIsFlagged) {
  ignore_hazards();
  Stream s(dev());
  DeviceBuffer<float> b(s, elements, zeroed);
  auto p = static_cast<std::uintptr_t>(b.device_pointer());
  fake().access(s.handle(), p, b.size_bytes(), true, "a write while live");
  EXPECT_TRUE(fake().hazards().empty());
  b.reset();
  s.synchronize();
  fake().access(s.handle(), p + 8, 4, false, "a read after the free");
  auto hazards = fake().hazards();
  ASSERT_EQ(hazards.size(), 1u);
  EXPECT_NE(hazards[0].description.find("a read after the free (read) uses freed memory"), std::string::npos)
      << hazards[0].description;
}

}  // namespace
}  // namespace cudakit
