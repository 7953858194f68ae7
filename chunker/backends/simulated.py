"""A simulated vLLM server of stated capacity: for measuring the pipeline's own overhead without a GPU.

The engine is a fluid model of continuous batching, advanced by an asyncio scheduler task:

* up to ``max_num_seqs`` requests run at once; the rest wait in FIFO order (vLLM's admission);
* a request first prefills ``visual + text`` tokens, then decodes its output tokens;
* with a cost model (``EngineSpec.cost``, built by :meth:`EngineSpec.for_model` for a model on a GPU class: the
  benchmark's engine), each step costs what :mod:`chunker.backends.gpu_model` says: weights, the KV of the whole
  context of every decoding sequence (the KV tax: more pages per request, larger renders and longer answers make every
  step dearer; an FP8 cache halves it), and the prefill chunk riding on it; a request is admitted only while the KV
  cache holds its prompt and answer, and the shared instructions before the images come from the prefix cache once
  seen. Rates below are then derived, not used;
* without one (flat rates: the defaults, or a GPU calibration's measured figures, which always win), per step,
  running decoders go first (vLLM V1 schedules running requests before new prefills): each wants at most
  ``seq_decode_tokens_per_s`` (one sequence's step latency bounds it), and together they share the engine's decode
  throughput ``decode_tokens_per_s``; the engine time left over prefills waiting tokens at ``prefill_tokens_per_s``.
  A prefill token costs ``1/prefill_tokens_per_s`` engine-seconds and a decode token ``1/decode_tokens_per_s``, so a
  saturated engine converts ``1 / (prefill/page / prefill_tps + output/page / decode_tps)`` pages per second.

Token counts follow Qwen2.5-VL: one visual token per 28x28 pixels of each image ((w/28)*(h/28), from the request's
``image_sizes``), text at ~4 characters per token, output = the length of the answer written here.

Flat defaults (``EngineSpec()``, what a bare ``SimulatedBackend`` runs on) stand for Qwen2.5-VL-7B bf16 on one H100
from published figures, without the KV tax: prefill 25k tokens/s, decode 4k tokens/s aggregate and 90 tokens/s for
one sequence, 500 output tokens per page: ~4.4 pages/s saturated on 4-page requests of 1,568 px. The benchmark uses
the cost model instead, and a GPU calibration (``python -m jobs.calibrate --write-calibration FILE``, loaded by
``EngineSpec.from_calibration`` / ``SimulatedBackend.from_calibration``) replaces both with measured rates.

``time_scale`` stretches (>1) or compresses (<1) simulated time against wall time, so tests run fast. The engine
advances by the wall time that really passed (like a GPU, it keeps working while the host CPU is busy), so CPU work
in the caller shows up as lost throughput, magnified by ``1/time_scale``.

Answers are deterministic under ``seed``: the text depends only on (seed, request id, pages asked).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import random
import re
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chunker.backends.base import GenerationRequest, GenerationResult
from chunker.backends.gpu_model import CostModel, cost_model
from chunker.config import ModelConfig
from chunker.contract import page_marker

_PAGES = re.compile(r"document pages ([\d,\s]+?), in that order")
_HEADINGS = re.compile(r"^Heading path: (.*)$", re.M)
_WORDS = (
    "the engine keeps every page in order while each batch hands its context to the next one so that headings "
    "tables and lists survive across page breaks and the index sees complete sections with their breadcrumbs"
).split()
PATCH_PX = 28


@dataclass(frozen=True)
class EngineSpec:
    """Capacity of one simulated engine (one GPU, or one tensor-parallel group). See the module docstring."""

    prefill_tokens_per_s: float = 25_000.0
    decode_tokens_per_s: float = 4_000.0
    seq_decode_tokens_per_s: float = 90.0
    max_num_seqs: int = 32
    output_tokens_per_page: int = 500
    tick_s: float = 0.02  # simulated seconds per scheduler step
    max_num_batched_tokens: int = 16384  # tokens per engine step (cost model only)
    cost: CostModel | None = None  # the KV-aware step cost; None: the flat rates above

    @classmethod
    def for_model(cls, cfg: ModelConfig, gpu: str = "h100", **overrides: Any) -> "EngineSpec":
        """The cost-model engine of ``cfg``'s model on one GPU of class ``gpu`` at ``cfg``'s precision
        (quantization, kv_cache_dtype) and batch limits; flat rates when the model is not one the cost model knows."""
        model = cost_model(cfg.name, gpu, quantization=cfg.quantization, kv_cache_dtype=cfg.kv_cache_dtype,
                           gpu_memory_utilization=cfg.gpu_memory_utilization)
        fields: dict[str, Any] = dict(max_num_seqs=cfg.max_num_seqs, max_num_batched_tokens=cfg.max_num_batched_tokens,
                                      cost=model)
        return cls(**{**fields, **overrides})

    def describe(self) -> str:
        if self.cost is None:
            return (f"flat rates: prefill {self.prefill_tokens_per_s:g} tok/s, decode {self.decode_tokens_per_s:g} "
                    f"tok/s, {self.max_num_seqs} sequences")
        c = self.cost
        precision = f"{'fp8' if c.fp8_weights else 'bf16'} weights, {'fp8' if c.fp8_kv else 'bf16'} KV"
        return (f"cost model: {c.shape.name} on {c.gpu.name}, {precision}, {self.max_num_seqs} sequences, "
                f"KV cache {c.kv_capacity_tokens:,} tokens")

    @staticmethod
    def visual_tokens(request: GenerationRequest) -> int:
        visual = sum(math.ceil(w / PATCH_PX) * math.ceil(h / PATCH_PX) for w, h in request.image_sizes)
        if not request.image_sizes:  # images without sizes: assume a full A4 render at 1568 px
            visual = len(request.images) * 40 * 56
        return visual

    def prefill_tokens(self, request: GenerationRequest) -> int:
        return self.visual_tokens(request) + (len(request.system) + len(request.instructions) + len(request.user)) // 4

    @staticmethod
    def shared_prefix_tokens(request: GenerationRequest) -> int:
        """Tokens before the first image (system + instructions), whole 16-token blocks: what a prefix cache shares."""
        return (len(request.system) + len(request.instructions)) // 4 // 16 * 16 if request.instructions else 0

    def pages_per_s(self, prefill_per_page: float, output_per_page: float) -> float:
        """Saturated throughput (the roofline) for pages of the given token counts (flat rates)."""
        return 1.0 / (prefill_per_page / self.prefill_tokens_per_s + output_per_page / self.decode_tokens_per_s)

    def work_seconds(self, request: GenerationRequest, result: GenerationResult) -> float:
        """Engine-seconds one answered request takes out of a saturated engine (the benchmark's roofline)."""
        if self.cost is None:
            return result.input_tokens / self.prefill_tokens_per_s + result.output_tokens / self.decode_tokens_per_s
        steady = self.cost.steady_state(result.input_tokens, result.cached_tokens, self.visual_tokens(request),
                                        len(request.images), max(1, result.output_tokens), self.max_num_seqs)
        return 1.0 / steady.requests_per_s

    @classmethod
    def from_calibration(cls, path: str | Path, **overrides: Any) -> "EngineSpec":
        """The spec a GPU run of ``python -m jobs.calibrate --write-calibration FILE`` measured.

        Reads the file's ``engine_spec`` object (or a bare object of the same fields); unknown keys are refused, so
        a file from another tool fails loudly instead of silently keeping the defaults.
        """
        data = json.loads(Path(path).read_text())
        fields = data.get("engine_spec", data) if isinstance(data, dict) else None
        if not isinstance(fields, dict):
            raise ValueError(f"{path}: expected a JSON object with an 'engine_spec' object")
        known = set(cls.__dataclass_fields__) - {"cost"}  # a calibration is measured rates: it replaces the model
        unknown = set(fields) - known
        if unknown:
            raise ValueError(f"{path}: unknown engine_spec fields {sorted(unknown)}; known: {sorted(known)}")
        return cls(**{**fields, **overrides})


@dataclass
class _Seq:
    prefill_left: float
    decode_left: float
    done: asyncio.Future[None]
    admitted: bool = False
    prompt: int = 0  # tokens of the whole prompt (cost model: its KV is read by every decode step)
    output: int = 0
    extra_flops_per_token: float = 0.0  # vision + attention prefill FLOPs per fresh prompt token
    prefix_key: str = ""  # system + instructions: cached once a prefill of them has finished
    cached: int = 0


@dataclass
class EngineStats:
    """Engine-side counters, in simulated seconds and tokens."""

    requests: int = 0
    prefill_tokens: int = 0
    output_tokens: int = 0
    sim_seconds: float = 0.0  # simulated time the engine has existed while it had work or waited for it
    busy_seconds: float = 0.0  # engine-seconds of token work done (occupancy = busy / sim)
    seq_seconds: float = 0.0  # integral of running sequences over time (mean batch = seq / sim)
    latencies: list[float] = field(default_factory=list)


class SimulatedBackend:
    """A :class:`~chunker.backends.base.ModelBackend` answering from a simulated continuous-batching engine."""

    name = "simulated"

    def __init__(
        self,
        cfg: ModelConfig | None = None,
        *,
        max_images: int = 4,
        max_side_px: int = 1568,
        spec: EngineSpec | None = None,
        seed: int = 0,
        time_scale: float = 1.0,
    ) -> None:
        if time_scale <= 0:
            raise ValueError(f"time_scale must be > 0 (got {time_scale})")
        self.model = f"simulated:{cfg.name}" if cfg else "simulated"
        # The engine's batch size is the config's max_num_seqs unless a spec says otherwise.
        self.spec = spec or EngineSpec(max_num_seqs=cfg.max_num_seqs if cfg else 32)
        self.max_images = max_images
        self.max_side_px = max_side_px
        self.seed = seed
        self.time_scale = time_scale
        self.stats = EngineStats()
        self._waiting: deque[_Seq] = deque()
        self._running: list[_Seq] = []
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None
        self._prefixes: set[str] = set()  # shared prompt prefixes in the (simulated) prefix cache

    @classmethod
    def from_calibration(cls, path: str | Path, cfg: ModelConfig | None = None, **kwargs: Any) -> "SimulatedBackend":
        """A simulated engine of the capacity a GPU calibration run measured (see :meth:`EngineSpec.from_calibration`)."""
        return cls(cfg, spec=EngineSpec.from_calibration(path), **kwargs)

    # -- answers --------------------------------------------------------------------------------------------------
    def answer_text(self, request: GenerationRequest) -> str:
        """Plausible Markdown for the pages the prompt names, then the context trailer the chain expects."""
        pages = _requested_pages(request)
        rng = random.Random(hashlib.sha256(f"{self.seed}|{request.request_id}|{pages}".encode()).digest())
        path_m = _HEADINGS.search(request.user)
        path = [h.strip() for h in path_m.group(1).split(">")] if path_m else []
        parts: list[str] = []
        for p in pages:
            target = int(self.spec.output_tokens_per_page * 4 * rng.uniform(0.8, 1.2))  # characters for this page
            body: list[str] = [page_marker(p)]
            if not path:
                path = [f"Simulated document {request.request_id.split('/')[0][:8]}"]
                body.append(f"# {path[0]}")
            if rng.random() < 0.4:
                section = f"Section {p}.{rng.randint(1, 9)}"
                path = path[:1] + [section]
                body.append(f"## {section}")
            size = sum(len(b) + 1 for b in body)
            while size < target:
                # One choices() call per paragraph: this loop is most of the host CPU a many-engine benchmark spends.
                para = " ".join(rng.choices(_WORDS, k=rng.randint(30, 90))).capitalize() + "."
                if rng.random() < 0.1:
                    para = "\n".join(f"- {rng.choice(_WORDS)} {rng.choice(_WORDS)} item {i + 1}" for i in range(4))
                body.append(para)
                size += len(para) + 2
            parts.append("\n\n".join(body))
        trailer = {"summary": f"Simulated pages up to {pages[-1]}.", "heading_path": path, "open_table": ""}
        return "\n\n".join(parts) + "\n\n<context>" + json.dumps(trailer) + "</context>"

    # -- engine ---------------------------------------------------------------------------------------------------
    async def generate(self, request: GenerationRequest) -> GenerationResult:
        text = self.answer_text(request)
        out_tokens = max(1, len(text) // 4)
        finish = "stop"
        if out_tokens > request.max_tokens:  # a real engine stops at the cap, mid-answer
            text, out_tokens, finish = text[: request.max_tokens * 4], request.max_tokens, "length"
        prefill = self.spec.prefill_tokens(request)
        loop = asyncio.get_running_loop()
        self._ensure_scheduler()
        seq = _Seq(prefill_left=float(prefill), decode_left=float(out_tokens), done=loop.create_future(),
                   prompt=prefill, output=out_tokens)
        cost = self.spec.cost
        if cost is not None:
            seq.prefix_key = hashlib.sha256((request.system + "\0" + request.instructions).encode()).hexdigest()
            seq.cached = self.spec.shared_prefix_tokens(request) if seq.prefix_key in self._prefixes else 0
            fresh = max(1, prefill - seq.cached)
            seq.prefill_left = float(fresh)
            seq.extra_flops_per_token = cost.prefill_extra_flops(prefill, self.spec.visual_tokens(request),
                                                                 len(request.images)) / fresh
        t0 = loop.time()
        self._waiting.append(seq)
        assert self._wake is not None
        self._wake.set()
        try:
            await seq.done
        except asyncio.CancelledError:
            # A caller that gives up (timeout) frees its slot, as vLLM aborts a request whose client went away.
            for q in (self._waiting, self._running):
                if seq in q:
                    q.remove(seq)
            raise
        self.stats.requests += 1
        self.stats.prefill_tokens += prefill
        self.stats.output_tokens += out_tokens
        self.stats.latencies.append((loop.time() - t0) / self.time_scale)
        return GenerationResult(text=text, input_tokens=prefill, output_tokens=out_tokens, finish_reason=finish,
                                model=self.model, cached_tokens=seq.cached)

    def _ensure_scheduler(self) -> None:
        # Created lazily inside the running loop: the backend may be built outside any loop (Ray actor __init__).
        if self._task is None or self._task.done():
            self._wake = asyncio.Event()
            self._task = asyncio.get_running_loop().create_task(self._schedule())

    async def _schedule(self) -> None:
        loop = asyncio.get_running_loop()
        assert self._wake is not None
        last = loop.time()
        while True:
            if not self._waiting and not self._running:
                self._wake.clear()
                await self._wake.wait()
                last = loop.time()  # idle time without any request does not count as engine time
            now = loop.time()
            elapsed = (now - last) / self.time_scale
            last = now
            while elapsed > 1e-9:
                self._admit()
                step = min(elapsed, self.spec.tick_s)
                self._step(step)
                elapsed -= step
            self._admit()
            await asyncio.sleep(self.spec.tick_s * self.time_scale)

    def _admit(self) -> None:
        cost = self.spec.cost
        held = sum(s.prompt + s.output for s in self._running) if cost is not None else 0
        while self._waiting and len(self._running) < self.spec.max_num_seqs:
            seq = self._waiting[0]
            # The KV cache must hold the prompt and the answer (vLLM would admit on the prompt and preempt later;
            # admitting on both keeps the model free of preemption). One request alone is always admitted.
            if cost is not None and self._running and held + seq.prompt + seq.output > cost.kv_capacity_tokens:
                break
            self._waiting.popleft()
            held += seq.prompt + seq.output
            seq.admitted = True
            self._running.append(seq)

    def _step(self, dt: float) -> None:
        if self.spec.cost is not None:
            self._step_cost(dt, self.spec.cost)
        else:
            self._step_flat(dt)

    def _step_cost(self, dt: float, cost: CostModel) -> None:
        """Advance by ``dt``: as many engine steps as fit, each one token for every decoder plus a prefill chunk."""
        st = self.stats
        st.sim_seconds += dt
        st.seq_seconds += len(self._running) * dt
        decoders = [s for s in self._running if s.prefill_left <= 0 and s.decode_left > 0]
        context = sum(s.prompt + s.output - s.decode_left for s in decoders)
        room = max(0, self.spec.max_num_batched_tokens - len(decoders))
        chunk: list[tuple[_Seq, float]] = []
        for s in self._running:  # FIFO prefill chunks into what the step's token budget leaves
            if room <= 0:
                break
            if s.prefill_left > 0:
                take = min(s.prefill_left, room)
                chunk.append((s, take))
                room -= take
        tokens = sum(t for _, t in chunk)
        step = cost.step_seconds(len(decoders), context, tokens, sum(t * s.extra_flops_per_token for s, t in chunk))
        if step > 0:
            steps = dt / step
            for s in decoders:
                s.decode_left -= min(s.decode_left, steps)
            for s, take in chunk:
                s.prefill_left -= min(s.prefill_left, take * steps)
                if s.prefill_left <= 0 and s.prefix_key:
                    self._prefixes.add(s.prefix_key)
            st.busy_seconds += dt
        self._finish()

    def _finish(self) -> None:
        finished = [s for s in self._running if s.prefill_left <= 0 and s.decode_left <= 1e-6]
        for s in finished:
            self._running.remove(s)
            if not s.done.done():
                s.done.set_result(None)

    def _step_flat(self, dt: float) -> None:
        """Advance the engine by ``dt`` simulated seconds: decoders first, leftover engine time to prefill."""
        spec, st = self.spec, self.stats
        st.sim_seconds += dt
        st.seq_seconds += len(self._running) * dt
        budget = dt
        decoders = [s for s in self._running if s.prefill_left <= 0 and s.decode_left > 0]
        wants = [min(s.decode_left, spec.seq_decode_tokens_per_s * dt) for s in decoders]
        cost = sum(wants) / spec.decode_tokens_per_s
        share = min(1.0, budget / cost) if cost > 0 else 1.0
        for s, w in zip(decoders, wants):
            s.decode_left -= w * share
        budget -= cost * share
        for s in self._running:  # FIFO prefill with what is left of the step
            if budget <= 0:
                break
            if s.prefill_left > 0:
                tokens = min(s.prefill_left, budget * spec.prefill_tokens_per_s)
                s.prefill_left -= tokens
                budget -= tokens / spec.prefill_tokens_per_s
        st.busy_seconds += dt - max(0.0, budget)
        self._finish()

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, RuntimeError):
                pass
            self._task = None
        for s in [*self._waiting, *self._running]:
            if not s.done.done():
                s.done.cancel()


def _requested_pages(request: GenerationRequest) -> list[int]:
    """The page numbers the prompt states (chunker.convert.prompts: "the attached images are document pages 7, 8, 9")."""
    m = _PAGES.search(request.user)
    if m:
        pages = [int(x) for x in re.findall(r"\d+", m.group(1))]
        if pages:
            return pages
    return list(range(1, max(1, len(request.images)) + 1))
