"""The Ray Serve query application: FastAPI ingress over one :class:`chunker.index.retrieval.Retriever` per replica.

Run it with ``serve run serving.app:build_app config=configs/local.yaml`` (any ``dotted.key=value`` argument is a
config override), ``serve run configs/serve.yaml`` / ``serve deploy configs/serve.yaml``, or
``python -m serving.app --config configs/local.yaml`` (which also honours ``serve.host`` / ``serve.port``).

Concurrent queries are batched per replica by :class:`Coalescer`: one embedding call and one Milvus call per
filter for the whole batch, run on a worker thread so the event loop keeps accepting requests. On CPU a batch of 8
short questions embeds in ~5x the time of one, and on Milvus Lite every search call walks all rows in Python
(~130 ms at 100k rows), so a batch pays that walk once instead of once per question.

Error contract: bad input is a 422 with a message and the offending fields; an unreachable store or a model that
failed to load is a 503 with a message; anything else is a defect, logged with its traceback and answered with a
generic 500 body that carries no traceback. Every Milvus call carries ``milvus.call_timeout_s`` as its deadline,
so a server that stops answering costs one deadline (not ~70 s of waiting for gRPC keepalive); for
``STORE_RETRY_S`` after an outage, queries get their 503 at once instead of each waiting out the deadline again.
"""

# No `from __future__ import annotations`: serve.ingress rebinds the route methods, and FastAPI must see the
# real QueryRequest class (not the string 'QueryRequest') to read it from the body.

import asyncio
import logging
import math
import threading
import time
from pathlib import Path
from typing import Any, Callable

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from ray import serve
from ray.serve import Application

from chunker.config import Config, ConfigError, load_config
from chunker.index.filters import FilterError
from chunker.index.store import is_outage
from serving.ingress import DirectIngressError, controller_options, replica_urls
from serving.schemas import ErrorDetail, ErrorResponse, HealthResponse, HitOut, QueryRequest, QueryResponse, Timings

# Serve forwards this logger to the replica's log file with request ids attached.
logger = logging.getLogger("ray.serve")

DEPLOYMENT_NAME = "QueryService"
# A broken store is re-probed at most this often, so a storm of requests during an outage does not become a
# storm of connection attempts.
STORE_RETRY_S = 2.0
_REPO_ROOT = Path(__file__).resolve().parents[1]

# serve.ingress needs the FastAPI object when the class is decorated, so it lives at module level; it holds
# only routes and handlers, never request state.
api = FastAPI(
    title="vision-chunker query API",
    version="1",
    description="Dense / sparse / hybrid search over retrieval-ready chunks in Milvus.",
)


def _error(status: int, kind: str, message: str, details: list[ErrorDetail] | None = None) -> JSONResponse:
    body = ErrorResponse(error=kind, message=message, details=details or [])
    return JSONResponse(status_code=status, content=body.model_dump())


@api.exception_handler(RequestValidationError)
async def _invalid_request(_: Request, exc: RequestValidationError) -> JSONResponse:
    # FastAPI's default body echoes every input back (a 10k-char filter value included); ours names the field
    # and the rule only.
    details = []
    for e in exc.errors():
        loc = ".".join(str(p) for p in e.get("loc", ()))
        msg = "unknown field" if e.get("type") == "extra_forbidden" else str(e.get("msg", "invalid"))
        details.append(ErrorDetail(field=loc, message=msg[:300]))
    summary = "; ".join(f"{d.field}: {d.message}" for d in details[:5]) or "invalid request"
    return _error(422, "invalid_request", summary, details)


@api.exception_handler(Exception)
async def _defect(_: Request, exc: Exception) -> JSONResponse:
    # Last resort only: the query route catches its own errors, so reaching this is a bug worth a traceback in the log.
    logger.exception("unhandled error in query service: %s", exc)
    return _error(500, "internal", "internal error; see the service log")


