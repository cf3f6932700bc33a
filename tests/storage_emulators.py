"""More object-storage test servers, each in a child process like storage_server.py's (so that a
client holding the GIL -- a pipeline build listing a folder -- cannot stall them):

    with WebDAVServer(root) as dav:           # WsgiDAV + cheroot serving the folder `root`
        dav.uri("tiny")                       # -> http://127.0.0.1:<port>/tiny
        dav.log()                             # [(method, path, Depth, Range, status)]

    with WebDAVServer(root, tls=(cert, key)) as davs:   # the same over https
        ...

    with GCSEmulator() as gcs:                # gcp-storage-emulator + the XML adapter below
        gcs.create_bucket("data")
        gcs.upload_tree("data", "tiny", local_root)     # -> gs://data/tiny/<relative path>
        sa = gcs.service_account(tmp_path / "sa.json")  # gcs_base_url -> the adapter
        # readers: storage_options={"google_service_account": sa, "allow_http": "true"}

`self_signed_cert(folder)` writes a certificate for 127.0.0.1 / localhost and its key.

WebDAV: object_store's HttpStore lists with PROPFIND (Depth: 1), reads with GET (with a Range
header for parts of an object) and asks sizes with HEAD; WsgiDAV answers all of them as is.

GCS: object_store's GCS client speaks the XML API (a list is `GET /{bucket}?list-type=2
&prefix=P&delimiter=/` answered with an S3-style ListBucketResult; an object is `GET` or `HEAD
/{bucket}/{percent-encoded name}`, whose answer must carry ETag and Last-Modified).
gcp-storage-emulator (2026.7.19) implements the JSON API and only the GET and PUT of the XML
one, and that GET answers without ETag or Last-Modified: its XML bucket listing answers 501 Not
Implemented, so does any HEAD (its handler has no do_HEAD), and object_store rejects its object
GETs ("Last-Modified Header missing from response"); those GETs also answer 501 for a bucket
name with a "-" in it, which object_store percent-encodes (%2D) and the emulator matches
undecoded against [-.\\w]+. `GCSEmulator` therefore puts a THIN ADAPTER
in front of the unmodified emulator, in the same child process: it translates those three XML
requests into the emulator's JSON API (objects.list with prefix/delimiter; objects.get for
metadata) plus the emulator's own XML GET for the bytes (Range passed through); everything it
answers comes from the emulator, nothing is stored or computed by the adapter beyond the
format. `gcs.emulator_endpoint` is the emulator itself (for checking what it lacks).

Everything has a timeout: a child that does not come up in 30 s is an error, requests to the
children time out after 10-20 s, stop() never waits more than ~10 s (the child is killed).

Run as a script it is one of those children: `--webdav ROOT [CERT KEY]` prints "READY <port>",
`--gcs` prints "READY <emulator port> <adapter port>"; both run until their stdin closes.
"""

import datetime
import email.utils
import http.client
import json
import os
import re
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from storage_server import START_TIMEOUT, ChildProcess, _readline_with_timeout, serve_until_stdin_closes

HOST = "127.0.0.1"


class _Child(ChildProcess):
    """A child process of this script, started with `args`, that prints "READY <ports>"."""

    what = "server"

    def __init__(self):
        self._proc = None
        self.ports = None

    def _args(self):
        raise NotImplementedError

    def start(self):
        if self._proc is not None:
            return self
        cmd = [sys.executable, "-u", str(Path(__file__).resolve()), *self._args()]
        self._proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      stderr=subprocess.DEVNULL)
        line = _readline_with_timeout(self._proc.stdout, START_TIMEOUT)
        m = re.match(rb"READY ((?:\d+ ?)+)$", (line or b"").strip())
        if not m:
            self.stop()
            raise RuntimeError(f"{self.what} did not start (said {line!r})")
        self.ports = [int(p) for p in m.group(1).split()]
        return self



def _get_json(url, timeout=10, context=None):
    with urllib.request.urlopen(url, timeout=timeout, context=context) as r:
        return json.loads(r.read() or b"null")


