"""Setup errors raised inside actors reach the user as one line, and local runs check model weights up front."""

import pytest

from chunker.backends.base import BackendUnavailable
from chunker.config import load_config
from jobs.common import preflight, setup_error


def test_setup_error_found_in_the_chain_and_in_ray_text():
    try:
        try:
            raise BackendUnavailable("install the gpu extra")
        except BackendUnavailable as inner:
            raise RuntimeError("actor died") from inner
    except RuntimeError as outer:
        assert setup_error(outer) == "install the gpu extra"
    wrapped = RuntimeError("The actor died ...\nchunker.backends.base.BackendUnavailable: model 'X' is missing\n")
    assert setup_error(wrapped) == "model 'X' is missing"
    assert setup_error(ValueError("a plain defect")) is None


def test_local_preflight_names_missing_weights(monkeypatch, tmp_path):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    cfg = load_config(None, ["converter.backend=transformers", f"converter.model.path={tmp_path / 'nope'}"])
    with pytest.raises(BackendUnavailable, match="nope"):
        preflight(cfg)
    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:6390")
    preflight(cfg)  # on a cluster the workers check: the driver may not hold the weights
    preflight(load_config(None, []))  # pdf-text needs nothing
