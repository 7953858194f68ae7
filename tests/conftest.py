"""Fixtures shared by the whole test suite."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]


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
