"""One rank of a multi-node DDP job for test_multinode.py, started with the
environment torchrun gives its workers (RANK, WORLD_SIZE, LOCAL_RANK,
LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR, MASTER_PORT). It joins its job's
gloo group, reads from its node's galleyd (the node layout from that
environment), trains a tiny DistributedDataParallel model, and writes the
item ids of every epoch and the daemon's record of the job.

    python ddp_node_rank.py CONFIG.json

CONFIG: {"socket", "dataset", "seed", "shard_seed", "epochs", "batch_size",
"prefetch", "ready_dir", "ready_count", "out"}. Before its first batch the rank waits
until ready_count ranks (of every job) have opened their loaders, as jobs
launched together do, and again before every epoch, as jobs of equal pace
stay in step.
"""

import json
import os
import pathlib
import sys
import time

import torch
import torch.distributed as dist

import galley
from galley import transforms as T

config = json.loads(pathlib.Path(sys.argv[1]).read_text())
dist.init_process_group("gloo")  # env://, as under torchrun
rank = dist.get_rank()
torch.manual_seed(0)
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(3 * 8 * 8, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
loader = galley.DataLoader(config["dataset"], batch_size=config["batch_size"], shuffle=True,
                           seed=config["seed"], shard_seed=config.get("shard_seed"),
                           prefetch=config.get("prefetch"),
                           transform=T.Compose([T.Resize([8, 8])]), socket=config["socket"])
len(loader)  # opens the job



def barrier(name):
    """Waits until ready_count ranks of every job have reached `name`."""
    folder = pathlib.Path(config["ready_dir"]) / name
    folder.mkdir(exist_ok=True)
    (folder / str(os.getpid())).touch()
    deadline = time.monotonic() + 120
    while len(list(folder.iterdir())) < config["ready_count"]:
        if time.monotonic() > deadline:
            sys.exit(f"the other ranks never reached {name}")
        time.sleep(0.002)


barrier("opened")
epochs = []
for epoch in range(config["epochs"]):
    # Jobs of equal pace start each epoch together, as node-affine sharing
    # needs (docs/sampling.md §9.2); a loaded test machine would otherwise
    # let one job drift an epoch ahead of the other.
    barrier(f"epoch{epoch}")
    loader.set_epoch(epoch)
    ids = []
    for images, _labels, item_ids in loader.iter_with_ids():
        loss = model(images.float().flatten(1)).logsumexp(1).mean()
        opt.zero_grad()
        loss.backward()  # all-reduce with the job's ranks on the other node
        opt.step()
        ids.extend(item_ids.tolist())
    epochs.append(ids)
job = loader.stats()["job"]
loader.close()
dist.barrier()
dist.destroy_process_group()
pathlib.Path(config["out"]).write_text(json.dumps(
    {"rank": rank, "local_world_size": loader.local_world_size, "epochs": epochs, "job": job}))
