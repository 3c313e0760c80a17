"""Order semantics of torch's DataLoader: shuffle=False is the id order every
epoch (and jobs walking it together share their reads), seed= decides the
order, identically after a daemon restart, and epochs= counts loops that ran
to their end."""


import pytest
import torch.utils.data

import galley
from galley import transforms as T

from conftest import job_context, job_process, start_daemon, stop_daemon, write_folder

FIXED = T.Compose([T.Resize([8, 8])])


def ids_of(loader):
    return [i for _x, _y, ids in loader.iter_with_ids() for i in ids.tolist()]


def test_shuffle_false_is_id_order_every_epoch(daemon, folder):
    loader = galley.DataLoader(folder, batch_size=7, transform=FIXED, socket=daemon.socket)
    assert loader.shuffle is False  # torch's default
    for _ in range(2):
        assert ids_of(loader) == list(range(60))
    loader.close()


@pytest.mark.compat
@pytest.mark.parametrize("world", [2, 3])
def test_ddp_shuffle_false_matches_distributed_sampler(daemon, tiny_folder, world):
    for drop_last in (False, True):
        for rank in range(world):
            loader = galley.DataLoader(tiny_folder, batch_size=2, transform=FIXED, rank=rank,
                                       world_size=world, drop_last=drop_last,
                                       socket=daemon.socket)
            sampler = torch.utils.data.DistributedSampler(
                list(range(12 + 1))[:12], num_replicas=world, rank=rank, shuffle=False,
                drop_last=drop_last)
            expected = list(sampler)
            if drop_last:  # and DataLoader(drop_last=True) drops the short batch
                expected = expected[: len(expected) // 2 * 2]
            assert ids_of(loader) == expected
            loader.close()


def test_shuffle_false_refuses_a_random_policy(daemon, folder):
    with pytest.raises(ValueError, match="shuffle=True"):
        galley.DataLoader(folder, policy="dsa", transform=FIXED, socket=daemon.socket)


def run_eval(socket, root, barrier, out):
    loader = galley.DataLoader(root, batch_size=8, shuffle=False, socket=socket, transform=FIXED)
    len(loader)  # opens the job
    barrier.wait()
    out.put([ids_of(loader) for _ in range(2)])
    loader.close()


def test_evaluation_jobs_running_together_share_reads(tmp_path):
    root = tmp_path / "data"
    # Images large enough that galleyd, not the consumers, sets the pace:
    # both jobs then want a batch at every wave, as evaluation jobs do.
    write_folder(root, classes=2, per_class=20, sizes=(400, 500), seed=4)
    daemon = start_daemon(tmp_path, "--cache-bytes", "0")
    try:
        ctx = job_context()
        barrier, out = ctx.Barrier(2), ctx.Queue()
        procs = [job_process(run_eval, (daemon.socket, str(root), barrier, out))
                 for _ in range(2)]
        for p in procs:
            p.start()
        results = [out.get(timeout=300) for _ in procs]
        for p in procs:
            p.join(timeout=60)
        for orders in results:
            assert orders == [list(range(40))] * 2
        status = daemon.query("status")
        group, = [g for g in status["samplers"] if g["policy"] == "sequential"]
        # (requests include what the daemon prepared ahead into a third epoch)
        ratio = group["loads"] / group["requests"]
        # Walking the same order together, each item is read and decoded once for both
        # (ideal 0.5; allowing rounds where one consumer lagged past the scheduler's
        # hold budget on a loaded machine; two separate loaders would give 1.0).
        assert ratio < 0.7, f"loads per request {ratio:.3f}"
    finally:
        stop_daemon(daemon)


def orders(socket, root, seed, policy, epochs=2):
    loader = galley.DataLoader(root, batch_size=5, shuffle=True, seed=seed, policy=policy,
                               transform=FIXED, socket=socket)
    result = [ids_of(loader) for _ in range(epochs)]
    loader.close()
    return result


def test_seed_sets_the_order_identically_across_daemon_restarts(tmp_path):
    root = tmp_path / "data"
    write_folder(root, classes=2, per_class=10, sizes=(8, 12), seed=8)
    policies = ["dsa", "independent", "lockstep"]
    runs = []
    for _restart in range(2):
        daemon = start_daemon(tmp_path)
        try:
            runs.append({(seed, policy): orders(daemon.socket, str(root), seed, policy)
                         for seed in (1, 2, 5, 777) for policy in policies})
        finally:
            stop_daemon(daemon)
    assert runs[0] == runs[1], "the same seed gave another order after a restart"
    for policy in policies:
        by_seed = [runs[0][(seed, policy)] for seed in (1, 2, 5, 777)]
        firsts = [tuple(o[0]) for o in by_seed]
        assert len(set(firsts)) == 4, f"{policy}: different seeds gave the same order"
        assert all(o[0] != o[1] for o in by_seed), "two epochs had the same order"
    # An admin's daemon-wide seed varies every order.
    daemon = start_daemon(tmp_path, "--sampler-seed", "99")
    try:
        varied = orders(daemon.socket, str(root), 1, "dsa")
    finally:
        stop_daemon(daemon)
    assert varied != runs[0][(1, "dsa")]
    assert sorted(varied[0]) == list(range(20))


def test_epochs_counts_loops_that_ran_to_the_end(daemon, folder):
    loader = galley.DataLoader(folder, batch_size=16, epochs=2, shuffle=True, transform=FIXED,
                               socket=daemon.socket)
    assert len(loader) == 4
    next(iter(loader))  # a peek: not a completed epoch
    assert [sum(1 for _ in loader) for _ in range(3)] == [4, 4, 0]
    assert loader.completed_epochs == 2
    for images, _labels in loader:
        raise AssertionError("iteration past epochs= yielded a batch")
    loader.close()
