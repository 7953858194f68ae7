"""HTTP tests of the query endpoint against a real Ray Serve on 127.0.0.1.

One Ray runtime and one Serve instance for the module (ray.init ~5 s, serve.run ~8 s). Two applications share it:
``query`` over a Milvus Lite directory indexed here beforehand, and ``down`` pointed at a port where nothing
listens, for the 503 paths. Serve runs with direct ingress (serving/ingress.py): each replica also answers on a
port of its own. The Lite client of the indexing step is closed before the replica opens the directory,
because Lite allows one process per data directory.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack
from typing import Any

import pytest
from milvus_lite_server import free_port  # tests/ is on sys.path under pytest

pytestmark = [pytest.mark.ray, pytest.mark.slow]

HIT_FIELDS = {"rank", "score", "chunk_id", "text", "breadcrumb", "source", "doc_id", "page_start", "page_end", "modality",
              "identity", "context", "context_page_end"}

CHUNKS: list[tuple[str, str, str, int, str]] = [
    # chunk_id, breadcrumb, text, page, modality
    ("c-pump", "Manual > Maintenance > Pump", "To reset the pump, hold the red button for five seconds until the light blinks.", 3, "text"),
    ("c-warranty", "Manual > Warranty", "Warranty claims must be filed within 30 days of purchase with the original receipt.", 7, "text"),
    ("c-specs", "Manual > Specifications", "Model X200 weighs 4.2 kg; model X300 weighs 5.1 kg; both run on 230 V.", 9, "table"),
    ("c-diagram", "Manual > Overview", "Figure: exploded diagram of the pump housing showing the impeller and the seal.", 2, "figure"),
    ("c-cleaning", "Manual > Maintenance > Cleaning", "Clean the filter monthly with warm water; never use solvents on the seal.", 4, "text"),
]


_INDEX_SCRIPT = """
import json, sys
from chunker.config import load_config
from chunker.index.embed import Embedder
from chunker.index.store import ChunkStore
from chunker.types import Chunk

db, rows = sys.argv[1], json.loads(sys.argv[2])
cfg = load_config(None, [f"milvus.uri={db}"])
chunks = [
    Chunk(chunk_id=cid, doc_id="docmanual01", element_ids=[f"docmanual01:{i}"], text=f"{crumb}\\n\\n{text}",
          breadcrumb=crumb, page_start=page, page_end=page, modality=mod, planner="test", config_hash="test",
          source="manuals/pump.pdf", source_uri="manuals/pump.pdf")
    for i, (cid, crumb, text, page, mod) in enumerate(rows)
]
embedder = Embedder(cfg.embed)
with ChunkStore(cfg.milvus, embedder.dim) as store:
    store.upsert(chunks, embedder.encode([c.text for c in chunks]))
    assert store.count() == len(chunks), store.count()
