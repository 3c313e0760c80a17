// Batch hand-off through the shared-memory ring: the daemon publishes a
// filled slot, the client takes it as a Batch and releases it. This is the
// whole per-batch cost of the data plane (no copy of the tensor): a wake-up
// sent and drained, two atomic state changes, and one SlotReleased frame.
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <sys/socket.h>

#include <cstring>
#include <numeric>
#include <vector>

#include "client/src/job_channel.h"
#include "galley/scheduling/batch_ring.h"

namespace galley {
namespace {

struct RingPair {
  std::unique_ptr<BatchRing> ring;
  std::shared_ptr<internal::JobChannel> channel;
  UniqueFd daemon_end;
};

RingPair MakeRingPair(uint32_t batch) {
  const uint64_t sample_bytes = 3 * 224 * 224;
  auto geometry = wire::ComputeGeometry(4, batch, sample_bytes).value();
  TensorShape shape{3, 224, 224, wire::ElementType::kUInt8, wire::TensorLayout::kNCHW};
  RingPair pair;
  pair.ring = std::move(BatchRing::Create(geometry, shape, 0).value());
  int fds[2];
  ::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds);
  pair.daemon_end.Reset(fds[0]);
  auto region = wire::MappedRegion::Map(pair.ring->segment_fd(), geometry.segment_bytes).value();
  auto wakeup = wire::WakeupReceiver::Adopt(
                    UniqueFd(::fcntl(pair.ring->client_wakeup_fd(), F_DUPFD_CLOEXEC, 0)))
                    .value();
  JobInfo info;
  info.sample_shape = {3, 224, 224};
  info.slots = 4;
  pair.channel = std::make_shared<internal::JobChannel>(new wire::Connection(UniqueFd(fds[1])),
                                                        info, std::move(region), std::move(wakeup),
                                                        geometry, std::chrono::milliseconds(1000));
  // Fill every slot's tensor once so pages are resident, as in steady state.
  for (uint32_t i = 0; i < 4; ++i) {
    std::memset(wire::SlotTensor(pair.ring->slot(i), geometry), 1, batch * sample_bytes);
  }
  return pair;
}

void BM_BatchHandOff(benchmark::State& state) {
  const auto batch = static_cast<uint32_t>(state.range(0));
  RingPair pair = MakeRingPair(batch);
  char drain[4096];
  // What the scheduler publishes with each batch besides its samples.
  std::vector<ItemId> items(batch);
  std::iota(items.begin(), items.end(), ItemId{0});
  const std::vector<int64_t> labels(batch, 0);
  for (auto _ : state) {
    const uint32_t slot = *pair.ring->Claim();
    pair.ring->Publish(slot, BatchDescription{.items = items, .labels = labels});
    auto index = pair.channel->WaitNext(std::chrono::milliseconds(1000));
    if (!index.ok()) {
      state.SkipWithError(index.status().ToString().c_str());
      break;
    }
    {
      Batch leased(pair.channel, *index);
      benchmark::DoNotOptimize(leased.data());
      benchmark::DoNotOptimize(leased.labels().data());
    }  // released here: state Free + SlotReleased frame
    // The daemon reads the notification, as its connection thread would.
    (void)!::recv(pair.daemon_end.get(), drain, sizeof(drain), MSG_DONTWAIT);
  }
  state.SetItemsProcessed(state.iterations() * batch);
  state.counters["batch_bytes"] = static_cast<double>(batch) * 3 * 224 * 224;
}
BENCHMARK(BM_BatchHandOff)->Arg(64)->Arg(256)->UseRealTime();

}  // namespace
}  // namespace galley

BENCHMARK_MAIN();
