#!/usr/bin/python3
"""Jobs at different speeds on one dataset: galley (each policy) against PyTorch.

Usage:
  bench/mixed_speeds.py [--images 2000] [--batch-size 64] [--batches-per-job 20]
                        [--model-ms 0,10,30,60] [--stall-s 10]
                        [--policies dsa,independent] [--scenarios mixed-speeds,stalled-peer]

Scenarios (each job is its own process, as in compare_pytorch.py, whose job
body and accounting this reuses; the same images, transforms and batch size):

- mixed-speeds: four jobs on the same ImageFolder; job k sleeps --model-ms[k]
  after every batch (simulated model time). Every job is also run alone with
  the same model time. Per job: images/s in the mix, alone, mix/alone, and
  galley/PyTorch in the mix. Target: every galley job keeps >= 95% of its solo
  speed.
- stalled-peer: four jobs at full speed; job 3 takes its first timed batch and
  then stops consuming for --stall-s seconds, holding its batch. The other
  three are compared with the same three jobs run without a fourth. Their
  timed windows should lie inside the stall; the table says how much of each
  did. Target: each keeps >= 95% of its speed.

galley runs once per policy in --policies, with a fresh galleyd per run (the
solo runs use the daemon's default policy: one job shares with nobody).
PyTorch: torch.utils.data.DataLoader over torchvision's ImageFolder, 2 workers
per job. CPU per image counts the job processes (and their workers) over their
timed windows plus galleyd's CPU from the first job's start to the last
job's end. Writes DIR/mixed_speeds.csv and prints per-job tables.
"""

import argparse
import atexit
import csv
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare_pytorch as cp  # noqa: E402

SCENARIOS = ["mixed-speeds", "stalled-peer", "out-of-step"]
STALLED = 3  # the job that stalls in stalled-peer


def run_group(side, label, jobs, args, ctx, policy=None, cache_bytes=None, batches=None,
              daemon_args=()):
    """Runs `jobs` (dicts with index, model_s, model_jitter_s, stall, stall_every) together;
    returns per-job rows and totals. cache_bytes None: galleyd's default cache."""
    specs = [{"side": side, "scenario": label, "index": j["index"], "dataset": str(ctx["dataset"]),
              "batch_size": args.batch_size, "batches": batches or args.batches_per_job,
              "indices": None,
              "seed": 1000 + j["index"], "delay": 0.0, "untimed_epochs": 0,
              "torch_workers": args.torch_workers, "batch_timeout": 300.0,
              "model_s": j.get("model_s", 0.0), "stall": j.get("stall"), "policy": policy,
              "model_jitter_s": j.get("model_jitter_s", 0.0), "stall_every": j.get("stall_every")}
             for j in jobs]
    cp.warm_page_cache(ctx["files"])
    daemon, run_dir = None, None
    try:
        if side == "galley":
            run_dir = tempfile.mkdtemp(prefix="galley-speeds-")
            daemon, socket = cp.start_daemon(args.galleyd, ctx["dataset"], run_dir, cache_bytes,
                                             daemon_args)
            for spec in specs:
                spec["socket"], spec["daemon_pid"] = socket, daemon.pid
        rows, _lifetime = cp.run_jobs(side, label, specs, args)
    finally:
        if daemon is not None:
            cp.stop_daemon(daemon)
            cp.CHILDREN.daemons.remove(daemon)
        if run_dir:
            shutil.rmtree(run_dir, ignore_errors=True)
    out = {"jobs": {}, "images": sum(r["images"] for r in rows),
           "cpu_s": sum(r["cpu"] for r in rows), "loads_per_request": None}
    for spec, row in zip(specs, rows):
        out["jobs"][spec["index"]] = {
            "ips": row["images"] / (row["t_end"] - row["t_begin"]),
            "window": (row["t_begin"], row["t_end"]), "stall_window": row.get("stall_window"),
            "stats": row.get("job_stats") or {}}
    if side == "galley":
        # The counters' window: from the first to the last of the jobs that
        # ran through (a stalled job's tail after the others ended is its
        # own, unshared, and not what the scenario compares).
        timed = [r for r in rows if r.get("stall_window") is None] or rows
        first = min(timed, key=lambda r: r["t_begin"])
        last = max(timed, key=lambda r: r["t_end"])
        b, e = first["snapshot_begin"], last["snapshot_end"]
        out["cpu_s"] += e["daemon_cpu"] - b["daemon_cpu"]
        requests = cp._sum_samplers(e["status"], "requests") - cp._sum_samplers(
            b["status"], "requests")
        loads = cp._sum_samplers(e["status"], "loads") - cp._sum_samplers(b["status"], "loads")
        out["loads_per_request"] = loads / requests if requests else None
        decodes = cp._sum_samplers(e["status"], "decodes") - cp._sum_samplers(
            b["status"], "decodes")
        out["decodes_per_request"] = decodes / requests if requests else None
    out["cpu_ms_per_image"] = 1e3 * out["cpu_s"] / out["images"] if out["images"] else None
    return out


