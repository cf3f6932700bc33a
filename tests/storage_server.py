"""Object-storage test infrastructure: a local S3 server (moto) and a fault-injecting HTTP
proxy (stdlib only) to put between a client and that server, each in a child process (so that a
client holding the GIL -- a pipeline build listing a bucket -- cannot stall them).

    with S3Server() as s3:                      # moto on 127.0.0.1:<free port>
        s3.create_bucket("data")
        s3.upload_tree("data", "train", local_root)   # -> s3://data/train/<relative path>
        with FaultProxy(s3.endpoint) as proxy:  # http://127.0.0.1:<other port> -> moto
            os.environ.update(s3.env(proxy.endpoint))  # AWS_ENDPOINT_URL, AWS_REGION, keys
            proxy.set_latency(50)               # ms before every request is forwarded
            proxy.fail_next("503", 2)           # the next 2 requests get S3 SlowDown
            proxy.fail_next("cut", 2, r"^GET /data/train/")  # 2 bodies cut in half
            ...
            proxy.injected("cut"), proxy.log()  # what the proxy saw and did

Everything has a timeout: a child that does not come up in 30 s is an error, a proxy socket
idle for `io_timeout` seconds is closed, control calls time out after 10 s, and stop() never
waits more than ~10 s (the child is killed).

Run as a script it is one of those children: `--serve [HOST]` runs moto's ThreadedMotoServer
on port 0 and prints "READY <host> <port>"; `--proxy http://HOST:PORT [IO_TIMEOUT]` runs the
proxy and prints "READY <port>"; both run until their stdin closes.
"""

import contextlib
import os
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

ACCESS_KEY_ID = "AKIDSLUICETESTKEY000"
SECRET_ACCESS_KEY = "sluice-test-SECRET-d0nt-l3ak-9f8e7d6c5b4a"
REGION = "us-east-1"

START_TIMEOUT = 30.0


# --------------------------------------------------------------------------- moto server
def client_env(endpoint):
    """Environment for an S3 client of the server (or proxy) at `endpoint`, with the test
    credentials."""
    return {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_REGION": REGION,
        "AWS_DEFAULT_REGION": REGION,
        "AWS_ACCESS_KEY_ID": ACCESS_KEY_ID,
        "AWS_SECRET_ACCESS_KEY": SECRET_ACCESS_KEY,
        "AWS_EC2_METADATA_DISABLED": "true",  # no 169.254.169.254 probing (slow timeouts)
    }


class ChildProcess:
    """A server in a child process (`_proc`, made by the subclass's start()): stop() ends it
    (killed if it does not exit within ~10 s), and it is a context manager."""

    _proc = None

    def stop(self):
        proc, self._proc = self._proc, None
        if proc is not None:
            _stop_child(proc)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


