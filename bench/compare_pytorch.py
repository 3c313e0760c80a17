#!/usr/bin/python3
"""End-to-end throughput of galley against torch.utils.data.DataLoader.

Usage:
  bench/compare_pytorch.py [--images 5000] [--batch-size 64]
                           [--scenarios 1job,4same,4overlap,8same,warm,warm4,recipe1,
                                        recipe4,recipe_py1,recipe_py4]
                           [--batches-per-job N] [--galleyd PATH] [--results DIR] [--quick]
                           [--max-resolution N] [--sides galley,pytorch[,ffcv][,dali]]
                           [--baseline-galleyd PATH] [--repetitions R]

Both sides read the same generated ImageNet-like JPEG ImageFolder
(scripts/make_demo_dataset.py into .demo/bench-<N>) and produce uint8 NCHW
batches of RandomResizedCrop(224) + RandomHorizontalFlip; the recipe1 and
recipe4 scenarios (1 and 4 jobs sharing the dataset) run torchvision's
ImageNet training recipe instead (RandomResizedCrop(224, bicubic), flip,
TrivialAugmentWide, float32 Normalize, RandomErasing), the same torchvision
Compose on both sides (galley translates it into its daemon pipeline). The
recipe_py1 and recipe_py4 scenarios append the job's own Python op to that
recipe (a Lambda adding Gaussian noise to the normalised tensor): galley runs
the recipe in galleyd and the Lambda in 2 worker processes per job
(num_workers=2, as the PyTorch side), and the report sets galley's ratio
beside the ceiling that the per-job Python part puts on it. galley: a fresh
galleyd per scenario (default worker threads, temporary socket) and one
galley.DataLoader per job process. PyTorch: one torch.utils.data.DataLoader
over torchvision's ImageFolder per job process, 2 workers each, shuffled.

The warm and warm4 scenarios (1 and 4 jobs) time each job after one untimed
epoch, with galleyd's cache sized for the whole decoded set. With
--max-resolution N a side galley@N runs beside the exact one, its jobs asking
for max_resolution=N (docs/datasets.md, "Training resolution"); FFCV's side
becomes ffcv@N, reading a .beton written at max_resolution=N; and every
galley run gets one cache size, the geometric mean of the decoded set shrunk
to N and at full resolution (below the full set, above the shrunk one),
unless --cache-bytes names another.

The enc_cold1, enc_cold4, enc_warm1 and enc_warm4 scenarios (1 and 4 jobs)
give galleyd a cache whose decoded tier is smaller than the set: a fixed
split of 90% encoded, 10% decoded, the encoded share sized to hold every
item in either form (the file's bytes, or the shrunk pixels raw, whichever
is larger, with 15% to spare). enc_cold* times the first epoch (at
max_resolution the items the decoded tier refuses are packed for the
encoded tier), enc_warm* the epoch after one untimed one, served mostly by
the encoded tier. --baseline-galleyd PATH adds a side "before" (and
"before@N") that runs another galleyd build the same way, for before/after
ratios in one run; --repetitions R runs every side of a scenario R times in
turn and reports each side's median run.

Every job is its own process. It takes one batch untimed (process start,
worker spawn and job open stay out of the measurement), then times the next
batches; the aggregate is the timed images of all jobs over the wall time from
the first job's start to the last job's end. The page cache holds every file
before each side runs. CPU is counted over each job's timed window from
/proc: the job process and its descendants (PyTorch's workers), plus, for
galley, galleyd's utime + stime between the first start and the last end.

The cost-model limit (bench/README.md) uses per-item read, decode and
augment costs measured by galleyd in the same run.

Writes DIR/compare_pytorch.csv and DIR/compare_pytorch.png and prints a table.
"""

import argparse
import atexit
import csv
import itertools
import json
import math
import multiprocessing as mp
import os
import queue
import random
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
import warnings
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "python"))

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
PR_SET_PDEATHSIG = 1
ALL_SCENARIOS = ["1job", "4same", "4overlap", "8same", "warm", "warm4", "recipe1", "recipe4",
                 "recipe_py1", "recipe_py4", "enc_cold1", "enc_cold4", "enc_warm1", "enc_warm4"]
# The enc_* scenarios' fixed split (encoded, decoded, augmented percent).
ENCODED_SPLIT = (90, 10, 0)
GALLEY_SIDES = ("galley", "before")
NOISE_STD = 0.1  # the Python op's Gaussian noise, in normalised units
OVERLAP_FRACTION = 0.75
# Job k starts k x this after the first. galley prepares a 3,750-image epoch
# in a few seconds, so a longer stagger would leave the jobs barely
# overlapping and measure little sharing.
OVERLAP_STAGGER_S = 0.5
SUBSET_SEED = 20240611


# -- /proc accounting -----------------------------------------------------------------------


def _stat_fields(pid):
    """Fields of /proc/<pid>/stat after the command name: [0] is field 3 (state)."""
    with open(f"/proc/{pid}/stat") as f:
        data = f.read()
    return data[data.rindex(")") + 2:].split()


def process_cpu_seconds(pid):
    """utime + stime of one process (all its threads)."""
    fields = _stat_fields(pid)
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def tree_cpu_seconds(root):
    """utime + stime of `root` and every live descendant of it."""
    parent_of, cpu = {}, {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            fields = _stat_fields(name)
        except (OSError, ValueError, IndexError):
            continue  # exited while we looked
        pid = int(name)
        parent_of[pid] = int(fields[1])
        cpu[pid] = (int(fields[11]) + int(fields[12])) / CLOCK_TICKS
    children = {}
    for pid, parent in parent_of.items():
        children.setdefault(parent, []).append(pid)
    total, stack = 0.0, [root]
    while stack:
        pid = stack.pop()
        total += cpu.get(pid, 0.0)
        stack.extend(children.get(pid, []))
    return total


def peak_rss_bytes(pid):
    """VmHWM of a live process, in bytes."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return None


def die_with_parent():
    """Asks the kernel to SIGKILL this process when its parent exits."""
    try:
        import ctypes
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except Exception:
        pass


def _torch_worker_init(_worker_id):
    die_with_parent()


# -- one job process ------------------------------------------------------------------------


def _touch(images):
    # A consumer reads the batch; a checksum of one pixel per sample reaches
    # every sample's memory without making the consumer the bottleneck.
    return int(images[:, :, 0, 0].sum())  # float batches: sum truncated


def _galley_snapshot(socket, daemon_pid):
    import galley
    return {"status": galley.query("status", socket=socket),
            "daemon_cpu": process_cpu_seconds(daemon_pid)}


def add_noise(x):
    """The job's own Python op: Gaussian noise on the normalised tensor."""
    import torch
    return x + NOISE_STD * torch.randn_like(x)


def imagenet_recipe(python_op=False):
    """torchvision's ImageNet training recipe (references/classification with
    --auto-augment ta_wide --random-erase 0.25, bicubic as for ViT/ConvNeXt):
    the same torchvision object is given to both loaders; galley translates it.
    With ``python_op``, the user's noise Lambda comes last (run in the job)."""
    import torch
    from torchvision import transforms as TT
    bicubic = TT.InterpolationMode.BICUBIC
    ops = [TT.RandomResizedCrop(224, interpolation=bicubic),
           TT.RandomHorizontalFlip(), TT.TrivialAugmentWide(interpolation=bicubic),
           TT.PILToTensor(), TT.ConvertImageDtype(torch.float),
           TT.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225]),
           TT.RandomErasing(p=0.25)]
    if python_op:
        ops.append(TT.Lambda(add_noise))
    return TT.Compose(ops)


