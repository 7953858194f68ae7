"""Drawing primitives of the development set: one fpdf2 document class with the layouts real corpora have and
the pdf-text converter finds hard (two columns, wrapped and hyphenated titles, bullet lists in table cells, long
ruled tables across pages, financial statements with spanning column headers and a currency-sign column).

Core fonts only (no TTF files), so the set builds on a bare machine; fixed metadata, so the bytes never change.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, timezone

from fpdf import FPDF

CREATED = datetime(2024, 1, 1, tzinfo=timezone.utc)
SHY = "\u00ad"  # a soft hyphen: fpdf2 may break a word there and then prints a hyphen, as TeX does
_VOWELS = set("aeiouy")


def hyphenate(text: str, min_len: int = 8) -> str:
    """``text`` with soft hyphens inside long words (after a vowel followed by a consonant, three letters in from
    either end): crude, but it lets wrapped lines end mid-word the way typeset documents do."""

    def word(m: re.Match[str]) -> str:
        w = m.group(0)
        if len(w) < min_len:
            return w
        out = []
        for i, ch in enumerate(w):
            out.append(ch)
            if 3 <= i + 1 <= len(w) - 3 and ch.lower() in _VOWELS and w[i + 1].lower() not in _VOWELS \
                    and w[i + 1].isalpha():
                out.append(SHY)
        return "".join(out)

    return re.sub(r"[A-Za-z]+", word, text)


@dataclass
class Style:
    """Typography of one organisation's documents."""

    family: str = "Helvetica"
    body: float = 10.0
    sizes: tuple[float, float, float] = (18.0, 13.0, 11.0)  # title, section, subsection
    bold_subheads: bool = False  # subsections in bold body size (run-in style) instead of a larger size
    title_align: str = "L"
    title_leading: float = 1.25  # line height of a wrapped title, as a multiple of its size
    header: str = ""  # running header ("" for none)
    footer: str = ""  # running footer left text; the page number goes right
    page_label: str = "Page {n}"
    margins: tuple[float, float, float] = (20.0, 22.0, 20.0)


@dataclass
class TableSpec:
    """A ruled table. ``header`` rows are drawn bold above a rule; ``spans`` (header row 0 only) give, per label,
    the first column and how many columns it covers (a multi-level header)."""

    header: list[list[str]]
    rows: list[list[str]]
    widths: list[float]
    aligns: list[str] = field(default_factory=list)  # per column: L, R, C
    grid: bool = False  # every cell boxed (else rules only above/below the header and at the end)
    repeat_header: bool = True  # draw the header again at the top of a continuation page
    bold_rows: set[int] = field(default_factory=set)  # body rows set in bold (totals, section labels)
    rule_above: set[int] = field(default_factory=set)  # body rows with a rule above their value columns
    double_below: set[int] = field(default_factory=set)  # body rows with a double rule below (grand totals)
    indent: dict[int, float] = field(default_factory=dict)  # body row -> label indent (mm)
    value_from: int = 1  # first column that holds values (rules above totals start here)
    spans: list[tuple[str, int, int]] = field(default_factory=list)
    line_h: float = 5.0
    size: float | None = None
    hanging_bullets: bool = False  # "• item" lines drawn as a bullet with the item indented past it (a list)