class S3Server(ChildProcess):
    """moto's S3 server in a child process on `host`, a port the OS picks. A context manager;
    start()/stop() also work. `endpoint` is its URL (http://127.0.0.1:PORT)."""

    def __init__(self, host="127.0.0.1"):
        self.host = host
        self.port = None
        self._proc = None
        self._client = None

    # ---- life cycle
    def start(self):
        if self._proc is not None:
            return self
        cmd = [sys.executable, "-u", str(Path(__file__).resolve()), "--serve", self.host]
        env = dict(os.environ)
        env.pop("AWS_ENDPOINT_URL", None)  # moto itself must not see a client endpoint
        self._proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      stderr=subprocess.DEVNULL, env=env)
        line = _readline_with_timeout(self._proc.stdout, START_TIMEOUT)
        m = re.match(rb"READY (\S+) (\d+)", line or b"")
        if not m:
            self.stop()
            raise RuntimeError(f"moto server did not start (said {line!r})")
        self.port = int(m.group(2))
        deadline = time.monotonic() + START_TIMEOUT
        while True:  # the socket is bound before READY; make sure the app answers too
            try:
                with urllib.request.urlopen(self.endpoint + "/", timeout=5) as r:
                    r.read()
                break
            except (urllib.error.URLError, OSError):
                if time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError("moto server does not answer")
                time.sleep(0.1)
        return self

    def stop(self):
        self._client = None
        super().stop()

    # ---- addresses and client configuration
    @property
    def endpoint(self):
        return f"http://{self.host}:{self.port}"

    def env(self, endpoint=None):
        """Environment for an S3 client of this server (or of a proxy in front of it)."""
        return client_env(endpoint or self.endpoint)

    # ---- data
    def client(self):
        """A boto3 S3 client talking to the server directly (never through a proxy)."""
        if self._client is None:
            import boto3
            from botocore.config import Config

            self._client = boto3.client(
                "s3", endpoint_url=self.endpoint, region_name=REGION,
                aws_access_key_id=ACCESS_KEY_ID, aws_secret_access_key=SECRET_ACCESS_KEY,
                config=Config(connect_timeout=5, read_timeout=30, retries={"max_attempts": 2},
                              s3={"addressing_style": "path"}))
        return self._client

    def create_bucket(self, bucket):
        with contextlib.suppress(self.client().exceptions.BucketAlreadyOwnedByYou):
            self.client().create_bucket(Bucket=bucket)
        return bucket

    def put(self, bucket, key, data):
        if isinstance(data, str):
            data = data.encode()
        self.client().put_object(Bucket=bucket, Key=key, Body=data)
        return f"s3://{bucket}/{key}"

    def get(self, bucket, key):
        return self.client().get_object(Bucket=bucket, Key=key)["Body"].read()

    def delete(self, bucket, key):
        self.client().delete_object(Bucket=bucket, Key=key)

    def upload_tree(self, bucket, prefix, root):
        """Uploads every regular file under `root` to s3://bucket/prefix/<relative path>
        (creating the bucket). Returns the URI of the prefix, s3://bucket/prefix."""
        root = Path(root)
        self.create_bucket(bucket)
        prefix = prefix.strip("/")
        for p in sorted(root.rglob("*")):
            if p.is_file():
                rel = p.relative_to(root).as_posix()
                self.put(bucket, f"{prefix}/{rel}" if prefix else rel, p.read_bytes())
        return f"s3://{bucket}/{prefix}" if prefix else f"s3://{bucket}"

    def list(self, bucket, prefix=""):
        keys = []
        for page in self.client().get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
            keys += [o["Key"] for o in page.get("Contents", [])]
        return keys

    def reset(self):
        """Drops every bucket (moto's reset API)."""
        req = urllib.request.Request(self.endpoint + "/moto-api/reset", method="POST")
        with urllib.request.urlopen(req, timeout=10) as r:
            r.read()


def _stop_child(proc):
    with contextlib.suppress(Exception):
        proc.stdin.close()  # the child exits when its stdin closes
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=5)
    with contextlib.suppress(Exception):
        proc.stdout.close()


def _readline_with_timeout(stream, timeout):
    out = []
    t = threading.Thread(target=lambda: out.append(stream.readline()), daemon=True)
    t.start()
    t.join(timeout)
    return out[0] if out else None


def _serve(host):
    """Child-process side of S3Server."""
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address=host, port=0, verbose=False)
    server.start()
    serve_until_stdin_closes(server.get_host_and_port(), server.stop)


def serve_until_stdin_closes(said, *stops):
    """The end of a ChildProcess's child: prints "READY <said...>", runs until the parent
    closes its stdin (or dies), then calls each of `stops` (their errors ignored) and exits."""
    sys.stdout.write("READY " + " ".join(str(x) for x in said) + "\n")
    sys.stdout.flush()
    try:
        sys.stdin.read()
    finally:
        for stop in stops:
            with contextlib.suppress(Exception):
                stop()
    os._exit(0)


# --------------------------------------------------------------------------- fault proxy
SLOW_DOWN_XML = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n'
    b"<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message>"
    b"<RequestId>SLUICEFAULT0000</RequestId><HostId>sluice-fault-proxy</HostId></Error>"
)


