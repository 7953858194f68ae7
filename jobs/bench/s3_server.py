"""A real S3 protocol server on loopback (moto's S3 behind werkzeug's threaded server, what ``moto_server`` and
``moto.server.ThreadedMotoServer`` run), with every request it receives recorded: for the object-storage tests and
the dry-run benchmark, which counts the requests a run makes per document.

The record says which S3 operation each request was, told apart the way S3 itself does (method, query and the
copy-source header), so a caller can check what a piece of code asked the store to do: e.g. that writing a part was
one PutObject (or a multipart upload) and never a CopyObject + DeleteObject "rename".

Two ways to run it:

* :class:`S3Server`: a thread in this process (the tests);
* :class:`S3Process`: ``python -m jobs.bench.s3_server`` in a process of its own, so that moto's own CPU (a few
  milliseconds of Python per request) is never counted as the CPU of the process being measured (the benchmark's
  driver). Its record is read over HTTP at ``/_chunker/requests`` (no S3 bucket name may contain ``_``).

``latency_s`` holds every S3 request that long before moto answers it (requests in parallel wait in parallel): a
loopback server answers in about a millisecond, a real object store's PUT takes tens, and a serial chain of
requests costs what their latency adds up to, not what their CPU does.

moto is in the ``test`` extra (``pip install -e ".[test]"``).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote

ACCESS_KEY = "chunker-test-key"
SECRET_KEY = "chunker-test-secret"
REGION = "us-east-1"
CONTROL = "_chunker"  # the control path's first segment: never an S3 bucket name


@dataclass(frozen=True)
class S3Request:
    method: str
    bucket: str
    key: str  # "" for bucket-level requests
    op: str  # the S3 operation name (PutObject, CopyObject, ListObjectsV2, ...)
    prefix: str = ""  # a listing's prefix parameter


def operation(method: str, key: str, query: dict[str, list[str]], headers: dict[str, str]) -> str:
    """The S3 operation of a path-style request (the API reference's names)."""
    if not key:
        if method == "GET":
            return "ListObjectsV2" if query.get("list-type") == ["2"] else (
                "GetBucketLocation" if "location" in query else "ListObjects")
        if method == "POST" and "delete" in query:
            return "DeleteObjects"
        return {"PUT": "CreateBucket", "HEAD": "HeadBucket", "DELETE": "DeleteBucket"}.get(method, method)
    if method == "PUT":
        if "x-amz-copy-source" in headers:
            return "UploadPartCopy" if "partNumber" in query else "CopyObject"
        return "UploadPart" if "partNumber" in query else "PutObject"
    if method == "POST":
        if "uploads" in query:
            return "CreateMultipartUpload"
        if "uploadId" in query:
            return "CompleteMultipartUpload"
    if method == "DELETE":
        return "AbortMultipartUpload" if "uploadId" in query else "DeleteObject"
    return {"GET": "GetObject", "HEAD": "HeadObject"}.get(method, method)


def env_for(endpoint: str) -> dict[str, str]:
    """What pyarrow (and boto3) need to reach a server at ``endpoint``: the standard AWS variables."""
    return {"AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": SECRET_KEY, "AWS_DEFAULT_REGION": REGION, "AWS_REGION": REGION,
            # No shared config or credentials file of the machine may leak in.
            "AWS_CONFIG_FILE": "/dev/null", "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
            "AWS_EC2_METADATA_DISABLED": "true"}


def _filter(requests: list[S3Request], bucket: str | None, key_prefix: str) -> list[S3Request]:
    return [r for r in requests if (bucket is None or r.bucket == bucket) and r.key.startswith(key_prefix)]


class _Client:
    """What both servers offer a caller, given ``endpoint``."""

    endpoint: str

    def env(self) -> dict[str, str]:
        return env_for(self.endpoint)

    def client(self) -> Any:
        import boto3

        return boto3.client("s3", endpoint_url=self.endpoint, aws_access_key_id=ACCESS_KEY,
                            aws_secret_access_key=SECRET_KEY, region_name=REGION)


class S3Server(_Client):
    """moto's S3 on ``127.0.0.1`` and a free port (or ``port``); :attr:`requests` holds every request since
    :meth:`clear`."""

    def __init__(self, latency_s: float = 0.0, port: int = 0) -> None:
        from moto.server import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
        from werkzeug.serving import make_server

        logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request otherwise
        self.latency_s = latency_s
        self.requests: list[S3Request] = []
        self._lock = threading.Lock()
        app = DomainDispatcherApplication(create_backend_app)
        self._server = make_server("127.0.0.1", port, self._recording(app), threaded=True,
                                   request_handler=MotoRequestHandler)
        self.port = self._server.server_address[1]
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def _recording(self, app: Any) -> Any:
        def wsgi(environ: dict[str, Any], start_response: Any) -> Any:
            path = unquote(environ.get("PATH_INFO", "")).lstrip("/")
            bucket, _, key = path.partition("/")
            if bucket == CONTROL:
                return self._control(environ["REQUEST_METHOD"], key, start_response)
            query = parse_qs(environ.get("QUERY_STRING", ""), keep_blank_values=True)
            headers = {k[5:].lower().replace("_", "-"): v for k, v in environ.items() if k.startswith("HTTP_")}
            if not bucket.startswith("moto-api"):
                with self._lock:
                    self.requests.append(S3Request(environ["REQUEST_METHOD"], bucket, key,
                                                   operation(environ["REQUEST_METHOD"], key, query, headers),
                                                   (query.get("prefix") or [""])[0]))
                if self.latency_s:
                    time.sleep(self.latency_s)
            return app(environ, start_response)

        return wsgi

    def _control(self, method: str, what: str, start_response: Any) -> list[bytes]:
        if what == "requests" and method == "GET":
            with self._lock:
                body = json.dumps([[r.method, r.bucket, r.key, r.op, r.prefix] for r in self.requests]).encode()
        elif what == "requests" and method == "DELETE":
            self.clear()
            body = b"[]"
        else:
            start_response("404 Not Found", [("Content-Type", "text/plain")])
            return [b"unknown control request"]
        start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
        return [body]

    def clear(self) -> None:
        with self._lock:
            self.requests.clear()

    def ops(self, bucket: str | None = None, key_prefix: str = "") -> list[S3Request]:
        with self._lock:
            return _filter(self.requests, bucket, key_prefix)

    def stop(self) -> None:
        self._server.shutdown()
        self._thread.join(timeout=10)


class S3Process(_Client):
    """:class:`S3Server` in a child process (``python -m jobs.bench.s3_server``); stopped by its pid."""

    def __init__(self, latency_s: float = 0.0, start_timeout_s: float = 60.0) -> None:
        with tempfile.TemporaryDirectory(prefix="s3-server-") as tmp:
            port_file = Path(tmp) / "port"
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "jobs.bench.s3_server", "--port-file", str(port_file),
                 "--latency-ms", str(latency_s * 1000)],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            deadline = time.monotonic() + start_timeout_s
            while not port_file.is_file() or not port_file.read_text().strip():
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError("the S3 server process did not start (is moto installed? pip install -e "
                                       "'.[test]')")
                time.sleep(0.1)
            self.port = int(port_file.read_text())
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.latency_s = latency_s

    def _call(self, method: str) -> list[list[str]]:
        req = urllib.request.Request(f"{self.endpoint}/{CONTROL}/requests", method=method)
        with urllib.request.urlopen(req, timeout=60) as resp:
            return json.loads(resp.read())

    def ops(self, bucket: str | None = None, key_prefix: str = "") -> list[S3Request]:
        return _filter([S3Request(*r) for r in self._call("GET")], bucket, key_prefix)

    def clear(self) -> None:
        self._call("DELETE")

    def cpu_s(self) -> float:
        """CPU seconds the server process has used (Linux; 0 elsewhere)."""
        try:
            fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return 0.0
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)

    def __enter__(self) -> "S3Process":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m jobs.bench.s3_server", description="moto S3 on loopback")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--port-file", default=None, help="write the bound port here once listening")
    p.add_argument("--latency-ms", type=float, default=0.0, help="hold every S3 request this long")
    args = p.parse_args(argv)
    server = S3Server(latency_s=args.latency_ms / 1000, port=args.port)
    if args.port_file:
        tmp = Path(args.port_file + ".tmp")
        tmp.write_text(str(server.port))
        tmp.replace(args.port_file)
    else:
        print(server.endpoint, flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        while not stop.wait(1.0):
            pass
    except KeyboardInterrupt:
        pass
    server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
