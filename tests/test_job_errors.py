"""Setup errors raised inside actors reach the user as one line, found by type (never by message text), and local
runs check model weights up front."""

import pytest

from chunker.backends.base import BackendUnavailable
from chunker.config import load_config
from chunker.errors import DocumentError, SetupError, find_setup_error
from chunker.plan.deterministic import CoverageError
from chunker.types import Stage
from jobs.common import preflight


def test_setup_error_found_in_the_exception_chain():
    try:
        try:
            raise BackendUnavailable("install the gpu extra")
        except BackendUnavailable as inner:
            raise RuntimeError("actor died") from inner
    except RuntimeError as outer:
        found = find_setup_error(outer)
        assert isinstance(found, BackendUnavailable) and str(found) == "install the gpu extra"
    assert find_setup_error(ValueError("a plain defect")) is None
    # Text that merely names a setup error is not one: nothing is read from message text.
    assert find_setup_error(RuntimeError("chunker.backends.base.BackendUnavailable: model 'X' is missing")) is None


def test_document_errors_keep_stage_and_code_across_pickling():
    import pickle

    err = pickle.loads(pickle.dumps(CoverageError("element 3 placed twice")))
    assert isinstance(err, DocumentError) and not isinstance(err, SetupError)
    assert (err.stage, err.code, str(err)) == (Stage.PLAN, "coverage", "element 3 placed twice")


@pytest.mark.ray
def test_setup_error_raised_in_a_ray_data_actor_is_found_with_its_own_message(tmp_path):
    """The conversion actor cannot load its model: Ray wraps the error in its own, the job finds it by type."""
    ray = pytest.importorskip("ray")
    from ray.data import ActorPoolStrategy

    from chunker.run.rows import SegmentRow
    from chunker.types import DocumentRecord
    from jobs.stages import ConvertStage

    cfg = load_config(None, ["converter.backend=transformers", f"converter.model.path={tmp_path / 'no-model'}"])
    rows = [SegmentRow(DocumentRecord("d", "x.pdf", "x.pdf", 1)).encode()]
    ray.init(num_cpus=2, include_dashboard=False, ignore_reinit_error=True, log_to_driver=False)
    try:
        ds = ray.data.from_items(rows).map_batches(
            ConvertStage, fn_constructor_kwargs={"cfg": cfg, "cfg_hash": "h", "out_uri": str(tmp_path / "run")},
            compute=ActorPoolStrategy(size=1), num_cpus=0.5, batch_size=1)
        with pytest.raises(Exception) as info:
            ds.take_all()
        found = find_setup_error(info.value)
        assert isinstance(found, BackendUnavailable), info.value
        assert "no-model" in str(found) and "\n" not in str(found).strip()
    finally:
        ray.shutdown()


def test_local_preflight_names_missing_weights(monkeypatch, tmp_path):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    cfg = load_config(None, ["converter.backend=transformers", f"converter.model.path={tmp_path / 'nope'}"])
    with pytest.raises(BackendUnavailable, match="nope"):
        preflight(cfg)
    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:6390")
    preflight(cfg)  # on a cluster the workers check: the driver may not hold the weights
    preflight(load_config(None, []))  # pdf-text needs nothing
