"""Concurrent jobs share reads and decodes through one galleyd (docs/sampling.md)."""


import pytest

import galley
from galley import transforms as T

from conftest import job_context, job_process, start_daemon, stop_daemon, write_folder


def noise_in_the_job(image):
    """An op galleyd does not know, run in each job after the shared part."""
    import torch
    return image.float() + torch.randn(image.shape)


def run_job(socket, root, seed, epochs, barrier, out, python_tail, workers):
    transform = [T.RandomResizedCrop(32), T.RandomHorizontalFlip()]
    if python_tail:
        from torchvision import transforms as TV
        transform = [TV.RandomResizedCrop(32), TV.RandomHorizontalFlip(), TV.PILToTensor(),
                     TV.Lambda(noise_in_the_job)]
    loader = galley.DataLoader(root, batch_size=8, seed=seed, socket=socket, shuffle=True,
                               transform=transform, num_workers=workers,
                               persistent_workers=bool(workers))
    len(loader)  # opens the job
    barrier.wait()
    orders = []
    for _ in range(epochs):
        ids = []
        for _images, _labels, item_ids in loader.iter_with_ids():
            ids.extend(item_ids.tolist())
        orders.append(ids)
    out.put((seed, orders))
    loader.close()


@pytest.mark.parametrize("python_tail,workers", [(False, 0), (True, 0), (True, 1)],
                         ids=["galleyd", "python", "python-worker"])
def test_four_jobs_on_one_dataset_load_each_item_about_once(tmp_path, python_tail, workers):
    # A daemon of its own, so its counters only see these four jobs. By
    # default galleyd keeps jobs in step only within bounds (docs/sampling.md
    # §3.3, tested in test_speeds.py): when four consumers and galleyd
    # contend for two cores and a consumer is descheduled, the jobs drift
    # apart for a while, and how far depends on the machine's load. Here a
    # job with a full peer is held until that peer frees a slot, so what is
    # shared depends on the sampler's coupling of the jobs, not on the
    # scheduling of their consumers (or of their worker processes).
    root = tmp_path / "data"
    write_folder(root, classes=4, per_class=30, sizes=(60, 100), seed=3)
    daemon = start_daemon(tmp_path, "--cache-bytes", "0", "--hold-budget-ms", "600000",
                          "--thin-hold-ms", "60000", "--peer-stall-ms", "600000")
    try:
        ctx = job_context()
        jobs, epochs = 4, 3
        barrier = ctx.Barrier(jobs)
        out = ctx.Queue()
        procs = [job_process(run_job, (daemon.socket, str(root), s, epochs, barrier, out,
                                       python_tail, workers))
                 for s in range(jobs)]
        for p in procs:
            p.start()
        results = dict(out.get(timeout=300) for _ in procs)
        for p in procs:
            p.join(timeout=60)
            assert p.exitcode == 0
        for seed, orders in results.items():
            assert len(orders) == epochs
            for ids in orders:
                assert sorted(ids) == list(range(120)), f"job {seed}: incomplete or duplicated epoch"
        status = daemon.query("status")
        group, = [g for g in status["samplers"] if g["dataset"].endswith("data")]
        ratio = group["loads"] / group["requests"]
        # Identical subsets started together share every item (ratio 1/4);
        # jobs open a few milliseconds apart, so the first batches of the
        # first epoch may be drawn before every job has joined. Separate
        # loaders would give 1.0.
        assert ratio < 0.45, f"loads per request {ratio:.3f} (ideal 0.25)"
        # Without a cache, every load is one file read and one decode.
        assert status["pipeline"]["decodes"] <= group["loads"]
    finally:
        stop_daemon(daemon)
