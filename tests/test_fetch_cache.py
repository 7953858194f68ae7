"""Resume without re-downloading: the ledger is asked by (absolute URI, version) before any byte is read, and an
object-store input is fetched once per node, however many segments and processes need it."""

from __future__ import annotations

import multiprocessing as mp
import os
import shutil
from pathlib import Path

import pytest

from chunker.config import IntakeConfig
from chunker.intake import prepare as prepare_mod
from chunker.intake import sources
from chunker.intake.cache import FetchCache, remove, run_folder
from chunker.intake.inputs import InputFile
from chunker.intake.prepare import prepare
from chunker.run.ledger import Ledger
from chunker.types import Status


def _counting_fetch(src_root: Path, calls: list[str]):
    """A fetcher that serves ``s3://bucket/<name>`` from ``src_root`` the way sources.fetch does (copy + hash)."""
    def fetch(uri: str, dest: Path) -> tuple[str, int]:
        calls.append(uri)
        return sources.fetch(str(src_root / uri.rsplit("/", 1)[1]), dest)
    return fetch


def test_one_fetch_per_uri_and_version(tmp_path: Path, samples_dir: Path):
    calls: list[str] = []
    cache = FetchCache(tmp_path / "cache", 10**9, _counting_fetch(samples_dir, calls))
    uri = "s3://bucket/travel-expense-policy.pdf"
    for _ in range(5):  # five segments of one document on this node
        with cache.open(uri, "100:1") as (path, digest, size):
            assert path.read_bytes() == (samples_dir / "travel-expense-policy.pdf").read_bytes()
            assert (digest, size) == prepare_mod.file_digest(str(samples_dir / "travel-expense-policy.pdf"))
    assert calls == [uri]
    with cache.open(uri, "200:2"):  # the object changed: a new entry
        pass
    assert calls == [uri, uri]


def _open_in_child(folder: str, src: str, uri: str, q) -> None:  # noqa: ANN001
    calls: list[str] = []
    cache = FetchCache(folder, 10**9, _counting_fetch(Path(src), calls))
    with cache.open(uri, "1:1") as (path, digest, _):
        q.put((len(calls), digest))