class _Closed(Exception):
    pass


class FaultProxy(ChildProcess):
    """An HTTP/1.1 proxy on 127.0.0.1, in a child process (so that a client holding the GIL,
    e.g. a pipeline build, cannot stall it), that forwards every request to `upstream`
    (http://host:port) unchanged (same Host header, so signatures stay valid) and can, at run
    time:

      set_latency(ms)            wait `ms` before forwarding each request;
      fail_next("503", k)        answer the next k requests itself with 503 SlowDown (S3 XML);
      fail_next("cut", k)        forward the next k requests whose response has a body of 2+
                                 bytes, send the client the response head and the first half of
                                 the body, then close the connection;
      fail_next(kind, k, match)  the same, counting only requests whose "METHOD /path?query"
                                 matches the regex `match` (e.g. r"^GET /bucket/.*\\.jpg").

    log() lists (method, target, status or fault, Range header) for every request seen, faults_left() how
    many injected faults are still pending, clear() drops latency, faults and log. These talk
    to the child over its own port (paths under /__fault__/). Sockets there time out after
    `io_timeout` s; stop() never waits more than a few seconds."""

    def __init__(self, upstream, io_timeout=30.0):
        if not re.match(r"https?://([^/:]+):(\d+)", upstream):
            raise ValueError(f"upstream must be http://host:port, got {upstream!r}")
        self.upstream = upstream
        self.io_timeout = io_timeout
        self.port = None
        self._proc = None

    @property
    def endpoint(self):
        return f"http://127.0.0.1:{self.port}"

    def start(self):
        if self._proc is not None:
            return self
        cmd = [sys.executable, "-u", str(Path(__file__).resolve()), "--proxy", self.upstream,
               str(self.io_timeout)]
        self._proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      stderr=subprocess.DEVNULL)
        line = _readline_with_timeout(self._proc.stdout, START_TIMEOUT)
        m = re.match(rb"READY (\d+)", line or b"")
        if not m:
            self.stop()
            raise RuntimeError(f"fault proxy did not start (said {line!r})")
        self.port = int(m.group(1))
        return self

    def _control(self, what, **params):
        import json
        import urllib.parse

        url = f"{self.endpoint}/__fault__/{what}?{urllib.parse.urlencode(params)}"
        with urllib.request.urlopen(url, timeout=10) as r:
            return json.loads(r.read() or b"null")

    def set_latency(self, ms):
        self._control("latency", ms=ms)

    def fail_next(self, kind, count, match=None):
        if kind not in ("503", "cut"):
            raise ValueError(f"unknown fault {kind!r}")
        self._control("fail", kind=kind, count=int(count), match=match or "")

    def clear(self):
        """No latency, no pending faults, empty log."""
        self._control("clear")

    def faults_left(self):
        return self._control("state")["faults_left"]

    def log(self):
        """[(method, target, status code or "503"/"cut" where a fault was injected, the Range
        header or "")]."""
        return [tuple(e) for e in self._control("state")["log"]]

    def injected(self, kind=None):
        kinds = ("503", "cut") if kind is None else (kind,)
        return [e for e in self.log() if e[2] in kinds]


