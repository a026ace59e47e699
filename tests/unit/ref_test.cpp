// Ref<T>, the intrusive counted reference (ref.hpp): every construction, assignment and
// hand-over changes the object's count by exactly what it says, and the last reference
// frees the object once.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <utility>
#include <vector>

#include "cudakit/detail/ref.hpp"

namespace cudakit::detail {
namespace {

// An object that counts its references and records its own end.
struct Counted {
  explicit Counted(int* freed) : freed(freed) {}
  std::atomic<int> refs{1};
  std::atomic<int> retains{0};
  int* freed;
};
void retain(Counted* c) noexcept {
  c->refs.fetch_add(1, std::memory_order_relaxed);
  c->retains.fetch_add(1, std::memory_order_relaxed);
}
void release(Counted* c) noexcept {
  if (c->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    ++*c->freed;
    delete c;
  }
}

// A second kind of reference on the same object, counted apart (like a stream's tracker
// slots): proves the counting argument is the one used.
struct SecondKind {
  static void retain_one(Counted* c) noexcept { c->refs.fetch_add(100, std::memory_order_relaxed); }
  static void release_one(Counted* c) noexcept {
    if (c->refs.fetch_sub(100, std::memory_order_acq_rel) == 100) {
      ++*c->freed;
      delete c;
    }
  }
};

TEST(Ref, AdoptingTakesOverTheReferenceWithoutRetaining) {
  int freed = 0;
  {
    Ref<Counted> r(new Counted(&freed), adopt);
    EXPECT_EQ(r->refs.load(), 1);
    EXPECT_EQ(r->retains, 0);
  }
  EXPECT_EQ(freed, 1);
}

TEST(Ref, ConstructingFromAPointerRetainsIt) {
  int freed = 0;
  auto* c = new Counted(&freed);  // the test's own reference
  {
    Ref<Counted> r(c);
    EXPECT_EQ(c->refs.load(), 2);
    EXPECT_EQ(c->retains, 1);
  }
  EXPECT_EQ(c->refs.load(), 1);
  EXPECT_EQ(freed, 0);
  release(c);
  EXPECT_EQ(freed, 1);
}

TEST(Ref, ACopyRetainsAndBothCopiesRelease) {
  int freed = 0;
  Ref<Counted> a = make_ref<Counted>(&freed);
  {
    Ref<Counted> b = a;
    EXPECT_EQ(a.get(), b.get());
    EXPECT_EQ(a->refs.load(), 2);
  }
  EXPECT_EQ(a->refs.load(), 1);
  a.reset();
  EXPECT_EQ(freed, 1);
}

TEST(Ref, AMoveChangesNoCountAndEmptiesTheSource) {
  int freed = 0;
  Ref<Counted> a = make_ref<Counted>(&freed);
  Counted* c = a.get();
  Ref<Counted> b = std::move(a);
  EXPECT_FALSE(a);  // NOLINT(bugprone-use-after-move): a moved-from Ref is empty
  EXPECT_EQ(b.get(), c);
  EXPECT_EQ(c->refs.load(), 1);
  EXPECT_EQ(c->retains, 0);
  Ref<Counted> d;
  d = std::move(b);
  EXPECT_FALSE(b);  // NOLINT(bugprone-use-after-move)
  EXPECT_EQ(c->refs.load(), 1);
  EXPECT_EQ(c->retains, 0);
  EXPECT_EQ(freed, 0);
}

TEST(Ref, CopyAssignmentReleasesTheOldObjectAndRetainsTheNewOne) {
  int freed_old = 0, freed_new = 0;
  Ref<Counted> a = make_ref<Counted>(&freed_old);
  Ref<Counted> b = make_ref<Counted>(&freed_new);
  a = b;
  EXPECT_EQ(freed_old, 1);
  EXPECT_EQ(b->refs.load(), 2);
  b.reset();
  EXPECT_EQ(freed_new, 0);
  a.reset();
  EXPECT_EQ(freed_new, 1);
}

TEST(Ref, MoveAssignmentReleasesTheOldObject) {
  int freed_old = 0, freed_new = 0;
  Ref<Counted> a = make_ref<Counted>(&freed_old);
  Ref<Counted> b = make_ref<Counted>(&freed_new);
  a = std::move(b);
  EXPECT_EQ(freed_old, 1);
  EXPECT_EQ(a->refs.load(), 1);
  EXPECT_EQ(freed_new, 0);
}

TEST(Ref, SelfAssignmentKeepsTheObjectAndItsCount) {
  int freed = 0;
  Ref<Counted> a = make_ref<Counted>(&freed);
  Ref<Counted>& same = a;
  a = same;
  EXPECT_EQ(freed, 0);
  EXPECT_EQ(a->refs.load(), 1);
  a = std::move(same);
  EXPECT_EQ(freed, 0);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->refs.load(), 1);
}

TEST(Ref, ResetReleasesOnceAndLeavesItEmpty) {
  int freed = 0;
  Ref<Counted> a = make_ref<Counted>(&freed);
  a.reset();
  EXPECT_FALSE(a);
  EXPECT_EQ(a, nullptr);
  EXPECT_EQ(freed, 1);
  a.reset();  // an empty Ref's reset does nothing
  EXPECT_EQ(freed, 1);
}

TEST(Ref, DetachHandsOutTheReferenceAndAdoptTakesItBack) {
  int freed = 0;
  Ref<Counted> a = make_ref<Counted>(&freed);
  Counted* raw = a.detach();
  EXPECT_FALSE(a);
  EXPECT_EQ(raw->refs.load(), 1);  // still held, now by `raw`
  EXPECT_EQ(freed, 0);
  {
    Ref<Counted> back(raw, adopt);
    EXPECT_EQ(raw->refs.load(), 1);
  }
  EXPECT_EQ(freed, 1);
}

TEST(Ref, AnEmptyRefCountsNothing) {
  Ref<Counted> a;
  Ref<Counted> b = nullptr;
  Ref<Counted> c(static_cast<Counted*>(nullptr));
  Ref<Counted> d = a;
  EXPECT_FALSE(a || b || c || d);
  EXPECT_EQ(a, b);
  EXPECT_EQ(d.detach(), nullptr);
}

TEST(Ref, ComparesByObject) {
  int freed = 0;
  Ref<Counted> a = make_ref<Counted>(&freed);
  Ref<Counted> b = a;
  Ref<Counted> c = make_ref<Counted>(&freed);
  EXPECT_TRUE(a == b);
  EXPECT_FALSE(a == c);
  EXPECT_TRUE(a == b.get());
}

TEST(Ref, TheCountingArgumentChoosesTheKindOfReference) {
  int freed = 0;
  auto* c = new Counted(&freed);  // one reference of the default kind
  {
    Ref<Counted, SecondKind> second(c);
    EXPECT_EQ(c->refs.load(), 101);
    Ref<Counted, SecondKind> copy = second;
    EXPECT_EQ(c->refs.load(), 201);
  }
  EXPECT_EQ(c->refs.load(), 1);
  release(c);
  EXPECT_EQ(freed, 1);
}

TEST(Ref, CopiesOnManyThreadsFreeTheObjectExactlyOnce) {
  int freed = 0;
  Ref<Counted> shared = make_ref<Counted>(&freed);
  constexpr int threads = 4, copies = 10000;
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([copy = shared] {
      for (int i = 0; i < copies; ++i) {
        Ref<Counted> again = copy;
        Ref<Counted> moved = std::move(again);
      }
    });
  shared.reset();  // the threads' copies now decide when it goes
  for (auto& t : pool) t.join();
  EXPECT_EQ(freed, 1);
}

}  // namespace
}  // namespace cudakit::detail
