"""Readers over object storage (issue 25), Sluice vs NVIDIA DALI: the ResNet-50 CPU training
pipeline of benches/readers.py (random-crop decode, resize 224, crop_mirror_normalize with a
random mirror) over the same ImageNet-like JPEGs read

  disk    from local disk (the baseline every other row is compared with);
  s3+Nms  from a local S3 server (moto, tests/storage_server.py's S3Server) through its
          FaultProxy, which waits N ms before forwarding each request (--latencies, default
          0,10,50: a loopback server, a same-region bucket, a far one);

as files (readers.file, file_root=s3://bench/files: one GET per image) and as WebDataset
shards (readers.webdataset, 10 tars with their index files, in S3 or on disk: ranged GETs of
each sample's members), each library in its own process on the same threads and with its own
environment (DALI's S3 client is made once per process and reads AWS_ENDPOINT_URL at first use,
so each child is given the proxy's endpoint before it starts). Each case is run twice: "read
only" (the reader's outputs, no decoding: what storage costs) and "rn50 train" (the whole
pipeline: on a small machine decoding dominates and hides the reader).

    python benches/storage.py [--data /tmp/sluice-readers-bench] [--count 6000] [--batch 128] [--threads 4]
                              [--epochs 1] [--latencies 0,10,50] [--formats file,webdataset] [--libs sluice,dali]
                              [--ceiling-seconds 2] [--timeout 900]

Columns: images/s of each library (over --epochs epochs after a warm-up of up to 5 batches),
sluice/dali, and each library's rate as a % of its own local-disk rate for the same format and
work. Then, per S3 row and library, what the storage side saw, measured over the timed part of
the run:
  GET/img   object GETs the proxy forwarded per image the pipeline produced (1 for files;
            2 per sample for WebDataset when each member is a ranged read; read-ahead and the
            last padded batch push it a little above);
  GET/s     the request rate the server sustained (images/s x GET/img);
  inflight  GET/s x the added latency: by Little's law a lower bound on the requests the
            client keeps in flight on average (a client that waits for each batch before
            asking for the next averages well below its limit; Sluice keeps up to
            SLUICE_STORAGE_IN_FLIGHT=256 requests of a reader in flight, its next batches'
            included);
  client%, moto%, proxy%  CPU of the pipeline's process, of moto's and of the proxy's, in % of
            one core (from /proc, over the timed loop).

moto is a Python server (Werkzeug, one thread per connection, one GIL) and the proxy is Python
too, so at 0 ms (and for the read-only rows) the *server* may be what is measured, not the
reader. How to tell: (1) moto% near 100 (one core: the GIL) means moto is saturated, and then
GET/s is moto's capacity on this machine, whatever the latency. (2) The "boto3 GET ceiling"
table printed first is the raw request rate of tight boto3 GET loops (whole objects of the
files set) against moto directly and through the proxy at each latency: one client thread (its
ms/GET is the round trip), and 32 threads in all (in one client process per 4 CPUs, at most 4,
started together); a reader whose GET/s reaches the 32-thread figure is at least as fast as
moto lets a Python client be. boto3 is itself Python and costs CPU, so that figure is a floor
of moto's capacity, not a ceiling of it: a Rust client can go past it (moto% says by how
much room was left). (3) On a machine with few cores the client, moto, the proxy and anything
else running share them: client% + moto% + proxy% near 100 x CPUs means the machine is the
limit. (4) A reader that keeps too few requests in flight shows a low "inflight" and a rate that
falls with the latency while moto% falls too (moto idle, waiting for requests). Sluice's S3
client knobs (SLUICE_STORAGE_IN_FLIGHT, SLUICE_STORAGE_TIMEOUT_S, ...) pass through to the
children from this process's environment. DALI keeps about one request in flight, so its 50 ms
rows take minutes at --count 6000.

--server s3s replaces moto and the proxy with benches/s3_server (the s3s crate's S3 protocol
over a local folder, in Rust, with the added latency applied by the server itself):
thousands of requests a second, for machines where moto would be what is measured. Its table
has no request counts; it shows each process's CPU instead (the server shares the machine's
cores with the pipeline: on one box that is a cost a real remote store does not put on the
client). Build it first: cargo build --release --manifest-path benches/s3_server/Cargo.toml.
--server-cpus N keeps the servers on N CPUs and every pipeline (the disk rows too) on the
others, so that the server is a machine of its own as a real store is.
--max-seconds ends each timed loop early (DALI at 50 ms reads ~10 images a second).

The data set is benches/readers.py's (its make_data, imported: the JPEGs of
tests/data_gen/make_dataset.py and its other formats, written once into --data and shared with
that bench); each run starts its own moto server and uploads the formats it reads (moto keeps
them in memory: ~1 GB of RAM at --count 6000, files and shards).
"""