class _ProxyCore:
    """The proxy itself (runs in FaultProxy's child process)."""

    def __init__(self, upstream, io_timeout=30.0):
        m = re.match(r"https?://([^/:]+):(\d+)", upstream)
        self.upstream = (m.group(1), int(m.group(2)))
        self.io_timeout = io_timeout
        self._lock = threading.Lock()
        self._latency = 0.0
        self._faults = []  # [kind, count, compiled regex or None]
        self.log = []
        self._conns = set()
        self._listener = None
        self._thread = None
        self._stopping = threading.Event()
        self.port = None

    # ---- control (requests to /__fault__/...)
    def _control(self, target):
        import urllib.parse

        url = urllib.parse.urlsplit(target)
        what = url.path[len("/__fault__/"):]
        q = dict(urllib.parse.parse_qsl(url.query, keep_blank_values=True))
        with self._lock:
            if what == "latency":
                self._latency = float(q["ms"]) / 1000.0
            elif what == "fail":
                self._faults.append([q["kind"], int(q["count"]), re.compile(q["match"]) if q.get("match") else None])
            elif what == "clear":
                self._latency = 0.0
                self._faults.clear()
                self.log.clear()
            elif what != "state":
                return 404, {"error": f"unknown control {what!r}"}
            return 200, {"faults_left": sum(f[1] for f in self._faults), "log": list(self.log)}

    # ---- life cycle
    def start(self):
        ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        ls.bind(("127.0.0.1", 0))
        ls.listen(64)
        ls.settimeout(0.2)
        self._listener = ls
        self.port = ls.getsockname()[1]
        self._thread = threading.Thread(target=self._accept_loop, name="fault-proxy", daemon=True)
        self._thread.start()
        return self

    def stop(self):
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(5)
        with self._lock:
            conns = list(self._conns)
        for s in conns:
            _close(s)
        if self._listener is not None:
            _close(self._listener)

    # ---- internals
    def _accept_loop(self):
        while not self._stopping.is_set():
            try:
                client, _ = self._listener.accept()
            except socket.timeout:
                continue
            except OSError:
                break
            client.settimeout(self.io_timeout)
            with self._lock:
                self._conns.add(client)
            threading.Thread(target=self._serve_client, args=(client,), daemon=True).start()

    def _take_fault(self, method, target, kind_filter):
        """Consumes one pending fault of a kind in kind_filter that applies to this request."""
        line = f"{method} {target}"
        with self._lock:
            for f in self._faults:
                if f[0] in kind_filter and f[1] > 0 and (f[2] is None or f[2].search(line)):
                    f[1] -= 1
                    return f[0]
        return None

    def _serve_client(self, client):
        upstream = None
        cf = client.makefile("rb")
        uf = None
        try:
            while not self._stopping.is_set():
                head = _read_head(cf)
                if head is None:
                    return
                request_line, headers, raw_head = head
                method, target = (request_line.split(" ") + ["", ""])[:2]
                if headers.get("expect", "").lower() == "100-continue":
                    client.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
                    headers.pop("expect")
                    raw_head = _render_head(request_line, headers)
                body = _read_body(cf, headers)
                raw_request = raw_head + body
                if target.startswith("/__fault__/"):
                    import json

                    code, answer = self._control(target)
                    data = json.dumps(answer).encode()
                    client.sendall(b"HTTP/1.1 %d X\r\nContent-Type: application/json\r\n"
                                   b"Content-Length: %d\r\n\r\n%s" % (code, len(data), data))
                    continue
                with self._lock:
                    latency = self._latency
                if latency:
                    time.sleep(latency)

                if self._take_fault(method, target, ("503",)):
                    self._record(method, target, "503", headers)
                    resp = (b"HTTP/1.1 503 Slow Down\r\nContent-Type: application/xml\r\n"
                            b"Content-Length: %d\r\nx-amz-request-id: SLUICEFAULT0000\r\n\r\n"
                            % len(SLOW_DOWN_XML))
                    client.sendall(resp + (b"" if method == "HEAD" else SLOW_DOWN_XML))
                    continue

                if upstream is None:
                    upstream = socket.create_connection(self.upstream, timeout=self.io_timeout)
                    with self._lock:
                        self._conns.add(upstream)
                    uf = upstream.makefile("rb")
                upstream.sendall(raw_request)
                rhead = _read_head(uf)
                if rhead is None:
                    raise _Closed("upstream closed")
                status_line, rheaders, raw_head = rhead
                status = int(status_line.split(" ")[1])
                no_body = method == "HEAD" or status in (204, 304) or 100 <= status < 200
                body, until_close = (b"", False) if no_body else _read_response_body(uf, rheaders)

                if len(body) >= 2 and self._take_fault(method, target, ("cut",)):
                    self._record(method, target, "cut", headers)
                    client.sendall(raw_head + body[: len(body) // 2])
                    return  # closes the client connection mid-body
                self._record(method, target, status, headers)
                client.sendall(raw_head + body)
                if until_close or rheaders.get("connection", "").lower() == "close":
                    self._drop(upstream)
                    upstream = uf = None
                if headers.get("connection", "").lower() == "close" or request_line.endswith("HTTP/1.0"):
                    return
        except (OSError, _Closed, ValueError, IndexError):
            return
        finally:
            if upstream is not None:
                self._drop(upstream)
            self._drop(client)

    def _record(self, method, target, what, headers):
        with self._lock:
            self.log.append((method, target, what, headers.get("range", "")))

    def _drop(self, s):
        with self._lock:
            self._conns.discard(s)
        _close(s)


def _close(s):
    with contextlib.suppress(OSError):
        s.shutdown(socket.SHUT_RDWR)
    with contextlib.suppress(OSError):
        s.close()


def _read_head(f):
    """(first line, {lower-case name: value}, raw bytes) of an HTTP message head; None at a
    clean EOF."""
    first = f.readline(65537)
    while first in (b"\r\n", b"\n"):  # tolerate stray CRLF between messages
        first = f.readline(65537)
    if not first:
        return None
    if not first.endswith(b"\n"):
        raise _Closed("truncated head")
    headers = {}
    raw = [first]
    for _ in range(200):
        line = f.readline(65537)
        if not line:
            raise _Closed("truncated head")
        raw.append(line)
        if line in (b"\r\n", b"\n"):
            return first.decode("latin-1").rstrip("\r\n"), headers, b"".join(raw)
        name, _, value = line.decode("latin-1").partition(":")
        key = name.strip().lower()
        value = value.strip()
        headers[key] = f"{headers[key]}, {value}" if key in headers else value
    raise _Closed("too many header lines")


def _render_head(first_line, headers):
    lines = [first_line] + [f"{_canon(k)}: {v}" for k, v in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def _canon(name):
    return "-".join(p[:1].upper() + p[1:] for p in name.split("-"))


def _read_exact(f, n):
    data = f.read(n)
    if len(data) != n:
        raise _Closed("truncated body")
    return data


def _read_chunked(f):
    """The raw bytes of a chunked body, trailers included."""
    out = []
    while True:
        size_line = f.readline(65537)
        if not size_line:
            raise _Closed("truncated chunk")
        out.append(size_line)
        size = int(size_line.split(b";")[0].strip(), 16)
        if size == 0:
            while True:  # trailers up to the blank line
                line = f.readline(65537)
                if not line:
                    raise _Closed("truncated trailer")
                out.append(line)
                if line in (b"\r\n", b"\n"):
                    return b"".join(out)
        out.append(_read_exact(f, size + 2))


def _read_body(f, headers):
    if "chunked" in headers.get("transfer-encoding", "").lower():
        return _read_chunked(f)
    n = int(headers.get("content-length", "0") or 0)
    return _read_exact(f, n) if n else b""


def _read_response_body(f, headers):
    """(raw body, whether it was delimited by the connection closing)."""
    if "chunked" in headers.get("transfer-encoding", "").lower():
        return _read_chunked(f), False
    if "content-length" in headers:
        n = int(headers["content-length"])
        return (_read_exact(f, n) if n else b""), False
    return f.read(), True


def _proxy(upstream, io_timeout):
    """Child-process side of FaultProxy."""
    core = _ProxyCore(upstream, io_timeout)
    core.start()
    serve_until_stdin_closes([core.port], core.stop)


if __name__ == "__main__":
    if len(sys.argv) >= 2 and sys.argv[1] == "--serve":
        _serve(sys.argv[2] if len(sys.argv) > 2 else "127.0.0.1")
    elif len(sys.argv) >= 3 and sys.argv[1] == "--proxy":
        _proxy(sys.argv[2], float(sys.argv[3]) if len(sys.argv) > 3 else 30.0)
    else:
        sys.exit("usage: storage_server.py --serve [HOST] | --proxy http://HOST:PORT [IO_TIMEOUT]")
