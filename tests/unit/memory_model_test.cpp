// The CPU test of the memory layer (issue 3, point 7): random sequences of
// allocations, uploads (pageable and pinned), downloads (blocking and stream-ordered),
// fills, device-to-device copies, frees and synchronizes over several streams and
// buffers, with fixed seeds. The fake driver's ordering model checks every conflicting
// pair of accesses was ordered (device memory, pinned memory and staging buffers alike);
// host mirrors check every value; buffers confined to one stream never cost a wait; and
// nothing leaks, events included.
#include <gtest/gtest.h>

#include <list>
#include <memory>
#include <random>
#include <vector>

#include "memory_fixture.hpp"

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
    detail::reset_device_states_for_testing();  // frees staging buffers and pooled events
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

INSTANTIATE_TEST_SUITE_P(FixedSeeds, MemoryModelTest, ::testing::Values(1u, 2u, 3u, 42u, 1234u, 99991u));

}  // namespace
}  // namespace cudakit
