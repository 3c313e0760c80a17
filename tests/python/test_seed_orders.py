"""Concurrent jobs with different seeds: the default policy gives them one
order (that is how they share reads and decodes), policy="independent" each
the order of its own seed; the job that joins a shared order with another
seed is told once, and galleyd reports what each choice loads per request."""

import warnings

import galley
import galley.loader
from galley import transforms as T

from conftest import start_daemon, stop_daemon, write_folder

FIXED = T.Compose([T.Resize([8, 8])])
ITEMS = 120


def spearman(a, b):
    """Spearman's rank correlation of the positions of the same items in two
    orders (permutations without ties)."""
    n = len(a)
    position = {item: i for i, item in enumerate(b)}
    d2 = sum((i - position[item]) ** 2 for i, item in enumerate(a))
    return 1 - 6 * d2 / (n * (n * n - 1))


def loader(daemon, root, seed, policy=None):
    return galley.DataLoader(str(root), batch_size=8, shuffle=True, seed=seed, policy=policy,
                             transform=FIXED, socket=daemon.socket)


def side_by_side(loaders, epochs):
    """Each loader's item order per epoch, the loaders stepped together."""
    orders = [[] for _ in loaders]
    for _ in range(epochs):
        epoch = [[] for _ in loaders]
        for batches in zip(*(one.iter_with_ids() for one in loaders)):
            for ids, (_images, _labels, item_ids) in zip(epoch, batches):
                ids.extend(item_ids.tolist())
        for order, ids in zip(orders, epoch):
            assert sorted(ids) == list(range(ITEMS)), "an epoch lost or repeated an item"
            order.append(ids)
    return orders


def shared_order_notices(caught):
    return [w for w in caught if 'policy="independent"' in str(w.message)]


def test_independent_policy_keeps_each_seeds_order_beside_another_job(tmp_path):
    root, copy = tmp_path / "data", tmp_path / "copy"
    for folder in (root, copy):  # the copy: its own sampler group, the same item ids
        write_folder(folder, classes=4, per_class=ITEMS // 4, sizes=(8, 12), seed=4)
    daemon = start_daemon(tmp_path)
    try:
        alone = loader(daemon, copy, 1, "independent")
        alone_orders = side_by_side([alone], 2)[0]
        alone.close()

        galley.loader._WARNED.discard("shared_order")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            jobs = [loader(daemon, root, seed, "independent") for seed in (1, 2)]
            for job in jobs:
                len(job)  # both open before either yields: one sampler group
            first, second = side_by_side(jobs, 2)
        assert shared_order_notices(caught) == [], "each job keeps its own order: no notice"
        # The seed's order, whatever runs beside it.
        assert first == alone_orders
        # Two independent uniform permutations of n items: Spearman's rho has
        # mean 0 and variance 1/(n - 1), so |rho| < 0.4 holds but for about
        # 1e-4 of seed pairs (4.4 sigma at n = 120); the default policy gives
        # +1.0 once the jobs run together.
        rhos = [spearman(a, b) for a, b in zip(first, second)]
        assert all(abs(rho) < 0.4 for rho in rhos), rhos

        stats = jobs[0].stats()
        group, = [g for g in stats["samplers"] if g["dataset"] == str(root)]
        assert group["policy"] == "independent"
        assert group["jobs"] == 2 and group["job_seeds"] == 2
        assert group["orders_follow_seeds"] is True
        # Two epochs each, and what galleyd prepared ahead since.
        assert group["requests"] >= 2 * 2 * ITEMS
        # Each item is loaded once per job, but for draws that coincide by
        # chance (about ln(n) per epoch): loads per request just under 1
        # instead of the default's 1/2.
        assert 0.9 < group["loads_per_request"] <= 1.0, group
        print(f"independent, 2 jobs: Spearman {rhos}, loads per request "
              f"{group['loads_per_request']:.3f}")
        for job in jobs:
            job.close()
    finally:
        stop_daemon(daemon)


def test_a_job_joining_a_shared_order_with_another_seed_is_told_once(tmp_path):
    roots = {}
    for name in ("sweep", "same_seed"):
        roots[name] = tmp_path / name
        write_folder(roots[name], classes=4, per_class=ITEMS // 4, sizes=(8, 12), seed=5)
    daemon = start_daemon(tmp_path)
    try:
        galley.loader._WARNED.discard("shared_order")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            # Equal seeds share one order as they should: nothing to say.
            same = [loader(daemon, roots["same_seed"], 7) for _ in range(2)]
            for job in same:
                len(job)
            assert shared_order_notices(caught) == []

            sweep = [loader(daemon, roots["sweep"], seed) for seed in (1, 2, 3)]
            len(sweep[0])
            assert shared_order_notices(caught) == [], "alone, the job has its seed's order"
            len(sweep[1])
            notices = shared_order_notices(caught)
            assert len(notices) == 1
            assert "seed=2" in str(notices[0].message)
            assert "one shared order" in str(notices[0].message)
            len(sweep[2])
            assert len(shared_order_notices(caught)) == 1, "once per process"
        stats = sweep[0].stats()
        group, = [g for g in stats["samplers"] if g["dataset"] == str(roots["sweep"])]
        assert group["policy"] == "dsa"
        assert group["jobs"] == 3 and group["job_seeds"] == 3
        assert group["orders_follow_seeds"] is False
        for job in same + sweep:
            job.close()
    finally:
        stop_daemon(daemon)
