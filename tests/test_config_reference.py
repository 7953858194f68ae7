"""docs/config.md is what the config model says today (it is generated: chunker.config.reference)."""

from __future__ import annotations

from pathlib import Path

from chunker.config import field_paths
from chunker.config.reference import reference_markdown

REPO = Path(__file__).resolve().parents[1]


def test_the_checked_in_reference_is_the_models() -> None:
    checked_in = (REPO / "docs" / "config.md").read_text(encoding="utf-8")
    assert checked_in == reference_markdown(), "run: python -m chunker.config.reference docs/config.md"


def test_every_field_has_a_row_with_its_description() -> None:
    text = reference_markdown()
    rows = {line.split("|")[1].strip().strip("`"): line for line in text.splitlines() if line.startswith("| `")}
    assert set(rows) == set(field_paths())
    assert all(line.rstrip().endswith("|") and len(line.split("|")[-2].strip()) > 10 for line in rows.values())
    # A secret's value never reaches the page, and a default is the model's own.
    assert "(unset)" in rows["intake.password"] and "`64`" in rows["intake.segment_pages"]