def python_part_cost(batch_size, samples=512):
    """CPU seconds per sample of what a galley job runs in Python for the
    recipe_py scenarios, alone, on one thread: each sample's generators
    seeded, its copy out of the batch, the noise op, and default_collate of
    the batch. It is paid per job on both sides."""
    import torch
    from galley import python_stage, transforms as GT
    from torchvision import transforms as TT
    torch.set_num_threads(1)
    split = python_stage.split_transform(imagenet_recipe(python_op=True))
    assert [type(op).__name__ for op in split.tail] == ["Lambda"], split.describe()
    stage = python_stage.SampleStage(split, None, seed=0)
    batch = torch.randn(batch_size, 3, 224, 224)
    labels, done = [0] * batch_size, 0
    noise_only = time.process_time()
    for _ in range(samples):
        add_noise(batch[0])
    noise_only = (time.process_time() - noise_only) / samples
    begin = time.process_time()
    while done < samples:
        python_stage.collate(stage.run(batch, labels, range(done, done + batch_size), 0), None)
        done += batch_size
    return (time.process_time() - begin) / done, noise_only


class DaliEpochs:
    """A built DALI pipeline as an iterable of (images, labels) torch batches,
    one epoch of its reader per iteration."""

    def __init__(self, pipe):
        pipe.build()
        self.pipe = pipe
        self.batches = math.ceil(pipe.epoch_size("reader") / pipe.max_batch_size)

    def __iter__(self):
        import torch
        for _ in range(self.batches):
            images, labels = self.pipe.run()
            yield (torch.from_numpy(images.as_array()),
                   torch.from_numpy(labels.as_array()).reshape(-1))


def run_job(spec, barrier, results, parent_pid):
    """Body of one job process; puts ("ok", index, row) or ("error", index, text)."""
    index = spec["index"]
    try:
        die_with_parent()
        if os.getppid() != parent_pid:
            return
        # The jobs take different seeds on purpose and share one order under
        # the default policy (docs/sampling.md 1.2): galley's notice of that
        # is not news here.
        warnings.filterwarnings("ignore", message=".*one shared order.*")
        if spec["side"] == "galley":
            import galley
            from galley import transforms as GT
        elif spec["side"] == "ffcv":
            import torch  # noqa: F401  (FFCV's ToTensor makes torch tensors)
            from ffcv.fields.decoders import IntDecoder, RandomResizedCropRGBImageDecoder
            from ffcv.loader import Loader, OrderOption
            from ffcv.transforms import RandomHorizontalFlip, ToTensor, ToTorchImage
        elif spec["side"] == "dali":
            from nvidia.dali import fn, pipeline_def, types
        else:
            import torch
            import torchvision
            from torchvision import transforms as TT
        import torch
        # The job's own tensor work (touching each batch) runs on one thread,
        # as in a training process whose model runs on an accelerator. torch's
        # default, a thread per core of the machine, would have N job
        # processes spin N times as many threads as the cores they share.
        torch.set_num_threads(1)
        # Built before the release: importing torchvision takes a few tenths
        # of a second, with jitter between processes, and would otherwise
        # stagger the galley jobs' starts (the PyTorch side imports it above).
        recipe = imagenet_recipe(spec.get("python_op")) if spec.get("recipe") else None
        barrier.wait(timeout=spec["barrier_timeout"])
        t_released = time.monotonic()
        time.sleep(spec["delay"])

        if spec["side"] == "galley":
            loader = galley.DataLoader(
                spec["dataset"], batch_size=spec["batch_size"], shuffle=True,
                transform=recipe or GT.Compose([GT.RandomResizedCrop(224),
                                                GT.RandomHorizontalFlip()]),
                seed=spec["seed"], indices=spec["indices"], socket=spec["socket"],
                name=f"bench-{spec['scenario']}-{index}", timeout=spec["batch_timeout"],
                policy=spec.get("policy"), max_resolution=spec.get("max_resolution"),
                num_workers=spec["torch_workers"] if spec.get("python_op") else 0)
            segment_bytes = int(loader.info["segment_bytes"])
        elif spec["side"] == "ffcv":
            # FFCV's own pipeline: RandomResizedCrop fused into the JPEG
            # decoder, flip, uint8 NCHW (a channels-last view) torch tensors.
            loader = Loader(
                spec["beton"], batch_size=spec["batch_size"], num_workers=spec["torch_workers"],
                order=OrderOption.RANDOM, os_cache=True, seed=spec["seed"],
                indices=spec["indices"], drop_last=False,
                pipelines={"image": [RandomResizedCropRGBImageDecoder((224, 224)),
                                     RandomHorizontalFlip(), ToTensor(), ToTorchImage()],
                           "label": [IntDecoder(), ToTensor()]})
            segment_bytes = None
        elif spec["side"] == "dali":
            if spec["indices"] is not None:
                raise ValueError("the dali side reads whole datasets only")

            # DALI on the CPU only (device_id=None): the crop fused into the
            # JPEG decode, as FFCV's, then a resize to 224, flip, uint8 CHW.
            @pipeline_def(batch_size=spec["batch_size"], num_threads=spec["torch_workers"],
                          device_id=None, seed=spec["seed"])
            def dali_pipeline():
                jpegs, labels = fn.readers.file(file_root=spec["dataset"], random_shuffle=True,
                                                name="reader")
                images = fn.decoders.image_random_crop(jpegs, device="cpu",
                                                       output_type=types.RGB)
                images = fn.resize(images, resize_x=224, resize_y=224)
                images = fn.flip(images, horizontal=fn.random.coin_flip())
                return fn.transpose(images, perm=[2, 0, 1]), labels

            loader = DaliEpochs(dali_pipeline())
            segment_bytes = None
        else:
            dataset = torchvision.datasets.ImageFolder(
                spec["dataset"],
                transform=recipe or TT.Compose([TT.RandomResizedCrop(224),
                                                TT.RandomHorizontalFlip(), TT.PILToTensor()]))
            if spec["indices"] is not None:
                dataset = torch.utils.data.Subset(dataset, spec["indices"])
            loader = torch.utils.data.DataLoader(
                dataset, batch_size=spec["batch_size"], shuffle=True,
                num_workers=spec["torch_workers"], worker_init_fn=_torch_worker_init,
                generator=torch.Generator().manual_seed(spec["seed"]))
            segment_bytes = None

        checksum = 0
        for _ in range(spec["untimed_epochs"]):
            for images, _labels in loader:
                checksum += _touch(images)

        # Epoch after epoch: a spec may ask for more batches than one holds.
        batches = (batch for _epoch in itertools.count() for batch in loader)
        images, _labels = next(batches)  # untimed: worker spawn, job open, first fill
        checksum += _touch(images)
        del images, _labels
        t_first = time.monotonic()

        snapshot_begin = None
        if spec["side"] == "galley":
            snapshot_begin = _galley_snapshot(spec["socket"], spec["daemon_pid"])
        cpu_begin = tree_cpu_seconds(os.getpid())
        t_begin = time.monotonic()
        count = 0
        # Simulated model time per batch (mixed speeds), and a stall: the
        # consumer stops taking batches for a while, holding the one it has.
        model_s = spec.get("model_s", 0.0)
        stall_window = None
        stall_after, stall_s = spec.get("stall") or (None, 0.0)
        # A model time that varies (uniform in [0, model_jitter_s) more per
        # batch, from the job's seed) and a stall every so many batches.
        model_jitter_s = spec.get("model_jitter_s", 0.0)
        jitter = random.Random(spec["seed"])
        stall_every, stall_every_s = spec.get("stall_every") or (0, 0.0)
        batch_times = []  # (when it arrived, its images): the rate over time
        for k in range(spec["batches"] - 1):
            images, labels = next(batches)
            checksum += _touch(images)
            count += int(labels.shape[0])
            batch_times.append((time.monotonic(), int(labels.shape[0])))
            if model_s or model_jitter_s:
                time.sleep(model_s + jitter.uniform(0.0, model_jitter_s))
            if stall_every and (k + 1) % stall_every == 0:
                time.sleep(stall_every_s)
            if k == stall_after:
                stall_window = (time.monotonic(), None)
                time.sleep(stall_s)
                stall_window = (stall_window[0], time.monotonic())
        del images, labels
        t_end = time.monotonic()
        cpu_end = tree_cpu_seconds(os.getpid())
        snapshot_end = None
        if spec["side"] == "galley":
            snapshot_end = _galley_snapshot(spec["socket"], spec["daemon_pid"])
        row = {"index": index, "images": count, "t_released": t_released, "t_first": t_first,
               "t_begin": t_begin, "t_end": t_end,
               "cpu": cpu_end - cpu_begin, "segment_bytes": segment_bytes,
               "snapshot_begin": snapshot_begin, "snapshot_end": snapshot_end,
               "checksum": checksum, "stall_window": stall_window, "batch_times": batch_times}
        if spec["side"] == "galley":
            row["job_stats"] = loader.stats().get("job", {})
        del batches
        if spec["side"] == "galley":
            loader.close()
        results.put(("ok", index, row))
    except BaseException:
        try:
            barrier.abort()
        except Exception:
            pass
        results.put(("error", index, traceback.format_exc()))


