"""One DDP rank for test_ddp.py: joins a gloo group on loopback, trains a tiny
DistributedDataParallel model on galley batches, and writes what it saw.

    python ddp_rank.py RANK WORLD PORT SOCKET DATASET OUT.json
"""

import json
import sys

import torch
import torch.distributed as dist
from torch.utils.data import DistributedSampler

import galley
from galley import transforms as T

rank, world, port, socket, root, out = (int(sys.argv[1]), int(sys.argv[2]), sys.argv[3],
                                         sys.argv[4], sys.argv[5], sys.argv[6])
dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                        world_size=world)
torch.manual_seed(0)
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(3 * 8 * 8, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
FIXED = T.Compose([T.Resize([8, 8])])
report = {}
for drop_last in (False, True):
    # rank and world_size come from torch.distributed.
    loader = galley.DataLoader(root, batch_size=2, shuffle=True, drop_last=drop_last, seed=5,
                               transform=FIXED, socket=socket)
    # A DistributedSampler (over any dataset of the same size): its own split.
    n = loader.info["subset_size"]
    sampler = DistributedSampler(list(range(n)), shuffle=True, seed=5, drop_last=drop_last)
    via_sampler = galley.DataLoader(root, batch_size=2, sampler=sampler, drop_last=drop_last,
                                    transform=FIXED, socket=socket)
    for name, l in (("default", loader), ("sampler", via_sampler)):
        epochs, lists = [], []
        for epoch in range(2):
            if name == "sampler":
                sampler.set_epoch(epoch)
                lists.append(list(sampler))  # what torch would feed this rank
            else:
                l.set_epoch(epoch)
            batches = []
            for images, labels, ids in l.iter_with_ids():
                loss = model(images.float().flatten(1)).logsumexp(1).mean()
                opt.zero_grad()
                loss.backward()  # all-reduce: every rank must take the same number of steps
                opt.step()
                batches.append(ids.tolist())
            epochs.append(batches)
        report[f"{name}-{int(drop_last)}"] = {
            "len": len(l), "epochs": epochs, "lists": lists, "skipped": l.skipped,
            "sampler_len": len(sampler), "rank": l.rank, "world_size": l.world_size}
        l.close()
dist.barrier()
dist.destroy_process_group()
with open(out, "w") as f:
    json.dump(report, f)