class Coalescer:
    """Runs ``fn(items)`` on a worker thread, one call at a time; whatever queued meanwhile forms the next call.

    Not ``@serve.batch``: Ray Serve 2.60 closes a batch before it waits for a free slot (max_concurrent_batches), so
    under load batches of one or two queue up behind the running one (measured: mean batch 1.3 with 8 clients).
    Here a batch is cut only when the worker is free, so it holds every query that arrived during the last one.
    """

    def __init__(self, fn: Callable[[list[Any]], list[Any]], max_batch_size: int, wait_s: float = 0.0) -> None:
        self.fn = fn
        self.max_batch_size = max(1, int(max_batch_size))
        self.wait_s = max(0.0, float(wait_s))
        self._queue: asyncio.Queue[tuple[Any, asyncio.Future[Any]]] | None = None
        self._worker: asyncio.Task[None] | None = None

    async def submit(self, item: Any) -> Any:
        """``fn``'s result for ``item`` (or its exception, raised here)."""
        if self._queue is None:
            self._queue = asyncio.Queue()
        if self._worker is None or self._worker.done():
            self._worker = asyncio.get_running_loop().create_task(self._run())
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._queue.put_nowait((item, future))
        return await future

    async def _run(self) -> None:
        queue = self._queue
        assert queue is not None
        while True:
            batch = [await queue.get()]
            if self.wait_s and queue.empty():
                await asyncio.sleep(self.wait_s)
            while len(batch) < self.max_batch_size and not queue.empty():
                batch.append(queue.get_nowait())
            live = [(item, fut) for item, fut in batch if not fut.done()]  # a caller that went away is skipped
            if not live:
                continue
            try:
                results = await asyncio.to_thread(self.fn, [item for item, _ in live])
                if len(results) != len(live):
                    raise RuntimeError(f"batch function returned {len(results)} results for {len(live)} items")
            except Exception as exc:  # noqa: BLE001 - handed to every caller of the batch; the worker lives on
                for _, fut in live:
                    if not fut.done():
                        fut.set_exception(exc)
                continue
            for (_, fut), result in zip(live, results):
                if not fut.done():
                    fut.set_result(result)


def search_items(items: list[tuple[Any, Any]]) -> list[Any]:
    """(retriever, Query) pairs -> SearchResult or the exception of each, one ``search_many`` per retriever."""
    started = time.perf_counter()
    out: list[Any] = [None] * len(items)
    groups: dict[int, list[int]] = {}
    for i, (retriever, _) in enumerate(items):  # one retriever unless a reconnect happened mid-batch
        groups.setdefault(id(retriever), []).append(i)
    for idx in groups.values():
        results = items[idx[0]][0].search_many([items[i][1] for i in idx])
        for i, r in zip(idx, results):
            if not isinstance(r, BaseException):
                r.timings_ms["batch_started"] = started
            out[i] = r
    return out