# -- the orchestrator -----------------------------------------------------------------------


class Children:
    """Every process this benchmark starts, so that any exit path ends them."""

    def __init__(self):
        self.processes = []  # multiprocessing.Process
        self.daemons = []    # subprocess.Popen

    def kill_all(self):
        for p in self.processes:
            if p.is_alive():
                p.kill()
        for p in self.processes:
            p.join(timeout=5)
        self.processes.clear()
        for d in self.daemons:
            stop_daemon(d)
        self.daemons.clear()


CHILDREN = Children()


def stop_daemon(proc):
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def start_daemon(galleyd, dataset, run_dir, cache_bytes, extra_args=()):
    socket = os.path.join(run_dir, "galleyd.sock")
    log = open(os.path.join(run_dir, "galleyd.log"), "wb")
    cmd = [galleyd, "--socket", socket, "--allowed-root", str(dataset)]
    if cache_bytes is not None:
        cmd += ["--cache-bytes", str(int(cache_bytes))]
    cmd += list(extra_args)
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, preexec_fn=die_with_parent)
    log.close()
    CHILDREN.daemons.append(proc)
    deadline = time.monotonic() + 20
    while not os.path.exists(socket):
        if proc.poll() is not None:
            raise RuntimeError(f"galleyd exited with {proc.returncode}: {read_tail(run_dir)}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"galleyd did not open {socket}: {read_tail(run_dir)}")
        time.sleep(0.05)
    return proc, socket


def wait_for_prefault(socket, stall_s=2.0):
    """Waits until galleyd has committed its decoded tier's memory ahead of use
    (cache_prefault, docs/cache.md "Memory"), as a daemon started before the
    jobs would have, or until the commitment stops growing (prefault off,
    caching off). Returns (MiB committed, seconds waited)."""
    import galley
    start = time.monotonic()
    last, last_change = -1, start
    while True:
        arena = galley.query("cache", socket=socket).get("decoded_arena") or {}
        populated = int(arena.get("populated_bytes", 0))
        if populated >= int(arena.get("prefault_target_bytes", 0)):
            break
        now = time.monotonic()
        if populated != last:
            last, last_change = populated, now
        elif now - last_change > stall_s:
            break
        time.sleep(0.05)
    return populated / 2**20, time.monotonic() - start


def read_tail(run_dir, lines=5):
    try:
        with open(os.path.join(run_dir, "galleyd.log"), errors="replace") as f:
            return " | ".join(f.read().splitlines()[-lines:])
    except OSError:
        return "(no log)"


def binary_mtime(path):
    """The build time of a binary, to tell results of different builds apart."""
    try:
        return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(os.stat(path).st_mtime))
    except OSError:
        return None


def warm_page_cache(files):
    for path in files:
        with open(path, "rb") as f:
            while f.read(1 << 20):
                pass


def list_images(dataset):
    return sorted(str(p) for p in Path(dataset).rglob("*.jpg"))


def image_sizes(files):
    from PIL import Image
    out = []
    for path in files:
        with Image.open(path) as im:  # reads the header only
            out.append(im.size)
    return out