"""


def _index(db: str) -> None:
    # In a child process: Milvus Lite keeps its data-dir lock until the process exits (client.close() does not
    # release it, measured), and the replica must be the only process that opens the directory.
    proc = subprocess.run([sys.executable, "-c", _INDEX_SCRIPT, db, json.dumps(CHUNKS)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]


@pytest.fixture(scope="module")
def base_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    ray = pytest.importorskip("ray")
    from ray import serve

    from serving.app import build_app, config_from_args
    from serving.ingress import controller_options

    db = str(tmp_path_factory.mktemp("serving") / "milvus.db")
    _index(db)
    dead = free_port()  # bound then released: nothing listens there
    port = free_port()
    old_auth = os.environ.get("RAY_AUTH_MODE")
    os.environ["RAY_AUTH_MODE"] = "disabled"
    # 4 logical CPUs on 2 cores: two replicas at 0.5 plus Serve's own actors fit without starving each other.
    ray.init(num_cpus=4, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}})
    try:
        query_args = {"set": [f"milvus.uri={db}", "serve.max_query_chars=200", "serve.direct_ingress=true"]}
        serve.start(http_options={"host": "127.0.0.1", "port": port},
                    controller_options=controller_options(config_from_args(query_args)))
        serve.run(build_app(query_args), name="query", route_prefix="/")
        serve.run(build_app({"milvus.uri": f"http://127.0.0.1:{dead}"}), name="down", route_prefix="/down")
        yield f"http://127.0.0.1:{port}"
    finally:
        try:
            serve.shutdown()
        finally:
            ray.shutdown()
            if old_auth is None:
                os.environ.pop("RAY_AUTH_MODE", None)
            else:
                os.environ["RAY_AUTH_MODE"] = old_auth


@pytest.fixture(scope="module")
def http(base_url: str) -> Iterator[Any]:
    import httpx

    with httpx.Client(base_url=base_url, timeout=60.0) as client:
        yield client


def test_good_query_returns_hits_with_all_fields(http: Any) -> None:
    r = http.post("/v1/query", json={"query": "how do I reset the pump?", "k": 3})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["mode"] in {"dense", "sparse", "hybrid"}
    assert set(body["timings_ms"]) == {"embed", "search", "rerank", "context", "queue", "wait", "total"}
    assert body["timings_ms"]["total"] > 0 and body["batch_size"] >= 1
    hits = body["hits"]
    assert 1 <= len(hits) <= 3
    assert all(set(h) == HIT_FIELDS for h in hits)
    assert [h["rank"] for h in hits] == list(range(1, len(hits) + 1))
    top = hits[0]
    assert top["chunk_id"] == "c-pump"
    assert top["breadcrumb"] == "Manual > Maintenance > Pump"
    assert (top["context"], top["context_page_end"]) == ("", 0), "short, but the next chunk opens another section"
    assert (top["source"], top["doc_id"], top["page_start"], top["page_end"]) == ("manuals/pump.pdf", "docmanual01", 3, 3)
    assert "red button" in top["text"]


def test_a_repeated_question_is_answered_from_the_cache(http: Any) -> None:
    body = {"query": "How often should the filter be cleaned?", "k": 2}
    first = http.post("/v1/query", json=body).json()
    again = http.post("/v1/query", json=dict(body, query="  How often should the   filter be cleaned? ")).json()
    assert not first["cached"] and again["cached"]
    assert again["hits"] == first["hits"] and again["query"] == "How often should the   filter be cleaned?"
    assert again["timings_ms"]["embed"] == 0 and again["timings_ms"]["search"] == 0
    other = http.post("/v1/query", json=dict(body, k=1)).json()  # another k is another answer
    assert not other["cached"] and other["hits"] == first["hits"][:1]


def test_direct_ingress_answers_as_the_proxy_does(http: Any) -> None:
    import httpx

    from serving.ingress import replica_urls

    (url,) = replica_urls("query", "127.0.0.1")
    assert int(url.rsplit(":", 1)[1]) != http.base_url.port  # the replica's own server, not the proxy
    body = {"query": "what does model X300 weigh?", "k": 3, "filters": {"modality": "table"}}
    with httpx.Client(base_url=url, timeout=60.0) as direct:
        via_replica = direct.post("/v1/query", json=body)
        bad = direct.post("/v1/query", json={"query": "pump", "k": 0})
        ready = direct.get("/readyz")
    via_proxy = http.post("/v1/query", json=body)
    assert via_replica.status_code == via_proxy.status_code == 200, (via_replica.text, via_proxy.text)
    assert [h["chunk_id"] for h in via_replica.json()["hits"]] == [h["chunk_id"] for h in via_proxy.json()["hits"]] \
        == ["c-specs"]
    # The same error contract on the replica's port: a 422 with a message, never a traceback.
    assert bad.status_code == 422 and bad.json()["error"] == "invalid_request" and "Traceback" not in bad.text
    assert ready.status_code == 200


def test_every_app_of_a_direct_ingress_serve_gets_its_own_port(http: Any) -> None:
    import httpx

    from serving.ingress import replica_urls

    # `down` was built without serve.direct_ingress: its replica inherits the flag from the controller's runtime
    # environment all the same, and keeps the 503 contract on its own port.
    (down,) = replica_urls("down", "127.0.0.1")
    (query,) = replica_urls("query", "127.0.0.1")
    assert down.endswith("/down") and down.rsplit(":", 1)[1] != query.rsplit(":", 1)[1]
    r = httpx.post(f"{down}/v1/query", json={"query": "pump"}, timeout=60.0)
    assert r.status_code == 503 and r.json()["error"] == "store_unavailable", r.text


def test_filters_restrict_hits(http: Any) -> None:
    r = http.post("/v1/query", json={"query": "weight of the models", "k": 5, "filters": {"modality": "table"}})
    assert r.status_code == 200, r.text
    hits = r.json()["hits"]
    assert [h["chunk_id"] for h in hits] == ["c-specs"]
    r = http.post("/v1/query", json={"query": "pump", "k": 5, "filters": {"page_min": 4, "page_max": 7}})
    assert r.status_code == 200, r.text
    assert {h["chunk_id"] for h in r.json()["hits"]} <= {"c-cleaning", "c-warranty"}


@pytest.mark.parametrize("value", ['manuals" or doc_id != "', "x' or 1==1 or '", "manuals/%", "a_b"])
def test_source_prefix_with_expression_syntax_is_a_literal(http: Any, value: str) -> None:
    # Quotes, `or 1==1` and LIKE wildcards are escaped into the literal: nothing matches, nothing is injected.
    r = http.post("/v1/query", json={"query": "pump", "filters": {"source_prefix": value}})
    assert r.status_code == 200, r.text
    assert r.json()["hits"] == []


BAD_REQUESTS: list[tuple[str, Any]] = [
    ("empty query", {"query": ""}),
    ("whitespace query", {"query": "   \n\t "}),
    ("query over max_query_chars", {"query": "pump " * 100}),
    ("missing query", {"k": 5}),
    ("query not a string", {"query": 42}),
    ("k zero", {"query": "pump", "k": 0}),
    ("k over 50", {"query": "pump", "k": 51}),
    ("k a string", {"query": "pump", "k": "x"}),
    ("k a numeric string", {"query": "pump", "k": "5"}),
    ("k a float", {"query": "pump", "k": 2.5}),
    ("rerank not a bool", {"query": "pump", "rerank": "yes"}),
    ("unknown top-level field", {"query": "pump", "topk": 3}),
    ("unknown filter field", {"query": "pump", "filters": {"chunk_id": "c-pump"}}),
    ("filters not an object", {"query": "pump", "filters": "doc_id == 'x'"}),
    ("bad modality", {"query": "pump", "filters": {"modality": "video"}}),
    ("doc_id with quotes", {"query": "pump", "filters": {"doc_id": 'x" or "1"=="1'}}),
    ("doc_id or 1==1", {"query": "pump", "filters": {"doc_id": "x or 1==1"}}),
    ("doc_id backslash", {"query": "pump", "filters": {"doc_id": "x\\\" or true"}}),
    ("source_prefix backslash", {"query": "pump", "filters": {"source_prefix": "manuals\\\" || 1==1"}}),
    ("source_prefix 10k chars", {"query": "pump", "filters": {"source_prefix": "a" * 10_000}}),
    ("doc_id 10k chars", {"query": "pump", "filters": {"doc_id": "a" * 10_000}}),
    ("page_min zero", {"query": "pump", "filters": {"page_min": 0}}),
    ("page range inverted", {"query": "pump", "filters": {"page_min": 9, "page_max": 2}}),
    ("page a string", {"query": "pump", "filters": {"page_max": "1 or 1==1"}}),
    ("body a list", ["pump"]),
]


@pytest.mark.parametrize("body", [b for _, b in BAD_REQUESTS], ids=[n for n, _ in BAD_REQUESTS])
def test_bad_requests_are_4xx_with_a_message(http: Any, body: Any) -> None:
    r = http.post("/v1/query", json=body)
    assert 400 <= r.status_code < 500, (r.status_code, r.text)
    err = r.json()
    assert err["error"] == "invalid_request"
    assert err["message"].strip()
    assert "Traceback" not in r.text
    assert len(r.text) < 5_000  # the offending 10k-char value is not echoed back


@pytest.mark.parametrize("raw", [b'{"query": "\\ud800 loan"}', b'{"query": "loan \\udfff"}',
                                 b'{"query": "pump", "filters": {"source_prefix": "\\ud83d"}}'])
def test_a_lone_surrogate_escape_is_a_422_not_a_500(http: Any, raw: bytes) -> None:
    # Valid JSON, not valid text: refused at the door with the field named, never a 500 from deep inside.
    r = http.post("/v1/query", content=raw, headers={"content-type": "application/json"})
    assert r.status_code == 422, (r.status_code, r.text)
    assert "surrogate" in r.json()["message"]


def test_an_astral_character_is_fine(http: Any) -> None:
    r = http.post("/v1/query", content='{"query": "pump \\ud835\\udc00 😀"}'.encode(),
                  headers={"content-type": "application/json"})
    assert r.status_code == 200, r.text


def test_malformed_json_is_422(http: Any) -> None:
    r = http.post("/v1/query", content=b'{"query": "pump",', headers={"content-type": "application/json"})
    assert r.status_code == 422
    assert r.json()["message"]


def test_health_ready_and_openapi(http: Any) -> None:
    assert http.get("/healthz").json() == {"status": "ok", "checks": {}}
    ready = http.get("/readyz")
    assert ready.status_code == 200, ready.text
    assert ready.json()["checks"] == {"model": "ok", "store": "ok"}
    spec = http.get("/openapi.json").json()
    assert "/v1/query" in spec["paths"]
    assert {"/healthz", "/readyz"} <= set(spec["paths"])
    assert http.get("/docs").status_code == 200


def test_unreachable_store_is_503_with_a_message(http: Any) -> None:
    assert http.get("/down/healthz").status_code == 200  # the process is up...
    ready = http.get("/down/readyz")
    assert ready.status_code == 503  # ...but not ready
    assert ready.json()["checks"]["store"].startswith("error:")
    r = http.post("/down/v1/query", json={"query": "how do I reset the pump?"})
    assert r.status_code == 503, r.text
    err = r.json()
    assert err["error"] == "store_unavailable"
    assert "127.0.0.1" in err["message"]
    assert "Traceback" not in r.text
    # Bad input is still bad input while the store is down.
    assert http.post("/down/v1/query", json={"query": ""}).status_code == 422


def test_rerank_without_a_model_is_a_clear_400(http: Any) -> None:
    r = http.post("/v1/query", json={"query": "how do I reset the pump?", "rerank": True})
    assert r.status_code == 400, r.text
    assert r.json()["error"] == "rerank_unavailable"
    assert "reranker_model" in r.json()["message"]


def test_store_dying_after_start_turns_ready_and_query_into_503(http: Any, base_url: str, tmp_path: Any) -> None:
    # The serving topology we recommend: replicas talk to a `milvus-lite server`; here it dies under them.
    from ray import serve

    from serving.app import build_app

    from milvus_lite_server import lite_server

    stack = ExitStack()
    uri, server = stack.enter_context(lite_server(tmp_path / "m"))
    try:
        # Result cache off: the question asked after the outage must reach the store, not a cached answer.
        serve.run(build_app({"milvus.uri": uri, "retrieval.result_cache_size": "0"}), name="flaky", route_prefix="/flaky")
        assert http.get("/flaky/readyz").status_code == 200
        ok = http.post("/flaky/v1/query", json={"query": "pump"})
        assert ok.status_code == 200 and ok.json()["hits"] == []  # an empty collection, created by the replica
        server.terminate()
        server.wait(timeout=30)
        r = http.post("/flaky/v1/query", json={"query": "pump"})
        assert r.status_code == 503, r.text
        assert r.json()["error"] == "store_unavailable"
        assert http.get("/flaky/readyz").status_code == 503
    finally:
        serve.delete("flaky")
        stack.close()


def test_a_frozen_store_is_a_503_within_the_call_timeout(http: Any, tmp_path: Any) -> None:
    # A Milvus that accepts connections but never answers (SIGSTOP): without per-call deadlines a search waits
    # ~70 s for gRPC's keepalive to drop the connection; with milvus.call_timeout_s the query is a 503 within it.
    import signal

    from ray import serve

    from serving.app import STORE_RETRY_S, build_app

    from milvus_lite_server import lite_server

    timeout_s = 2.0
    stack = ExitStack()
    uri, server = stack.enter_context(lite_server(tmp_path / "m"))
    try:
        serve.run(build_app({"milvus.uri": uri, "milvus.call_timeout_s": str(timeout_s),
                             "retrieval.result_cache_size": "0"}),  # each question below must reach the store
                  name="frozen", route_prefix="/frozen")
        assert http.post("/frozen/v1/query", json={"query": "pump"}).status_code == 200
        os.kill(server.pid, signal.SIGSTOP)
        try:
            t0 = time.monotonic()
            r = http.post("/frozen/v1/query", json={"query": "pump"})
            took = time.monotonic() - t0
            assert r.status_code == 503, r.text
            assert r.json()["error"] == "store_unavailable" and "call_timeout_s=2" in r.json()["message"]
            assert took < timeout_s + 2.5, took  # the deadline plus embedding and HTTP, not minutes
            t0 = time.monotonic()
            assert http.post("/frozen/v1/query", json={"query": "pump"}).status_code == 503
            assert time.monotonic() - t0 < 1.0  # just failed: answered at once, not after another deadline
            t0 = time.monotonic()
            assert http.get("/frozen/readyz").status_code == 503
            assert time.monotonic() - t0 < timeout_s + 2.5
        finally:
            os.kill(server.pid, signal.SIGCONT)
        time.sleep(STORE_RETRY_S)
        deadline = time.monotonic() + 30
        while (r := http.post("/frozen/v1/query", json={"query": "pump"})).status_code != 200:
            assert time.monotonic() < deadline, r.text  # the same replica recovers once the server answers again
            time.sleep(0.5)
    finally:
        serve.delete("frozen")
        stack.close()


def test_serve_host_defaults_to_all_interfaces_on_a_cluster(monkeypatch) -> None:
    from chunker.config import load_config
    from serving.app import serve_host

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    assert serve_host(load_config(None)) == "127.0.0.1"  # a private local runtime
    assert serve_host(load_config(None, ["ray.address=auto"])) == "0.0.0.0"
    monkeypatch.setenv("RAY_ADDRESS", "http://head:8266")
    assert serve_host(load_config(None)) == "0.0.0.0"
    assert serve_host(load_config(None, ["serve.host=10.1.2.3"])) == "10.1.2.3"


def test_build_app_reads_replicas_autoscaling_and_overrides_from_config() -> None:
    # No runtime needed: the builder only binds the deployment.
    from chunker.config import ConfigError
    from serving.app import build_app

    fixed = build_app({"set": "serve.replicas=2;milvus.uri=http://127.0.0.1:1", "serve.num_cpus": "0.25"})._bound_deployment
    assert fixed.num_replicas == 2
    assert fixed.ray_actor_options["num_cpus"] == 0.25
    assert fixed.init_args[0]["milvus"]["uri"] == "http://127.0.0.1:1"
    auto = build_app({"serve.autoscaling": "true", "serve.max_replicas": "3"})._bound_deployment
    scaling = auto._deployment_config.autoscaling_config
    assert (scaling.min_replicas, scaling.max_replicas, scaling.target_ongoing_requests) == (1, 3, 4.0)
    with pytest.raises(ConfigError, match="unknown application argument 'confg'"):
        build_app({"confg": "configs/local.yaml"})
    with pytest.raises(ConfigError, match="min_replicas"):
        build_app({"serve.autoscaling": "true", "serve.min_replicas": "5", "serve.max_replicas": "2"})


def test_concurrent_queries_each_get_their_own_answer(base_url: str) -> None:
    # Queries arriving together are embedded and searched as one batch; no answer may leak into another's.
    from concurrent.futures import ThreadPoolExecutor

    import httpx

    asks = [("how do I reset the pump?", None, "c-pump"), ("warranty claims receipt", None, "c-warranty"),
            ("how heavy is the X300?", {"modality": "table"}, "c-specs"), ("clean the filter", None, "c-cleaning"),
            ("exploded view of the housing", {"modality": "figure"}, "c-diagram")] * 2

    def ask(item: tuple[str, Any, str]) -> tuple[str, dict[str, Any]]:
        body: dict[str, Any] = {"query": item[0], "k": 1}
        if item[1]:
            body["filters"] = item[1]
        with httpx.Client(base_url=base_url, timeout=60.0) as client:
            r = client.post("/v1/query", json=body)
        assert r.status_code == 200, r.text
        return item[2], r.json()

    with ThreadPoolExecutor(len(asks)) as pool:
        answers = list(pool.map(ask, asks))
    for want, body in answers:
        assert [h["chunk_id"] for h in body["hits"]] == [want]


def test_coalescer_batches_what_queued_while_it_ran() -> None:
    import asyncio
    import threading

    from serving.app import Coalescer

    gate = threading.Event()
    calls: list[list[int]] = []

    def fn(items: list[int]) -> list[Any]:
        calls.append(list(items))
        gate.wait(10)
        if -1 in items:
            raise RuntimeError("boom")
        return [i * 10 for i in items]

    async def main() -> None:
        c = Coalescer(fn, max_batch_size=3)
        first = asyncio.ensure_future(c.submit(0))
        await asyncio.sleep(0.05)  # the worker is now inside fn([0])
        rest = [asyncio.ensure_future(c.submit(i)) for i in range(1, 6)]
        await asyncio.sleep(0.05)
        gate.set()
        assert await first == 0 and [await f for f in rest] == [10, 20, 30, 40, 50]
        gate.clear()
        bad = [asyncio.ensure_future(c.submit(i)) for i in (-1, 7)]
        await asyncio.sleep(0.05)
        gate.set()
        for f in bad:
            with pytest.raises(RuntimeError, match="boom"):
                await f
        assert await c.submit(8) == 80  # the worker outlives a failed batch

    asyncio.run(main())
    assert calls == [[0], [1, 2, 3], [4, 5], [-1, 7], [8]]
