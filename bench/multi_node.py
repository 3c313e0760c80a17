#!/usr/bin/python3
"""Several nodes on one shared storage, with and without the remote cache tier.

Stands N nodes (default 2) on this machine: N galleyd processes, each with
its own socket, cache budget and worker threads, all reading one
ImageNet-like JPEG dataset through a storage throttle shared by all of them
(`--storage-throttle-bytes-per-s` with one `--storage-throttle-file`: the
nodes queue behind each other on one pipe of that bandwidth, as nodes share
a file server). Each node runs one job (RandomResizedCrop(224) + flip, its
own seed, so its own order) for a few epochs, all nodes at once. Two modes:

  storage  every node reads every item it does not hold locally from storage;
  remote   the nodes share a remote tier: three memcached servers (SASL) on
           loopback, each node's galleyd pointed at all three.

Per mode and epoch it prints the storage bytes read by all nodes together,
each node's images/s, and the remote tier's bytes read and written; it
writes results/multi_node.csv.

    PYTHONPATH=python /usr/bin/python3 bench/multi_node.py [--nodes 2] [--images 600]
        [--storage-mb-per-s 12] [--epochs 2] [--cache-mib 16] [--worker-threads 1]

Figures on a shared 2-core machine are noisy; the ratios between the two
modes, measured in the same run, are what to read.
"""

import argparse
import csv
import multiprocessing as mp
import os
import pathlib
import pwd
import secrets
import shutil
import signal
import socket as socketlib
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python"))

USER, PASSWORD = "galley-bench", "bench-only-password"


def free_port():
    with socketlib.socket(socketlib.AF_INET, socketlib.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port, proc, what):
    for _ in range(500):
        with socketlib.socket(socketlib.AF_INET, socketlib.SOCK_STREAM) as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}")
        time.sleep(0.01)
    raise RuntimeError(f"{what} does not answer on port {port}")


