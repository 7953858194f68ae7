"""The ``pdf-text`` converter: a PDF's text layer (OCR where it has none) -> the Markdown contract, no model."""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass, field
from urllib.parse import unquote, urlparse

import pypdfium2 as pdfium

from chunker.config import ConverterConfig
from chunker.contract import PAGE_MARKER, page_marker
from chunker.convert.base import PageImages, batch_done
from chunker.convert.pdf_text.blocks import FlowState, PageWriter, join_split_paragraph
from chunker.convert.pdf_text.figures import Figure, find_figures, is_full_page, page_images
from chunker.convert.pdf_text.furniture import furniture_lines, toc_lines
from chunker.convert.pdf_text.headings import FontStats, font_stats
from chunker.convert.pdf_text.notemarks import attach_note_marks
from chunker.convert.pdf_text.ocr import PageOcr
from chunker.convert.pdf_text.aligned import AlignedTable
from chunker.convert.pdf_text.colheads import find_aligned_tables
from chunker.convert.pdf_text.tables import Rules, Table, find_tables, page_rules, pipe_row
from chunker.convert.pdf_text.textlayer import SOFT_HYPHENS, PageText, read_page
from chunker.convert.render import PDFIUM_LOCK
from chunker.types import BatchContext, ConvertedBatch, SegmentJob

# pdfium is one process-wide C library that is not thread-safe; every converter instance shares this lock.
_PDFIUM_LOCK = PDFIUM_LOCK  # one lock for every pdfium user in the process (rendering too)


@dataclass
class _Page:
    number: int
    text: PageText | None = None
    rules: Rules | None = None
    tables: list[Table] = field(default_factory=list)
    aligned: list[AlignedTable] = field(default_factory=list)
    figures: list[Figure] = field(default_factory=list)
    skip: set[int] = field(default_factory=set)
    error: str = ""


def local_path(source_uri: str) -> str:
    """A local filesystem path from a plain path or a ``file://`` URI."""
    if source_uri.startswith("file://"):
        return unquote(urlparse(source_uri).path)
    return source_uri


