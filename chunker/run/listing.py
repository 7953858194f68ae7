"""The input listing of a run, streamed: the driver never lists or holds every path at once.

* a manifest (``.txt``/``.jsonl``/``.manifest``, local or in object storage) is read line by line by the workers
  (the job hands its lines to :func:`manifest_rows`);
* a folder, object-store prefix, glob or single file is walked lazily and written out as listing parts of
  ``intake.listing_block`` entries under the run's ``listing/`` folder, which are then read like a manifest (a
  listing of one part is read by the driver, which hands its rows to the pipeline: see ``jobs.ingest``).

A run may take one shard of its inputs (:class:`Shard`, ``jobs.ingest --shard I/N``): the inputs whose absolute path
hashes to it, so N runs over the same input each take a disjoint part, the same part on every re-run, each with a
driver (and run folder and ledger) of its own, all loading one Milvus server. ``jobs.ingest --drivers N`` walks the
input once for all N (:func:`write_listings`) and each of its drivers reads its own listing (:func:`read_listing`).

Either way the rows carry only ``path``/``source`` (+ ``error`` for a bad manifest line, ``unmatched`` for a file
of an input folder whose name matches no ``intake.patterns``: listed all the same, so every file is accounted for):
workers fetch the bytes. Paths travel as valid UTF-8 text (:func:`chunker.intake.sources.text_safe_uri`), so a file
name with bytes that are not UTF-8 reaches its worker intact instead of failing the block in Arrow.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from chunker.config import Config
from chunker.intake.inputs import InputError, is_manifest, iter_inputs, manifest_entry
from chunker.intake.sources import text_safe_uri
from chunker.run.layout import LISTING, RunStore, listing_part
from chunker.types import safe_text

COLUMNS = ("path", "source", "error", "unmatched")


@dataclass(frozen=True)
class Shard:
    """Shard ``index`` (1-based) of ``count``: the inputs whose absolute path hashes to it."""

    index: int
    count: int

    def __post_init__(self) -> None:
        if not (self.count >= 1 and 1 <= self.index <= self.count):
            raise InputError(f"shard {self.index}/{self.count}: want I/N with 1 <= I <= N")

    @classmethod
    def parse(cls, text: str) -> "Shard":
        index, sep, count = text.partition("/")
        try:
            if sep:
                return cls(int(index), int(count))
        except ValueError:
            pass
        raise InputError(f"shard {text!r}: want I/N, e.g. 2/8")

    @property
    def name(self) -> str:
        """The run folder of this shard inside the job's output."""
        return f"shard-{self.index}-of-{self.count}"

    def holds(self, path: str) -> bool:
        return shard_of(path, self.count) == self.index

    @classmethod
    def all(cls, count: int) -> list["Shard"]:
        return [cls(i, count) for i in range(1, count + 1)]


def shard_of(path: str, count: int) -> int:
    """The shard (1-based) of ``count`` that holds ``path``: by a hash of it, the same on every run and machine."""
    digest = hashlib.sha256(path.encode("utf-8", "surrogateescape")).digest()
    return int.from_bytes(digest[:8], "big") % count + 1


def direct_manifest(input_path: str) -> bool:
    """A manifest file (not a glob matching manifests): Ray reads it itself, no listing is written."""
    return is_manifest(input_path) and not any(ch in input_path for ch in "*?[")


def manifest_rows(row: dict[str, Any], base_uri: str, shard: Shard | None = None) -> list[dict[str, Any]]:
    """flat_map over manifest lines: one input row, none for blanks (or another shard's input), or one failed row
    for a bad line (in the shard its text hashes to)."""
    line = row["text"]
    try:
        entry = manifest_entry(line, base_uri, "line")
    except InputError as exc:
        if shard is not None and not shard.holds(line):
            return []
        return [{"path": "", "source": safe_text(line.strip()[:200]), "error": safe_text(str(exc)), "unmatched": False}]
    if entry is None or (shard is not None and not shard.holds(entry.path)):
        return []
    return [{"path": text_safe_uri(entry.path), "source": safe_text(entry.source), "error": "",
             "unmatched": not entry.matched}]


def manifest_batch(batch: dict[str, Any], base_uri: str, shard: Shard | None = None) -> dict[str, list[Any]]:
    """:func:`manifest_rows` as a ``map_batches`` UDF (so the intake repartition after it fuses into its task)."""
    out = [r for line in batch["text"] for r in manifest_rows({"text": str(line)}, base_uri, shard)]
    return {k: [r[k] for r in out] for k in COLUMNS}


class Listing(list[str]):
    """The listing parts' URIs, and how many inputs they hold (the progress line's total)."""

    entries: int = 0


class _Parts:
    """One run's listing, written part by part as entries come."""

    def __init__(self, runstore: RunStore, block: int) -> None:
        runstore.clear(LISTING)  # a listing is per run: no stale parts
        self.runstore = runstore
        self.size = block
        self.listing = Listing()
        self.block: list[str] = []

    def add(self, line: str) -> None:
        self.block.append(line)
        self.listing.entries += 1
        if len(self.block) >= self.size:
            self.flush()

    def flush(self) -> None:
        if not self.block:
            return
        name = f"{LISTING}/{listing_part(len(self.listing))}"
        self.runstore.write_bytes(name, ("\n".join(self.block) + "\n").encode())
        self.listing.append(self.runstore.uri_of(name))
        self.block.clear()


def write_listing(input_path: str, cfg: Config, runstore: RunStore, shard: Shard | None = None) -> Listing:
    """Stream the inputs (those of ``shard``) into JSONL parts of ``listing_block`` entries; returns the parts' URIs
    (none: no input)."""
    if shard is None:
        return write_listings(input_path, cfg, [runstore])[0]
    listings = write_listings(input_path, cfg, [runstore], count=shard.count, only=shard.index)
    return listings[0]


def write_listings(input_path: str, cfg: Config, runstores: list[RunStore], count: int | None = None,
                   only: int | None = None) -> list[Listing]:
    """One walk of the inputs into the listings of ``runstores``: all of them into the only one, or, by
    :func:`shard_of` over ``count`` shards, shard I's into ``runstores[I-1]`` (``only``: shard ``only``'s into the
    only one). ``jobs.ingest --drivers N`` lists its input once this way for all its drivers."""
    writers = [_Parts(rs, cfg.intake.listing_block) for rs in runstores]
    for f in iter_inputs(input_path, cfg.intake, unmatched=True):
        if count is None:
            target = 0
        else:
            owner = shard_of(f.path, count)
            if only is not None and owner != only:
                continue
            target = 0 if only is not None else owner - 1
        entry = {"path": f.path, "source": f.source}
        if not f.matched:
            entry["unmatched"] = True
        writers[target].add(json.dumps(entry))  # ASCII: a name's undecodable bytes travel as \udcXX escapes
    for w in writers:
        w.flush()
    return [w.listing for w in writers]


def read_listing(runstore: RunStore) -> Listing:
    """The listing a job wrote into this run folder (``write_listings``), parts in order, entries counted."""
    parts = Listing()
    for name in sorted(runstore.names(LISTING)):
        if name.endswith(".jsonl"):
            parts.append(runstore.uri_of(f"{LISTING}/{name}"))
            parts.entries += runstore.read_bytes(f"{LISTING}/{name}").count(b"\n")
    return parts


def manifest_base(input_path: str) -> str:
    """The folder a manifest's relative paths are relative to."""
    if "://" in input_path:
        return input_path.rsplit("/", 1)[0]
    import os

    return os.path.dirname(os.path.abspath(input_path))