def _f(v, spec):
    return "-" if v is None else format(v, spec)


def mixed_speeds(args, ctx, csv_rows):
    model = args.model_ms
    jobs = [{"index": k, "model_s": ms / 1e3} for k, ms in enumerate(model)]
    solo = {side: {} for side in args.sides}
    for side in solo:
        for j in jobs:
            r = run_group(side, "solo", [j], args, ctx)
            solo[side][j["index"]] = r["jobs"][j["index"]]["ips"]
            print(f"  {side} job {j['index']} ({model[j['index']]} ms) alone: "
                  f"{solo[side][j['index']]:.1f} images/s", flush=True)
    torch_mix = None
    if "pytorch" in args.sides:
        torch_mix = run_group("pytorch", "mixed-speeds", jobs, args, ctx)
    runs = [(f"galley {p}", run_group("galley", "mixed-speeds", jobs, args, ctx, policy=p))
            for p in args.policies]
    if torch_mix:
        runs.append(("pytorch", torch_mix))
    print(f"\n== mixed-speeds: 4 jobs, model time {','.join(map(str, model))} ms per batch "
          f"of {args.batch_size}, {args.batches_per_job} batches each")
    print(f"{'side':18s} {'job':>3s} {'model ms':>8s} {'mix img/s':>9s} {'solo img/s':>10s} "
          f"{'mix/solo':>8s} {'vs torch':>8s} {'held s':>7s} {'wait s':>7s} {'full s':>7s}")
    for name, run in runs:
        side = "pytorch" if name == "pytorch" else "galley"
        for j in jobs:
            k = j["index"]
            r = run["jobs"][k]
            ratio = r["ips"] / solo[side][k]
            vs = r["ips"] / torch_mix["jobs"][k]["ips"] if side == "galley" and torch_mix else None
            st = r["stats"]
            print(f"{name:18s} {k:3d} {model[k]:8d} {r['ips']:9.1f} {solo[side][k]:10.1f} "
                  f"{ratio:8.2f} {_f(vs, '.2f'):>8s} {_f(st.get('peer_hold_seconds'), '.3f'):>7s} "
                  f"{_f(st.get('consumer_wait_seconds'), '.2f'):>7s} "
                  f"{_f(st.get('ring_full_seconds'), '.2f'):>7s}")
            csv_rows.append({"scenario": "mixed-speeds", "run": name, "job": k,
                             "model_ms": model[k], "images_per_s": r["ips"],
                             "solo_images_per_s": solo[side][k], "of_solo": ratio,
                             "vs_pytorch": vs, "peer_hold_s": st.get("peer_hold_seconds"),
                             "consumer_wait_s": st.get("consumer_wait_seconds"),
                             "ring_full_s": st.get("ring_full_seconds"),
                             "loads_per_request": run["loads_per_request"],
                             "cpu_ms_per_image": run["cpu_ms_per_image"]})
        print(f"{name:18s} all: loads/request {_f(run['loads_per_request'], '.3f')}, "
              f"CPU {_f(run['cpu_ms_per_image'], '.2f')} ms per delivered image")


