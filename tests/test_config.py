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
    "converter.model.name=other", "converter.model.temperature=0.5", "converter.prompt_version=v1",
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


@pytest.mark.parametrize("backend", ["vllm", "transformers"])
def test_llm_planner_on_the_converters_in_process_model_is_refused(backend):
    # It would build a second engine (a second copy of the model) inside the GPU-less planning stage.
    with pytest.raises(ConfigError, match=f"second copy of the converter's model.*planner.llm_backend={backend}"):
        load_config(None, [f"converter.backend={backend}", "planner.kind=llm"])
    # Named explicitly (jobs.rechunk on a GPU host) or served once (openai), it is the user's choice.
    for named in (backend, "openai"):
        cfg = load_config(None, [f"converter.backend={backend}", "planner.kind=llm", f"planner.llm_backend={named}"])
        assert cfg.planner.llm_backend == named
    # A served model (openai) or the test backends share nothing in-process: the converter's backend is fine.
    assert load_config(None, ["converter.backend=openai", "planner.kind=llm"]).planner.kind == "llm"


def test_the_segment_timeout_is_a_last_resort_behind_the_batch_timeouts():
    # pdf-text has no batch timeout: the segment timeout keeps its default.
    assert load_config(None).ray.document_timeout_s == 1800
    # A model converter: 64 + 2 pages x 240 s of model time per page is 15,840 s; unset, the segment gets twice that.
    cfg = load_config(None, ["converter.backend=vllm"])
    assert cfg.segment_model_budget_s() == 66 * 240
    assert cfg.ray.document_timeout_s == 2 * 66 * 240
    assert load_config(None, ["converter.backend=vllm", "intake.segment_pages=8", "converter.page_timeout_s=10"]
                       ).ray.document_timeout_s == 1800  # never below the default
    # Set below the budget, it would fail whole segments before any batch could fall back: refused, by name.
    with pytest.raises(ConfigError, match=r"ray.document_timeout_s=1800 would fire before the batch timeouts of a "
                                          r"66-page segment.*at least 15840"):
        load_config(None, ["converter.backend=vllm", "ray.document_timeout_s=1800"])
    assert load_config(None, ["converter.backend=vllm", "ray.document_timeout_s=null"]).ray.document_timeout_s is None
    assert load_config(None, ["converter.backend=vllm", "converter.page_timeout_s=null",
                              "ray.document_timeout_s=1800"]).ray.document_timeout_s == 1800


def test_every_shipped_config_loads():
    from pathlib import Path

    names = []
    for path in sorted(Path("configs").glob("*.yaml")):
        if path.name == "serve.yaml":  # a Ray Serve deploy file (serve deploy), not a job config
            continue
        cfg = load_config(path)
        names.append(path.stem)
        if cfg.converter.backend == "vllm":
            m = cfg.converter.model
            # Chains in flight keep every engine slot busy.
            assert cfg.ray.convert_concurrency >= m.max_num_seqs, path
    assert {"local", "qwen2.5-vl-7b", "qwen2.5-vl-7b-fp8", "qwen2.5-vl-7b-throughput"} <= set(names)


def test_fp8_and_throughput_profiles_say_what_they_promise():
    from chunker.backends.vllm_requests import build_engine_args

    fp8 = load_config("configs/qwen2.5-vl-7b-fp8.yaml")
    args = build_engine_args(fp8.converter.model, "/m", max_images=fp8.intake.batch_pages, mm_kwargs={})
    assert (args["quantization"], args["kv_cache_dtype"]) == ("fp8", "fp8")
    assert fp8.converter.model.max_num_seqs == 128 and fp8.render.max_side_px == 1568
    tp = load_config("configs/qwen2.5-vl-7b-throughput.yaml")
    assert tp.render.max_side_px == 1288 and tp.intake.batch_pages in (1, 2) and tp.converter.model.max_num_seqs == 128
    # The prompt fits: pages of up to (1288/28)^2 visual tokens, ~1.5k of text, and the output cap.
    assert tp.intake.batch_pages * (1288 // 28) ** 2 + 1500 + tp.converter.model.max_output_tokens \
        <= tp.converter.model.max_model_len
    # The first GPU hour (jobs.gpu_check) measures this very profile.
    from jobs.gpu_check import GPU_PROFILES

    measured = {(a[a.index("--side") + 1], a[a.index("--pages") + 1], a[a.index("--decode-batch") + 1])
                for a in (p.args for p in GPU_PROFILES if "7b" in p.name)}
    assert ("1288", str(tp.intake.batch_pages), str(tp.converter.model.max_num_seqs)) in measured


def test_direct_ingress_ports_are_checked_and_reach_serves_controller():
    from serving.ingress import controller_options, ingress_env

    with pytest.raises(ConfigError, match="serve.port 30500 lies inside direct_ingress_ports"):
        load_config(None, ["serve.direct_ingress=true", "serve.port=30500"])
    with pytest.raises(ConfigError, match="lowest first"):
        load_config(None, ["serve.direct_ingress_ports=[31000,30000]"])
    assert ingress_env(load_config(None, [])) == {} and controller_options(load_config(None, [])) is None
    cfg = load_config(None, ["serve.direct_ingress=true", "serve.direct_ingress_ports=[32000,32100]"])
    assert controller_options(cfg) == {"runtime_env": {"env_vars": {
        "RAY_SERVE_ENABLE_DIRECT_INGRESS": "1", "RAY_SERVE_DIRECT_INGRESS_MIN_HTTP_PORT": "32000",
        "RAY_SERVE_DIRECT_INGRESS_MAX_HTTP_PORT": "32100"}}}
