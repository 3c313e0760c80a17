"""Multi-node DDP on one machine: two galleyd processes stand for two nodes
(each its own socket), DDP ranks with gloo on loopback are spread across
them with the environment torchrun gives its workers. One job's shards are
disjoint and complete across the nodes; two concurrent jobs with different
seeds and one shard_seed load the same items on each node, so each node's
galleyd reads and decodes them once for both (docs/sampling.md §9), while
each job's order stays uniform. A node whose galleyd dies takes only its own
ranks down."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import split_reference as ref
from conftest import HERE, free_port, start_daemon, stop_daemon, write_folder
from stats import chi2_sf


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    base = tmp_path_factory.mktemp("multinode")
    one = base / "data" / "one"  # 24 items: 4 ranks x 6
    write_folder(one, classes=3, per_class=8, sizes=(8, 12), seed=31)
    # 16 items: 2 ranks x 8; one copy per test, so that each sampler group's
    # counters see one pair of jobs.
    two = {}
    for affine in (True, False):
        two[affine] = base / "data" / f"two-{affine}"
        write_folder(two[affine], classes=2, per_class=8, sizes=(8, 12), seed=32)
    return base, one, two


@pytest.fixture(scope="module")
def nodes(data):
    """Two galleyds without a cache: every load is one read and one decode."""
    base = data[0]
    daemons = []
    try:
        for node in range(2):
            directory = base / f"node{node}"
            directory.mkdir()
            daemons.append(start_daemon(directory, "--allowed-root", str(base / "data"),
                                        "--cache-bytes", "0"))
        yield daemons
    finally:
        for d in daemons:
            stop_daemon(d)


def run_jobs(tmp_path, jobs):
    """Starts every rank of every job; jobs: [(config, world, ranks_per_node,
    sockets by node)]. Returns each job's reports, by rank."""
    ready = tmp_path / "ready"
    ready.mkdir()
    count = sum(world for _config, world, _local, _sockets in jobs)
    procs = []
    for j, (config, world, local, sockets) in enumerate(jobs):
        port = free_port()
        for rank in range(world):
            node = rank // local
            out = tmp_path / f"job{j}-rank{rank}.json"
            path = tmp_path / f"job{j}-rank{rank}.config.json"
            path.write_text(json.dumps({**config, "socket": sockets[node], "ready_dir": str(ready),
                                        "ready_count": count, "out": str(out)}))
            env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(world),
                       LOCAL_RANK=str(rank % local), LOCAL_WORLD_SIZE=str(local),
                       GROUP_RANK=str(node), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
            procs.append((j, rank, out, subprocess.Popen(
                [sys.executable, str(HERE / "ddp_node_rank.py"), str(path)], env=env,
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)))
    logs = []
    for _j, _rank, _out, p in procs:
        try:
            logs.append(p.communicate(timeout=240)[0])
        except subprocess.TimeoutExpired:
            for *_rest, q in procs:
                q.kill()
            pytest.fail("a DDP rank hung")
    assert all(p.returncode == 0 for *_rest, p in procs), "\n".join(logs)
    reports = [[None] * world for _config, world, _local, _sockets in jobs]
    for j, rank, out, _p in procs:
        reports[j][rank] = json.loads(out.read_text())
    return reports


def group_of(daemon, root):
    status = daemon.query("status")
    group, = [g for g in status["samplers"] if g["dataset"] == str(root)]
    return group, status


