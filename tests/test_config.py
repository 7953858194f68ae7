import pytest

from chunker.config import Config, ConfigError, config_hash, field_class, field_paths, load_config, runtime_settings


def test_local_yaml_loads_and_overrides(tmp_path):
    cfg = load_config("configs/local.yaml", ["milvus.uri=/tmp/x.db", "planner.target_chars=600", "intake.batch_pages=5"])
    assert cfg.milvus.uri == "/tmp/x.db"
    assert cfg.planner.target_chars == 600
    assert cfg.intake.batch_pages == 5


def test_unknown_key_names_the_field(tmp_path):
    with pytest.raises(ConfigError, match=r"planner\.target_size: unknown field"):
        load_config(None, ["planner.target_size=3"])
    bad = tmp_path / "c.yaml"
    bad.write_text("milvus:\n  urii: x\n")
    with pytest.raises(ConfigError, match=r"milvus\.urii"):
        load_config(bad)


def test_bad_values_name_the_field():
    with pytest.raises(ConfigError, match=r"intake\.batch_pages"):
        load_config(None, ["intake.batch_pages=0"])
    with pytest.raises(ConfigError, match=r"converter"):
        load_config(None, ["converter.backend=nonsense"])
    with pytest.raises(ConfigError, match="min_chars <= target_chars"):
        load_config(None, ["planner.min_chars=900", "planner.target_chars=800"])
    with pytest.raises(ConfigError, match="dotted.key=value"):
        load_config(None, ["no-equals-sign"])
    with pytest.raises(ConfigError, match="not found"):
        load_config("configs/does-not-exist.yaml")


def test_hash_is_stable_and_tracks_content_settings():
    a, b = Config(), Config()
    assert config_hash(a) == config_hash(b)
    assert len(config_hash(a)) == 16
    # Runtime sizing does not change the rows, so it does not change the hash.
    assert config_hash(load_config(None, ["ray.convert_actors=7", "milvus.uri=/x"])) == config_hash(a)
    assert config_hash(load_config(None, ["planner.target_chars=500"])) != config_hash(a)


def test_every_field_is_classified_content_or_runtime():
    for path in field_paths():
        assert field_class(path) in ("content", "runtime", "secret"), path  # raises for an unclassified field


@pytest.mark.parametrize("override", [
    # Retuning after an out-of-memory error, moving the weights, resizing batches: the done ledger must hold.
    "converter.model.max_num_seqs=8", "converter.model.gpu_memory_utilization=0.8",
    "converter.model.request_timeout_s=30", "converter.model.path=/models/elsewhere", "embed.batch_size=16",
    "embed.device=cuda", "intake.listing_block=10", "converter.model.max_model_len=16384",
    "converter.model.tensor_parallel_size=2", "ray.convert_num_cpus=8",
])
def test_runtime_knobs_leave_the_hash_alone(override):
    assert config_hash(load_config(None, [override])) == config_hash(Config())


@pytest.mark.parametrize("override", [
    "converter.model.name=other", "converter.model.temperature=0.5", "converter.prompt_version=v2",
    "render.max_side_px=1288", "intake.batch_pages=2", "intake.segment_pages=32", "embed.model=/m/other",
    "converter.pdf_text.ocr=false", "planner.max_chars=1400",
])
def test_content_settings_change_the_hash(override):
    assert config_hash(load_config(None, [override])) != config_hash(Config())


def test_runtime_settings_are_recorded_without_secrets():
    got = runtime_settings(load_config(None, ["converter.model.max_num_seqs=8", "intake.password=hunter2"]))
    assert got["converter.model.max_num_seqs"] == 8 and got["ray.convert_actors"] == 2
    assert "intake.password" not in got and "hunter2" not in repr(got)
    assert "planner.target_chars" not in got  # content settings are in the hash, not here


def test_no_progress_timeout_must_exceed_the_document_timeout():
    with pytest.raises(ConfigError, match="no_progress_timeout_s"):
        load_config(None, ["ray.document_timeout_s=600", "ray.no_progress_timeout_s=300"])
    assert Config().ray.effective_no_progress_timeout_s() > Config().ray.document_timeout_s
    assert load_config(None, ["ray.document_timeout_s=3000"]).ray.effective_no_progress_timeout_s() == 3600
    assert load_config(None, ["ray.document_timeout_s=null"]).ray.effective_no_progress_timeout_s() == -1


def test_every_field_is_described():
    def walk(model):
        for name, f in model.model_fields.items():
            assert f.description, f"{model.__name__}.{name} has no description"
            ann = f.annotation
            if isinstance(ann, type) and hasattr(ann, "model_fields"):
                walk(ann)

    walk(Config)


def test_llm_planner_without_a_model_fails_at_load():
    with pytest.raises(ConfigError, match="planner.llm_backend"):
        load_config(None, ["planner.kind=llm"])
    assert load_config(None, ["planner.kind=llm", "planner.llm_backend=scripted"]).planner.kind == "llm"
