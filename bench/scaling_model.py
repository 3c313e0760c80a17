#!/usr/bin/env python3
"""The arithmetic of docs/scaling.md: storage, NIC and remote-tier traffic per
epoch, memory per tier, and where the partition model puts each tier, for a
cluster of data-parallel training nodes each running galleyd.

    python3 bench/scaling_model.py                  # the tables of docs/scaling.md
    python3 bench/scaling_model.py --storage-gbs 50 --cache-gb 256

No measurement: every input is an assumption stated in docs/scaling.md (and
overridable here). The model is galley's (docs/cache.md: the rate of each
source, hit fractions, the hit-weighted harmonic mix), extended as Seneca's
DSI model does with the network: an item read from the remote tier or from
shared storage also crosses the node's NIC, and storage and the remote tier
are shared by all nodes. Decisions follow from the inputs, so changing one
shows how the placement moves.
"""

import argparse
import math

GB = 1e9


def options():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    a = p.add_argument
    a("--nodes", type=int, default=64)
    a("--gpus", type=int, default=8, help="GPUs per node")
    a("--gpu-rate", type=float, default=16621 / 8,
      help="images/s one GPU trains on (ResNet-50, mixed precision, A100: NVIDIA's "
           "DeepLearningExamples report 16,621 images/s for 8)")
    a("--items", type=int, default=1281167, help="images in the dataset (ImageNet-1k train)")
    a("--scales", default="1,10", help="dataset sizes to tabulate, as multiples of --items")
    a("--encoded-kb", type=float, default=110, help="mean JPEG size (140 GB / 1.28 M)")
    a("--decoded-kb", type=float, default=500, help="mean decoded RGB size at full resolution")
    a("--cores", type=int, default=64, help="cores per node given to galleyd")
    a("--decode-ms", type=float, default=1.0, help="JPEG decode, ms per image per core")
    a("--augment-ms", type=float, default=0.15, help="crop + resize + flip, ms per image per core")
    a("--storage-gbs", type=float, default=20, help="shared storage read bandwidth, GB/s, all nodes")
    a("--nic-gbit", type=float, default=100, help="node NIC for storage and cache traffic, Gbit/s")
    a("--cache-gb", type=float, default=512, help="galleyd's local cache per node, GB")
    a("--remote-servers", type=int, default=64,
      help="remote-tier servers (64: one beside galleyd on every node)")
    a("--remote-gb", type=float, default=32, help="remote-tier memory per server, GB")
    a("--remote-gbit", type=float, default=100, help="remote-tier server NIC, Gbit/s")
    a("--jobs", type=int, default=4, help="concurrent jobs in the sweep rows (GPUs split evenly)")
    a("--epochs", type=int, default=90, help="epochs of a training run")
    return p.parse_args()


def rates(o, n, remote):
    """Items/s one node gets when every item comes from one source, each
    capped by the GPUs' demand (loads/s the node must make)."""
    s, m = o.encoded_kb * 1e3, o.decoded_kb / o.encoded_kb
    nic = o.nic_gbit / 8 * GB
    cpu_encoded = o.cores * 1e3 / (o.decode_ms + o.augment_ms)
    cpu_decoded = o.cores * 1e3 / o.augment_ms
    storage_share = o.storage_gbs * GB / o.nodes
    remote_share = o.remote_servers * o.remote_gbit / 8 * GB / o.nodes if remote else 0
    return {
        "local decoded": cpu_decoded,
        "local encoded": cpu_encoded,
        "remote encoded": min(cpu_encoded, nic / s, remote_share / s) if remote else 0,
        "remote decoded": min(cpu_decoded, nic / (s * m), remote_share / (s * m)) if remote else 0,
        "storage": min(cpu_encoded, nic / s, storage_share / s),
    }


def plan(o, n, remote, demand, seen=1.0, pooled=1.0):
    """The best split of the local budget (1% grid, as galleyd's planner)
    and whether the remote pool holds encoded or decoded bytes; returns the
    fractions of loads each source serves and the node's load rate
    (items/s). `seen`: the fraction of the dataset the node has loaded so
    far (all its local tier can hold); `pooled`: the same for the pool."""
    s, d = o.encoded_kb * 1e3, o.decoded_kb * 1e3
    r = rates(o, n, remote)
    budget = o.cache_gb * GB
    pool = o.remote_servers * o.remote_gb * GB if remote else 0
    best = None
    for local_decoded_pct in range(101):
        # Tiers hold disjoint slices; a node's items are a uniformly random
        # subset each epoch, so a slice of x of the dataset serves x of them.
        fd = min(seen, local_decoded_pct / 100 * budget / (n * d))
        fe = min(seen - fd, (100 - local_decoded_pct) / 100 * budget / (n * s))
        for remote_decoded in ((False, True) if remote else (False,)):
            rest = 1 - fd - fe  # the pool's content is independent of the node's
            held = min(pooled, pool / (n * (d if remote_decoded else s)))
            f = {"local decoded": fd, "local encoded": fe,
                 "remote decoded": rest * held if remote_decoded else 0.0,
                 "remote encoded": 0.0 if remote_decoded else rest * held,
                 "storage": rest * (1 - held)}
            seconds = sum(share / min(r[k], demand) for k, share in f.items() if share > 0)
            rate = min(demand, 1 / seconds)
            key = (rate, not remote_decoded, -local_decoded_pct)  # ties: encoded bytes
            if best is None or key > best[0]:
                best = (key, f, rate, local_decoded_pct, remote_decoded)
    return best[1:]


