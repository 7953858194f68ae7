"""A real S3 protocol server on loopback for the object-storage tests: moto's S3 behind werkzeug's threaded server
(what ``moto_server`` and ``moto.server.ThreadedMotoServer`` run), with every request it receives recorded.

The record says which S3 operation each request was, told apart the way S3 itself does (method, query and the
copy-source header), so a test can assert what a piece of code asked the store to do: e.g. that writing a part was
one PutObject (or a multipart upload) and never a CopyObject + DeleteObject "rename".
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, unquote

ACCESS_KEY = "chunker-test-key"
SECRET_KEY = "chunker-test-secret"
REGION = "us-east-1"


@dataclass(frozen=True)
class S3Request:
    method: str
    bucket: str
    key: str  # "" for bucket-level requests
    op: str  # the S3 operation name (PutObject, CopyObject, ListObjectsV2, ...)


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


class S3Server:
    """moto's S3 on ``127.0.0.1`` and a free port; :attr:`requests` holds every request since :meth:`clear`."""

    def __init__(self) -> None:
        from moto.server import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
        from werkzeug.serving import make_server

        logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request otherwise
        self.requests: list[S3Request] = []
        self._lock = threading.Lock()
        app = DomainDispatcherApplication(create_backend_app)
        self._server = make_server("127.0.0.1", 0, self._recording(app), threaded=True,
                                   request_handler=MotoRequestHandler)
        self.port = self._server.server_address[1]
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def _recording(self, app: Any) -> Any:
        def wsgi(environ: dict[str, Any], start_response: Any) -> Any:
            path = unquote(environ.get("PATH_INFO", "")).lstrip("/")
            bucket, _, key = path.partition("/")
            query = parse_qs(environ.get("QUERY_STRING", ""), keep_blank_values=True)
            headers = {k[5:].lower().replace("_", "-"): v for k, v in environ.items() if k.startswith("HTTP_")}
            if not bucket.startswith("moto-api"):
                with self._lock:
                    self.requests.append(S3Request(environ["REQUEST_METHOD"], bucket, key,
                                                   operation(environ["REQUEST_METHOD"], key, query, headers)))
            return app(environ, start_response)

        return wsgi

    def env(self) -> dict[str, str]:
        """What pyarrow (and boto3) need to reach this server: the standard AWS variables."""
        return {"AWS_ENDPOINT_URL": self.endpoint, "AWS_ACCESS_KEY_ID": ACCESS_KEY,
                "AWS_SECRET_ACCESS_KEY": SECRET_KEY, "AWS_DEFAULT_REGION": REGION, "AWS_REGION": REGION,
                # No shared config or credentials file of the machine may leak in.
                "AWS_CONFIG_FILE": "/dev/null", "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
                "AWS_EC2_METADATA_DISABLED": "true"}

    def client(self) -> Any:
        import boto3

        return boto3.client("s3", endpoint_url=self.endpoint, aws_access_key_id=ACCESS_KEY,
                            aws_secret_access_key=SECRET_KEY, region_name=REGION)

    def clear(self) -> None:
        with self._lock:
            self.requests.clear()

    def ops(self, bucket: str | None = None, key_prefix: str = "") -> list[S3Request]:
        with self._lock:
            return [r for r in self.requests
                    if (bucket is None or r.bucket == bucket) and r.key.startswith(key_prefix)]

    def stop(self) -> None:
        self._server.shutdown()
        self._thread.join(timeout=10)
