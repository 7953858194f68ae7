"""Fixtures shared by the whole test suite."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from ray_support import ray_runtime_fixture  # tests/ is on sys.path under pytest (rootdir conftest)

REPO_ROOT = Path(__file__).resolve().parents[1]
_BUCKETS = itertools.count()  # a fresh bucket per test: no test sees another's objects


@pytest.fixture(scope="session")
def samples_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sample PDFs of :mod:`chunker.eval.samples`, generated once per session (nothing binary is committed)."""
    from chunker.eval.samples import generate_samples

    out = tmp_path_factory.mktemp("samples")
    generate_samples(out)
    return out


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """``../shared/data`` next to the repository, or ``$CHUNKER_SHARED_DATA`` (real corpora); tests that need it skip
    where it is absent."""
    import os

    path = Path(os.environ.get("CHUNKER_SHARED_DATA") or (REPO_ROOT / ".." / "shared" / "data")).resolve()
    if not path.is_dir():
        pytest.skip(f"shared data not found at {path} (expected ../shared/data next to the repository)")
    return path


@pytest.fixture(scope="session")
def cloudway_sample(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Eight of the 37 CloudWay PDFs (every fifth by name, so manuals, policies and spec sheets all come), copied
    into a folder of their own. The cluster tests that run a real corpus end to end assert what a cluster does with
    it (autoscaled GPU workers, actors sized to two CPUs, every document accounted for); all 37 add minutes of
    conversion and nothing a cluster does differently. The quality runs (jobs.evaluate) read all of them."""
    import shutil

    src = shared_data / "rag-multi-corpus-cloudway" / "pdf"
    pdfs = sorted(src.glob("*.pdf"))
    if not pdfs:
        pytest.skip(f"{src} holds no PDFs")
    out = tmp_path_factory.mktemp("cloudway-sample")
    for pdf in pdfs[::5]:
        shutil.copy2(pdf, out / pdf.name)
    return out


# A local Ray runtime for the tests of one module (tests/ray_support.py): 4 logical CPUs, no dashboard, the workers'
# output kept off the test's terminal.
ray_local = ray_runtime_fixture()


@pytest.fixture(scope="session")
def s3_server():
    """A real S3 protocol server (moto) on a free loopback port for the whole session; see tests/s3_server.py."""
    from s3_server import S3Server  # tests/ is on sys.path under pytest (rootdir conftest)

    server = S3Server()
    yield server
    server.stop()


@pytest.fixture
def s3(s3_server, monkeypatch: pytest.MonkeyPatch):
    """A fresh bucket on the loopback S3 server, with the AWS variables pyarrow reads set for this test only.

    Yields ``(server, bucket)``; the server's request record starts empty."""
    for name, value in s3_server.env().items():
        monkeypatch.setenv(name, value)
    bucket = f"test-bucket-{next(_BUCKETS)}"
    s3_server.client().create_bucket(Bucket=bucket)
    s3_server.clear()
    yield s3_server, bucket