# --------------------------------------------------------------------------- WebDAV (http, https)
class WebDAVServer(_Child):
    """WsgiDAV on cheroot, read-only, anonymous, serving the folder `root` at / on 127.0.0.1 (a
    port the OS picks); over https with `tls=(certificate file, key file)`. `endpoint` is its
    URL, `uri(rel)` the URL of root/rel. Files written under `root` at any time are served."""

    what = "WebDAV server"

    def __init__(self, root, tls=None):
        super().__init__()
        self.root = Path(root)
        self.tls = tls

    def _args(self):
        return ["--webdav", str(self.root), *(map(str, self.tls) if self.tls else [])]

    @property
    def port(self):
        return self.ports[0]

    @property
    def endpoint(self):
        return f"{'https' if self.tls else 'http'}://{HOST}:{self.port}"

    def uri(self, rel=""):
        return self.endpoint + ("/" + rel.strip("/") if rel.strip("/") else "")

    def _control(self, what):
        import ssl

        ctx = None
        if self.tls:
            ctx = ssl.create_default_context(cafile=str(self.tls[0]))
        return _get_json(f"{self.endpoint}/__log__/{what}", context=ctx)

    def log(self):
        """[(method, path, Depth header, Range header, status)] of every request so far."""
        return [tuple(e) for e in self._control("get")]

    def clear(self):
        self._control("clear")


def self_signed_cert(folder):
    """A self-signed certificate for 127.0.0.1 and localhost (EC P-256, one day) and its key, as
    PEM files in `folder`: (cert path, key path). Made with `cryptography` where installed,
    else the openssl command."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    cert, key = folder / "cert.pem", folder / "key.pem"
    try:
        import ipaddress

        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID
    except ImportError:
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                        "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1", "-addext",
                        "subjectAltName=IP:127.0.0.1,DNS:localhost", "-keyout", str(key), "-out", str(cert)],
                       check=True, capture_output=True, timeout=60)
        return cert, key
    k = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.timezone.utc)
    c = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(k.public_key())
         .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
         .not_valid_after(now + datetime.timedelta(days=1))
         .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(HOST)),
                                                     x509.DNSName("localhost")]), critical=False)
         .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
         .sign(k, hashes.SHA256()))
    cert.write_bytes(c.public_bytes(serialization.Encoding.PEM))
    key.write_bytes(k.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                    serialization.NoEncryption()))
    return cert, key


def _logged(app):
    """WSGI middleware: records (method, path, Depth, Range, status) of every request (status
    None until it is answered); answers /__log__/get and /__log__/clear itself."""
    log, lock = [], threading.Lock()

    def wrapper(environ, start_response):
        path = environ.get("PATH_INFO", "")
        if path.startswith("/__log__/"):
            with lock:
                if path == "/__log__/clear":
                    log.clear()
                body = json.dumps(log).encode()
            start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
            return [body]
        entry = [environ.get("REQUEST_METHOD", ""), path, environ.get("HTTP_DEPTH", ""),
                 environ.get("HTTP_RANGE", ""), None]

        def recording_start_response(status, headers, exc_info=None):
            entry[4] = int(status.split()[0])
            return start_response(status, headers, exc_info)

        with lock:
            log.append(entry)
        return app(environ, recording_start_response)

    return wrapper


def _webdav(root, cert=None, key=None):
    """Child-process side of WebDAVServer."""
    from cheroot import wsgi
    from wsgidav.wsgidav_app import WsgiDAVApp

    config = {
        "host": HOST, "port": 0,
        "provider_mapping": {"/": {"root": root, "readonly": True}},
        "simple_dc": {"user_mapping": {"*": True}},  # anonymous
        "verbose": 0,
        "logging": {"enable": False},
    }
    server = wsgi.Server((HOST, 0), _logged(WsgiDAVApp(config)), numthreads=16, timeout=20)
    if cert:
        from cheroot.ssl.builtin import BuiltinSSLAdapter

        server.ssl_adapter = BuiltinSSLAdapter(cert, key)
    server.prepare()
    thread = threading.Thread(target=server.serve, daemon=True)
    thread.start()
    serve_until_stdin_closes([server.bind_addr[1]], server.stop)


# --------------------------------------------------------------------------- GCS
class GCSEmulator(_Child):
    """gcp-storage-emulator (in memory) and the XML adapter in front of it, in a child process.
    `endpoint` is the adapter (what object_store is pointed at), `emulator_endpoint` the
    emulator itself; data is put through the emulator's own API."""

    what = "GCS emulator"

    def _args(self):
        return ["--gcs"]

    @property
    def emulator_endpoint(self):
        return f"http://{HOST}:{self.ports[0]}"

    @property
    def endpoint(self):
        return f"http://{HOST}:{self.ports[1]}"

    def _request(self, method, url, data=None, headers=None):
        req = urllib.request.Request(url, data=data, method=method, headers=headers or {})
        with urllib.request.urlopen(req, timeout=20) as r:
            return r.status, r.read()

    def create_bucket(self, bucket):
        self._request("POST", f"{self.emulator_endpoint}/storage/v1/b?project=sluice-test",
                      json.dumps({"name": bucket}).encode(), {"Content-Type": "application/json"})
        return bucket

    def put(self, bucket, key, data):
        """Stores an object with the emulator's XML upload (PUT /bucket/name)."""
        if isinstance(data, str):
            data = data.encode()
        self._request("PUT", f"{self.emulator_endpoint}/{bucket}/{urllib.parse.quote(key)}", data,
                      {"Content-Type": "application/octet-stream"})
        return f"gs://{bucket}/{key}"

    def delete(self, bucket, key):
        self._request("DELETE", f"{self.emulator_endpoint}/storage/v1/b/{bucket}/o/{urllib.parse.quote(key, safe='')}")

    def upload_tree(self, bucket, prefix, root):
        """Every regular file under `root` -> gs://bucket/prefix/<relative path>. Returns the
        prefix's URI."""
        root = Path(root)
        prefix = prefix.strip("/")
        for p in sorted(root.rglob("*")):
            if p.is_file():
                rel = p.relative_to(root).as_posix()
                self.put(bucket, f"{prefix}/{rel}" if prefix else rel, p.read_bytes())
        return f"gs://{bucket}/{prefix}" if prefix else f"gs://{bucket}"

    def service_account(self, path, raw=False):
        """Writes the service-account file object_store's GCS client reads (gcs_base_url: the
        adapter, or with raw=True the emulator itself; disable_oauth: no token requests).
        Returns its path as a string."""
        path = Path(path)
        path.write_text(json.dumps({
            "gcs_base_url": self.emulator_endpoint if raw else self.endpoint, "disable_oauth": True,
            "client_email": "", "private_key": "", "private_key_id": ""}))
        return str(path)

    def log(self):
        """[(method, target, Range header, status)] of every request the adapter answered
        (status None: the client left before the answer was written)."""
        return [tuple(e) for e in _get_json(f"{self.endpoint}/__adapter__/log")]

    def clear(self):
        _get_json(f"{self.endpoint}/__adapter__/clear")


