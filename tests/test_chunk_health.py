"""The chunk-health report (issue 40, item 5): its counts on a known set of chunks, the run-folder reader, the PNG,
and the command that prints it for an existing run."""

from __future__ import annotations

import json
import struct
import zlib
from pathlib import Path

from chunker.config import PlannerConfig
from chunker.contract import parse_markdown
from chunker.plan.deterministic import build_chunks, plan
from chunker.plan.health import FRAGMENT_CHARS, Health, format_health
from chunker.plan.histogram_png import bar_chart_png
from chunker.run.layout import CHUNKS, ELEMENTS, RunStore
from chunker.schemas import CHUNK, ELEMENT, to_table
from jobs import health as health_job

# Lead-ins kept with the prose and fragments kept: the old behaviour, so every counter has something to count.
OLD = PlannerConfig(target_chars=400, min_chars=100, max_chars=900, table_captions=False, merge_fragments="none")
PROSE = "Our stores sell food, fuel and household goods in twelve countries; most of them are leased. " * 3
DOC = (f"# Annual report\n\n## Leases\n\n{PROSE}\n\n### Cost\n\nLease cost was as follows (in millions):\n\n"
       "| | 2023 | 2022 |\n| --- | --- | --- |\n| Operating lease cost | 1,200 | 1,100 |\n| Variable cost | 80 | 75 |\n\n"
       "## Schedule\n\n| A | |\n| --- | --- |\n| x | y |\n\n"
       "## Contacts\n\nCall us.\n")


def _doc(doc_id: str, md: str, cfg: PlannerConfig = OLD):
    els = parse_markdown(doc_id, [(md, 1)])
    return els, build_chunks(els, plan(els, cfg), cfg, "h", source=f"{doc_id}.pdf")


def test_counts_on_a_known_document() -> None:
    els, chunks = _doc("a", DOC)
    h = Health()
    h.add("a", chunks, els)
    r = h.report()
    sizes = [len(c.text) for c in chunks]
    assert r["chunks"] == len(chunks) and sum(r["histogram"]["counts"]) == len(chunks)
    assert r["fragments"] == sum(1 for n in sizes if n < FRAGMENT_CHARS) and r["fragments"] >= 2
    assert r["lead_in_only"] == 1, "'Lease cost was as follows' stands alone before its rows"
    # Two tables: the figures with their years, and the one whose second column has no header (a bare value).
    assert r["tables"] == 2 and r["column_n_tables"] == 0
    assert r["worst"]["lead_in_only"][0]["source"] == "a.pdf"
    # Lead-ins with their tables (the default) and fragments joined: no lead-in alone, no fragment.
    els2, chunks2 = _doc("b", DOC, PlannerConfig(target_chars=400, min_chars=250, max_chars=900,
                                                 merge_fragments="document"))
    h2 = Health()
    h2.add("b", chunks2, els2)
    assert h2.report()["lead_in_only"] == 0 and h2.report()["fragments"] == 0
    text = format_health(r)
    assert "lead-in-only chunks: 1" in text and "worst by lead in only" in text


def test_a_document_shorter_than_a_fragment_is_not_counted() -> None:
    els, chunks = _doc("s", "# Memo\n\nShort note.")
    h = Health()
    h.add("s", chunks, els)
    assert h.report()["fragments"] == 0 and h.report()["fragment_share"] == 0.0


def test_placeholder_headers_are_counted() -> None:
    els = parse_markdown("c", [("<!-- table -->\nColumn 1: 2024; Column 2: 3,417.\n<!-- /table -->", 1)])
    chunks = build_chunks(els, plan(els, OLD), OLD, "h")
    h = Health()
    h.add("c", chunks, els)
    assert h.report()["column_n_tables"] == 1 and h.report()["pathless_tables"] == 1


def _png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    length, tag = struct.unpack(">I4s", data[8:16])
    assert tag == b"IHDR" and zlib.crc32(data[12:16 + length]) & 0xFFFFFFFF == struct.unpack(">I", data[16 + length:20 + length])[0]
    return struct.unpack(">II", data[16:24])


def test_the_histogram_is_a_valid_png() -> None:
    w, h = _png_size(bar_chart_png([0, 100, 250, 500], [3, 10, 40, 7], mark_below=250))
    assert w > 100 and h > 100
    idat = bar_chart_png([0, 100], [0, 0])
    assert _png_size(idat)[0] > 0  # an empty run still draws


def test_the_command_reads_a_run_folder_and_writes_the_report(tmp_path: Path, capsys) -> None:  # noqa: ANN001
    store = RunStore(str(tmp_path / "run"))
    for doc_id, md in [("a", DOC), ("b", "# Other\n\n" + PROSE)]:
        els, chunks = _doc(doc_id, md)
        store.write_segment(ELEMENTS, doc_id, 0, to_table(els, ELEMENT))
        store.write_segment(CHUNKS, doc_id, 0, to_table(chunks, CHUNK), source_uri=f"/x/{doc_id}.pdf")
    assert health_job.main([str(tmp_path / "run")]) == 0
    out = capsys.readouterr().out
    assert "== chunk health ==" in out and "documents 2" in out
    report = json.loads((tmp_path / "run" / "chunk_health.json").read_text())
    assert report["documents"] == 2 and report["lead_in_only"] == 1
    assert (tmp_path / "run" / "chunk_health.txt").read_text().startswith("== chunk health ==")
    _png_size((tmp_path / "run" / "chunk_health.png").read_bytes())
    # Not a run folder: one line, exit 2.
    assert health_job.main([str(tmp_path / "nothing")]) == 2
    assert "no chunks/ parts" in capsys.readouterr().err


def test_a_drivers_job_adds_its_drivers_health_up() -> None:
    from chunker.run.drivers import merge_summaries

    def part(chunks: int, fragments: int, tables: int) -> dict:
        return {"documents": 1, "pages": 3, "output": f"shard-{chunks}", "timing": {},
                "health": {"chunks": chunks, "fragments": fragments, "fragment_share": fragments / chunks,
                           "lead_in_only": 0, "tables": tables, "column_n_tables": 1, "pathless_tables": 0}}

    out = merge_summaries([part(100, 10, 4), part(300, 2, 6)], seconds=2.0, collection_rows=400, output="o",
                          cluster="", settings={})
    h = out["health"]
    assert (h["chunks"], h["fragments"], h["tables"], h["column_n_tables"]) == (400, 12, 10, 2)
    assert h["fragment_share"] == 0.03  # over all chunks, not the mean of the drivers' shares
    assert "health" not in merge_summaries([{"documents": 1, "timing": {}}], seconds=1.0, collection_rows=0,
                                           output="o", cluster="", settings={})
