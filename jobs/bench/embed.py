"""Embedding micro-benchmark: passages/s per backend (torch, onnx fp32, onnx int8), one short query's latency, and
each backend's cosine to the torch vectors, measured in one process on the same passages.

    python -m jobs.bench.embed [--passages 600] [--tokens 120] [--repeats 3] [--backends torch,onnx,onnx-int8]

Passages are windows of the CloudWay PDFs' text layer (../shared/data) when present, else of the synthetic corpus's
vocabulary, sized to about ``--tokens`` tokens of the model's tokenizer. Each backend encodes the whole set
``repeats`` times after a warm-up; the best run is reported beside every run (the machine may be shared, and the best
run is the one least disturbed). Nothing is asserted: targets belong to the caller.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from chunker.config import ConfigError, EmbedConfig, load_config
from jobs.bench.corpus import CLOUDWAY
QUERY = "How do I rotate an API key without downtime?"


def _corpus_words(source: Path | None) -> list[str]:
    if source is not None and source.is_dir():
        import pypdfium2 as pdfium

        words: list[str] = []
        for pdf in sorted(source.glob("*.pdf")):
            doc = pdfium.PdfDocument(str(pdf))
            try:
                for page in doc:
                    text = page.get_textpage().get_text_range()
                    # LaTeX PDFs break words at line ends with soft hyphens (U+FFFE / U+00AD): join them back.
                    words += text.replace("\ufffe", "").replace("\u00ad", "").split()
            finally:
                doc.close()
        if len(words) > 1000:
            return words
    from chunker.eval.synthetic import _WORDS

    rng = random.Random(0)
    return [rng.choice(_WORDS) for _ in range(20_000)]


def make_passages(cfg: EmbedConfig, n: int = 600, tokens: int = 120, source: Path | None = CLOUDWAY) -> list[str]:
    """``n`` overlapping word windows of about ``tokens`` tokens each (the model's own tokenizer decides)."""
    from transformers import AutoTokenizer

    from chunker.index.embed import resolve_model_path

    words = _corpus_words(source)
    tok = AutoTokenizer.from_pretrained(resolve_model_path(cfg.model))
    probe = [" ".join(words[i : i + 100]) for i in range(0, min(len(words), 2000), 100)]
    counted = sum(len(ids) for ids in tok(probe, add_special_tokens=False)["input_ids"])
    per_word = max(1.0, counted / max(1, sum(len(t.split()) for t in probe)))
    width = max(1, round((tokens - 2) / per_word))  # [CLS] and [SEP] count too
    stride = max(1, (len(words) - width) // max(1, n))
    return [" ".join(words[(i * stride) % max(1, len(words) - width):][:width]) for i in range(n)]


def bench_embed(cfg: EmbedConfig, backends: list[str], passages: list[str], repeats: int = 3,
                query_runs: int = 50, progress: bool = False) -> dict[str, Any]:
    """Per backend: load seconds, passages/s (every run and the best), query ms (median, p90), cosine to torch.
    ``progress`` prints each backend's figures to stderr as soon as they are measured."""
    from chunker.index.embed import Embedder

    out: dict[str, Any] = {"passages": len(passages), "threads": cfg.num_threads or os.cpu_count(), "backends": {}}
    vectors: dict[str, np.ndarray] = {}
    for name in backends:
        row: dict[str, Any] = {}
        try:
            t0 = time.perf_counter()
            emb = Embedder(cfg.model_copy(update={"backend": name}))
            row["load_s"] = round(time.perf_counter() - t0, 2)
            row["ran"] = emb.backend
            row["batch"] = emb.cfg.batch_size if emb.backend == "torch" else emb.cfg.onnx_batch_size
            emb.encode(passages[:16])  # warm-up: the first calls pay for lazy initialisation
            rates = []
            for _ in range(repeats):
                t0 = time.perf_counter()
                vectors[name] = emb.encode(passages)
                rates.append(len(passages) / (time.perf_counter() - t0))
            row["passages_per_s_runs"] = [round(r, 1) for r in rates]
            row["passages_per_s"] = round(max(rates), 1)
            lat = []
            for _ in range(query_runs):
                t0 = time.perf_counter()
                emb.encode([QUERY])
                lat.append(1000 * (time.perf_counter() - t0))
            lat.sort()
            row["query_ms_median"] = round(statistics.median(lat), 2)
            row["query_ms_p90"] = round(lat[int(0.9 * (len(lat) - 1))], 2)
            del emb
        except Exception as exc:  # noqa: BLE001 - one failing backend is reported, the others still run
            row["error"] = f"{type(exc).__name__}: {exc}"
        out["backends"][name] = row
        if progress:
            print(f"{name}: {json.dumps(row)}", file=sys.stderr, flush=True)
    if "torch" in vectors:
        for name, vecs in vectors.items():
            cos = (vecs * vectors["torch"]).sum(axis=1)
            out["backends"][name]["cos_to_torch_min"] = round(float(cos.min()), 4)
            out["backends"][name]["cos_to_torch_mean"] = round(float(cos.mean()), 4)
    return out


def embed_step(embed: dict[str, Any], backends: list[str], passages: int = 600, tokens: int = 120,
               repeats: int = 3, query_runs: int = 50) -> dict[str, Any]:
    """:func:`bench_embed` on :func:`make_passages`, for the benchmark report (run in a process of its own)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    cfg = EmbedConfig.model_validate(embed)
    texts = make_passages(cfg, passages, tokens)
    from transformers import AutoTokenizer

    from chunker.index.embed import resolve_model_path

    tok = AutoTokenizer.from_pretrained(resolve_model_path(cfg.model))
    result = bench_embed(cfg, backends, texts, repeats, query_runs)
    result["mean_tokens"] = round(float(np.mean([len(ids) for ids in tok(texts)["input_ids"]])), 1)
    return result


def render(result: dict[str, Any], mean_tokens: float | None = None) -> str:
    head = f"{result['passages']} passages" + (f" of ~{mean_tokens:.0f} tokens" if mean_tokens else "")
    header = ("| backend | passages per call | passages/s (best; runs) | query ms (median / p90) | "
              "cos to torch (min / mean) | load s |")
    lines = [f"embedding: {head}, {result['threads']} threads", header, "| --- | --- | --- | --- | --- | --- |"]
    for name, r in result["backends"].items():
        if "error" in r:
            lines.append(f"| {name} | failed: {r['error']} | | | | |")
            continue
        cos = f"{r['cos_to_torch_min']} / {r['cos_to_torch_mean']}" if "cos_to_torch_min" in r else "-"
        lines.append(f"| {name} | {r.get('batch', '-')} | {r['passages_per_s']} ({', '.join(map(str, r['passages_per_s_runs']))}) | "
                     f"{r['query_ms_median']} / {r['query_ms_p90']} | {cos} | {r['load_s']} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m jobs.bench.embed", description=__doc__.split("\n")[0])
    p.add_argument("--config", default=None, help="YAML config (its embed section is used)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--backends", default="torch,onnx,onnx-int8", help="comma list of embed.backend values")
    p.add_argument("--passages", type=int, default=600)
    p.add_argument("--tokens", type=int, default=120, help="tokens per passage, about")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--query-runs", type=int, default=50, help="timed single-query calls per backend")
    p.add_argument("--json", default=None, metavar="FILE", help="also write the figures as JSON")
    args = p.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    try:
        cfg = load_config(args.config, args.overrides).embed
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return 2
    passages = make_passages(cfg, args.passages, args.tokens)
    from transformers import AutoTokenizer

    from chunker.index.embed import resolve_model_path

    tok = AutoTokenizer.from_pretrained(resolve_model_path(cfg.model))
    mean_tokens = float(np.mean([len(ids) for ids in tok(passages)["input_ids"]]))
    result = bench_embed(cfg, [b.strip() for b in args.backends.split(",") if b.strip()], passages, args.repeats,
                         args.query_runs, progress=True)
    result["mean_tokens"] = round(mean_tokens, 1)
    print(render(result, mean_tokens))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