def start_memcached(tmp, servers, memory_mb):
    """Servers requiring SASL, their user in a sasldb of this run's own."""
    conf = tmp / "sasl"
    conf.mkdir()
    (conf / "memcached.conf").write_text(f"mech_list: plain\nsasldb_path: {conf / 'sasldb2'}\n")
    subprocess.run(["saslpasswd2", "-a", "memcached", "-c", "-p", "-f", str(conf / "sasldb2"), USER],
                   input=PASSWORD.encode(), check=True)
    env = dict(os.environ, SASL_CONF_PATH=str(conf))
    user = ["-u", pwd.getpwuid(0).pw_name] if os.geteuid() == 0 else []
    procs, addresses = [], []
    for _ in range(servers):
        port = free_port()
        proc = subprocess.Popen(["memcached", "-S", "-l", "127.0.0.1", "-p", str(port), "-U", "0",
                                 "-m", str(memory_mb), *user], env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        procs.append(proc)
        wait_for_port(port, proc, "memcached")
        addresses.append(f"127.0.0.1:{port}")
    credentials = tmp / "remote-cache.toml"
    credentials.touch(mode=0o600)
    # Every node of the run shares one key that signs the values.
    credentials.write_text(f'username = "{USER}"\npassword = "{PASSWORD}"\n'
                           f'mac_key = "{secrets.token_hex(32)}"\n')
    return procs, addresses, credentials


def start_node(galleyd, tmp, name, root, args, throttle_file, remote):
    sock = str(tmp / f"{name}.sock")
    command = [galleyd, "--socket", sock, "--allowed-root", str(root),
               "--cache-bytes", f"{args.cache_mib}M", "--worker-threads", str(args.worker_threads),
               "--storage-throttle-bytes-per-s", str(args.storage_mb_per_s * 1e6),
               "--storage-throttle-file", str(throttle_file), "--log-level", "warn"]
    if remote is not None:
        addresses, credentials = remote
        for address in addresses:
            command += ["--remote-cache-server", address]
        command += ["--remote-cache-credentials", str(credentials)]
    log = open(tmp / f"{name}.log", "w")
    proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    for _ in range(500):
        if os.path.exists(sock):
            with socketlib.socket(socketlib.AF_UNIX, socketlib.SOCK_STREAM) as probe:
                if probe.connect_ex(sock) == 0:
                    return proc, sock, log
        if proc.poll() is not None:
            raise RuntimeError(f"galleyd {name} exited with {proc.returncode}; see {log.name}")
        time.sleep(0.02)
    raise RuntimeError(f"galleyd {name} did not start")


def job(sock, root, seed, epochs, batch_size, start, marks, out):
    import galley
    from galley import transforms as T
    # epochs= bounds what galleyd prepares: nothing past the last epoch is
    # prefetched into the counters.
    loader = galley.DataLoader(root, batch_size=batch_size, shuffle=True, seed=seed, socket=sock,
                               epochs=epochs,
                               transform=T.Compose([T.RandomResizedCrop(224),
                                                    T.RandomHorizontalFlip()]))
    len(loader)
    start.wait()
    spans = []
    for _epoch in range(epochs):
        begin, n = time.perf_counter(), 0
        for images, _labels in loader:
            n += images.shape[0]
        spans.append((time.perf_counter() - begin, n))
        marks.wait()  # every node finished this epoch: the parent reads the counters
    out.put((seed, spans))
    loader.close()


def counters(sock):
    import galley
    pipeline = galley.query("status", socket=sock)["pipeline"]
    remote = pipeline.get("remote") or {}
    return {"storage_bytes": pipeline["bytes_read"], "file_reads": pipeline["file_reads"],
            "remote_bytes_read": remote.get("bytes_read", 0),
            "remote_bytes_written": remote.get("bytes_written", 0),
            "remote_hits": remote.get("hits", 0)}


def run_mode(mode, args, root):
    tmp = pathlib.Path(tempfile.mkdtemp(prefix=f"galley-multinode-{mode}-"))
    servers, nodes, logs = [], [], []
    try:
        remote = None
        if mode == "remote":
            servers, addresses, credentials = start_memcached(tmp, 3, args.memcached_mb)
            remote = (addresses, credentials)
        throttle_file = tmp / "storage-throttle"
        for i in range(args.nodes):
            proc, sock, log = start_node(args.galleyd, tmp, f"node{i}", root, args, throttle_file,
                                         remote)
            nodes.append((proc, sock))
            logs.append(log)
        ctx = mp.get_context("spawn")
        start, marks, out = ctx.Barrier(args.nodes + 1), ctx.Barrier(args.nodes + 1), ctx.Queue()
        procs = [ctx.Process(target=job, args=(sock, str(root), i, args.epochs, args.batch_size,
                                               start, marks, out))
                 for i, (_proc, sock) in enumerate(nodes)]
        for p in procs:
            p.start()
        start.wait()
        before = [counters(sock) for _p, sock in nodes]
        per_epoch = []
        for _epoch in range(args.epochs):
            marks.wait()
            after = [counters(sock) for _p, sock in nodes]
            per_epoch.append([{k: a[k] - b[k] for k in a} for a, b in zip(after, before)])
            before = after
        spans = dict(out.get() for _ in procs)
        for p in procs:
            p.join()
        rows = []
        for epoch in range(args.epochs):
            deltas = per_epoch[epoch]
            rates = [spans[i][epoch][1] / spans[i][epoch][0] for i in range(args.nodes)]
            rows.append({
                "mode": mode, "epoch": epoch + 1, "nodes": args.nodes,
                "storage_mb": round(sum(d["storage_bytes"] for d in deltas) / 1e6, 1),
                "file_reads": sum(d["file_reads"] for d in deltas),
                "images_per_s_per_node": " ".join(f"{r:.1f}" for r in rates),
                "mean_images_per_s": round(sum(rates) / len(rates), 1),
                "remote_mb_read": round(sum(d["remote_bytes_read"] for d in deltas) / 1e6, 1),
                "remote_mb_written": round(sum(d["remote_bytes_written"] for d in deltas) / 1e6, 1),
                "remote_hits": sum(d["remote_hits"] for d in deltas),
            })
        return rows
    finally:
        for proc, _sock in nodes:
            proc.send_signal(signal.SIGTERM)
        for proc, _sock in nodes:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
        for proc in servers:
            proc.kill()
            proc.wait()
        for log in logs:
            log.close()
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=2)
    parser.add_argument("--images", type=int, default=600)
    parser.add_argument("--storage-mb-per-s", type=float, default=12.0,
                        help="the shared storage's bandwidth, MB/s (all nodes together)")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--cache-mib", type=int, default=16, help="each node's local cache")
    parser.add_argument("--worker-threads", type=int, default=1, help="per node")
    parser.add_argument("--memcached-mb", type=int, default=64, help="per memcached server")
    parser.add_argument("--modes", default="storage,remote")
    parser.add_argument("--galleyd", default=str(ROOT / "build/server/daemon/galleyd"))
    parser.add_argument("--results", default=str(ROOT / "results"))
    args = parser.parse_args()

    root = ROOT / ".demo" / f"bench-{args.images}"
    subprocess.run([sys.executable, str(ROOT / "scripts/make_demo_dataset.py"), str(root),
                    "--images", str(args.images), "--classes", "10"], check=True)
    size = sum(f.stat().st_size for f in root.rglob("*.jpg"))
    print(f"dataset {root}: {args.images} images, {size / 1e6:.1f} MB; {args.nodes} nodes, shared "
          f"storage {args.storage_mb_per_s:g} MB/s, local cache {args.cache_mib} MiB per node",
          flush=True)
    rows = []
    for mode in args.modes.split(","):
        rows += run_mode(mode, args, root)
        for row in rows[-args.epochs:]:
            print(row, flush=True)
    os.makedirs(args.results, exist_ok=True)
    with open(os.path.join(args.results, "multi_node.csv"), "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    header = ("mode", "epoch", "storage MB", "img/s per node", "remote MB read", "remote MB wr")
    print("\n| " + " | ".join(header) + " |\n|" + "---|" * len(header))
    for r in rows:
        print(f"| {r['mode']} | {r['epoch']} | {r['storage_mb']} | {r['images_per_s_per_node']} | "
              f"{r['remote_mb_read']} | {r['remote_mb_written']} |")


if __name__ == "__main__":
    main()
