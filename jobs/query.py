"""Query the indexed corpus from the command line.

    python -m jobs.query --config configs/local.yaml "How do I reset the pump?"
    python -m jobs.query --config configs/local.yaml --queries questions.jsonl --json > hits.jsonl

Uses the same retrieval implementation as the Ray Serve endpoint (:class:`chunker.index.retrieval.Retriever`).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import TextIO

from chunker.cli import ExitCode, base_parser, load_or_exit
from chunker.errors import ChunkerError


class QueriesFileError(ChunkerError, ValueError):
    """A --queries file that cannot be read as questions; the message names the file and the line."""


def read_queries(path: str) -> Iterator[dict[str, str]]:
    """JSONL lines with ``question`` (and optional ``qid``); a bad line is an error naming the line."""
    p = Path(path)
    if not p.is_file():
        raise QueriesFileError(f"queries file not found: {path}")
    for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise QueriesFileError(f"{path} line {n}: not valid JSON ({exc.msg})") from None
        if not isinstance(obj, dict) or not str(obj.get("question", "")).strip():
            raise QueriesFileError(f"{path} line {n}: needs a non-empty 'question'")
        yield {"qid": str(obj.get("qid", n)), "question": str(obj["question"])}


def hit_json(hit: object) -> dict[str, object]:
    d = asdict(hit)  # type: ignore[call-overload]
    keys = ("chunk_id", "score", "source", "doc_id", "page_start", "page_end", "breadcrumb", "text", "modality",
            "identity", "context", "context_page_end")
    return {k: d[k] for k in keys if k in d}


def print_hits(question: str, result: object, out: TextIO) -> None:
    print(f"\nQ: {question}", file=out)
    for hit in result.hits:  # type: ignore[attr-defined]
        pages = f"p.{hit.page_start}" + (f"-{hit.page_end}" if hit.page_end != hit.page_start else "")
        print(f"  {hit.rank}. [{hit.score:.3f}] {hit.source} {pages} | {hit.breadcrumb}", file=out)
        body = hit.reading_text.split("\n\n", 1)[-1].replace("\n", " ")  # type: ignore[attr-defined]
        print(f"     {body[:240]}{'...' if len(body) > 240 else ''}", file=out)


def main(argv: list[str] | None = None, prog: str = "python -m jobs.query") -> int:
    p = base_parser("Ask questions of the indexed corpus.", prog)
    p.add_argument("question", nargs="?", help="a question (or use --queries)")
    p.add_argument("--queries", help="JSONL file of {qid, question}")
    p.add_argument("-k", type=int, default=5, help="hits per question (1-50)")
    p.add_argument("--json", action="store_true", help="one JSON line per question")
    args = p.parse_args(argv)
    if bool(args.question) == bool(args.queries):
        p.error("give either a QUESTION or --queries FILE")
    if not 1 <= args.k <= 50:
        p.error("-k must be between 1 and 50")
    cfg = load_or_exit(args)
    from chunker.index.retrieval import Retriever
    from chunker.index.store import StoreUnavailable

    try:
        queries = list(read_queries(args.queries)) if args.queries else [{"qid": "q", "question": args.question}]
    except QueriesFileError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return ExitCode.USAGE
    try:
        retriever = Retriever(cfg)
        if retriever.store.count() == 0:
            print(f"error: collection {cfg.milvus.collection!r} at {cfg.milvus.uri} holds no chunks: ingest documents "
                  "first (python -m jobs.ingest --input ...) or point --set milvus.uri= at an existing index",
                  file=sys.stderr)
            return ExitCode.NOTHING_INDEXED
        for q in queries:
            result = retriever.search(q["question"], k=args.k)
            if args.json:
                print(json.dumps({"qid": q["qid"], "question": q["question"],
                                  "hits": [hit_json(h) for h in result.hits]}, ensure_ascii=False))
            else:
                print_hits(q["question"], result, sys.stdout)
    except StoreUnavailable as exc:
        print(f"error: {exc}", file=sys.stderr)
        return ExitCode.SETUP
    return ExitCode.OK


if __name__ == "__main__":
    raise SystemExit(main())