def test_one_job_over_two_nodes_gets_disjoint_complete_shards(nodes, data, tmp_path):
    _base, root, _two = data
    n, world, local, epochs = 24, 4, 2, 2
    config = {"dataset": str(root), "seed": 5, "epochs": epochs, "batch_size": 3}
    reports, = run_jobs(tmp_path, [(config, world, local, [d.socket for d in nodes])])
    for rank, r in enumerate(reports):
        assert r["local_world_size"] == local  # from LOCAL_WORLD_SIZE
        assert (r["job"]["nodes"], r["job"]["node_rank"]) == (2, rank // local)
        assert r["job"]["shard_seed"] == 5
    for epoch in range(epochs):
        shards = [r["epochs"][epoch] for r in reports]
        flat = [i for s in shards for i in s]
        assert sorted(flat) == list(range(n)), "shards overlap or miss items"
        order = ref.epoch_order(range(n), 5, epoch)
        for rank, s in enumerate(shards):
            assert sorted(s) == sorted(ref.shard(range(n), 5, epoch, rank, world, local))
        for node in range(2):  # node g holds the positions = g (mod 2)
            held = {i for s in shards[node * local:(node + 1) * local] for i in s}
            assert held == set(order[node::2])


def position_p(orders, m):
    """p-value that the items (mapped to 0..m-1) are uniform over positions
    in these orders: Pearson's statistic scaled by (m-1)/m, (m-1)^2 degrees
    of freedom (docs/sampling.md §6: a permutation matrix's covariance)."""
    table = np.zeros((m, m))
    for order in orders:
        for pos, item in enumerate(order):
            table[item, pos] += 1
    expected = len(orders) / m
    statistic = float(((table - expected) ** 2 / expected).sum()) * (m - 1) / m
    return chi2_sf(statistic, (m - 1) ** 2)


@pytest.mark.parametrize("affine", [True, False], ids=["one-shard-seed", "own-splits"])
def test_two_jobs_with_node_affine_shards_share_each_node(nodes, data, tmp_path, affine):
    """Two 2 x 1 jobs with seeds 1 and 2: with one shard_seed each node holds
    the same items for both and loads each once (loads per request 0.5);
    with their own splits (the control) the nodes' items overlap by chance
    only and about three loads in four remain."""
    root = data[2][affine]
    n, world, epochs, shard_seed = 16, 2, 40, 11
    m = n // world
    sockets = [d.socket for d in nodes]
    # The jobs start every epoch together (ddp_node_rank.py's barrier: jobs
    # of equal pace), and each buffers more than an epoch (6 batches of 2 per
    # epoch), so its consumer never runs below half its ring within an epoch:
    # holding it for its peer is then free (docs/sampling.md §3.3), and every
    # wave serves both jobs however the machine schedules their consumers.
    jobs = [({"dataset": str(root), "seed": seed, "shard_seed": shard_seed if affine else None,
              "epochs": epochs, "batch_size": 4, "prefetch": 6}, world, 1, sockets)
            for seed in (1, 2)]
    reports = run_jobs(tmp_path, jobs)
    by_node = np.zeros((n, 2))
    for epoch in range(epochs):
        for job, seed in zip(reports, (1, 2)):
            shards = [r["epochs"][epoch] for r in job]
            assert sorted(i for s in shards for i in s) == list(range(n))
            split_seed = shard_seed if affine else seed
            for rank, s in enumerate(shards):
                assert sorted(s) == sorted(ref.shard(range(n), split_seed, epoch, rank, world))
        for rank in range(world):
            by_node[reports[0][rank]["epochs"][epoch], rank] += 1
    # Each item lands on each node in half the epochs (n - 1 degrees of
    # freedom after the (n-1)/n scaling of a balanced partition).
    statistic = float(((by_node - epochs / 2) ** 2 / (epochs / 2)).sum()) * (n - 1) / n
    assert chi2_sf(statistic, n - 1) > 1e-3
    # Each job's order within its shard is uniform, though the two jobs share.
    # The orders of its two ranks are independent: the two galleyds do not
    # repeat one pattern (the same relative order has chance 1/8! an epoch).
    for job in reports:
        patterns = []
        for r in job:
            patterns.append([])
            for ids in r["epochs"]:
                rank_of = {item: k for k, item in enumerate(sorted(ids))}
                patterns[-1].append([rank_of[i] for i in ids])
        assert sum(a == b for a, b in zip(*patterns)) <= 1, "the nodes repeat one order"
        assert position_p(patterns[0] + patterns[1], m) > 1e-3
    for node, daemon in enumerate(nodes):
        group, status = group_of(daemon, root)
        ratio = group["loads"] / group["requests"]
        print(f"node {node}, {'one shard_seed' if affine else 'own splits'}: "
              f"loads per request {ratio:.3f}")
        if affine:
            # Identical shards drawn in the same rounds: each item loaded
            # once for both jobs (ideal 0.5).
            assert ratio < 0.6, f"node {node}: loads per request {ratio:.3f} (ideal 0.5)"
        else:
            # Two random halves of 16 share 4 items on average, which the
            # coupling hands to both jobs half the time: about 0.75.
            assert ratio > 0.65, f"node {node}: loads per request {ratio:.3f} without affinity"
        assert status["pipeline"]["decodes"] <= sum(g["loads"] for g in status["samplers"])


def test_a_node_that_dies_takes_only_its_own_ranks_down(data, tmp_path):
    """Rank 0 reads through node A, rank 1 through node B. A's galleyd is
    killed mid-epoch: rank 0 hears so within its timeout, rank 1 goes on to
    the end of its epoch, and its shard and rank 0's (reopened on B) are
    still disjoint and complete."""
    import galley
    from galley import transforms as T

    base, one, _two = data
    daemons = []
    for node in ("a", "b"):
        directory = tmp_path / node
        directory.mkdir()
        daemons.append(start_daemon(directory, "--allowed-root", str(base / "data")))
    a, b = daemons
    try:
        def loader(rank, daemon):
            return galley.DataLoader(str(one), batch_size=2, shuffle=True, seed=5, rank=rank,
                                     world_size=2, local_world_size=1, timeout=5,
                                     transform=T.Compose([T.Resize((8, 8))]),
                                     socket=daemon.socket)

        doomed, survivor = loader(0, a), loader(1, b)
        doomed_batches, survivor_batches = doomed.iter_with_ids(), survivor.iter_with_ids()
        next(doomed_batches)
        ids = next(survivor_batches)[2].tolist()
        a.proc.kill()
        a.proc.wait()
        with pytest.raises(galley.ServerUnavailable):
            for _batch in doomed_batches:
                pass
        for _images, _labels, item_ids in survivor_batches:
            ids.extend(item_ids.tolist())
        assert len(ids) == 12 and len(set(ids)) == 12
        # Rank 0's shard of epoch 0, from the node that is left.
        again = loader(0, b)
        rank0 = [i for _x, _y, item_ids in again.iter_with_ids() for i in item_ids.tolist()]
        assert sorted(rank0 + ids) == list(range(24))
        for each in (doomed, survivor, again):
            each.close()
    finally:
        for d in daemons:
            if d.proc.poll() is None:
                stop_daemon(d)
            else:
                d.log.close()