import argparse
import concurrent.futures
import json
import os
import re
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "tests"))

import readers as readers_bench  # noqa: E402  (benches/readers.py: the data set and its maker)

BUCKET = "bench"

CHILD = r"""
import json, os, sys, time
cfg = json.loads(sys.argv[1])
lib, root, fmt, decode = cfg["lib"], cfg["root"], cfg["fmt"], cfg["decode"]
batch, threads, epochs = cfg["batch"], cfg["threads"], cfg["epochs"]
if lib == "dali":
    from nvidia.dali import fn, pipeline_def, types
else:
    from sluice import fn, pipeline_def, types

def cpu_of(pid):
    # utime + stime of another process, in seconds
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None

def own_cpu():
    t = os.times()
    return t.user + t.system

@pipeline_def(batch_size=batch, num_threads=threads, device_id=None, seed=1, prefetch_queue_depth=2)
def pipe():
    if fmt == "file":
        jpegs, labels = fn.readers.file(file_root=root + "/files", random_shuffle=True, name="R", pad_last_batch=True)
    else:
        shards = cfg["shards"]
        jpegs, labels = fn.readers.webdataset(paths=[root + "/webdataset/" + s for s in shards],
                                              index_paths=[root + "/webdataset/" + s[:-4] + ".idx" for s in shards],
                                              ext=["jpg", "cls"], dtypes=[types.UINT8, types.INT32],
                                              random_shuffle=True, name="R", pad_last_batch=True)
    if not decode:
        return jpegs, labels
    images = fn.decoders.image_random_crop(jpegs, output_type=types.RGB, random_aspect_ratio=[0.75, 4 / 3],
                                           random_area=[0.08, 1.0], num_attempts=100)
    images = fn.resize(images, resize_x=224, resize_y=224)
    images = fn.crop_mirror_normalize(images, dtype=types.FLOAT, output_layout="CHW", crop=(224, 224),
                                      mean=[0.485 * 255, 0.456 * 255, 0.406 * 255], std=[0.229 * 255, 0.224 * 255, 0.225 * 255],
                                      mirror=fn.random.coin_flip(probability=0.5))
    return images, labels

p = pipe()
p.build()
size = p.epoch_size("R")
iters = -(-size // batch)
w0 = time.perf_counter()
for _ in range(min(iters, 5)):  # up to 5 batches or 5 s (DALI at 50 ms: ~10 images/s)
    p.run()
    if time.perf_counter() - w0 > 5:
        break
watch = cfg.get("watch", {})
before = {k: cpu_of(v) for k, v in watch.items()}
own0 = own_cpu()
print("TIMED", flush=True)  # the parent snapshots the proxy's request count here
t0 = time.perf_counter()
done = 0
for _ in range(epochs * iters):
    p.run()
    done += 1
    if time.perf_counter() - t0 > cfg["max_seconds"]:
        break
dt = time.perf_counter() - t0
print("DONE", flush=True)
cpu = {"client": (own_cpu() - own0) / dt * 100}
for k, v in watch.items():
    after = cpu_of(v)
    cpu[k] = (after - before[k]) / dt * 100 if after is not None and before[k] is not None else None
print(json.dumps({"rate": done * batch / dt, "images": done * batch, "seconds": dt,
                  "epoch_size": size, "cpu": cpu}))
"""