def stalled_peer(args, ctx, csv_rows):
    others = [{"index": k} for k in range(4) if k != STALLED]
    four = others + [{"index": STALLED, "stall": (0, args.stall_s)}]
    runs = []
    for p in args.policies:
        runs.append((f"galley {p}", run_group("galley", "three", others, args, ctx, policy=p),
                     run_group("galley", "stalled-peer", four, args, ctx, policy=p)))
    if "pytorch" in args.sides:
        runs.append(("pytorch", run_group("pytorch", "three", others, args, ctx),
                     run_group("pytorch", "stalled-peer", four, args, ctx)))
    print(f"\n== stalled-peer: job {STALLED} stops for {args.stall_s:.0f} s after one timed "
          f"batch; {args.batches_per_job} batches per job")
    print(f"{'side':18s} {'job':>3s} {'with stall':>10s} {'3 alone':>8s} {'ratio':>6s} "
          f"{'in stall':>8s} {'held s':>7s} {'wait s':>7s}")
    for name, base, stalled in runs:
        if name != "pytorch":
            print(f"{name:18s} loads/request: {_f(stalled['loads_per_request'], '.3f')} with the "
                  f"stalled peer, {_f(base['loads_per_request'], '.3f')} for the 3 alone")
        stall = stalled["jobs"][STALLED]["stall_window"]
        for j in others:
            k = j["index"]
            r, b = stalled["jobs"][k], base["jobs"][k]
            t0, t1 = r["window"]
            inside = None
            if stall and stall[1]:
                inside = max(0.0, min(t1, stall[1]) - max(t0, stall[0])) / (t1 - t0)
            st = r["stats"]
            print(f"{name:18s} {k:3d} {r['ips']:10.1f} {b['ips']:8.1f} {r['ips'] / b['ips']:6.2f} "
                  f"{_f(inside, '.0%'):>8s} {_f(st.get('peer_hold_seconds'), '.3f'):>7s} "
                  f"{_f(st.get('consumer_wait_seconds'), '.2f'):>7s}")
            csv_rows.append({"scenario": "stalled-peer", "run": name, "job": k,
                             "images_per_s": r["ips"], "solo_images_per_s": b["ips"],
                             "of_solo": r["ips"] / b["ips"], "in_stall": inside,
                             "peer_hold_s": st.get("peer_hold_seconds"),
                             "consumer_wait_s": st.get("consumer_wait_seconds"),
                             "loads_per_request": stalled["loads_per_request"],
                             "cpu_ms_per_image": stalled["cpu_ms_per_image"]})


def out_of_step_jobs(copies):
    """One job whose model sleeps 0-50 ms a batch, one at full speed, two at full speed
    that stall 2 s every 100 batches; `copies` of each (docs/sampling.md §3.5)."""
    jobs = []
    for _ in range(copies):
        jobs += [{"model_jitter_s": 0.050}, {}, {"stall_every": (100, 2.0)},
                 {"stall_every": (100, 2.0)}]
    return [dict(j, index=k) for k, j in enumerate(jobs)]


