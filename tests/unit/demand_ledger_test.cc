// DemandLedger over a real DemandTracker: an epoch's items enter whole,
// each delivery takes one copy, leaving drops exactly what is left (copies
// of a repeated item included), and nothing a job had no demand for ever
// changes the tracker.
#include "galley/scheduling/demand_ledger.h"

#include <gtest/gtest.h>

#include <vector>

#include "galley/cache/blob.h"
#include "galley/cache/demand_tracker.h"

namespace galley {
namespace {

constexpr uint32_t kDataset = 3;
constexpr size_t kDatasetSize = 16;

class DemandLedgerTest : public ::testing::Test {
 protected:
  uint32_t DemandOf(ItemId item) const { return tracker_.Demand(cache::MakeKey(kDataset, item)); }

  cache::DemandTracker tracker_;
  DemandLedger ledger_{&tracker_};
};

TEST_F(DemandLedgerTest, AnEpochEntersWholeAndEachDeliveryTakesOneCopy) {
  const std::vector<ItemId> items = {0, 3, 7, 15};
  ledger_.Enter(1, kDataset, kDatasetSize, items);
  EXPECT_EQ(tracker_.TotalDemand(), 4u);
  for (ItemId item : items) EXPECT_EQ(DemandOf(item), 1u) << "item " << item;
  EXPECT_EQ(tracker_.Demand(cache::MakeKey(kDataset + 1, 3)), 0u) << "another dataset's key";

  ledger_.Consume(1, 7);
  EXPECT_EQ(DemandOf(7), 0u);
  EXPECT_EQ(ledger_.Outstanding(1), 3u);
  EXPECT_EQ(tracker_.TotalDemand(), 3u);
}

TEST_F(DemandLedgerTest, AnItemTheEpochHoldsTwiceIsNeededOncePerCopy) {
  // 5 twice in the list, once more among the repeats; 9 once in each.
  ledger_.Enter(1, kDataset, kDatasetSize, std::vector<ItemId>{5, 9, 5}, std::vector<ItemId>{5, 9});
  EXPECT_EQ(DemandOf(5), 3u);
  EXPECT_EQ(DemandOf(9), 2u);
  EXPECT_EQ(ledger_.Outstanding(1), 5u);

  ledger_.Consume(1, 5);
  ledger_.Consume(1, 9);
  EXPECT_EQ(DemandOf(5), 2u);
  EXPECT_EQ(DemandOf(9), 1u);

  // Leaving early drops the copies still owed, no more.
  ledger_.Leave(1);
  EXPECT_EQ(DemandOf(5), 0u);
  EXPECT_EQ(DemandOf(9), 0u);
  EXPECT_EQ(tracker_.TotalDemand(), 0u);
  EXPECT_EQ(ledger_.Outstanding(1), 0u);
}

TEST_F(DemandLedgerTest, ADeliveryTheJobHadNoDemandForChangesNothing) {
  ledger_.Enter(1, kDataset, kDatasetSize, std::vector<ItemId>{2, 4});
  // A second job needs 2 as well: the first one's extra deliveries of it
  // must not take the second's demand.
  ledger_.Enter(2, kDataset, kDatasetSize, std::vector<ItemId>{2});
  ledger_.Consume(1, 2);
  ledger_.Consume(1, 2);             // delivered twice, needed once
  ledger_.Consume(1, 6);             // not in its epoch
  ledger_.Consume(1, kDatasetSize);  // past the dataset
  ledger_.Consume(3, 4);             // a job the ledger does not know
  EXPECT_EQ(DemandOf(2), 1u);
  EXPECT_EQ(DemandOf(4), 1u);
  EXPECT_EQ(tracker_.TotalDemand(), 2u);
}

TEST_F(DemandLedgerTest, LeavingDropsOnlyThatJobsDemand) {
  ledger_.Enter(1, kDataset, kDatasetSize, std::vector<ItemId>{1, 2, 3});
  ledger_.Enter(2, kDataset, kDatasetSize, std::vector<ItemId>{2, 3, 4});
  ledger_.Consume(2, 3);
  ledger_.Leave(1);
  EXPECT_EQ(DemandOf(1), 0u);
  EXPECT_EQ(DemandOf(2), 1u);
  EXPECT_EQ(DemandOf(3), 0u);
  EXPECT_EQ(DemandOf(4), 1u);
  ledger_.Leave(1);  // again: nothing left to drop
  ledger_.Leave(7);  // never entered
  EXPECT_EQ(tracker_.TotalDemand(), 2u);
  ledger_.Leave(2);
  EXPECT_EQ(tracker_.TotalDemand(), 0u);
  EXPECT_EQ(tracker_.KeysWithDemand(), 0u);
}

TEST_F(DemandLedgerTest, EnteringAgainFirstDropsWhatTheLastEpochStillNeeded) {
  ledger_.Enter(1, kDataset, kDatasetSize, std::vector<ItemId>{1, 2, 3});
  ledger_.Consume(1, 1);
  ledger_.Enter(1, kDataset, kDatasetSize, std::vector<ItemId>{3, 4});
  EXPECT_EQ(DemandOf(1), 0u);
  EXPECT_EQ(DemandOf(2), 0u);
  EXPECT_EQ(DemandOf(3), 1u);
  EXPECT_EQ(DemandOf(4), 1u);
  EXPECT_EQ(ledger_.Outstanding(1), 2u);
  // An empty epoch registers nothing, and leaves nothing of the last one.
  ledger_.Enter(1, kDataset, kDatasetSize, {});
  EXPECT_EQ(tracker_.TotalDemand(), 0u);
  EXPECT_EQ(ledger_.Outstanding(1), 0u);
}

TEST_F(DemandLedgerTest, DeferredChangesWaitAndAreMadeInTheOrderAskedFor) {
  ledger_.Enter(1, kDataset, kDatasetSize, std::vector<ItemId>{1, 2, 3});
  ledger_.Defer();
  // The next wave's: job 1 receives 1 and leaves (its epoch's end), then
  // enters another epoch; job 2 enters and receives 6.
  ledger_.Consume(1, 1);
  ledger_.Leave(1);
  ledger_.Enter(1, kDataset, kDatasetSize, std::vector<ItemId>{3, 4});
  ledger_.Enter(2, kDataset, kDatasetSize, std::vector<ItemId>{5, 6});
  ledger_.Consume(2, 6);
  // Until then the tiers see the demand as it was.
  EXPECT_EQ(DemandOf(1), 1u);
  EXPECT_EQ(DemandOf(2), 1u);
  EXPECT_EQ(DemandOf(3), 1u);
  EXPECT_EQ(DemandOf(4), 0u);
  EXPECT_EQ(DemandOf(5), 0u);
  EXPECT_EQ(ledger_.Outstanding(1), 3u);
  EXPECT_EQ(ledger_.Outstanding(2), 0u);

  ledger_.ApplyDeferred();
  EXPECT_EQ(DemandOf(1), 0u);
  EXPECT_EQ(DemandOf(2), 0u);
  EXPECT_EQ(DemandOf(3), 1u);
  EXPECT_EQ(DemandOf(4), 1u);
  EXPECT_EQ(DemandOf(5), 1u);
  EXPECT_EQ(DemandOf(6), 0u);
  EXPECT_EQ(tracker_.TotalDemand(), 3u);
  EXPECT_EQ(ledger_.Outstanding(1), 2u);
  EXPECT_EQ(ledger_.Outstanding(2), 1u);

  // The deferral ended: changes are made at once again.
  ledger_.Consume(1, 4);
  EXPECT_EQ(DemandOf(4), 0u);
  ledger_.ApplyDeferred();  // nothing queued
  EXPECT_EQ(tracker_.TotalDemand(), 2u);
}

TEST(DemandLedgerWithoutCacheTest, RecordsNothing) {
  DemandLedger ledger(nullptr);
  ledger.Enter(1, kDataset, kDatasetSize, std::vector<ItemId>{1, 2});
  ledger.Consume(1, 1);
  EXPECT_EQ(ledger.Outstanding(1), 0u);
  ledger.Leave(1);
}

}  // namespace
}  // namespace galley
