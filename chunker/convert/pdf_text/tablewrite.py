"""A page's tables, forms and figures as Markdown (split from :mod:`chunker.convert.pdf_text.blocks`, whose
:class:`~chunker.convert.pdf_text.blocks.PageWriter` mixes this in): a ruled table continued from the page before or
taking the labels of the table above it, a grid of "Label:" cells written as a form, rows of aligned figures as
sentences with their column paths, a figure's line.

Methods here read and set the writer's page state (``out``, ``state``, ``last_ruled``, ``last_aligned``,
``lent_at``, ``last_was_open_table``) and write through its ``_emit`` and ``heading``.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from chunker.convert.pdf_text.aligned import AlignedTable
from chunker.convert.pdf_text.colheads import label_paths
from chunker.convert.pdf_text.figures import Figure
from chunker.convert.pdf_text.handover import OpenAligned, inherit, is_data_row, lend_to_aligned, relabel, same_columns
from chunker.convert.pdf_text.tables import Table, pipe_row, same_layout
from chunker.contract import figure_line, figure_row_sentence, table_block, table_row_sentence
from chunker.forms import read_form
from chunker.tabletext import is_sentence_piece

if TYPE_CHECKING:
    from chunker.convert.pdf_text.handover import FlowState
    from chunker.convert.pdf_text.headings import FontStats

# Text that Markdown would read as markup at a block's start (a heading, a quote, a table row): escaped.
MD_ESCAPE = re.compile(r"^(#{1,6}\s|>|\|)")


class TableWriting:
    """The table, form and figure half of a page writer."""

    out: list[str]
    state: FlowState
    stats: FontStats
    last_ruled: tuple[list[str], list[float]] | None
    last_aligned: OpenAligned | None
    lent_at: int
    last_was_open_table: bool

    def _emit(self, markdown: str) -> None:
        raise NotImplementedError

    def heading(self, level: int, text: str) -> None:
        raise NotImplementedError

    def table(self, t: Table) -> None:
        ncols = len(t.rows[0]) if t.rows else len(t.header or [])
        carried = self.state.table_header
        continued = bool(carried) and t.at_top and not self.out and len(carried) == ncols \
            and same_layout(self.state.table_columns, t.columns)
        if not continued and self._form(t):
            return
        header, rows = t.header, t.rows
        if continued and header is not None and header != carried and not t.header_bold:
            # A guessed header at the top of a continuation page is the table's next data row, not a new header.
            header, rows = None, t.header_rows + rows
        header = header or (carried if continued else None)
        if not continued and (header is None or not any(header[1:])) and self.last_ruled is not None \
                and len(self.last_ruled[0]) == ncols and same_layout(self.last_ruled[1], t.columns):
            # A table with no labels over its values, set in the columns of the table before it on this page
            # (a schedule's 2021 block under its 2022 block), reads with that table's labels; a label found in
            # its stub alone ("2021") goes back to its rows as their group label.
            header, rows = self.last_ruled[0], (t.header_rows if header is not None else []) + rows
        if header is None:
            if is_data_row(rows[0]):
                # Figures in the first row: it is data. Taken as the header, its values would label every row.
                header = [""] * ncols
            elif is_sentence_piece(" ".join(c for c in rows[0] if c)):
                # The lead-in ruled in with the table ("Summary of ... is as follows:"): prose before the table,
                # never its column paths.
                self._emit(MD_ESCAPE.sub(r"\\\1", " ".join(c for c in rows[0] if c)))
                header, rows = [""] * ncols, rows[1:]
            else:
                header, rows = rows[0], rows[1:]
        if any(header[1:]) and t.columns and (t.header_bold or t.labels_above):
            self.last_ruled = header, t.columns  # only labels found for sure are lent on: never a guessed header
            lent = lend_to_aligned(header, t.columns, t.rights, rows)
            if lent is not None:
                # Rows below the rules that the aligned-figure reader takes up (a schedule ruled only around its
                # first rows) read with these labels when their figures end where these columns' do.
                self.last_aligned = lent
                self.lent_at = len(self.out) + 1  # the aligned rows take its open group label only right after it
        if continued:
            lines = table_block([table_row_sentence(header, r) for r in rows if any(r)], continued=True)
        else:
            lines = [pipe_row(header), "|" + "---|" * len(header)] + [pipe_row(r) for r in rows if any(r)]
        self._emit("\n".join(lines))
        self.state.aligned = None
        self.state.table_header = header if t.at_bottom else []
        self.state.table_columns = t.columns if t.at_bottom else []
        self.last_was_open_table = t.at_bottom

    def _form(self, t: Table) -> bool:
        """A ruled grid of "Label:" cells and their values is a form (chunker.forms): written as its title (a
        heading under the current one) and one row of pairs per grid row. False when it is a table."""
        grid = (t.header_rows or ([t.header] if t.header else [])) + t.rows
        form = read_form(grid)
        if form is None:
            return False
        level = min(6, max((lv for lv, _ in self.state.heading_path), default=1) + 1)
        for title in form.titles:
            self.heading(level, title)
        if form.rows:
            self._emit("\n".join(table_block(form.rows)))
        self.state.table_header, self.state.table_columns = [], []
        self.last_was_open_table = False
        return True

    def aligned(self, t: AlignedTable) -> None:
        """Rows of figures as sentences, each figure with its column path. A table at the top of the page whose
        columns line up with the one open at the end of the page before continues it, and its open section
        labels; without a header of its own a table takes the paths, unit and text columns of the table just
        before it (on this page, or open at the end of the last one) when its columns line up with that one's."""
        carried = self.state.aligned
        continued = carried is not None and t.at_top and not self.out and same_columns(carried.columns, t.columns)
        columns, unit, stub, rows = t.columns, t.unit, t.stub, t.rows
        before = self.last_aligned or carried
        if not t.header_found and before is not None:
            inherited = inherit(t.columns, before.columns)
            if inherited is not None:
                columns, unit, stub = inherited, t.unit or before.unit, before.stub
                rows = [relabel(r, before.text_cuts, self.stats.body_size) for r in rows] if before.text_cuts else rows
        opened = carried.sections if continued and carried is not None else None
        if not t.header_found and before is self.last_aligned and before is not None and self.lent_at == len(self.out):
            opened = before.sections  # rows right under a ruled table go on under its open group label ("2022")
        paths, still_open = label_paths(rows, opened)
        sentences = []
        for path, r in paths:
            label = f"{stub[0]}: {r.label}" if stub and stub[0] and r.label else r.label
            cells = [([h], v) for h, v in zip(stub[1:], r.texts)] + [(c.path, v) for c, v in zip(columns, r.values)]
            sentences.append(figure_row_sentence(path + ([label] if label else []), cells, unit))
        self._emit("\n".join(table_block([s for s in sentences if s], continued=continued)))
        self.state.table_header, self.state.table_columns = [], []
        self.last_aligned = OpenAligned(columns, unit, still_open, stub,
                                        t.text_cuts if t.header_found or before is None else before.text_cuts)
        self.state.aligned = self.last_aligned if t.at_bottom else None
        self.last_was_open_table = t.at_bottom

    def figure(self, f: Figure) -> None:
        self._emit(figure_line(f.caption, [round(v, 1) for v in f.bbox]))