def _xml(s):
    from xml.sax.saxutils import escape

    return escape(str(s))


def _http_date(rfc3339):
    """'2026-11-26T02:30:18.630286Z' -> 'Thu, 26 Nov 2026 02:30:18 GMT'."""
    dt = datetime.datetime.fromisoformat(rfc3339.replace("Z", "+00:00"))
    return email.utils.format_datetime(dt.astimezone(datetime.timezone.utc), usegmt=True)


def _gcs_adapter(emulator_port):
    """The XML adapter (runs in GCSEmulator's child): a threading HTTP/1.1 server translating
    object_store's XML API requests into requests to the emulator on `emulator_port`."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
    from urllib.parse import parse_qs, quote, unquote, urlencode, urlsplit

    log, lock = [], threading.Lock()

    def upstream(method, target, headers=None):
        conn = http.client.HTTPConnection(HOST, emulator_port, timeout=20)
        try:
            conn.request(method, target, headers=headers or {})
            r = conn.getresponse()
            return r.status, r.getheader("Content-Range"), r.read()
        finally:
            conn.close()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def do_GET(self):
            self._handle("GET")

        def do_HEAD(self):
            self._handle("HEAD")

        def _send(self, method, status, body=b"", headers=(), length=None):
            self.send_response(status)
            for k, v in headers:
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(body) if length is None else length))
            self.end_headers()
            if method != "HEAD":
                self.wfile.write(body)
            return status

        def _error(self, method, status, code):
            body = f'<?xml version="1.0" encoding="UTF-8"?><Error><Code>{code}</Code></Error>'.encode()
            return self._send(method, status, body, [("Content-Type", "application/xml")])

        def _handle(self, method):
            url = urlsplit(self.path)
            if url.path.startswith("/__adapter__/"):
                with lock:
                    if url.path == "/__adapter__/clear":
                        log.clear()
                    body = json.dumps(log).encode()
                self._send(method, 200, body, [("Content-Type", "application/json")])
                return
            bucket, _, name = url.path.lstrip("/").partition("/")
            bucket, name = unquote(bucket), unquote(name)
            query = parse_qs(url.query, keep_blank_values=True)
            status = None
            try:
                if not name and method == "GET" and query.get("list-type") == ["2"]:
                    status = self._list(bucket, query)
                elif bucket and name:
                    status = self._object(method, bucket, name)
                else:
                    status = self._error(method, 501, "NotImplementedByAdapter")
            finally:
                with lock:
                    log.append([method, self.path, self.headers.get("Range", ""), status])

        def _list(self, bucket, query):
            """ListObjectsV2 from the emulator's objects.list (which returns every match in one
            page: no continuation token is ever handed out)."""
            prefix = query.get("prefix", [""])[0]
            delimiter = query.get("delimiter", [""])[0]
            params = {k: v for k, v in (("prefix", prefix), ("delimiter", delimiter)) if v}
            status, _, body = upstream("GET", f"/storage/v1/b/{quote(bucket, safe='')}/o?{urlencode(params)}")
            if status == 404:
                return self._error("GET", 404, "NoSuchBucket")
            if status != 200:
                return self._error("GET", status, "EmulatorError")
            listing = json.loads(body)
            after = query.get("start-after", [""])[0]
            items = sorted((o for o in listing.get("items", []) if o["name"] > after), key=lambda o: o["name"])
            prefixes = sorted(p for p in listing.get("prefixes", []) if p > after)
            if query.get("continuation-token"):
                items, prefixes = [], []
            parts = ['<?xml version="1.0" encoding="UTF-8"?>',
                     '<ListBucketResult xmlns="http://doc.s3.amazonaws.com/2006-03-01">',
                     f"<Name>{_xml(bucket)}</Name><Prefix>{_xml(prefix)}</Prefix>",
                     f"<KeyCount>{len(items) + len(prefixes)}</KeyCount><IsTruncated>false</IsTruncated>"]
            for o in items:
                parts.append(f"<Contents><Key>{_xml(o['name'])}</Key><Size>{int(o['size'])}</Size>"
                             f"<LastModified>{_xml(o['updated'])}</LastModified>"
                             f"<ETag>&quot;{_xml(o['etag'])}&quot;</ETag></Contents>")
            for p in prefixes:
                parts.append(f"<CommonPrefixes><Prefix>{_xml(p)}</Prefix></CommonPrefixes>")
            parts.append("</ListBucketResult>")
            return self._send("GET", 200, "".join(parts).encode(), [("Content-Type", "application/xml")])

        def _object(self, method, bucket, name):
            """HEAD: the emulator's objects.get metadata as headers. GET: the emulator's XML GET
            (Range passed through) with those headers added."""
            status, _, body = upstream("GET", f"/storage/v1/b/{quote(bucket, safe='')}/o/{quote(name, safe='')}")
            if status == 404:
                return self._error(method, 404, "NoSuchKey")
            if status != 200:
                return self._error(method, status, "EmulatorError")
            meta = json.loads(body)
            headers = [("ETag", f'"{meta["etag"]}"'), ("Last-Modified", _http_date(meta["updated"])),
                       ("x-goog-generation", str(meta["generation"])),
                       ("Content-Type", meta.get("contentType") or "application/octet-stream"),
                       ("Accept-Ranges", "bytes")]
            if method == "HEAD":
                return self._send("HEAD", 200, headers=headers, length=int(meta["size"]))
            rng = self.headers.get("Range")
            status, content_range, data = upstream("GET", f"/{quote(bucket, safe='')}/{quote(name, safe='')}",
                                                   {"Range": rng} if rng else None)
            if status == 404:  # deleted between the two requests
                return self._error(method, 404, "NoSuchKey")
            if content_range:
                headers.append(("Content-Range", content_range))
            return self._send("GET", status, data, headers)

    server = ThreadingHTTPServer((HOST, 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def _gcs():
    """Child-process side of GCSEmulator."""
    import logging

    from gcp_storage_emulator.server import create_server

    logging.disable(logging.CRITICAL)
    emulator = create_server(HOST, 0, in_memory=True)
    emulator.start()
    emulator_port = emulator._api._httpd.server_address[1]
    deadline = time.monotonic() + START_TIMEOUT
    while True:  # its health check
        try:
            with urllib.request.urlopen(f"http://{HOST}:{emulator_port}/", timeout=5) as r:
                r.read()
            break
        except (urllib.error.URLError, OSError):
            if time.monotonic() > deadline:
                os._exit(1)
            time.sleep(0.1)
    adapter = _gcs_adapter(emulator_port)
    serve_until_stdin_closes([emulator_port, adapter.server_address[1]], adapter.shutdown, emulator.stop)


if __name__ == "__main__":
    if len(sys.argv) in (3, 5) and sys.argv[1] == "--webdav":
        _webdav(*sys.argv[2:])
    elif len(sys.argv) == 2 and sys.argv[1] == "--gcs":
        _gcs()
    else:
        sys.exit("usage: storage_emulators.py --webdav ROOT [CERT KEY] | --gcs")
