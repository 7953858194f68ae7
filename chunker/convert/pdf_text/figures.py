"""Figures: image objects of a page, with a caption line found next to them."""

from __future__ import annotations

import re
from dataclasses import dataclass

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c

from chunker.convert.pdf_text.textlayer import PageText

_CAPTION = re.compile(r"^(figure|fig\.?|chart|diagram|image|illustration|exhibit|abbildung|abb\.)\s*[\dIVX]*[.:\-–]?\s*", re.I)
_MIN_SIDE_PT = 40.0  # smaller images are icons, bullets and logos: decoration
_FULL_PAGE_SHARE = 0.8  # an image covering this much of the page is a scan, not a figure
_CAPTION_REACH_PT = 36.0


@dataclass
class Figure:
    bbox: tuple[float, float, float, float]  # x0, y0, x1, y1; points, top-left origin
    caption: str
    caption_lines: set[int]


def page_images(page: pdfium.PdfPage, height: float) -> list[tuple[float, float, float, float]]:
    """Boxes (top-left origin) of the page's image objects, nested form objects included."""
    out = []
    for obj in page.get_objects(filter=(pdfium_c.FPDF_PAGEOBJ_IMAGE,), max_depth=4):
        try:
            left, bottom, right, top = obj.get_bounds()
        except Exception:  # noqa: BLE001 - an unreadable image object is skipped, the page goes on
            continue
        out.append((left, height - top, right, height - bottom))
    return out


def is_full_page(box: tuple[float, float, float, float], width: float, height: float) -> bool:
    area = max(0.0, box[2] - box[0]) * max(0.0, box[3] - box[1])
    return area >= _FULL_PAGE_SHARE * width * height


def find_figures(page: PageText, boxes: list[tuple[float, float, float, float]], skip: set[int]) -> list[Figure]:
    """Figures worth an element: big enough, not a full-page scan; each takes the nearest caption line."""
    figures: list[Figure] = []
    used: set[int] = set(skip)
    for box in sorted(boxes, key=lambda b: (b[1], b[0])):
        x0, y0, x1, y1 = box
        if x1 - x0 < _MIN_SIDE_PT or y1 - y0 < _MIN_SIDE_PT or is_full_page(box, page.width, page.height):
            continue
        best: tuple[float, int] | None = None
        for i, ln in enumerate(page.lines):
            if i in used or not _CAPTION.match(ln.text):
                continue
            overlaps = min(x1, ln.x1) - max(x0, ln.x0) > 0
            dist = ln.y0 - y1 if ln.y0 >= y1 - 2 else y0 - ln.y1
            if overlaps and -2 <= dist <= _CAPTION_REACH_PT and (best is None or dist < best[0]):
                best = (dist, i)
        lines: set[int] = set()
        caption = ""
        if best is not None:
            i = best[1]
            lines.add(i)
            caption = page.lines[i].text
            # A caption may wrap: take following lines set in the same size right below it.
            j = i + 1
            while j < len(page.lines) and j not in used and page.lines[j].y0 - page.lines[j - 1].y1 < 0.6 * max(page.lines[j].size, 4) \
                    and abs(page.lines[j].size - page.lines[i].size) < 0.3 and len(lines) < 4:
                lines.add(j)
                caption += " " + page.lines[j].text
                j += 1
        used |= lines
        figures.append(Figure(box, caption.strip(), lines))
    return figures