def shrunk_size(width, height, limit):
    """galleyd's rule (image/max_resolution.h): the longer side becomes
    `limit`, the shorter one is scaled and rounded down."""
    longer = max(width, height)
    return tuple(side if longer <= limit else max(1, side * limit // longer)
                 for side in (width, height))


def decoded_bytes(files, max_resolution=None):
    """RGB bytes of the images decoded, at most max_resolution on their longer side."""
    total = 0
    for w, h in image_sizes(files):
        if max_resolution:
            w, h = shrunk_size(w, h, max_resolution)
        total += w * h * 3
    return total


def split_side(side):
    """("galley", 256) for the side "galley@256", ("pytorch", None) for "pytorch"."""
    base, _, limit = side.partition("@")
    return base, int(limit) if limit else None


def run_jobs(side, scenario, specs, args):
    """Starts one process per spec, releases them together, returns their rows."""
    ctx = mp.get_context("spawn")
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_before = usage.ru_utime + usage.ru_stime
    barrier = ctx.Barrier(len(specs) + 1)
    results = ctx.Queue()
    procs = []
    for spec in specs:
        spec["barrier_timeout"] = 120.0
        p = ctx.Process(target=run_job, args=(spec, barrier, results, os.getpid()),
                        name=f"{side}-{scenario}-{spec['index']}")
        p.start()
        CHILDREN.processes.append(p)
        procs.append(p)
    try:
        barrier.wait(timeout=120.0)
    except Exception:
        pass  # a job failed before the start: its error arrives on the queue
    rows, errors = {}, []
    deadline = time.monotonic() + args.job_timeout
    while len(rows) + len(errors) < len(specs):
        try:
            kind, index, payload = results.get(timeout=1.0)
        except queue.Empty:
            if time.monotonic() > deadline:
                errors.append(f"timed out after {args.job_timeout:.0f} s")
                break
            if not any(p.is_alive() for p in procs):
                try:  # a last result may still be in flight
                    kind, index, payload = results.get(timeout=2.0)
                except queue.Empty:
                    errors.append("job processes exited without a result")
                    break
            else:
                continue
        if kind == "ok":
            rows[index] = payload
        else:
            errors.append(f"job {index}: {payload.strip().splitlines()[-1]}")
            if args.verbose:
                print(payload, file=sys.stderr)
    for p in procs:
        p.join(timeout=30)
        if p.is_alive():
            p.kill()
            p.join()
        CHILDREN.processes.remove(p)
    if errors:
        raise RuntimeError("; ".join(errors[:3]))
    print_timeline(side, [rows[i] for i in sorted(rows)])
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    lifetime_cpu = usage.ru_utime + usage.ru_stime - cpu_before
    return [rows[i] for i in sorted(rows)], lifetime_cpu


def print_timeline(side, rows):
    """When each job got its first batch and timed its window, from the common release."""
    zero = min(r["t_released"] for r in rows)
    parts = [f"{r['index']}: first {r['t_first'] - zero:.2f}, timed {r['t_begin'] - zero:.2f}"
             f"-{r['t_end'] - zero:.2f}" for r in rows]
    print(f"  {side:<10}  timeline (s after release) " + "; ".join(parts))


def summarize(rows):
    first = min(rows, key=lambda r: r["t_begin"])
    last = max(rows, key=lambda r: r["t_end"])
    images = sum(r["images"] for r in rows)
    wall = last["t_end"] - first["t_begin"]
    per_job = [r["images"] / (r["t_end"] - r["t_begin"]) for r in rows]
    return {"images": images, "wall_s": wall, "images_per_s": images / wall,
            "job_ips_min": min(per_job), "job_ips_mean": sum(per_job) / len(per_job),
            "job_ips_max": max(per_job), "jobs_cpu_s": sum(r["cpu"] for r in rows),
            "first": first, "last": last}


def _sum_samplers(status, key):
    return sum(float(s.get(key, 0)) for s in status.get("samplers", []))


def cost_model(begin, end, cores):
    """Per-item costs and the cost-model limit from two status documents.

    Work fractions per request come from the window's counter deltas; per-item
    costs from the same deltas where the window did that work, else from the
    run so far (the warm epoch decodes nothing: its decode cost is epoch 1's).
    """
    pb, pe = begin.get("pipeline", {}), end.get("pipeline", {})

    def delta(key):
        return float(pe.get(key, 0)) - float(pb.get(key, 0))

    requests = _sum_samplers(end, "requests") - _sum_samplers(begin, "requests")
    loads = _sum_samplers(end, "loads") - _sum_samplers(begin, "loads")
    out = {"requests": requests, "loads_per_request": loads / requests if requests else None}
    total_cost = 0.0
    for stage, count_key in (("read", "file_reads"), ("decode", "decodes"), ("augment", "augments")):
        n, s = delta(count_key), delta(f"{stage}_seconds")
        if n <= 0:
            n, s = float(pe.get(count_key, 0)), float(pe.get(f"{stage}_seconds", 0))
        per_item = s / n if n > 0 else None
        per_request = delta(count_key) / requests if requests else None
        out[f"{stage}_s_per_item"] = per_item
        out[f"{count_key}_per_request"] = per_request
        if per_item is not None and per_request is not None:
            total_cost += per_request * per_item
    for hit in ("decoded_hits", "encoded_hits", "augmented_hits"):
        out[f"{hit}_per_request"] = delta(hit) / requests if requests and hit in pe else None
    copy_s = 0.0
    total_cost += copy_s
    out["limit_images_per_s"] = cores / total_cost if total_cost > 0 else None
    return out


def scenario_specs(name, args, n_images):
    """(jobs, per-job subset or None, per-job delay, untimed epochs) of a scenario."""
    import numpy as np
    if name == "1job":
        return 1, [None], [0.0], 0
    if name == "4same":
        return 4, [None] * 4, [0.0] * 4, 0
    if name == "8same":
        return 8, [None] * 8, [0.0] * 8, 0
    if name == "4overlap":
        size = int(round(OVERLAP_FRACTION * n_images))
        subsets = [sorted(int(i) for i in np.random.default_rng([SUBSET_SEED, k])
                          .choice(n_images, size=size, replace=False)) for k in range(4)]
        return 4, subsets, [k * OVERLAP_STAGGER_S for k in range(4)], 0
    if name == "warm":
        return 1, [None], [0.0], 1
    if name == "warm4":
        return 4, [None] * 4, [0.0] * 4, 1
    if name in ("recipe1", "recipe_py1"):
        return 1, [None], [0.0], 0
    if name in ("recipe4", "recipe_py4"):
        return 4, [None] * 4, [0.0] * 4, 0
    if name.startswith("enc_"):
        jobs = 4 if name.endswith("4") else 1
        return jobs, [None] * jobs, [0.0] * jobs, 1 if name.startswith("enc_warm") else 0
    raise ValueError(f"unknown scenario {name!r}")


def run_side(side, name, args, ctx):
    """One side ("galley", "galley@256", "before@256", "pytorch", "ffcv", "ffcv@256") of a
    scenario."""
    base, max_resolution = split_side(side)
    galleyd = args.baseline_galleyd if base == "before" else args.galleyd
    jobs, subsets, delays, untimed_epochs = scenario_specs(name, args, len(ctx["files"]))
    batches = args.batches_per_job
    for subset in subsets:
        size = len(ctx["files"]) if subset is None else len(subset)
        batches = min(batches, size // args.batch_size)
    if batches < 2:
        raise RuntimeError("fewer than 2 full batches per job; use more --images")
    warm_page_cache(ctx["files"])
    specs = [{"side": "galley" if base in GALLEY_SIDES else base, "scenario": name, "index": k, "dataset": str(ctx["dataset"]),
              "batch_size": args.batch_size, "batches": batches, "indices": subsets[k],
              "seed": 1000 + k, "delay": delays[k], "untimed_epochs": untimed_epochs,
              "torch_workers": args.torch_workers, "batch_timeout": 300.0,
              "recipe": name.startswith("recipe"), "python_op": name.startswith("recipe_py"),
              "max_resolution": max_resolution}
             for k in range(jobs)]
    result = {"scenario": name, "side": side, "jobs": jobs, "batches_per_job": batches,
              "loadavg_1m": os.getloadavg()[0]}
    if base not in GALLEY_SIDES:
        if base == "ffcv":
            warm_page_cache([ctx["beton"]])
            for spec in specs:
                spec["beton"] = ctx["beton"]
        rows, lifetime_cpu = run_jobs(side, name, specs, args)
        result["jobs_lifetime_cpu_s"] = lifetime_cpu
        s = summarize(rows)
        result.update({k: v for k, v in s.items() if k not in ("first", "last")})
        result["cpu_s"] = s["jobs_cpu_s"]
        result["cpu_s_per_image"] = s["jobs_cpu_s"] / s["images"]
        return result

    cache_bytes = args.cache_bytes
    extra_args = args.galleyd_args.split()
    if name.startswith("warm"):
        cache_bytes = ctx["warm_cache_bytes"]
    if name.startswith("enc_"):
        cache_bytes = ctx["encoded_cache_bytes"]
        extra_args += ["--cache-split", ",".join(str(p) for p in ENCODED_SPLIT)]
    run_dir = tempfile.mkdtemp(prefix="galley-bench-")
    daemon = None
    try:
        result["galleyd_mtime"] = ctx["galleyd_mtime"]
        daemon, socket = start_daemon(galleyd, ctx["dataset"], run_dir, cache_bytes, extra_args)
        result["prefault_mib"], result["prefault_s"] = wait_for_prefault(socket)
        for spec in specs:
            spec["socket"], spec["daemon_pid"] = socket, daemon.pid
        rows, lifetime_cpu = run_jobs(side, name, specs, args)
        result["jobs_lifetime_cpu_s"] = lifetime_cpu
        s = summarize(rows)
        result.update({k: v for k, v in s.items() if k not in ("first", "last")})
        daemon_cpu = (s["last"]["snapshot_end"]["daemon_cpu"] -
                      s["first"]["snapshot_begin"]["daemon_cpu"])
        result["daemon_cpu_s"] = daemon_cpu
        result["cpu_s"] = s["jobs_cpu_s"] + daemon_cpu
        result["cpu_s_per_image"] = result["cpu_s"] / s["images"]
        result["daemon_peak_rss_bytes"] = peak_rss_bytes(daemon.pid)
        result["shm_per_job_bytes"] = max(r["segment_bytes"] for r in rows)
        result["cache_bytes"] = cache_bytes
        tiers = _galley_tiers(socket)
        if tiers:
            result.update(tiers)
        model = cost_model(s["first"]["snapshot_begin"]["status"],
                           s["last"]["snapshot_end"]["status"], args.cores)
        result.update(model)
        if model["limit_images_per_s"]:
            result["fraction_of_limit"] = s["images_per_s"] / model["limit_images_per_s"]
        if args.verbose:
            import galley
            for what in ("status", "cache", "plan"):
                print(json.dumps({what: galley.query(what, socket=socket)}, indent=1),
                      file=sys.stderr)
    finally:
        if daemon is not None:
            stop_daemon(daemon)
            CHILDREN.daemons.remove(daemon)
        shutil.rmtree(run_dir, ignore_errors=True)
    return result


# -- reporting ------------------------------------------------------------------------------

CSV_FIELDS = [
    "scenario", "side", "jobs", "batches_per_job", "images", "wall_s", "images_per_s", "ratio",
    "job_ips_min", "job_ips_mean", "job_ips_max", "cpu_s", "cpu_s_per_image", "daemon_cpu_s",
    "jobs_cpu_s", "jobs_lifetime_cpu_s", "daemon_peak_rss_bytes", "shm_per_job_bytes", "cache_bytes",
    "prefault_mib", "prefault_s",
    "loads_per_request", "file_reads_per_request", "decodes_per_request",
    "augments_per_request", "decoded_hits_per_request", "encoded_hits_per_request",
    "augmented_hits_per_request", "read_s_per_item", "decode_s_per_item",
    "augment_s_per_item", "limit_images_per_s", "fraction_of_limit", "python_part_s_per_image",
    "noise_op_s_per_image", "python_ceiling", "loadavg_1m", "galleyd_mtime",
    "encoded_entries", "encoded_bytes_per_entry", "decoded_entries", "decoded_bytes_per_entry",
    "packs", "unpacks", "unpack_failures", "repetition_images_per_s", "error",
]


def _fmt(value, spec, missing="-"):
    if value is None:
        return missing
    try:
        return format(value, spec)
    except (TypeError, ValueError):
        return str(value)


def _mib(value):
    return None if value is None else value / (1 << 20)


def _ms(value):
    return None if value is None else value * 1e3


def print_scenario(name, g, t):
    ratio = g.get("images_per_s") / t["images_per_s"] if g.get("images_per_s") and t.get(
        "images_per_s") else None
    print(f"\n== {name}")
    for label, r in (("galley", g), ("pytorch", t)):
        if r.get("error"):
            print(f"  {label:8s} ERROR: {r['error']}")
            continue
        print(f"  {label:8s} {r['images_per_s']:8.1f} images/s aggregate "
              f"({r['images']} images in {r['wall_s']:.1f} s; per job "
              f"{r['job_ips_min']:.1f}..{r['job_ips_max']:.1f}), "
              f"{r['cpu_s_per_image'] * 1e3:.2f} CPU ms/image")
    if ratio:
        print(f"  ratio galley/pytorch {ratio:.2f}x")
    if ratio and g.get("python_part_s_per_image"):
        # Both sides pay the Python part per job and per image; were
        # everything else free in galley, its ratio would be torch's CPU per
        # image over the Python part's.
        g["python_ceiling"] = t["cpu_s_per_image"] / g["python_part_s_per_image"]
        print(f"  the per-job Python part costs {g['python_part_s_per_image'] * 1e3:.2f} CPU "
              f"ms/image (the noise op alone {g['noise_op_s_per_image'] * 1e3:.2f} ms): "
              f"ceiling {g['python_ceiling']:.2f}x, reached {ratio / g['python_ceiling']:.2f}")
    if not g.get("error"):
        if g.get("prefault_mib"):
            print(f"  galleyd committed {g['prefault_mib']:.0f} MiB of decoded-tier memory "
                  f"ahead of use; the jobs started {g['prefault_s']:.2f} s after its socket")
        print(f"  galleyd peak RSS {_fmt(_mib(g.get('daemon_peak_rss_bytes')), '.0f')} MiB, "
              f"shm per job {_fmt(_mib(g.get('shm_per_job_bytes')), '.1f')} MiB, "
              f"loads/request {_fmt(g.get('loads_per_request'), '.3f')} "
              f"(file reads {_fmt(g.get('file_reads_per_request'), '.3f')}, decodes "
              f"{_fmt(g.get('decodes_per_request'), '.3f')}, decoded-cache hits "
              f"{_fmt(g.get('decoded_hits_per_request'), '.3f')} per request)")
        print(f"  per item: read {_fmt(_ms(g.get('read_s_per_item')), '.2f')} ms, decode "
              f"{_fmt(_ms(g.get('decode_s_per_item')), '.2f')} ms, augment "
              f"{_fmt(_ms(g.get('augment_s_per_item')), '.2f')} ms -> limit "
              f"{_fmt(g.get('limit_images_per_s'), '.1f')} images/s, measured/limit "
              f"{_fmt(g.get('fraction_of_limit'), '.2f')}")
    sys.stdout.flush()
    return ratio


def _ratio(g, r):
    if g.get("images_per_s") and r.get("images_per_s"):
        return g["images_per_s"] / r["images_per_s"]
    return None


def print_peer(name, side, g, r):
    if r.get("error"):
        print(f"  {side:8s} ERROR: {r['error']}")
        return
    print(f"  {side:8s} {r['images_per_s']:8.1f} images/s aggregate (per job "
          f"{r['job_ips_min']:.1f}..{r['job_ips_max']:.1f}), "
          f"{r['cpu_s_per_image'] * 1e3:.2f} CPU ms/image; ratio {g['side']}/{side} "
          f"{_fmt(_ratio(g, r), '.2f')}x")
    sys.stdout.flush()


def peer_pairs(sides, results):
    """(galley side, peer side, their results) for each galley side against
    each other side, but for exact galley against pytorch (the main table),
    and each galley side against the baseline build's at the same resolution."""
    galleys = [s for s in sides if split_side(s)[0] == "galley"]
    peers = [s for s in sides if split_side(s)[0] != "galley"]
    pairs = [(g, peer, results[g], results[peer]) for peer in peers for g in galleys
             if (g, peer) != ("galley", "pytorch")]
    return [p for p in pairs if split_side(p[1])[0] != "before" or
            split_side(p[0])[1] == split_side(p[1])[1]]


def _galley_tiers(socket):
    """Entries and bytes per entry of the encoded and decoded tiers, and the
    packed-pixel counters, after a galley side's run."""
    try:
        import galley
        cache = galley.query("cache", socket=socket)
    except Exception:  # an older galleyd, or no cache
        return {}
    out = {}
    for tier in ("encoded", "decoded"):
        t = cache.get("tiers", {}).get(tier, {})
        out[f"{tier}_entries"] = t.get("entries")
        if t.get("entries"):
            out[f"{tier}_bytes_per_entry"] = t["bytes"] / t["entries"]
    for key in ("packs", "unpacks", "unpack_failures"):
        out[key] = cache.get("pipeline", {}).get(key)
    return out


def print_peer_table(peers):
    header = (f"{'scenario':9s} {'galley':11s} {'peer':9s} {'galley/s':>9s} {'peer/s':>8s} "
              f"{'ratio':>6s} {'g ms/img':>8s} {'p ms/img':>8s}")
    print("\n" + header)
    print("-" * len(header))
    for name, side, g, r in peers:
        print(f"{name:9s} {g['side']:11s} {side:9s} "
              f"{_fmt(g.get('images_per_s'), '.1f', 'ERR'):>9s} "
              f"{_fmt(r.get('images_per_s'), '.1f', 'ERR'):>8s} {_fmt(_ratio(g, r), '.2f'):>6s} "
              f"{_fmt(_ms(g.get('cpu_s_per_image')), '.2f'):>8s} "
              f"{_fmt(_ms(r.get('cpu_s_per_image')), '.2f'):>8s}")


def write_beton(dataset, max_resolution=None):
    """FFCV's .beton of the same JPEGs, at full resolution or at most
    max_resolution px on the longer side (FFCV's own resize), made once next
    to the dataset and reused: its path."""
    suffix = f"-max{max_resolution}" if max_resolution else ""
    path = f"{dataset}{suffix}.beton"
    if os.path.exists(path) and os.path.getmtime(path) >= os.path.getmtime(dataset):
        return path
    import torchvision
    from ffcv.fields import IntField, RGBImageField
    from ffcv.writer import DatasetWriter
    started = time.monotonic()
    images = torchvision.datasets.ImageFolder(str(dataset))  # PIL images, labels
    partial = path + ".partial"
    DatasetWriter(partial, {"image": RGBImageField(write_mode="jpg", jpeg_quality=90,
                                                   max_resolution=max_resolution),
                            "label": IntField()}, num_workers=2).from_indexed_dataset(images)
    os.replace(partial, path)
    print(f"wrote {path} ({os.path.getsize(path) / (1 << 20):.0f} MiB) in "
          f"{time.monotonic() - started:.0f} s")
    return path


def print_table(pairs):
    header = (f"{'scenario':9s} {'jobs':>4s} {'galley/s':>9s} {'torch/s':>8s} {'ratio':>6s} "
              f"{'g ms/img':>8s} {'t ms/img':>8s} {'RSS MiB':>8s} {'shm MiB':>8s} "
              f"{'loads/req':>9s} {'rd/dec/aug ms':>15s} {'limit/s':>8s} {'of limit':>8s}")
    print("\n" + header)
    print("-" * len(header))
    for name, g, t, ratio in pairs:
        costs = "/".join(_fmt(_ms(g.get(k)), ".1f") for k in
                         ("read_s_per_item", "decode_s_per_item", "augment_s_per_item"))
        print(f"{name:9s} {g.get('jobs', t.get('jobs', 0)):>4d} "
              f"{_fmt(g.get('images_per_s'), '.1f', 'ERR'):>9s} "
              f"{_fmt(t.get('images_per_s'), '.1f', 'ERR'):>8s} {_fmt(ratio, '.2f'):>6s} "
              f"{_fmt(_ms(g.get('cpu_s_per_image')), '.2f'):>8s} "
              f"{_fmt(_ms(t.get('cpu_s_per_image')), '.2f'):>8s} "
              f"{_fmt(_mib(g.get('daemon_peak_rss_bytes')), '.0f'):>8s} "
              f"{_fmt(_mib(g.get('shm_per_job_bytes')), '.1f'):>8s} "
              f"{_fmt(g.get('loads_per_request'), '.3f'):>9s} {costs:>15s} "
              f"{_fmt(g.get('limit_images_per_s'), '.1f'):>8s} "
              f"{_fmt(g.get('fraction_of_limit'), '.2f'):>8s}")


def write_csv(path, pairs):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=CSV_FIELDS, extrasaction="ignore")
        w.writeheader()
        for _name, g, t, ratio in pairs:
            for r in (g, t):
                row = dict(r)
                row["ratio"] = ratio
                w.writerow({k: ("" if row.get(k) is None else row.get(k)) for k in CSV_FIELDS})


def write_plot(path, pairs, title):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    names = [p[0] for p in pairs]
    gv = [p[1].get("images_per_s") or 0.0 for p in pairs]
    tv = [p[2].get("images_per_s") or 0.0 for p in pairs]
    x = range(len(names))
    width = 0.38
    fig, ax = plt.subplots(figsize=(1.8 * len(names) + 3, 4.5))
    # Rates span two orders of magnitude across scenarios: a log axis keeps
    # the slower side readable.
    bars_g = ax.bar([i - width / 2 for i in x], gv, width, label="galley")
    bars_t = ax.bar([i + width / 2 for i in x], tv, width,
                    label="PyTorch DataLoader (2 workers per job)")
    for bars in (bars_g, bars_t):
        for bar in bars:
            if bar.get_height() > 0:
                ax.annotate(f"{bar.get_height():.0f}", (bar.get_x() + bar.get_width() / 2,
                                                        bar.get_height()),
                            xytext=(0, 2), textcoords="offset points", ha="center", fontsize=7)
    for i, (_name, _g, _t, ratio) in enumerate(pairs):
        top = max(gv[i], tv[i], 1.0)
        ax.annotate(f"{ratio:.2f}x" if ratio else "n/a", (i, top * 1.6), ha="center",
                    fontweight="bold")
    ax.set_yscale("log")
    ax.set_xticks(list(x))
    ax.set_xticklabels(names)
    ax.set_ylabel("aggregate images/s (log scale)")
    ax.set_title(title, fontsize=9)
    positive = [v for v in gv + tv if v > 0] or [1.0]
    ax.set_ylim(min(positive) / 2, max(positive) * 4)
    ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


# -- main -----------------------------------------------------------------------------------


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--images", type=int, default=None, help="dataset size (default 5000)")
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--scenarios", default=None, help=f"comma list of {','.join(ALL_SCENARIOS)}")
    p.add_argument("--batches-per-job", type=int, default=None,
                   help="batches each job takes, the first untimed (default: one epoch)")
    p.add_argument("--galleyd", default=str(REPO / "build/server/daemon/galleyd"))
    p.add_argument("--results", default=str(REPO / "results"))
    p.add_argument("--quick", action="store_true",
                   help="smoke run: 800 images, 1job and 4same")
    p.add_argument("--cache-bytes", type=int, default=None,
                   help="galleyd --cache-bytes outside the warm scenario (default: the daemon's)")
    p.add_argument("--galleyd-args", default="",
                   help="more galleyd flags, space-separated; give them with '=' "
                        "(e.g. --galleyd-args=--cache-prefault=false)")
    p.add_argument("--sides", default="galley,pytorch",
                   help="galley,pytorch and optionally ffcv (FFCV 1.0.2) and dali (DALI on "
                        "the CPU), see bench/README.md")
    p.add_argument("--torch-workers", type=int, default=2)
    p.add_argument("--cores", type=int, default=len(os.sched_getaffinity(0)),
                   help="cores in the cost-model limit (default: the CPUs this process may use)")
    p.add_argument("--job-timeout", type=float, default=1800.0,
                   help="seconds a side of a scenario may take")
    p.add_argument("--max-resolution", type=int, default=None,
                   help="also run galley@N (jobs keep images at most N px on their longer "
                        "side); FFCV's .beton is written at N")
    p.add_argument("--baseline-galleyd", default=None,
                   help="another galleyd build, run as the sides 'before' (and 'before@N'), "
                        "for before/after ratios in one run")
    p.add_argument("--repetitions", type=int, default=1,
                   help="runs of every side per scenario, in turn; each side's median counts")
    p.add_argument("--verbose", action="store_true")
    args = p.parse_args()
    if args.images is None:
        args.images = 800 if args.quick else 5000
    if args.scenarios is None:
        args.scenarios = "1job,4same" if args.quick else ",".join(ALL_SCENARIOS)
    args.scenarios = [s.strip() for s in args.scenarios.split(",") if s.strip()]
    for s in args.scenarios:
        if s not in ALL_SCENARIOS:
            p.error(f"unknown scenario {s!r}")
    args.sides = [x.strip() for x in args.sides.split(",") if x.strip()]
    if args.sides[:2] != ["galley", "pytorch"] or not set(args.sides) <= {"galley", "pytorch",
                                                                           "ffcv", "dali"}:
        p.error("--sides starts with galley,pytorch; the others are ffcv and dali")
    if args.max_resolution:
        n = args.max_resolution
        args.sides = (args.sides[:2] + [f"galley@{n}"] +
                      [f"{side}@{n}" if side == "ffcv" else side for side in args.sides[2:]])
    if args.baseline_galleyd:
        n = args.max_resolution
        args.sides += ["before"] + ([f"before@{n}"] if n else [])
    if args.batches_per_job is None:
        args.batches_per_job = args.images // args.batch_size
    if args.batches_per_job < 2:
        p.error("need at least 2 batches per job (the first is untimed)")
    return args


def median_run(rows):
    """The run of a side whose images/s is the median (the lower one of an even
    count), with every run's rate in "repetition_images_per_s"; an error when
    none succeeded."""
    ok = sorted((r for r in rows if r.get("images_per_s")), key=lambda r: r["images_per_s"])
    if not ok:
        return rows[-1]
    median = dict(ok[(len(ok) - 1) // 2])
    median["repetition_images_per_s"] = " ".join(f"{r['images_per_s']:.1f}" for r in ok)
    return median


def _on_signal(signum, _frame):
    raise SystemExit(128 + signum)


def prepare_run(images, classes, galleyd, tag):
    """What every benchmark program does first: children end with it, the
    jobs find galley under python/, the demo dataset of `images` exists, and
    galleyd is copied so that a rebuild meanwhile changes nothing. Returns
    (ctx with "dataset" and "files", the copy of galleyd)."""
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, _on_signal)
    atexit.register(CHILDREN.kill_all)
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [str(REPO / "python")] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])
    dataset = REPO / ".demo" / f"bench-{images}"
    subprocess.run([sys.executable, str(REPO / "scripts/make_demo_dataset.py"), str(dataset),
                    "--images", str(images), "--classes", str(classes)], check=True)
    binary_dir = tempfile.mkdtemp(prefix=f"galley-{tag}-bin-")
    atexit.register(shutil.rmtree, binary_dir, True)
    copy = shutil.copy2(galleyd, os.path.join(binary_dir, "galleyd")) if os.access(
        galleyd, os.X_OK) else galleyd
    return {"dataset": dataset, "files": list_images(dataset)}, copy


