"""A table's rows in one chunk write their column paths once, on the chunk's first row (planner.compact_rows)."""

from chunker.config import PlannerConfig
from chunker.contract import parse_markdown
from chunker.plan.deterministic import build_chunks, plan
from chunker.rowtext import compact_line, compact_rows, row_paths

CFG = PlannerConfig(target_chars=600, min_chars=120, max_chars=1200, compact_rows=True)
HEAD = "| | Three Months Ended July 1, 2023 | Three Months Ended June 25, 2022 |\n| --- | --- | --- |\n"
ROWS = "".join(f"| Operating cost item {i} | {i * 1000 + 17:,} | {i * 900 + 3:,} |\n" for i in range(40))


def _chunks(md: str, cfg: PlannerConfig = CFG):
    els = parse_markdown("d", [(md, 1)])
    chunks = build_chunks(els, plan(els, cfg), cfg, "h")
    assert [i for c in chunks for i in c.element_ids] == [e.element_id for e in els], "every element once, in order"
    return els, chunks


def _rows(c) -> list[str]:  # noqa: ANN001
    return [line for line in c.text.splitlines() if line.startswith("Operating cost item")]


def test_each_chunk_writes_the_column_paths_on_its_first_row_only():
    els, chunks = _chunks(f"# Costs\n\n{HEAD}{ROWS}")
    tables = [c for c in chunks if c.modality == "table"]
    assert len(tables) >= 3
    for c in tables:
        rows = _rows(c)
        assert "Three Months Ended July 1, 2023: " in rows[0] and "Three Months Ended June 25, 2022: " in rows[0]
        for r in rows[1:]:
            assert "Three Months Ended" not in r, "a later row of the run leaves its paths to the first"
            label, figures = r.split(" | ")
            assert label.startswith("Operating cost item") and len(figures.split("; ")) == 2
    # No figure is lost: every figure of the table is in the chunks, with its row.
    for i in range(40):
        row = next(r for c in tables for r in _rows(c) if r.startswith(f"Operating cost item {i} |"))
        assert f"{i * 1000 + 17:,}" in row and f"{i * 900 + 3:,}" in row


def test_rows_are_packed_by_the_size_they_are_written_at():
    _, compact = _chunks(f"# Costs\n\n{HEAD}{ROWS}")
    _, full = _chunks(f"# Costs\n\n{HEAD}{ROWS}", CFG.model_copy(update={"compact_rows": False}))
    compact_t = [c for c in compact if c.modality == "table"]
    full_t = [c for c in full if c.modality == "table"]
    assert len(compact_t) * 2 <= len(full_t) + 1, "a chunk holds about twice the rows"
    for c in compact_t[:-1]:
        assert CFG.target_chars * 0.7 < len(c.text) <= CFG.target_chars + 120, "full chunks, none past the target"
    for c in full_t:
        assert all("Three Months Ended" in r for r in _rows(c)), "off: every row keeps its paths"


def test_a_row_with_other_paths_keeps_them():
    # A row with an empty cell has one path less: it is written in full, and the row after it too.
    rows = "| Revenue | 5,100 | 4,900 |\n| Other income | | 12 |\n| Net income | 2,153 | 1,938 |\n"
    _, chunks = _chunks(f"# Results\n\n{HEAD}{rows}")
    lines = [line for c in chunks for line in c.text.splitlines() if " | " in line]
    assert lines[0].startswith("Revenue | Three Months Ended July 1, 2023: 5,100")
    assert lines[1] == "Other income | Three Months Ended June 25, 2022: 12"
    assert lines[2].startswith("Net income | Three Months Ended July 1, 2023: 2,153")


def test_compact_line_touches_only_rows_with_the_same_paths():
    first = "Net sales | In millions | 2023: $1,200; 2022: $1,100"
    second = "Cost of sales | In millions | 2023: (700); 2022: (650)"
    assert row_paths(first) == ["2023", "2022"]
    assert compact_line(second, row_paths(first)) == "Cost of sales | In millions | (700); (650)"
    assert compact_line(second, ["2024", "2023"]) == second
    assert compact_line(second, None) == second
    prose = "Sales rose because of volume | price: strong demand; mix: better"
    assert row_paths(prose) is None and compact_line(prose, ["price", "mix"]) == prose
    text = "\n".join([first, second, "A sentence between.", second])
    assert compact_rows(text).splitlines() == [first, "Cost of sales | In millions | (700); (650)",
                                               "A sentence between.", second]