class PdfTextConverter:
    """CPU converter; see :mod:`chunker.convert.pdf_text`."""

    name = "pdf-text"

    def __init__(self, cfg: ConverterConfig, config_hash: str = "", password: str | None = None) -> None:
        self.cfg = cfg
        self.password = password  # for encrypted PDFs (intake accepts them when a password is configured)
        self.opts = cfg.pdf_text
        self.config_hash = config_hash
        self._ocr = PageOcr(self.opts.ocr_max_side_px)

    def needs_images(self) -> bool:
        return False

    async def convert(self, job: SegmentJob, images: PageImages | None) -> list[ConvertedBatch]:
        return await asyncio.to_thread(self.convert_sync, job)

    # -- synchronous core ---------------------------------------------------------------------------------
    def convert_sync(self, job: SegmentJob) -> list[ConvertedBatch]:
        ranges = job.batches()
        pages, open_error = self._read(job.source_uri, list(range(job.context_start, job.page_end + 1)))
        state = FlowState()
        stats = self._prepare(pages, state)
        out: list[ConvertedBatch] = []
        for index, (a, b) in enumerate(ranges):
            errors: list[str] = [open_error] if open_error else []
            unread = [p for p in range(a, b + 1) if p in pages and pages[p].error]
            errors += [f"page {p}: {pages[p].error}" for p in unread]
            markdown = self._markdown(pages, list(range(a, b + 1)), stats, state)
            tail = markdown[-self.cfg.context_tail_chars:] if self.cfg.context_tail_chars else ""
            ctx = BatchContext(
                tail=tail,
                heading_path=[t for _, t in state.heading_path],
                table_header=pipe_row(state.table_header) if state.table_header else "",
                heading_levels=[lv for lv, _ in state.heading_path],
            )
            out.append(ConvertedBatch(
                doc_id=job.doc_id, segment_index=job.segment_index, batch_index=index, page_start=a, page_end=b,
                markdown=markdown, context_out=ctx.to_json(), model=self.name, prompt_version="",
                finish_reason="stop", lost_pages=unread,
                context_only=job.context_start < job.page_start and index == 0,
                error="; ".join(errors), config_hash=self.config_hash,
            ))
            batch_done(out[-1])
        return out

    def markdown_for_pages(self, source_uri: str, pages: list[int]) -> str:
        """Markdown (with page markers) of the given 1-based pages: the vision converter's per-page fallback."""
        wanted = sorted(set(pages))
        read, _ = self._read(source_uri, wanted)
        state = FlowState()
        stats = self._prepare(read, state)
        return self._markdown(read, wanted, stats, state)

    # -- steps --------------------------------------------------------------------------------------------
    def _read(self, source_uri: str, numbers: list[int]) -> tuple[dict[int, _Page], str]:
        """Text, tables and figures of each page; a page that fails carries its error, the others go on.

        The pdfium lock is taken per page, not per document, and OCR inference runs outside it: a scanned page's
        seconds of OCR never hold up the page renders of the conversion actor's other chains.
        """
        pages: dict[int, _Page] = {}
        with _PDFIUM_LOCK:
            try:
                doc = pdfium.PdfDocument(local_path(source_uri), password=self.password)
            except Exception as exc:  # noqa: BLE001 - unreadable input is reported on the batch, not raised
                return {n: _Page(n, error=f"cannot open PDF: {exc}") for n in numbers}, f"cannot open PDF: {exc}"
            total = len(doc)
        try:
            for n in numbers:
                if not 1 <= n <= total:
                    pages[n] = _Page(n, error=f"page out of range (document has {total} pages)")
                    continue
                try:
                    pages[n] = self._read_page(doc, n)
                except Exception as exc:  # noqa: BLE001 - one broken page must not lose the others
                    pages[n] = _Page(n, error=f"{type(exc).__name__}: {exc}")
        finally:
            with _PDFIUM_LOCK:
                doc.close()
        return pages, ""

    def _read_page(self, doc: pdfium.PdfDocument, n: int) -> _Page:
        # What reads the PDF holds the pdfium lock; what works on the extracted lines, boxes and rules does not.
        scan = rules = None
        with _PDFIUM_LOCK:
            pdf_page = doc[n - 1]
            try:
                text = read_page(pdf_page, n)
                boxes = page_images(pdf_page, text.height)
                area = text.width * text.height or 1.0
                # OCR costs seconds: only pages that carry a sizeable picture can hold scanned text.
                pictured = any((b[2] - b[0]) * (b[3] - b[1]) >= 0.05 * area for b in boxes)
                scanned = text.n_chars < self.opts.ocr_min_chars and pictured
                if scanned and self.opts.ocr:
                    try:
                        scan = self._ocr.rasterise(pdf_page)
                    except Exception as exc:  # noqa: BLE001 - OCR failure leaves the page empty, with the reason
                        return _Page(n, text=text, error=f"OCR failed: {exc}")
                elif self.opts.tables:
                    rules = page_rules(pdf_page, text.height)
            finally:
                pdf_page.close()
        if scan is None:
            text.lines = attach_note_marks(text.lines)
            page = _Page(n, text=text, rules=rules)
            page.figures = find_figures(text, [b for b in boxes if not is_full_page(b, text.width, text.height)], set())
            return page
        # A scanned page: the recogniser runs without the pdfium lock. Scans (a full-page image) are the text, not a
        # figure, and have no ruled tables to read.
        try:
            return _Page(n, text=self._ocr.recognise(scan, n))
        except Exception as exc:  # noqa: BLE001 - OCR failure leaves the page empty, with the reason
            return _Page(n, text=text, error=f"OCR failed: {exc}")

    def _prepare(self, pages: dict[int, _Page], state: FlowState) -> FontStats:
        """Segment-wide decisions: furniture and TOC first (they never enter a table), then tables (aligned
        figures, then ruled ones), font statistics without table text; then the per-page skip sets."""
        texts = [p.text for p in pages.values() if p.text is not None and not p.text.ocr]
        state.keep_hard_hyphens = any(any(ln.soft_end for ln in t.lines) for t in texts)
        texts_all = [p.text for p in pages.values() if p.text is not None]
        furniture = furniture_lines(texts_all, self.opts.drop_repeated_lines, font_stats(texts).body_size)
        for page in pages.values():
            if page.text is None:
                continue
            skip = set(furniture.get(page.number, set()))
            if self.opts.skip_toc and not page.text.ocr:
                skip |= toc_lines(page.text, skip)
            if self.opts.tables and not page.text.ocr:
                page.aligned = find_aligned_tables(page.text, skip)
                taken = skip.union(*(t.lines for t in page.aligned))
                if page.rules is not None and page.rules.horizontal:
                    page.tables = find_tables(page.text, page.rules, 0.0, ignore=skip, taken=taken,
                                              claimed=[t.bbox for t in page.aligned])
            page.skip = skip
        stats = font_stats(texts, {p.number: set().union(*(t.lines for t in p.tables), *(t.lines for t in p.aligned))
                                   for p in pages.values() if p.tables or p.aligned})
        for page in pages.values():
            if page.text is None:
                continue
            if page.tables:
                page.tables = _rejudge(page.text, page.tables, page.skip, stats)
            for t in [*page.tables, *page.aligned]:
                page.skip |= t.lines
            for f in page.figures:
                page.skip |= f.caption_lines
        return stats

    def _markdown(self, pages: dict[int, _Page], numbers: list[int], stats: FontStats, state: FlowState) -> str:
        """One batch's Markdown: page markers and bodies, a paragraph cut by a page break made whole again."""
        parts: list[str] = []
        prev: tuple[int, PageWriter] | None = None  # index in parts of the previous page's body, and its writer
        for p in numbers:
            parts.append(page_marker(p))
            page = pages.get(p)
            if page is None or page.error or page.text is None:
                prev = None
                continue
            writer = PageWriter(page.text, stats, state, page.skip)
            body = writer.render(page.tables, page.figures, page.aligned)
            if not body:
                prev = None
                continue
            if prev is not None:
                joined = join_split_paragraph(prev[1], parts[prev[0]], writer, body, state.keep_hard_hyphens)
                if joined is not None:
                    parts[prev[0]], body = joined
            parts.append(body)
            prev = (len(parts) - 1, writer)
        return join_pages([part for part in parts if part])