class DevPdf(FPDF):
    """A4 pages with the organisation's running header/footer and typography."""

    def __init__(self, style: Style, title: str = "", author: str = "") -> None:
        super().__init__(format="A4", unit="mm")
        self.core_fonts_encoding = "windows-1252"
        self.style = style
        self.set_creation_date(CREATED)
        self.set_producer("chunker.eval.devset")
        if title:
            self.set_title(title)
        if author:
            self.set_author(author)
        left, top, right = style.margins
        self.set_margins(left, top, right)
        self.set_auto_page_break(True, margin=20)
        self.alias_nb_pages()

    # -- furniture --------------------------------------------------------------------------------------------
    def header(self) -> None:
        st = self.style
        if st.header:
            self.set_font(st.family, "", 8)
            self.set_xy(self.l_margin, 10)
            self.cell(0, 4, st.header, align="L")
            self.line(self.l_margin, 15, self.w - self.r_margin, 15)
        self.set_y(self.style.margins[1])

    def footer(self) -> None:
        st = self.style
        self.set_font(st.family, "", 8)
        self.set_y(-13)
        if st.footer:
            self.cell(100, 4, st.footer, align="L")
        self.set_x(self.w - self.r_margin - 40)
        self.cell(40, 4, st.page_label.format(n=self.page_no(), m="{nb}"), align="R")

    # -- text -------------------------------------------------------------------------------------------------
    def use_font(self, style: str = "", size: float | None = None) -> None:
        self.set_font(self.style.family, style, size or self.style.body)

    def doc_title(self, text: str, size: float | None = None) -> None:
        size = size or self.style.sizes[0]
        self.use_font("B", size)
        lh = size * self.style.title_leading * 0.3528  # points -> mm
        self.multi_cell(0, lh, hyphenate(text), align=self.style.title_align, new_x="LMARGIN", new_y="NEXT")
        self.ln(3)

    def heading(self, text: str, level: int = 2) -> None:
        st = self.style
        if level >= 3 and st.bold_subheads:
            self.ln(1.5)
            self.use_font("B")
            self.multi_cell(0, st.body * 0.5, text, align="L", new_x="LMARGIN", new_y="NEXT")
            self.ln(0.5)
            return
        size = st.sizes[min(level, 3) - 1]
        self.ln(2.5)
        self.use_font("B", size)
        self.multi_cell(0, size * 0.45, hyphenate(text), align="L", new_x="LMARGIN", new_y="NEXT")
        self.ln(1.5)

    def para(self, text: str, style: str = "") -> None:
        self.use_font(style)
        self.multi_cell(0, self.style.body * 0.5, hyphenate(text), align="J", new_x="LMARGIN", new_y="NEXT")
        self.ln(2)

    def items(self, texts: list[str], numbered: bool = False) -> None:
        self.use_font()
        lh = self.style.body * 0.5
        for i, text in enumerate(texts, 1):
            self.set_x(self.l_margin + 4)
            self.cell(6, lh, f"{i}." if numbered else "\u2022")
            self.multi_cell(0, lh, hyphenate(text), align="L", new_x="LMARGIN", new_y="NEXT")
            self.ln(0.8)
        self.ln(1.5)

    def two_columns(self, blocks: list[tuple[str, str]]) -> None:
        """Flow (kind, text) blocks through two columns: kind is "h" (a bold heading) or "p" (a paragraph)."""
        self.use_font()
        lh = self.style.body * 0.5
        with self.text_columns(ncols=2, gutter=8, text_align="J", line_height=1.15, balance=True) as cols:
            for kind, text in blocks:
                if kind == "h":
                    with cols.paragraph(text_align="L", top_margin=2, bottom_margin=1) as par:
                        self.use_font("B", self.style.sizes[2])
                        par.write(text)
                else:
                    with cols.paragraph(bottom_margin=lh * 0.6) as par:
                        self.use_font()
                        par.write(hyphenate(text))
        self.use_font()
        self.ln(2)

    # -- tables -----------------------------------------------------------------------------------------------
    def _cell_lines(self, text: str, width: float) -> list[str]:
        if not text:
            return [""]
        out: list[str] = []
        for part in text.split("\n"):
            if self.get_string_width(part) <= width - 2:
                out.append(part)
                continue
            lines = self.multi_cell(width - 2, 4, hyphenate(part), dry_run=True, output="LINES") or [""]
            # The dry run hands back text already in the core fonts' encoding: decode it so it can be drawn again.
            out += [ln.encode("latin-1", "replace").decode(self.core_fonts_encoding, "replace").replace(SHY, "")
                    for ln in lines]
        return out

    def ruled_table(self, spec: TableSpec) -> list[int]:
        """Draw ``spec``; returns the page of each body row. Rows never split over a page."""
        size = spec.size or self.style.body - 0.5
        lh = spec.line_h * size / 10
        x0 = self.l_margin
        total_w = sum(spec.widths)
        aligns = spec.aligns or ["L"] * len(spec.widths)
        pages: list[int] = []

        def col_x(c: int) -> float:
            return x0 + sum(spec.widths[:c])

        def draw_row(cells: list[str], bold: bool, indent: float = 0.0, align: list[str] | None = None) -> float:
            self.use_font("B" if bold else "", size)
            wrapped = [self._cell_lines(t, w - (indent if c == 0 else 0))
                       for c, (t, w) in enumerate(zip(cells, spec.widths))]
            n = max(len(w) for w in wrapped)
            y = self.get_y()
            for c, lines in enumerate(wrapped):
                for k, line in enumerate(lines):
                    x = col_x(c) + 1 + (indent if c == 0 else 0)
                    w = spec.widths[c] - 2 - (indent if c == 0 else 0)
                    if spec.hanging_bullets and line.startswith("\u2022 "):
                        self.set_xy(x, y + k * lh + 0.6)
                        self.cell(4, lh, "\u2022")
                        x, w, line = x + 4.5, w - 4.5, line[2:]
                    self.set_xy(x, y + k * lh + 0.6)
                    self.cell(w, lh, line, align=(align or aligns)[c])
            h = n * lh + 1.2
            if spec.grid:
                for c in range(len(spec.widths)):
                    self.rect(col_x(c), y, spec.widths[c], h)
            self.set_xy(x0, y + h)
            return h

        def draw_header() -> None:
            self.line(x0, self.get_y(), x0 + total_w, self.get_y())
            if spec.spans:
                y = self.get_y()
                self.use_font("B", size)
                for label, first, count in spec.spans:
                    w = sum(spec.widths[first:first + count])
                    self.set_xy(col_x(first), y + 0.6)
                    self.cell(w, lh, label, align="C")
                    # A rule under each spanning label, a little shorter than its columns (as filings draw them).
                    self.line(col_x(first) + 2, y + lh + 1.0, col_x(first) + w - 2, y + lh + 1.0)
                self.set_xy(x0, y + lh + 1.6)
            for row in spec.header:
                draw_row(row, True, align=["L"] + ["C"] * (len(row) - 1) if spec.spans else None)
            self.line(x0, self.get_y(), x0 + total_w, self.get_y())

        draw_header()
        for r, row in enumerate(spec.rows):
            self.use_font("", size)
            need = max(len(self._cell_lines(t, w)) for t, w in zip(row, spec.widths)) * lh + 2
            if self.get_y() + need > self.page_break_trigger:
                if not spec.grid:
                    self.line(x0, self.get_y(), x0 + total_w, self.get_y())
                self.add_page()
                if spec.repeat_header:
                    draw_header()
                else:
                    self.line(x0, self.get_y(), x0 + total_w, self.get_y())
            if r in spec.rule_above:
                y = self.get_y()
                for c in range(spec.value_from, len(spec.widths)):
                    if spec.aligns and spec.aligns[c] == "R" or c >= spec.value_from:
                        self.line(col_x(c) + 1, y, col_x(c) + spec.widths[c] - 1, y)
            draw_row(row, r in spec.bold_rows, spec.indent.get(r, 0.0))
            if r in spec.double_below:
                y = self.get_y()
                for dy in (0.0, 0.7):
                    self.line(col_x(spec.value_from) + 1, y + dy, x0 + total_w - 1, y + dy)
                self.set_y(y + 1.0)
            pages.append(self.page_no())
        if not spec.grid:
            self.line(x0, self.get_y(), x0 + total_w, self.get_y())
        self.ln(4)
        return pages