@serve.deployment(name=DEPLOYMENT_NAME)
@serve.ingress(api)
class QueryService:
    """One replica: the embedder is loaded once; the store connection is (re)opened lazily when it is down."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.cfg = Config.model_validate(config)
        self._lock = threading.Lock()
        self._embedder: Any = None
        self._model_error = ""
        self._retriever: Any = None
        self._store_error = "not connected yet"
        self._last_attempt = 0.0
        self._outage_at = -STORE_RETRY_S  # monotonic time of the last query that found the store down
        s = self.cfg.serve
        self._batcher = Coalescer(search_items, s.max_batch_size, s.batch_wait_timeout_s)
        self._set_torch_threads(s.torch_threads or max(1, math.ceil(s.num_cpus)))
        try:
            from chunker.index.embed import Embedder

            self._embedder = Embedder(self.cfg.embed)
        except Exception as exc:  # noqa: BLE001 - reported by /readyz instead of crash-looping the replica
            self._model_error = f"{type(exc).__name__}: {exc}"
            logger.error("embedding model failed to load: %s", self._model_error)
        self._connect(force=True)

    def _connect(self, force: bool = False) -> Any:
        """The retriever, building it if the store was down; None while the store (or the model) is unavailable."""
        if self._retriever is not None or self._embedder is None:
            return self._retriever
        # Non-blocking: a connect to a black-holed host can take the store's whole connect timeout, and requests
        # arriving meanwhile should get their 503 at once rather than queue behind it.
        if not self._lock.acquire(blocking=force):
            return None
        try:
            if self._retriever is not None:
                return self._retriever
            now = time.monotonic()
            if not force and now - self._last_attempt < STORE_RETRY_S:
                return None
            self._last_attempt = now
            try:
                from chunker.index.retrieval import Retriever
                from chunker.index.store import ChunkStore

                store = ChunkStore(self.cfg.milvus, self._embedder.dim)
                retriever = Retriever(self.cfg, store=store, embedder=self._embedder)
                self._warm_up(retriever)
                self._retriever = retriever
                self._store_error = ""
            except Exception as exc:  # noqa: BLE001 - e.g. SchemaMismatch: say so at /readyz, keep the replica up
                self._store_error = f"{type(exc).__name__}: {exc}"
                if is_outage(exc):
                    logger.warning("milvus store unavailable at %s: %s", self.cfg.milvus.uri, self._store_error)
                else:
                    logger.exception("could not open the chunk store at %s", self.cfg.milvus.uri)
        finally:
            self._lock.release()
        return self._retriever

    @staticmethod
    def _set_torch_threads(n: int) -> None:
        # torch sizes its pool from the machine's cores, not from the replica's CPU share: on 2 cores with two
        # replicas and a Milvus process, more threads than the share only adds contention.
        try:
            import torch

            torch.set_num_threads(n)
        except Exception as exc:  # noqa: BLE001 - a tuning knob, never a reason to fail the replica
            logger.warning("could not set torch threads to %d: %s", n, exc)

    @staticmethod
    def _warm_up(retriever: Any) -> None:
        """One throwaway query before the first request: Milvus Lite builds its in-memory BM25 index of a segment
        on the first sparse search (~9 s at 100k rows, measured), which would otherwise land on a user."""
        from chunker.index.retrieval import Query

        t = time.perf_counter()
        (res,) = retriever.search_many([Query("warm up the search path", k=1)])
        if isinstance(res, Exception):
            raise res
        logger.info("search path warmed up in %.1f s", time.perf_counter() - t)

    def _unavailable(self) -> JSONResponse:
        if self._model_error:
            return _error(503, "not_ready", f"embedding model not loaded: {self._model_error}")
        return _error(503, "store_unavailable", f"vector store unreachable ({self.cfg.milvus.uri}): {self._store_error}")

    @api.get("/healthz", response_model=HealthResponse)
    def healthz(self) -> HealthResponse:
        # Liveness only: the process answers. Dependencies are /readyz's business.
        return HealthResponse(status="ok")

    @api.get("/readyz", response_model=HealthResponse, responses={503: {"model": HealthResponse}})
    def readyz(self) -> Any:
        checks = {"model": f"error: {self._model_error}" if self._model_error else "ok"}
        retriever = self._connect()
        if retriever is None:
            checks["store"] = f"error: {self._store_error or 'model not loaded'}"
        else:
            try:
                # A metadata call within the read deadline, not count(): count() flushes, too heavy for a probe.
                store = retriever.store
                checks["store"] = "ok" if store.ready() else f"error: collection {store.collection!r} is missing"
            except Exception as exc:  # noqa: BLE001 - a probe never 500s; the failure is the answer
                if not is_outage(exc):
                    logger.exception("readiness probe failed")
                checks["store"] = f"error: {type(exc).__name__}: {exc}"
        ready = all(v == "ok" for v in checks.values())
        body = HealthResponse(status="ok" if ready else "not_ready", checks=checks)
        return JSONResponse(status_code=200 if ready else 503, content=body.model_dump())

    @api.post(
        "/v1/query",
        response_model=QueryResponse,
        responses={422: {"model": ErrorResponse}, 503: {"model": ErrorResponse}, 500: {"model": ErrorResponse}},
    )
    async def query(self, req: QueryRequest) -> Any:
        t0 = time.perf_counter()
        question = req.query.strip()
        limit = self.cfg.serve.max_query_chars
        if not question:
            return _error(422, "invalid_request", "query must not be empty", [ErrorDetail(field="body.query", message="empty")])
        if len(req.query) > limit:
            msg = f"query is {len(req.query)} characters; the limit is {limit} (serve.max_query_chars)"
            return _error(422, "invalid_request", msg, [ErrorDetail(field="body.query", message=msg)])
        if time.monotonic() - self._outage_at < STORE_RETRY_S:
            return self._unavailable()  # it was down a moment ago: answer now rather than wait out a deadline
        # Off the event loop unless already connected: a (re)connect can take the store's connect timeout.
        retriever = self._retriever or await asyncio.to_thread(self._connect)
        if retriever is None:
            return self._unavailable()
        from chunker.index.retrieval import Query, RerankerUnavailable

        t_enqueue = time.perf_counter()
        try:
            result = await self._batcher.submit((retriever, Query(question, req.k, req.filters, req.rerank)))
            if isinstance(result, BaseException):
                raise result
        except RerankerUnavailable as exc:
            # The caller asked for something this deployment cannot do; retrying will not help, so not a 503.
            return _error(400, "rerank_unavailable", f"rerank is not available on this deployment: {exc}")
        except FilterError as exc:
            # The retriever's last word on filter values (QueryFilters has already checked their shape).
            return _error(422, "invalid_request", str(exc), [ErrorDetail(field="body.filters", message=str(exc))])
        except Exception as exc:  # noqa: BLE001 - outage -> 503; anything else is a defect: logged, no traceback out
            if is_outage(exc):
                logger.warning("query failed, store unavailable: %s", exc)
                self._store_error = f"{type(exc).__name__}: {exc}"
                self._outage_at = time.monotonic()
                return self._unavailable()
            logger.exception("query failed")
            return _error(500, "internal", "internal error while searching; see the service log")
        timings = {key: float(result.timings_ms.get(key, 0.0)) for key in ("embed", "search", "rerank", "context")}
        timings["total"] = (time.perf_counter() - t0) * 1000.0
        timings["queue"] = max(0.0, (result.timings_ms.get("batch_started", t_enqueue) - t_enqueue) * 1000.0)
        timings["wait"] = max(0.0, timings["total"] - timings["embed"] - timings["search"] - timings["rerank"]
                              - timings["context"])
        hits = [
            HitOut(
                rank=h.rank, score=float(h.score), chunk_id=h.chunk_id, text=h.text, breadcrumb=h.breadcrumb,
                source=h.source, doc_id=h.doc_id, page_start=h.page_start, page_end=h.page_end, modality=h.modality,
                identity=h.identity, context=h.context, context_page_end=h.context_page_end,
            )
            for h in result.hits
        ]
        rerank = self.cfg.retrieval.rerank if req.rerank is None else req.rerank
        mode = str(getattr(result, "mode", "") or self.cfg.retrieval.mode)
        return QueryResponse(query=question, k=req.k, mode=mode, rerank=rerank, hits=hits, timings_ms=Timings(**timings),
                             batch_size=int(result.batch_size), cached=bool(getattr(result, "cached", False)))


def _resolve_config_path(raw: str) -> str:
    # Relative paths are tried from the working directory first, then from the repository root, because
    # `serve deploy` builds the app in a Ray task whose working directory is not the user's.
    p = Path(raw)
    if p.is_absolute() or p.exists():
        return str(p)
    alt = _REPO_ROOT / p
    return str(alt) if alt.exists() else raw


def _overrides(args: dict[str, Any]) -> list[str]:
    """Overrides from `set` (a list, or ';'-separated string from the CLI) and from any `dotted.key=value` arg."""
    raw_set = args.get("set") or []
    items = [s for s in raw_set.split(";")] if isinstance(raw_set, str) else [str(s) for s in raw_set]
    items = [s.strip() for s in items if s.strip()]
    for key, value in args.items():
        if "." in key:
            items.append(f"{key}={value}")
        elif key not in ("config", "set"):
            raise ConfigError(f"unknown application argument {key!r}; known: config, set, or any dotted.key=value override")
    return items


def config_from_args(args: dict[str, Any]) -> Config:
    """The validated config for the app, with a relative Milvus Lite path made absolute for the replicas."""
    path = args.get("config")
    cfg = load_config(_resolve_config_path(str(path)) if path else None, _overrides(args))
    uri = cfg.milvus.uri
    if "://" not in uri and not Path(uri).is_absolute():
        # Replicas may not share the caller's working directory; the caller means its own.
        cfg.milvus.uri = str(Path(uri).resolve())
    s = cfg.serve
    if s.autoscaling and s.min_replicas > s.max_replicas:
        raise ConfigError(f"serve.min_replicas ({s.min_replicas}) must not exceed serve.max_replicas ({s.max_replicas})")
    return cfg


def deployment_options(cfg: Config) -> dict[str, Any]:
    s = cfg.serve
    opts: dict[str, Any] = {
        "ray_actor_options": {"num_cpus": s.num_cpus},
        "max_ongoing_requests": s.max_ongoing_requests,
    }
    if s.autoscaling:
        opts["num_replicas"] = "auto"
        opts["autoscaling_config"] = {
            "min_replicas": s.min_replicas,
            "max_replicas": s.max_replicas,
            "target_ongoing_requests": s.target_ongoing_requests,
        }
    else:
        opts["num_replicas"] = s.replicas
    return opts


def build_app(args: dict[str, Any]) -> Application:
    """Serve application builder: ``{"config": path, "set": [...], "dotted.key": value}`` -> bound app."""
    cfg = config_from_args(dict(args))
    # The resolved config travels as data so replicas never re-read files from their own working directory.
    return QueryService.options(**deployment_options(cfg)).bind(cfg.model_dump(mode="json"))


def serve_host(cfg: Config) -> str:
    """serve.host, or by default loopback for a private local runtime and every interface on a cluster: Serve's
    own default (127.0.0.1) would leave the proxies unreachable from other machines and from a Service."""
    from chunker.cli import ray_address

    if cfg.serve.host:
        return cfg.serve.host
    return "0.0.0.0" if ray_address(cfg) else "127.0.0.1"


def main(argv: list[str] | None = None, prog: str = "python -m serving.app") -> None:
    """Start Ray (or join RAY_ADDRESS) and serve on serve.host:serve.port until interrupted."""
    import ray

    from chunker.cli import base_parser, ray_init_options

    ns = base_parser("Serve the query API until interrupted.", prog).parse_args(argv)
    args: dict[str, Any] = {"config": ns.config, "set": ns.overrides}
    try:
        cfg = config_from_args(args)
    except ConfigError as exc:
        raise SystemExit(f"error: {exc}") from None
    if not ray.is_initialized():
        ray.init(**ray_init_options(cfg))
    host = serve_host(cfg)
    serve.start(proxy_location=cfg.serve.proxy_location, http_options={"host": host, "port": cfg.serve.port},
                controller_options=controller_options(cfg))
    logger.info("serving on http://%s:%d (proxies: %s)", host, cfg.serve.port, cfg.serve.proxy_location)
    serve.run(build_app(args), name="query", route_prefix="/")
    if cfg.serve.direct_ingress:
        try:
            urls = replica_urls("query", None if host in ("0.0.0.0", "::") else host)
            logger.info("replicas answer directly at %s", ", ".join(urls))
        except DirectIngressError as exc:
            logger.warning("%s", exc)
    while True:  # what serve.run(blocking=True) does: keep the driver (and so the app) alive until interrupted
        time.sleep(10)


if __name__ == "__main__":
    main()