_ITEM = re.compile(r"^\s*(\d{1,3}[.)]|[-*+•])\s")


def join_pages(parts: list[str]) -> str:
    """Join page markers and page bodies. A list running over a page end is written without a blank line before
    the page marker: the parser keeps a list open over a marker, but a blank line followed by a marker ends it."""
    out = ""
    for k, part in enumerate(parts):
        if k == 0:
            out = part
            continue
        last = out.rsplit("\n", 1)[-1]
        nxt = parts[k + 1] if k + 1 < len(parts) else ""
        glued = bool(PAGE_MARKER.match(part)) and _ITEM.match(last) and _ITEM.match(nxt.split("\n", 1)[0])
        out += ("\n" if glued else "\n\n") + part
    return out + "\n"


def _rejudge(text: PageText, tables: list[Table], skip: set[int], stats: FontStats) -> list[Table]:
    owned = set().union(*(t.lines for t in tables))
    content = [i for i in range(len(text.lines)) if i not in skip and i not in owned]
    for t in tables:
        t.at_top = all((text.lines[i].y0 + text.lines[i].y1) / 2 >= t.bbox[1] for i in content)
        t.at_bottom = all((text.lines[i].y0 + text.lines[i].y1) / 2 <= t.bbox[3] for i in content)
    # A table whose text is mostly heading-size type is a layout frame, not data.
    return [t for t in tables if not all(text.lines[i].size > stats.body_size * 1.12 for i in t.lines)]


__all__ = ["PdfTextConverter", "SOFT_HYPHENS", "local_path"]