def run(label, o, n, remote, jobs, affine):
    """A training run of --epochs epochs, epoch by epoch (expected values):
    the tiers start empty, every item a node loads is kept locally while the
    budget lasts, and every item any node loads is written to the pool.
    `jobs` jobs share the node's GPUs; affine jobs in step load each item
    once for all of them, jobs with their own splits each load their own."""
    s = o.encoded_kb * 1e3
    gpu_demand = o.gpus * o.gpu_rate                 # images/s the node's GPUs take
    loads_per_image = 1 / jobs if affine else 1.0
    demand = gpu_demand * loads_per_image            # loads/s the node must make
    shares = 1 if affine else jobs                   # fresh 1/N shares a node loads per epoch
    # In the first epoch the pool starts empty; jobs with their own splits
    # load each item `shares` times on different nodes at random moments, and
    # all but the first find it pooled.
    seen, pooled = 0.0, (shares - 1) / shares if remote else 0.0
    totals = {"time": 0.0, "storage": 0.0, "remote": 0.0}
    first = last = None
    peak_nic = peak_pool = 0.0
    for _epoch in range(o.epochs):
        f, load_rate, ld, remote_decoded = plan(o, n, remote, demand, seen, pooled)
        loads = n * shares  # cluster-wide loads this epoch
        item_bytes = {"remote encoded": s, "remote decoded": o.decoded_kb * 1e3, "storage": s}
        totals["storage"] += f["storage"] * loads * s
        totals["remote"] += (f["remote encoded"] * s + f["remote decoded"] * item_bytes[
            "remote decoded"]) * loads
        peak_nic = max(peak_nic, sum(f[k] * b for k, b in item_bytes.items()) * load_rate)
        peak_pool = max(peak_pool, (f["remote encoded"] * s + f["remote decoded"] * item_bytes[
            "remote decoded"]) * load_rate * o.nodes)
        seconds = loads / o.nodes / load_rate
        totals["time"] += seconds
        first = seconds if first is None else first
        last = (seconds, f, ld, remote_decoded)
        seen = min(1.0, 1 - (1 - seen) * (1 - 1 / o.nodes) ** shares)
        pooled = 1.0 if remote else 0.0  # every item was loaded somewhere this epoch
    seconds, f, ld, remote_decoded = last
    ideal = o.epochs * n * jobs / (gpu_demand * o.nodes)
    return {
        "case": label,
        "epoch 1 s": f"{first:.1f}",
        f"epoch {o.epochs} s": f"{seconds:.1f}",
        "run min": f"{totals['time'] / 60:.1f}",
        "GPU busy": f"{ideal / totals['time']:.0%}",
        "storage TB": f"{totals['storage'] / 1e12:.2f}",
        "remote TB": f"{totals['remote'] / 1e12:.1f}" if remote else "-",
        "NIC Gbit/s": f"{peak_nic * 8 / GB:.1f}",
        "pool GB/s": f"{peak_pool / GB:.0f}" if remote else "-",
        "last epoch local/remote/storage": "{:.0%}/{:.0%}/{:.0%}".format(
            f["local decoded"] + f["local encoded"], f["remote decoded"] + f["remote encoded"],
            f["storage"]),
        "local E/D %": f"{100 - ld}/{ld}",
        "pool holds": ("-" if not remote else "decoded" if remote_decoded else "encoded"),
    }


def table(rows):
    keys = list(rows[0])
    lines = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    lines += ["| " + " | ".join(r[k] for k in keys) + " |" for r in rows]
    return "\n".join(lines)


def main():
    o = options()
    s, d = o.encoded_kb * 1e3, o.decoded_kb * 1e3
    for scale in (float(x) for x in o.scales.split(",")):
        n = int(o.items * scale)
        print(f"\n## {n:,} images: {n * s / GB:,.0f} GB encoded, {n * d / GB:,.0f} GB decoded; "
              f"{o.nodes} nodes x {o.gpus} GPUs, {o.gpus * o.gpu_rate:,.0f} images/s per node\n")
        r = rates(o, n, True)
        print("source rates, items/s per node: " + ", ".join(
            f"{k} {v:,.0f}" for k, v in r.items()))
        print(f"remote pool {o.remote_servers * o.remote_gb:,.0f} GB; local cache {o.cache_gb:,.0f} GB "
              f"per node ({o.cache_gb * GB / (n * s):.0%} of the encoded dataset)\n")
        rows = []
        for remote in (False, True):
            tier = "with remote tier" if remote else "no remote tier"
            rows.append(run(f"1 job, {tier}", o, n, remote, 1, False))
            rows.append(run(f"{o.jobs} jobs, own splits, {tier}", o, n, remote, o.jobs, False))
            rows.append(run(f"{o.jobs} jobs, node-affine, {tier}", o, n, remote, o.jobs, True))
        print(table(rows))


if __name__ == "__main__":
    main()