CEILING = r"""
import json, os, random, sys, threading, time
import boto3
from botocore.config import Config
cfg = json.loads(sys.argv[1])
client = boto3.client("s3", endpoint_url=cfg["endpoint"], region_name=cfg["region"],
                      aws_access_key_id=cfg["key"], aws_secret_access_key=cfg["secret"],
                      config=Config(max_pool_connections=max(cfg["threads"], 10), retries={"max_attempts": 1},
                                    s3={"addressing_style": "path"}))
keys = cfg["keys"]

def cpu_of(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

def loop(seed, out, stop):
    rnd = random.Random(seed)
    n = b = 0
    while not stop.is_set():
        b += len(client.get_object(Bucket=cfg["bucket"], Key=rnd.choice(keys))["Body"].read())
        n += 1
    out.append((n, b))

for k in keys[:4]:  # connections, credentials, first-request costs
    client.get_object(Bucket=cfg["bucket"], Key=k)["Body"].read()
out, stop = [], threading.Event()
ths = [threading.Thread(target=loop, args=(cfg["seed"] * 1000 + s, out, stop)) for s in range(cfg["threads"])]
time.sleep(max(0.0, cfg["start"] - time.time()))  # every client process starts at once
m0 = cpu_of(cfg["moto"])
t0 = time.perf_counter()
for t in ths:
    t.start()
time.sleep(cfg["seconds"])
stop.set()
for t in ths:
    t.join()
dt = time.perf_counter() - t0
n, b = sum(o[0] for o in out), sum(o[1] for o in out)
print(json.dumps({"req_s": n / dt, "mb_s": b / dt / 1e6, "moto": (cpu_of(cfg["moto"]) - m0) / dt * 100}))
"""


