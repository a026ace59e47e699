// The shareable pool's allocation ledger on its own (no driver): what the producer writes,
// what an importer's read-only mapping of the same file sees, reuse of slots, exhaustion.
#include <gtest/gtest.h>

#include <vector>

#include "memory/allocation_ledger.hpp"

namespace cudakit::detail {
namespace {

TEST(AllocationLedgerTest, AnImporterSeesEachEntryLiveUntilTheProducerLetsItGo) {
  AllocationLedger producer = AllocationLedger::create();
  AllocationLedger importer = AllocationLedger::open(producer.file());
  const AllocationLedger::Entry a = producer.enter(), b = producer.enter();
  EXPECT_NE(a.slot, b.slot);
  EXPECT_NE(a.generation, 0u);
  EXPECT_TRUE(importer.live(a));
  EXPECT_TRUE(importer.live(b));
  producer.leave(a);
  EXPECT_FALSE(importer.live(a));
  EXPECT_TRUE(importer.live(b));
  // The freed slot is reused with a new generation: the old entry stays dead.
  const AllocationLedger::Entry c = producer.enter();
  EXPECT_EQ(c.slot, a.slot);
  EXPECT_NE(c.generation, a.generation);
  EXPECT_FALSE(importer.live(a));
  EXPECT_TRUE(importer.live(c));
  // Entries that name no slot, or no generation, are never live.
  EXPECT_FALSE(importer.live({AllocationLedger::slots, c.generation}));
  EXPECT_FALSE(importer.live({c.slot, 0}));
}

TEST(AllocationLedgerTest, AFullLedgerGivesNoEntryUntilASlotIsLetGo) {
  AllocationLedger ledger = AllocationLedger::create();
  std::vector<AllocationLedger::Entry> entries;
  entries.reserve(AllocationLedger::slots);
  for (std::uint32_t i = 0; i < AllocationLedger::slots; ++i) entries.push_back(ledger.enter());
  EXPECT_EQ(entries.back().slot, AllocationLedger::slots - 1);
  EXPECT_EQ(ledger.enter().generation, 0u) << "every slot is taken";
  ledger.leave(entries[7]);
  const AllocationLedger::Entry again = ledger.enter();
  EXPECT_EQ(again.slot, 7u);
  EXPECT_TRUE(ledger.live(again));
}

TEST(AllocationLedgerTest, AnImporterCannotWriteTheLedger) {
  AllocationLedger producer = AllocationLedger::create();
  AllocationLedger importer = AllocationLedger::open(producer.file());
  const AllocationLedger::Entry a = producer.enter();
  importer.leave(a);  // a read-only view lets nothing go
  EXPECT_TRUE(producer.live(a));
  EXPECT_TRUE(importer.live(a));
}

}  // namespace
}  // namespace cudakit::detail
