"""Golden chunks of ../shared/data/tables: what the pdf-text path makes of public tables, kept under review.

Each file's chunks (page span, modality, text) are compared with tests/golden/tables/<name>.md. A change of table
extraction changes them on purpose: regenerate with ``UPDATE_GOLDEN=1 pytest tests/test_tables_golden.py`` and
read the diff before committing it. CI never sets the flag.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from chunker.config import Config
from chunker.run.local import process_document_async

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "tables"
GOLDEN = Path(__file__).resolve().parent / "golden" / "tables"
FILES = sorted(p.name for p in DATA.glob("*.pdf")) if DATA.is_dir() else []

pytestmark = [pytest.mark.shared_data,
              pytest.mark.skipif(not FILES, reason="shared test data (../shared/data/tables) is absent")]


def render(pdf: Path) -> str:
    result = asyncio.run(process_document_async(pdf, Config()))
    parts = [f"# {pdf.name}: {result.document.status.value}, {len(result.chunks)} chunks", ""]
    for c in result.chunks:
        parts += [f"## chunk pages {c.page_start}-{c.page_end} ({c.modality})", "", c.text, ""]
    return "\n".join(parts)


@pytest.mark.parametrize("name", FILES)
def test_chunks_match_the_golden_file(name: str) -> None:
    got = render(DATA / name)
    golden = GOLDEN / f"{Path(name).stem}.md"
    if os.environ.get("UPDATE_GOLDEN") == "1":
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(got, encoding="utf-8")
    assert golden.is_file(), f"no golden file {golden}: run UPDATE_GOLDEN=1 pytest {__file__}"
    want = golden.read_text(encoding="utf-8")
    assert got == want, f"{name}: chunks differ from {golden.name}; if on purpose, regenerate (see module doc)"