CEILING_PROCS = max(1, min(4, (os.cpu_count() or 1) // 4))  # client processes: one per 4 cores, at most 4
CEILING_THREADS = 32 // CEILING_PROCS  # 32 requests in flight in all


def ceiling(endpoint, keys, procs, threads, seconds, moto_pid, env):
    """{req_s, mb_s, moto} of `procs` boto3 client processes x `threads` threads each, GETting
    random whole objects of `keys` for `seconds`, all started at the same moment (several
    processes: one Python client process is itself GIL-bound near moto's rate)."""
    from storage_server import ACCESS_KEY_ID, REGION, SECRET_ACCESS_KEY

    start = time.time() + 3.0  # after every process has imported boto3
    cfgs = [dict(endpoint=endpoint, region=REGION, key=ACCESS_KEY_ID, secret=SECRET_ACCESS_KEY, bucket=BUCKET, keys=keys,
                 threads=threads, seconds=seconds, moto=moto_pid, start=start, seed=k) for k in range(procs)]
    with concurrent.futures.ThreadPoolExecutor(procs) as ex:
        got = list(ex.map(lambda c: run_child(CEILING, c, env, 120), cfgs))
    if any(r is None for r, _, _ in got):
        sys.stderr.write(next(e for r, _, e in got if r is None))
        return None
    res = [r for r, _, _ in got]
    return {"req_s": sum(r["req_s"] for r in res), "mb_s": sum(r["mb_s"] for r in res),
            "moto": sum(r["moto"] for r in res) / len(res)}


class FastServer:
    """--server s3s: one bench-s3-server (benches/s3_server: the s3s crate's S3 protocol over a
    local folder, in Rust) per latency, each waiting that long before answering every request.
    They answer thousands of requests a second, so the rows measure the readers, not a Python
    server. The data set's files and shards are served through hard links (no upload). No
    request log: the GET/img column is left out."""

    def __init__(self, binary, data, latencies, cpus=None):
        from storage_server import ACCESS_KEY_ID, SECRET_ACCESS_KEY, _readline_with_timeout

        self.root = os.path.join(data, "s3s-root")
        bucket = os.path.join(self.root, BUCKET)
        os.makedirs(bucket, exist_ok=True)
        for part in ("files", "webdataset"):
            if not os.path.exists(os.path.join(bucket, part)):
                subprocess.run(["cp", "-al", os.path.join(data, part), os.path.join(bucket, part)], check=True)
        self.procs, self.servers = [], {}
        for lat in sorted(set([0.0] + list(latencies))):
            proc = subprocess.Popen([binary, self.root, str(lat), ACCESS_KEY_ID, SECRET_ACCESS_KEY], stdout=subprocess.PIPE,
                                    stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, preexec_fn=pinned(cpus))
            self.procs.append(proc)
            line = _readline_with_timeout(proc.stdout, 30) or b""
            m = re.match(rb"READY (\d+)", line)
            if not m:
                self.stop()
                raise RuntimeError(f"bench-s3-server did not start (said {line!r})")
            self.servers[lat] = (f"http://127.0.0.1:{int(m.group(1))}", proc.pid)

    def stop(self):
        for p in self.procs:
            p.kill()
            p.wait()


def local_data(root, count):
    """The data set (benches/readers.py's make_data) and what this bench reads of it."""
    readers_bench.make_data(root, count)
    files = os.path.join(root, "files")
    rel_files = sorted(os.path.relpath(os.path.join(d, f), files) for d, _, fs in os.walk(files) for f in fs)
    shards = sorted(f for f in os.listdir(os.path.join(root, "webdataset")) if f.endswith(".tar"))
    return rel_files, shards


def upload(client, bucket, prefix, root, rels):
    def put(rel):
        with open(os.path.join(root, rel), "rb") as f:
            client.put_object(Bucket=bucket, Key=f"{prefix}/{rel}", Body=f.read())

    with concurrent.futures.ThreadPoolExecutor(8) as ex:
        list(ex.map(put, rels))


CLIENT_CPUS = None  # --server-cpus: the CPUs the pipelines run on (the others serve)


def pinned(cpus):
    """A preexec_fn keeping a child on `cpus` (None: anywhere)."""
    return None if cpus is None else (lambda: os.sched_setaffinity(0, cpus))


def run_child(code, cfg, env, timeout, proxy=None):
    """Runs a child; returns (its last JSON line or None, the proxy's log over its timed part
    or None, its stderr tail)."""
    proc = subprocess.Popen([sys.executable, "-c", code, json.dumps(cfg)], stdout=subprocess.PIPE, preexec_fn=pinned(CLIENT_CPUS),
                            stderr=subprocess.PIPE, text=True, env=env)
    lines, log_at = [], {}
    deadline = time.monotonic() + timeout

    def read_out():
        for line in proc.stdout:
            line = line.strip()
            if line in ("TIMED", "DONE") and proxy is not None:
                log_at[line] = len(proxy.log())
            lines.append(line)

    reader = threading.Thread(target=read_out, daemon=True)
    reader.start()
    err = []
    errt = threading.Thread(target=lambda: err.append(proc.stderr.read()), daemon=True)
    errt.start()
    try:
        proc.wait(timeout=max(1, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        err.append(f"\n(timed out after {timeout} s)\n")
    reader.join(10)
    errt.join(10)
    result = next((json.loads(l) for l in reversed(lines) if l.startswith("{")), None)
    window = None
    if proxy is not None and "TIMED" in log_at and "DONE" in log_at:
        window = proxy.log()[log_at["TIMED"]:log_at["DONE"]]
    return result, window, "".join(err)[-1500:]


def object_gets(log):
    """Object reads among the proxy's log entries (not listings, HEADs or control calls)."""
    return sum(1 for method, target, *_ in log if method == "GET" and re.match(rf"^/{BUCKET}/[^?]+", target)
               and "list-type" not in target)


def percent(rate, disk):
    if not rate or not disk:
        return f"{'-':>12}"
    v = 100 * rate / disk
    return f"{v:>11.{0 if v >= 10 else 1 if v >= 1 else 2}f}%"


def fmt_rate(v):
    return f"{v:>9.0f}" if v else f"{'fail':>9}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default="/tmp/sluice-readers-bench")
    ap.add_argument("--count", type=int, default=6000)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--latencies", default="0,10,50", help="ms added per request by the proxy, comma-separated")
    ap.add_argument("--formats", default="file,webdataset")
    ap.add_argument("--libs", default="sluice,dali")
    ap.add_argument("--ceiling-seconds", type=float, default=2.0, help="length of each boto3 GET loop (0: skip)")
    ap.add_argument("--timeout", type=float, default=900, help="seconds per child process")
    ap.add_argument("--server-cpus", type=int, default=0,
                    help="--server s3s: pin the servers to this many CPUs and every pipeline to the others (0: no pinning)")
    ap.add_argument("--max-seconds", type=float, default=1e9,
                    help="end a row's timed loop after this long (its rate is over the batches it ran): DALI at 50 ms")
    ap.add_argument("--server", choices=["moto", "s3s"], default="moto",
                    help="moto (+ the Python FaultProxy, with GET counts) or s3s (benches/s3_server: fast, no counts)")
    ap.add_argument("--s3-server", default=os.path.join(HERE, "s3_server", "target", "release", "bench-s3-server"),
                    help="the bench-s3-server binary (--server s3s; cargo build --release --manifest-path benches/s3_server/Cargo.toml)")
    a = ap.parse_args()
    libs = a.libs.split(",")
    formats = a.formats.split(",")
    latencies = [float(x) for x in a.latencies.split(",") if x.strip()]

    from storage_server import FaultProxy, S3Server

    rel_files, shards = local_data(a.data, a.count)
    count = len(rel_files)
    if count != a.count:
        print(f"note: {a.data} holds {count} images (made earlier), not --count {a.count}")
    base_env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    if a.server == "s3s":
        return run_fast(a, libs, formats, latencies, rel_files, shards, base_env)
    with S3Server() as s3, FaultProxy(s3.endpoint, io_timeout=60) as proxy:
        s3.create_bucket(BUCKET)
        client = s3.client()
        t = time.perf_counter()
        if "file" in formats or a.ceiling_seconds > 0:  # the ceiling loops read the files set
            upload(client, BUCKET, "files", os.path.join(a.data, "files"), rel_files)
        if "webdataset" in formats:
            upload(client, BUCKET, "webdataset", os.path.join(a.data, "webdataset"),
                   [x for s in shards for x in (s, s[:-4] + ".idx")])
        print(f"uploaded to moto in {time.perf_counter() - t:.1f} s")
        s3_env = dict(base_env, **s3.env(proxy.endpoint))
        watch = {"moto": s3._proc.pid, "proxy": proxy._proc.pid}

        # ---- the server's own ceiling: tight boto3 GET loops
        if a.ceiling_seconds > 0:
            keys = [f"files/{r}" for r in rel_files]
            print(f"\nboto3 GET ceiling (whole objects of the files set, {a.ceiling_seconds:g} s per loop; "
                  f"{CEILING_PROCS} x {CEILING_THREADS}: that many client processes x threads at once)")
            print(f"{'target':<14} {'1 x 1':>10} {'ms/GET':>7} {f'{CEILING_PROCS} x {CEILING_THREADS}':>10} {'MB/s':>6}"
                  f" {'moto%':>6}")
            targets = [("moto direct", s3.endpoint, None)] + [(f"proxy +{l:g}ms", proxy.endpoint, l) for l in latencies]
            for name, endpoint, lat in targets:
                proxy.clear()
                if lat:
                    proxy.set_latency(lat)
                one = ceiling(endpoint, keys, 1, 1, a.ceiling_seconds, watch["moto"], base_env)
                many = ceiling(endpoint, keys, CEILING_PROCS, CEILING_THREADS, a.ceiling_seconds, watch["moto"], base_env)
                one_s = f"{one['req_s']:>10.0f} {1000 / one['req_s']:>7.1f}" if one else f"{'fail':>10} {'-':>7}"
                many_s = (f"{many['req_s']:>10.0f} {many['mb_s']:>6.0f} {many['moto']:>6.0f}" if many
                          else f"{'fail':>10} {'-':>6} {'-':>6}")
                print(f"{name:<14} {one_s} {many_s}")
            proxy.clear()

        # ---- the pipelines
        print(f"\n{count} ImageNet-like JPEGs, batch {a.batch}, {a.threads} threads, {a.epochs} epoch(s) after warm-up; "
              f"{os.cpu_count()} CPUs")
        def run_s3(cfg, lat):
            cfg["watch"] = watch
            proxy.clear()
            if lat:
                proxy.set_latency(lat)
            return run_child(CHILD, cfg, s3_env, a.timeout, proxy)

        rows = pipeline_table(a, libs, formats, latencies, count, shards, base_env, run_s3)
        diag = [(fmt, work, source, lib, res, object_gets(window) if window is not None else None, lat)
                for fmt, work, source, lib, res, window, lat in rows]
        if diag:
            print("\nS3 rows, timed part: object GETs per image, GET/s, Little's-law in-flight lower bound, CPU % of one core")
            print(f"{'format':<10} {'work':<10} {'source':<9} {'lib':<7} {'img/s':>7} {'GET/img':>8} {'GET/s':>7}"
                  f" {'inflight':>8} {'client%':>8} {'moto%':>6} {'proxy%':>7}")
            for fmt, work, source, lib, res, gets, lat in diag:
                per = gets / res["images"] if gets is not None else None
                gps = gets / res["seconds"] if gets is not None else None
                infl = f"{gps * lat / 1000:>8.1f}" if gps is not None and lat else f"{'-':>8}"
                cpu = res["cpu"]
                print(f"{fmt:<10} {work:<10} {source:<9} {lib:<7} {res['rate']:>7.0f} "
                      + (f"{per:>8.2f} {gps:>7.0f}" if per is not None else f"{'-':>8} {'-':>7}")
                      + f" {infl} {show(cpu.get('client'), 8)} {show(cpu.get('moto'), 6)} {show(cpu.get('proxy'), 7)}")


def show(v, width):
    return f"{v:>{width}.0f}" if v is not None else f"{'-':>{width}}"


def pipeline_table(a, libs, formats, latencies, count, shards, base_env, run_s3, extra_head="", extra=lambda results: ""):
    """Runs every (format, work, source, library) child and prints the table: images/s,
    sluice/dali, each library's share of its own disk rate, and `extra(results)` (columns of
    the row's results by library, headed `extra_head`). `run_s3(cfg, latency)` runs an S3
    row's child: (result, the proxy's log over its timed part or None, stderr). Returns the
    S3 rows: [(format, work, source, library, result, log window, latency)]."""
    sources = [("disk", None)] + [(f"s3+{l:g}ms", l) for l in latencies]
    print(f"{'format':<10} {'work':<10} {'source':<9} " + " ".join(f"{lib:>9}" for lib in libs)
          + f" {'s/d':>6} " + " ".join(f"{lib + ' %disk':>12}" for lib in libs) + extra_head)
    rows = []
    for fmt in formats:
        for decode in (False, True):
            work = "rn50 train" if decode else "read only"
            disk = {}
            for source, lat in sources:
                results = {}
                for lib in libs:
                    cfg = dict(lib=lib, fmt=fmt, decode=decode, batch=a.batch, threads=a.threads, epochs=a.epochs,
                               shards=shards, max_seconds=a.max_seconds)
                    if lat is None:
                        cfg["root"] = a.data
                        res, window, err = run_child(CHILD, cfg, base_env, a.timeout)
                    else:
                        cfg["root"] = f"s3://{BUCKET}"
                        res, window, err = run_s3(cfg, lat)
                    if res is None:
                        sys.stderr.write(f"[{fmt} {work} {source} {lib}] failed:\n{err}\n")
                        continue
                    if res["epoch_size"] != count:
                        sys.stderr.write(f"[{fmt} {work} {source} {lib}] epoch size {res['epoch_size']} != {count}\n")
                    results[lib] = res
                    if lat is None:
                        disk[lib] = res["rate"]
                    else:
                        rows.append((fmt, work, source, lib, res, window, lat))
                rates = {lib: r["rate"] for lib, r in results.items()}
                ratio = f"{rates['sluice'] / rates['dali']:.2f}x" if rates.get("sluice") and rates.get("dali") else "-"
                pct = " ".join(percent(rates.get(l), disk.get(l)) for l in libs)
                print(f"{fmt:<10} {work:<10} {source:<9} " + " ".join(fmt_rate(rates.get(l)) for l in libs)
                      + f" {ratio:>6} {pct}" + extra(results), flush=True)
    return rows


def run_fast(a, libs, formats, latencies, rel_files, shards, base_env):
    """The pipelines table against bench-s3-server (see FastServer)."""
    from storage_server import client_env

    count = len(rel_files)
    global CLIENT_CPUS
    server_cpus = None
    if a.server_cpus:
        every = sorted(os.sched_getaffinity(0))
        server_cpus, CLIENT_CPUS = set(every[-a.server_cpus:]), set(every[:-a.server_cpus])
    server = FastServer(a.s3_server, a.data, latencies, server_cpus)

    try:
        print(f"\n{count} ImageNet-like JPEGs, batch {a.batch}, {a.threads} threads, {a.epochs} epoch(s) after warm-up; "
              f"{os.cpu_count()} CPUs; bench-s3-server"
              + (f" on {a.server_cpus} of them, every pipeline (disk rows too) on the other {len(CLIENT_CPUS)}" if a.server_cpus else ""))

        def run_s3(cfg, lat):
            endpoint, server_pid = server.servers[lat]
            cfg["watch"] = {"server": server_pid}
            return run_child(CHILD, cfg, dict(base_env, **client_env(endpoint)), a.timeout)

        def cpu_columns(results):
            cpus = {lib: r["cpu"] for lib, r in results.items()}
            last = cpus.get("sluice") or next(iter(cpus.values()), {})
            return " " + " ".join(show(cpus.get(l, {}).get("client"), 11) for l in libs) + f" {show(last.get('server'), 8)}"

        extra_head = " " + " ".join(f"{lib + ' cpu%':>11}" for lib in libs) + f" {'server%':>8}"
        pipeline_table(a, libs, formats, latencies, count, shards, base_env, run_s3, extra_head, cpu_columns)
    finally:
        server.stop()


if __name__ == "__main__":
    main()