def main():
    args = parse_args()
    if args.baseline_galleyd:
        print(f"baseline galleyd: {args.baseline_galleyd} (built "
              f"{binary_mtime(args.baseline_galleyd)})")
        _ctx, args.baseline_galleyd = prepare_run(args.images, args.classes,
                                                   args.baseline_galleyd, "baseline")
    if not os.access(args.galleyd, os.X_OK):
        print(f"warning: {args.galleyd} is not executable; galley rows will be errors",
              file=sys.stderr)
    galleyd_mtime = binary_mtime(args.galleyd)
    print(f"galleyd: {args.galleyd} (built {galleyd_mtime})")
    # Every scenario runs the same build, even if galleyd is rebuilt meanwhile.
    ctx, args.galleyd = prepare_run(args.images, args.classes, args.galleyd, "bench")
    ctx["galleyd_mtime"] = galleyd_mtime
    dataset, files = ctx["dataset"], ctx["files"]
    if len(files) != args.images:
        sys.exit(f"{dataset} holds {len(files)} images, expected {args.images}")
    import torch
    print(f"python {sys.version.split()[0]} ({sys.executable}), torch {torch.__version__}")
    if any(split_side(side)[0] == "ffcv" for side in args.sides):
        ctx["beton"] = write_beton(dataset, args.max_resolution)
    if args.max_resolution:
        size, shrunk = decoded_bytes(files), decoded_bytes(files, args.max_resolution)
        if args.cache_bytes is None:
            args.cache_bytes = int(math.sqrt(size * shrunk))
        ctx["warm_cache_bytes"] = args.cache_bytes
        print(f"decoded size of the dataset: {size / (1 << 20):.0f} MiB, "
              f"{shrunk / (1 << 20):.0f} MiB at max_resolution={args.max_resolution}; every "
              f"galley run has --cache-bytes {args.cache_bytes}")
    if any(name.startswith("enc_") for name in args.scenarios):
        files_bytes = sum(os.path.getsize(f) for f in files)
        pixels = decoded_bytes(files, args.max_resolution)
        kept = max(files_bytes, pixels) + 512 * len(files)  # per-entry bookkeeping
        ctx["encoded_cache_bytes"] = int(kept * 1.15 * 100 / ENCODED_SPLIT[0])
        print(f"enc_* scenarios: --cache-bytes {ctx['encoded_cache_bytes']} split "
              f"{ENCODED_SPLIT}: the encoded tier holds every item, the decoded tier "
              f"{ctx['encoded_cache_bytes'] * ENCODED_SPLIT[1] / 100 / pixels:.0%} of the "
              f"pixels at {args.max_resolution or 'full size'}")
    elif "warm" in args.scenarios or "warm4" in args.scenarios:
        size = decoded_bytes(files)
        # Room beyond the pixels for per-entry bookkeeping and the planner's split.
        ctx["warm_cache_bytes"] = int(math.ceil(size * 1.25 / (1 << 20))) << 20
        print(f"decoded size of the dataset: {size / (1 << 20):.0f} MiB; warm scenario "
              f"runs galleyd with --cache-bytes {ctx['warm_cache_bytes']}")
    started = time.strftime("%Y-%m-%d %H:%M:%S")
    print(f"{started}: {len(files)} images in {dataset}, batch {args.batch_size}, "
          f"{args.batches_per_job} batches per job (first untimed), {args.cores} cores, "
          f"PyTorch {args.torch_workers} workers per job")

    python_part = None
    if any(name.startswith("recipe_py") for name in args.scenarios):
        python_part = python_part_cost(args.batch_size)
        print(f"the recipe_py scenarios' Python part alone: {python_part[0] * 1e3:.2f} CPU "
              f"ms/sample on one thread (the noise op {python_part[1] * 1e3:.2f} ms, the rest "
              f"seeding, the sample's copy and default_collate)")

    pairs, peers = [], []
    try:
        for name in args.scenarios:
            runs = {side: [] for side in args.sides}
            for repetition in range(args.repetitions):
                for side in args.sides:
                    try:
                        result = run_side(side, name, args, ctx)
                        if side == "galley" and name.startswith("recipe_py"):
                            result["python_part_s_per_image"] = python_part[0]
                            result["noise_op_s_per_image"] = python_part[1]
                    except Exception as e:  # one failed side is a row, not the end of the run
                        if args.verbose:
                            traceback.print_exc()
                        result = {"scenario": name, "side": side,
                                  "error": f"{type(e).__name__}: {e}"}
                        CHILDREN.kill_all()
                    runs[side].append(result)
            results = {side: median_run(rows) for side, rows in runs.items()}
            ratio = print_scenario(name, results["galley"], results["pytorch"])
            pairs.append((name, results["galley"], results["pytorch"], ratio))
            for _galley_side, side, g, r in peer_pairs(args.sides, results):
                peers.append((name, side, g, r))
                print_peer(name, side, g, r)
    finally:
        CHILDREN.kill_all()
        if pairs:
            os.makedirs(args.results, exist_ok=True)
            csv_path = os.path.join(args.results, "compare_pytorch.csv")
            png_path = os.path.join(args.results, "compare_pytorch.png")
            write_csv(csv_path, pairs)
            try:
                write_plot(png_path, pairs,
                           f"{len(files)} JPEGs, RandomResizedCrop(224)+flip, uint8, batch "
                           f"{args.batch_size}, {args.cores} cores ({started})")
            except Exception as e:
                print(f"plot failed: {e}", file=sys.stderr)
            print_table(pairs)
            if peers:
                print_peer_table(peers)
                peer_csv = os.path.join(args.results, "compare_peers.csv")
                write_csv(peer_csv, [(n, g, r, _ratio(g, r)) for n, _side, g, r in peers])
                print(f"wrote {peer_csv}")
            print(f"\nwrote {csv_path} and {png_path}")


if __name__ == "__main__":
    main()
