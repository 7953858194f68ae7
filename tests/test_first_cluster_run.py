"""The smaller things that stop a first cluster run: downloads asked for on offline workers, GPU configs without
conversion CPUs or with too few chains, a one-page batch retried at its cap, embedding threads inside a pod."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest

from chunker.config import load_config
from jobs.stages import ConvertStage

REPO = Path(__file__).resolve().parents[1]

# ------------------------------------------------------------------ embedding threads inside a pod


def test_available_cpus_is_the_containers_quota_not_the_hosts_cores(tmp_path):
    from chunker.index.embed import available_cpus

    host = set(range(128))
    v2 = tmp_path / "v2"
    v2.mkdir()
    (v2 / "cpu.max").write_text("1600000 100000\n")  # a pod with cpu: 16
    assert available_cpus(str(v2), host) == 16
    (v2 / "cpu.max").write_text("150000 100000\n")  # 1.5 CPUs: two threads
    assert available_cpus(str(v2), host) == 2
    (v2 / "cpu.max").write_text("max 100000\n")  # no quota: the cores it may run on
    assert available_cpus(str(v2), set(range(6))) == 6
    v1 = tmp_path / "v1"
    (v1 / "cpu").mkdir(parents=True)
    (v1 / "cpu" / "cpu.cfs_quota_us").write_text("400000\n")
    (v1 / "cpu" / "cpu.cfs_period_us").write_text("100000\n")
    assert available_cpus(str(v1), host) == 4
    (v1 / "cpu" / "cpu.cfs_quota_us").write_text("-1\n")
    assert available_cpus(str(v1), set(range(3))) == 3
    assert available_cpus(str(tmp_path / "none"), {0, 1}) == 2  # no cgroup files at all


def test_embed_num_threads_zero_uses_the_available_cpus(monkeypatch):
    from chunker.config import EmbedConfig
    from chunker.index import embed

    monkeypatch.setattr(embed, "available_cpus", lambda: 16)
    e = embed.Embedder.__new__(embed.Embedder)
    e.cfg = EmbedConfig(num_threads=0)
    assert e._threads() == 16
    e.cfg = EmbedConfig(num_threads=3)
    assert e._threads() == 3


# ------------------------------------------------------------------ the shipped GPU configs


@pytest.mark.parametrize("name", ["qwen2.5-vl-7b", "qwen2.5-vl-7b-fp8", "qwen2.5-vl-7b-throughput", "qwen2.5-vl-3b"])
def test_gpu_configs_give_the_conversion_actor_cpus_and_enough_chains(name: str):
    cfg = load_config(REPO / "configs" / f"{name}.yaml")
    r, m = cfg.ray, cfg.converter.model
    assert r.convert_num_cpus is not None and r.convert_cpus() >= 4, "rendering needs real cores, not 0.5 of one"
    # Enough chains to keep every engine slot busy between a chain's batches, not so many that pages pile up.
    assert m.max_num_seqs <= r.convert_concurrency <= 1.5 * m.max_num_seqs


def test_the_7b_config_runs_as_many_sequences_as_an_80gb_card_holds():
    from chunker.backends.gpu_model import cost_model

    cfg = load_config(REPO / "configs" / "qwen2.5-vl-7b.yaml")
    m = cfg.converter.model
    kv = cost_model(m.name, "h100", quantization=m.quantization, kv_cache_dtype=m.kv_cache_dtype,
                    gpu_memory_utilization=m.gpu_memory_utilization).kv_capacity_tokens
    per_sequence = 11_000  # a 4-page request of 1,568 px pages and its answer
    assert 0.5 * kv / per_sequence <= m.max_num_seqs <= kv / per_sequence, (kv // per_sequence, m.max_num_seqs)


# ------------------------------------------------------------------ a one-page batch at its cap


class CappedEngine:
    """Every answer runs into the output cap (finish "length"), as a page the model loops on."""

    name = "capped"

    def __init__(self) -> None:
        self.requests: list = []

    async def generate(self, req):  # noqa: ANN001, ANN202
        from chunker.backends.base import GenerationResult

        self.requests.append(req)
        return GenerationResult("row " * 50, 10, req.max_tokens, "length", "m")

    async def close(self) -> None:
        return None


class Fallback:
    def __init__(self) -> None:
        self.calls: list[list[int]] = []

    def markdown_for_pages(self, source_uri: str, pages: list[int]) -> str:
        self.calls.append(list(pages))
        return "\n".join(f"<!-- page {p} -->\nFallback text of page {p}.\n" for p in pages)


class Pages:
    mime = "image/jpeg"

    def image(self, page: int) -> bytes:
        return f"d:{page}".encode()

    def size(self, page: int) -> tuple[int, int]:
        return (12, 16)


def test_a_one_page_batch_at_its_cap_is_not_retried_at_every_temperature():
    from chunker.config import ConverterConfig
    from chunker.convert.vlm import VlmConverter
    from chunker.types import SegmentJob

    eng, fb = CappedEngine(), Fallback()
    conv = VlmConverter(ConverterConfig(), eng, fb)
    assert len(conv.ladder) == 3, "the ladder it used to climb with the full cap"
    job = SegmentJob("d", "file:///d.pdf", "d.pdf", 1, 0, 1, 1, 1, 1, 1)  # one page, one-page batches
    [b] = asyncio.run(conv.convert(job, Pages()))
    model = ConverterConfig().model
    # One try at the cap, one more at the next temperature (a loop may break there) and the page cap: not three
    # answers of 8,192 tokens at three temperatures.
    assert [(r.temperature, r.max_tokens) for r in eng.requests] == [
        (conv.ladder[0], model.max_output_tokens), (conv.ladder[1], model.max_output_tokens_per_page)]
    assert model.max_output_tokens_per_page < model.max_output_tokens
    assert b.fallback_pages == [1] and fb.calls == [[1]] and "output cap reached, one more try" in b.error


# ------------------------------------------------------------------ allow_download on workers that are offline


def test_allow_download_turns_the_hub_on_for_the_conversion_actors_only():
    from jobs.common import conversion_remote_args

    assert conversion_remote_args(load_config(None)) == {}
    env = conversion_remote_args(load_config(None, ["converter.model.allow_download=true"]))["runtime_env"]["env_vars"]
    assert env == {"HF_HUB_OFFLINE": "0", "TRANSFORMERS_OFFLINE": "0"}


class EnvStage(ConvertStage):
    """Notes the hub switch its actor process sees."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)
        (Path(self.store.root) / "hub-offline").write_text(os.environ.get("HF_HUB_OFFLINE", "unset"))