def out_of_step(args, ctx, csv_rows):
    """Loads per request of jobs in step and of jobs at different speeds, with the cache
    off and with a decoded tier of a quarter of the set, over --epochs epochs each."""
    batches = args.epochs * (args.images // args.batch_size)
    quarter = cp.decoded_bytes(ctx["files"]) // 4
    sets = [("in-step", [{"index": k} for k in range(4)])] if args.in_step else []
    sets += [("mixed-speeds", out_of_step_jobs(n // 4)) for n in args.mixed_jobs]
    tiers = [("off", 0, ()), ("1/4 decoded", quarter, ("--cache-split", "0,100,0"))]
    tiers = [t for t, name in zip(tiers, ("off", "quarter")) if name in args.caches]
    print(f"\n== out-of-step: {args.epochs} epochs of {args.images} images per job, batch "
          f"{args.batch_size}; a quarter of the set decoded is {quarter / 2**20:.0f} MiB")
    print(f"{'set':14s} {'jobs':>4s} {'cache':>12s} {'loads/req':>9s} {'decodes/req':>11s} "
          f"{'lag peak':>8s} {'ahead peak':>10s} {'load avg':>8s}")
    for name, jobs in sets:
        for cache_name, cache_bytes, daemon_args in tiers:
            load = os.getloadavg()[0]
            run = run_group("galley", name, jobs, args, ctx, policy="dsa",
                            cache_bytes=cache_bytes, batches=batches, daemon_args=daemon_args)
            stats = [r["stats"] for r in run["jobs"].values()]
            lag = max((s.get("lag_peak", 0) for s in stats), default=0)
            ahead = max((s.get("drawn_ahead_peak", 0) for s in stats), default=0)
            print(f"{name:14s} {len(jobs):4d} {cache_name:>12s} "
                  f"{_f(run['loads_per_request'], '.4f'):>9s} "
                  f"{_f(run['decodes_per_request'], '.4f'):>11s} {lag:8d} {ahead:10d} "
                  f"{load:8.1f}", flush=True)
            csv_rows.append({"scenario": "out-of-step", "run": name, "jobs": len(jobs),
                             "cache": cache_name, "cache_bytes": cache_bytes,
                             "loads_per_request": run["loads_per_request"],
                             "decodes_per_request": run["decodes_per_request"],
                             "lag_peak": lag, "drawn_ahead_peak": ahead, "load_average": load})


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--images", type=int, default=2000)
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--batches-per-job", type=int, default=20)
    p.add_argument("--model-ms", default="0,10,30,60")
    p.add_argument("--stall-s", type=float, default=10.0)
    p.add_argument("--policies", default="dsa,independent")
    p.add_argument("--scenarios", default="mixed-speeds,stalled-peer",
                   help=f"any of {','.join(SCENARIOS)}")
    p.add_argument("--galleyd", default=str(cp.REPO / "build/server/daemon/galleyd"))
    p.add_argument("--results", default=str(cp.REPO / "results"))
    p.add_argument("--torch-workers", type=int, default=2)
    p.add_argument("--no-pytorch", action="store_true",
                   help="galley's runs only (no PyTorch rows, no galley/PyTorch ratios)")
    p.add_argument("--job-timeout", type=float, default=300.0)
    p.add_argument("--verbose", action="store_true")
    p.add_argument("--epochs", type=int, default=10, help="out-of-step: epochs per job")
    p.add_argument("--mixed-jobs", default="4,8",
                   help="out-of-step: sizes of the mixed-speed sets (multiples of 4)")
    p.add_argument("--caches", default="off,quarter",
                   help="out-of-step: off (no cache), quarter (a decoded tier of 1/4 the set)")
    p.add_argument("--no-in-step", dest="in_step", action="store_false",
                   help="out-of-step: leave out the 4 jobs in step")
    args = p.parse_args()
    args.sides = ("galley",) if args.no_pytorch else ("galley", "pytorch")
    args.model_ms = [int(x) for x in args.model_ms.split(",")]
    if len(args.model_ms) != 4:
        p.error("--model-ms takes four values")
    args.policies = [x for x in args.policies.split(",") if x]
    args.mixed_jobs = [int(x) for x in args.mixed_jobs.split(",") if x]
    args.caches = [x for x in args.caches.split(",") if x]
    args.scenarios = [x for x in args.scenarios.split(",") if x]
    for s in args.scenarios:
        if s not in SCENARIOS:
            p.error(f"unknown scenario {s!r}")
    if args.batches_per_job * args.batch_size > args.images:
        p.error("a job's batches must fit in one epoch: raise --images")
    return args


def main():
    args = parse_args()
    print(f"galleyd: {args.galleyd} (built {cp.binary_mtime(args.galleyd)}); "
          f"load average {os.getloadavg()[0]:.1f} on {len(os.sched_getaffinity(0))} cores at start")
    ctx, args.galleyd = cp.prepare_run(args.images, args.classes, args.galleyd, "speeds")
    csv_rows = []
    try:
        if "mixed-speeds" in args.scenarios:
            mixed_speeds(args, ctx, csv_rows)
        if "stalled-peer" in args.scenarios:
            stalled_peer(args, ctx, csv_rows)
        if "out-of-step" in args.scenarios:
            out_of_step(args, ctx, csv_rows)
    finally:
        cp.CHILDREN.kill_all()
        print(f"load average {os.getloadavg()[0]:.1f} at the end")
        if csv_rows:
            os.makedirs(args.results, exist_ok=True)
            path = os.path.join(args.results, "mixed_speeds.csv")
            fields = sorted({k for r in csv_rows for k in r})
            with open(path, "w", newline="") as f:
                w = csv.DictWriter(f, fieldnames=fields)
                w.writeheader()
                w.writerows(csv_rows)
            print(f"wrote {path}")


if __name__ == "__main__":
    main()
