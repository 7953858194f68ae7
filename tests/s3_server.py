"""The loopback S3 server of the object-storage tests: it lives in :mod:`jobs.bench.s3_server` (the dry-run benchmark
counts its requests too); the tests import it from here."""

from jobs.bench.s3_server import ACCESS_KEY, REGION, SECRET_KEY, S3Process, S3Request, S3Server, operation

__all__ = ["ACCESS_KEY", "REGION", "SECRET_KEY", "S3Process", "S3Request", "S3Server", "operation"]