@pytest.fixture(scope="module")
def offline_ray():
    """A runtime whose every worker is offline, as jobs.common.init_ray starts one and as cluster/runtime_env.yaml
    makes every node of a cluster."""
    import ray
    import ray.cloudpickle

    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    ray.init(num_cpus=4, include_dashboard=False, ignore_reinit_error=True, log_to_driver=False,
             runtime_env={"env_vars": {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}})
    yield
    ray.shutdown()


@pytest.mark.ray
@pytest.mark.slow
def test_conversion_actors_of_a_run_that_allows_downloads_are_online(offline_ray, samples_dir, tmp_path):
    from jobs.ingest import run_ingest

    one = tmp_path / "in"
    one.mkdir()
    first = sorted(samples_dir.glob("*.pdf"))[0]
    (one / first.name).write_bytes(first.read_bytes())
    for allow, want in (("false", "1"), ("true", "0")):
        run = tmp_path / f"run-{allow}"
        cfg = load_config("configs/local.yaml", [f"milvus.uri={tmp_path / f'm-{allow}.db'}",
                                                 f"converter.model.allow_download={allow}"])
        s = run_ingest(cfg, str(one), str(run), convert_stage=EnvStage)
        assert s.ok == 1, s.problems
        assert (run / "hub-offline").read_text() == want, f"allow_download={allow}"