def test_processes_on_one_node_share_one_download(tmp_path: Path, samples_dir: Path):
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    procs = [ctx.Process(target=_open_in_child, args=(str(tmp_path / "c"), str(samples_dir),
                                                       "s3://b/field-service-manual.pdf", q)) for _ in range(4)]
    for p in procs:
        p.start()
    got = [q.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    assert sum(n for n, _ in got) == 1 and len({d for _, d in got}) == 1


def test_eviction_keeps_entries_in_use_and_drops_the_oldest(tmp_path: Path, samples_dir: Path):
    calls: list[str] = []
    sizes = {p.name: p.stat().st_size for p in samples_dir.glob("*.pdf")}
    names = sorted(sizes)
    cache = FetchCache(tmp_path / "c", max_bytes=sizes[names[0]] + 1, fetch=_counting_fetch(samples_dir, calls))
    with cache.open(f"s3://b/{names[0]}") as (held, _, _):
        with cache.open(f"s3://b/{names[1]}"):
            pass
        assert held.exists(), "an entry in use is never evicted"
    with cache.open(f"s3://b/{names[2]}"):
        pass
    assert len(list((tmp_path / "c").glob("*.bin"))) == 1  # the older entries went once nobody held them
    assert remove(tmp_path / "c") and not (tmp_path / "c").exists()
    assert run_folder("s3://b/run") == run_folder("s3://b/run") != run_folder("s3://b/other")


def test_ledger_precheck_skips_without_reading_a_byte(tmp_path: Path, samples_dir: Path,
                                                      monkeypatch: pytest.MonkeyPatch):
    src = tmp_path / "in" / "a.pdf"
    src.parent.mkdir()
    shutil.copy(samples_dir / "travel-expense-policy.pdf", src)
    ledger = Ledger(str(tmp_path / "run"), "h", "db#c")
    rec, _ = prepare(InputFile(str(src), "a.pdf"), IntakeConfig(), tmp_path)
    version = sources.version_of(str(src))
    assert version.startswith(f"{src.stat().st_size}:")
    ledger.mark_done(rec.doc_id, source_uri=rec.source_uri, source_version=version, status="ok")

    digests: list[str] = []
    real = prepare_mod.file_digest
    monkeypatch.setattr(prepare_mod, "file_digest", lambda p: digests.append(p) or real(p))
    again, pdf = prepare(InputFile(str(src), "a.pdf"), IntakeConfig(), tmp_path, version=version,
                         done=ledger.done_by_uri, skip=ledger.is_done)
    assert again.status == Status.SKIPPED and again.doc_id == rec.doc_id and not pdf and digests == []

    # Touched (new mtime): read and hashed again; same bytes, so the doc_id check still skips it.
    os.utime(src, ns=(1, 1))
    v2 = sources.version_of(str(src))
    third, _ = prepare(InputFile(str(src), "a.pdf"), IntakeConfig(), tmp_path, version=v2, done=ledger.done_by_uri,
                       skip=ledger.is_done)
    assert third.status == Status.SKIPPED and len(digests) == 1
    # Another target (collection) or a lost document entry: not done, whatever the URI entry says.
    assert Ledger(str(tmp_path / "run"), "h", "db#other").done_by_uri(rec.source_uri, version) is None
    (tmp_path / "run" / "ledger" / "h" / f"{rec.doc_id}.json").unlink()
    assert ledger.done_by_uri(rec.source_uri, version) is None


def test_source_uri_is_absolute(tmp_path: Path, samples_dir: Path, monkeypatch: pytest.MonkeyPatch):
    shutil.copy(samples_dir / "travel-expense-policy.pdf", tmp_path / "w.pdf")
    monkeypatch.chdir(tmp_path)
    rec, _ = prepare(InputFile("w.pdf", "w.pdf"), IntakeConfig(), tmp_path)
    assert rec.source_uri == str(tmp_path / "w.pdf")
    assert sources.absolute_uri("s3://b/k.pdf") == "s3://b/k.pdf"
    assert sources.absolute_uri(f"file://{tmp_path}/w.pdf") == str(tmp_path / "w.pdf")


def test_a_long_object_store_document_is_fetched_once_by_intake_and_all_its_segments(
        tmp_path: Path, samples_dir: Path, monkeypatch: pytest.MonkeyPatch):
    """Intake and every segment's conversion on one node share one download (a 32-segment PDF was fetched 33
    times); a re-run of the finished document fetches nothing. The object store is the only fake: a local folder
    served under s3:// through sources.fetch / version_of, the two calls that reach it."""
    import asyncio

    from chunker.config import load_config
    from chunker.run.rows import SegmentRow
    from jobs.stages import ConvertStage, intake_rows

    calls: list[str] = []
    real_fetch = sources.fetch
    monkeypatch.setattr(sources, "fetch", lambda uri, dest: calls.append(uri) or real_fetch(
        str(samples_dir / uri.rsplit("/", 1)[1]), dest))
    monkeypatch.setattr(sources, "version_of", lambda uri: "1234:5678")
    cfg = load_config(None, ["intake.segment_pages=2", "intake.segment_overlap_pages=1"])
    out = str(tmp_path / "run")
    uri = "s3://bucket/field-service-manual.pdf"
    rows = [SegmentRow.decode(r) for r in intake_rows({"path": uri, "source": "m.pdf"}, cfg, out, "h", "t#c",
                                                      force=False)]
    assert len(rows) >= 3 and calls == [uri]
    stage = ConvertStage(cfg, "h", out)
    for row in rows:
        asyncio.run(stage._one(row))
        assert row.batches and not (row.facts and row.facts.failed)
    assert calls == [uri], "one download for intake and every segment"
    Ledger(out, "h", "t#c").mark_done(rows[0].doc.doc_id, source_uri=uri, source_version="1234:5678", status="ok")
    again = [SegmentRow.decode(r) for r in intake_rows({"path": uri, "source": "m.pdf"}, cfg, out, "h", "t#c",
                                                       force=False)]
    assert [r.doc.status for r in again] == [Status.SKIPPED] and calls == [uri], "resume fetches nothing"
    assert remove(run_folder(out)) and not run_folder(out).exists()
