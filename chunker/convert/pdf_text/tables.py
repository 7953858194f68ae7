"""Ruled tables found from the page's vector rules (pypdfium2 path objects) and the text layer.

Why not pdfplumber: it parses the page a second time (tens of ms per page) and its lines strategy misses the
common booktabs/longtable style (horizontal rules only) that LaTeX and pandoc PDFs use. Rules are read cheaply
from pdfium's page objects; only pages that have rules pay for table analysis.

A table is a stack of horizontal rules sharing an x extent (or a single rule under a header line) whose text falls
into at least two columns. Columns come from vertical rules when the table has them, otherwise from the gaps in the
horizontal projection of the text. Bands between rules separate the header from the body.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c

from chunker.convert.pdf_text.cells import (DIGITS, SEG_GAP_EM, YEAR_OR_DATE, Seg, band_rows, clean_cells, column_of,
                                            compose_header, headerish, merge_sign_columns, visual_rows)
from chunker.convert.pdf_text.grids import above_grid, rules_extent, split_grids
from chunker.convert.pdf_text.labels import header_above
from chunker.convert.pdf_text.textlayer import CURRENCY, PageText

_HRULE_MAX_H = 3.0
_MIN_RULE_W = 15.0
_BULLET_ONLY = re.compile(r"^[•●▪■◦‣∙·○◆◇►▸➢✓✔–-]$")


@dataclass
class Rules:
    horizontal: list[tuple[float, float, float]] = field(default_factory=list)  # (x0, x1, y), top-left origin
    vertical: list[tuple[float, float, float]] = field(default_factory=list)  # (x, y0, y1)


@dataclass
class Table:
    bbox: tuple[float, float, float, float]
    header: list[str] | None
    rows: list[list[str]]
    lines: set[int]  # indexes of page lines consumed by the table
    header_rows: list[list[str]] = field(default_factory=list)  # the body rows taken as the header, as found
    header_bold: bool = False  # the header was recognised by its bold type (strong evidence), not by guessing
    columns: list[float] = field(default_factory=list)  # left x of each kept column: the table's layout
    at_top: bool = False  # nothing but furniture above it on the page
    at_bottom: bool = False  # nothing but furniture below it on the page
    labels_above: bool = False  # the header is the column labels set above the body (labels.header_above)
    rights: list[float] = field(default_factory=list)  # right x of each kept column (where right-set figures end)


def page_rules(page: pdfium.PdfPage, height: float) -> Rules:
    """Horizontal and vertical rules of a page, rectangle edges included (cheap: no text parsing)."""
    rules = Rules()
    width = page.get_width()
    for obj in page.get_objects(filter=(pdfium_c.FPDF_PAGEOBJ_PATH,), max_depth=4):
        try:
            left, bottom, right, top = obj.get_bounds()
        except Exception:  # noqa: BLE001 - a broken path object is not worth losing the page
            continue
        w, h = right - left, top - bottom
        y0, y1 = height - top, height - bottom
        if h <= _HRULE_MAX_H and w >= _MIN_RULE_W:
            rules.horizontal.append((left, right, (y0 + y1) / 2))
        elif w <= _HRULE_MAX_H and h >= 6:
            rules.vertical.append(((left + right) / 2, y0, y1))
        elif w > _HRULE_MAX_H and h > _HRULE_MAX_H and w < width * 0.95:
            # A filled cell or row: its edges are rules.
            rules.horizontal += [(left, right, y0), (left, right, y1)]
            rules.vertical += [(left, y0, y1), (right, y0, y1)]
    return rules


def _join_abutting(hrules: list[tuple[float, float, float]]) -> list[tuple[float, float, float]]:
    """Horizontal rules on one y whose ends touch, as one rule: a grid drawn cell by cell (one box per cell, as many
    generators do) has a rule per cell edge; left apart, each column would stack alone and the table fall apart."""
    out: list[tuple[float, float, float]] = []
    for r in sorted(hrules, key=lambda r: (round(r[2] * 2) / 2, r[0])):
        if out and abs(out[-1][2] - r[2]) <= 0.6 and r[0] <= out[-1][1] + 1.5:
            x0, x1, y = out[-1]
            out[-1] = (x0, max(x1, r[1]), y)
        else:
            out.append(r)
    return out


def _join_vertical(vrules: list[tuple[float, float, float]]) -> list[tuple[float, float, float]]:
    """Vertical rules on one x whose ends touch, as one rule (a grid drawn cell by cell, see :func:`_join_abutting`)."""
    out: list[tuple[float, float, float]] = []
    for r in sorted(vrules, key=lambda r: (round(r[0] * 2) / 2, r[1])):
        if out and abs(out[-1][0] - r[0]) <= 0.6 and r[1] <= out[-1][2] + 1.5:
            x, y0, y1 = out[-1]
            out[-1] = (x, y0, max(y1, r[2]))
        else:
            out.append(r)
    return out


def _stacks(hrules: list[tuple[float, float, float]]) -> list[list[tuple[float, float, float]]]:
    """Groups of horizontal rules with (nearly) the same x extent, each sorted top to bottom."""
    groups: list[list[tuple[float, float, float]]] = []
    for r in sorted(_join_abutting(hrules), key=lambda r: r[2]):
        for g in groups:
            gx0, gx1 = min(x[0] for x in g), max(x[1] for x in g)
            overlap = min(gx1, r[1]) - max(gx0, r[0])
            if overlap >= 0.6 * min(gx1 - gx0, r[1] - r[0]):
                if abs(g[-1][2] - r[2]) > 0.8:  # a rectangle's twin edges are one rule
                    g.append(r)
                break
        else:
            groups.append([r])
    return [_trim_ornaments(g) for g in groups]


def _trim_ornaments(stack: list[tuple[float, float, float]]) -> list[tuple[float, float, float]]:
    """Drop a short rule at either end of a stack that is inset from both table edges: a decorative separator
    above or below the table (a note under it would otherwise become a row), not one of its rules."""
    while len(stack) > 2:
        x0, x1 = min(r[0] for r in stack), max(r[1] for r in stack)
        ends = [k for k in (0, len(stack) - 1)
                if stack[k][1] - stack[k][0] < 0.8 * (x1 - x0) and stack[k][0] > x0 + 5 and stack[k][1] < x1 - 5]
        if not ends:
            break
        stack = [r for k, r in enumerate(stack) if k != ends[0]]
    return stack


def _segments(page: PageText, idx: list[int], cuts: list[float]) -> list[Seg]:
    out = []
    for i in idx:
        ln = page.lines[i]
        y = (ln.y0 + ln.y1) / 2
        parts = [p for p in ln.segments(SEG_GAP_EM * max(ln.size, 4.0), cuts, split_currency=True) if p[0]]
        k = 0
        while k < len(parts):
            text, a, b = parts[k]
            nxt = parts[k + 1] if k + 1 < len(parts) else None
            free = nxt is not None and not any(b <= c <= nxt[1] for c in cuts)
            if nxt is not None and free and _BULLET_ONLY.match(text) and nxt[1] - b < 4 * max(ln.size, 4.0):
                # A list bullet set apart from its item (a hanging indent) is part of the item, not a column.
                text, b = f"{text} {nxt[0]}", nxt[2]
                k += 1
            elif nxt is not None and free and len(text) == 1 and text in CURRENCY and nxt[0][:1] in "0123456789(-.":
                # A currency sign set apart from its figure (a statement's "$" column, filled on some rows only)
                # is part of the figure: as a column of its own it would be too sparse to separate cleanly.
                text, b = f"{text}{nxt[0]}", nxt[2]
                k += 1
            out.append(Seg(text, a, b, y, i, ln.bold))
            k += 1
    return out


def _columns(segs: list[Seg], cuts: list[float]) -> list[tuple[float, float, float]]:
    """Column separators: ruled ones if any, else gaps in the text. A gap of the whole projection is one; so is a
    gap that at least two visual rows share when at most one cell crosses it (a wide cell overflowing into the
    next column's margin closes the projection gap but not the rows' gaps)."""
    if cuts:
        return [(c, c, c) for c in sorted(cuts)]
    gaps: list[tuple[float, float]] = []
    for row in visual_rows(segs):
        end = row[0].x1
        for s in row[1:]:
            if s.x0 > end + 2.0:
                gaps.append((end, s.x0))
            end = max(end, s.x1)
    points = sorted({s.x0 for s in segs} | {s.x1 for s in segs} | {x for g in gaps for x in g})
    lo, hi = min(s.x0 for s in segs), max(s.x1 for s in segs)
    seps: list[tuple[float, float, float]] = []  # (x, gap start, gap end)
    run: list[tuple[float, float, int, int]] = []  # elementary intervals (a, b, crossings, support) of one run

    def close() -> None:
        if not run:
            return
        if all(c == 0 for _, _, c, _ in run):
            seps.append(((run[0][0] + run[-1][1]) / 2, run[0][0], run[-1][1]))  # a gap of the whole projection
        else:
            best = min((c, -n) for _, _, c, n in run)
            picked = [(a, b) for a, b, c, n in run if (c, -n) == best]
            seps.append(((picked[0][0] + picked[-1][1]) / 2, run[0][0], run[-1][1]))
        run.clear()

    starts, ends = sorted(s.x0 for s in segs), sorted(s.x1 for s in segs)
    g_starts, g_ends = sorted(g[0] for g in gaps), sorted(g[1] for g in gaps)
    for a, b in zip(points, points[1:]):
        m = (a + b) / 2
        if b - a < 1e-6 or not lo < m < hi:
            continue
        cross = bisect_left(starts, m) - bisect_right(ends, m)  # segments with x0 < m < x1
        support = bisect_right(g_starts, m) - bisect_left(g_ends, m)  # gaps with g0 <= m <= g1
        if cross == 0 and b - a > 2.0 or cross and support >= 2 and cross <= max(1, support // 4):
            run.append((a, b, cross, support))
        else:
            close()
    close()
    return seps


def _split_crossing(page: PageText, segs: list[Seg], seps: list[tuple[float, float, float]]) -> list[Seg]:
    """Split a segment that crosses a separator at a word space inside that separator's gap: two touching cells
    ("Departure Arrival City", "Netherlands 6 months") that the text layer ran together."""
    out: list[Seg] = []
    for s in segs:
        cross = [(x, a, b) for x, a, b in seps if s.x0 < x < s.x1]
        if len(cross) != 1 or cross[0][1] >= cross[0][2]:  # a title or note spanning columns stays whole
            out.append(s)
            continue
        ln = page.lines[s.line]
        ks = [k for k, a in enumerate(ln.xs0) if s.x0 - 0.01 <= a and ln.xs1[k] <= s.x1 + 0.01]
        spaces = [k for k in ks if ln.chars[k].isspace() and any(a - 1 <= ln.xs0[k] <= b + 1 for _, a, b in cross)]
        if not spaces:
            out.append(s)
            continue
        pieces: list[list[int]] = [[]]
        for k in ks:
            if k in spaces:
                pieces.append([])
            else:
                pieces[-1].append(k)
        for piece in filter(None, pieces):
            text = "".join(ln.chars[k] for k in piece).strip()
            if text:
                out.append(Seg(text, ln.xs0[piece[0]], max(ln.xs1[k] for k in piece), s.y, s.line, s.bold))
    return out


def _paragraph_like(page: PageText, idx: list[int], width: float) -> bool:
    """A long running line inside the stack: the rules frame prose, not a table."""
    for i in idx:
        ln = page.lines[i]
        if len(ln.text.split()) >= 8 and ln.x1 - ln.x0 > 0.5 * width and len(ln.segments(SEG_GAP_EM * ln.size)) == 1:
            return True
    return False


def find_tables(page: PageText, rules: Rules, body_size: float, ignore: set[int] | None = None,
                taken: set[int] | None = None,
                claimed: list[tuple[float, float, float, float]] | None = None) -> list[Table]:
    """Tables of one page, top to bottom; ``ignore``: furniture lines (not content for at_top/at_bottom);
    ``taken``: lines that are not table text here (furniture, tables of aligned figures found before);
    ``claimed``: boxes of tables found before: the rules running through one are that table's ruling, so a stack
    is cut there and the lines it leaves (a title above the figures) never join the rows below."""
    if not rules.horizontal or not page.lines:
        return []
    centres = [((ln.y0 + ln.y1) / 2, (ln.x0 + ln.x1) / 2) for ln in page.lines]
    taken = set(taken or ())
    tables: list[Table] = []
    for stack in (part for whole in _stacks(rules.horizontal) for part in _outside(whole, claimed or [])):
        x0, x1 = min(r[0] for r in stack), max(r[1] for r in stack)
        ys = [r[2] for r in stack]
        if len(ys) == 1:
            ys = _single_rule_extent(page, x0, x1, ys[0])
            if ys is None:
                continue
        else:
            below = _extend_down(page, x0, ys[-1])
            if below > ys[-1] + 1:
                ys.append(below)
        # Bands between consecutive rules; a band holding a bigger font (a heading) or prose breaks the table.
        runs: list[list[tuple[float, float]]] = [[]]
        inside = sorted(page.lines[i].size for i, (cy, cx) in enumerate(centres) if ys[0] < cy < ys[-1] and x0 - 2 < cx < x1 + 2)
        typical = max(body_size, inside[len(inside) // 2]) if inside else body_size
        for top, bot in zip(ys, ys[1:]):
            idx = [i for i, (cy, cx) in enumerate(centres) if top < cy < bot and x0 - 2 < cx < x1 + 2 and i not in taken]
            big = any(page.lines[i].size > typical * 1.12 for i in idx)
            if big or _paragraph_like(page, idx, x1 - x0):
                runs.append([])
            else:
                runs[-1].append((top, bot))
        vertical = [v for v in _join_vertical(rules.vertical) if x0 - 3 <= v[0] <= x1 + 3]
        for bands in (g for run in runs for g in split_grids(run, vertical, rules_extent(stack, run, x0, x1))):
            above = above_grid(page, bands, vertical, centres, taken)
            bands = bands[above:]
            # Below a banner that joined the stack (its box overlaps the grid), the grid's width is that of its own
            # rules: the banner's left edge is no column of it.
            bx0, bx1 = rules_extent(stack, bands, x0, x1) if above else (x0, x1)
            table = _build(page, rules, bands, bx0, bx1, centres, taken)
            if table is not None:
                taken |= table.lines
                tables.append(table)
    tables.sort(key=lambda t: t.bbox[1])
    tables = [t for t in tables if t.lines]
    content = [i for i in range(len(page.lines)) if i not in (ignore or set())]
    for t in tables:
        t.at_top = all(centres[i][0] >= t.bbox[1] for i in content if i not in t.lines)
        t.at_bottom = all(centres[i][0] <= t.bbox[3] for i in content if i not in t.lines)
    return tables


def _outside(stack: list[tuple[float, float, float]], claimed: list[tuple[float, float, float, float]]
             ) -> list[list[tuple[float, float, float]]]:
    """A stack of rules cut where it runs through a table found before (its rules are that table's ruling): the
    runs of rules above, between and below such tables, each a stack of its own."""
    parts: list[list[tuple[float, float, float]]] = [[]]
    for r in stack:
        inside = any(box[1] - 2 <= r[2] <= box[3] + 2 and min(r[1], box[2]) - max(r[0], box[0]) > 0
                     for box in claimed)
        if inside:
            if parts[-1]:
                parts.append([])
        else:
            parts[-1].append(r)
    return [p for p in parts if p]


def _single_rule_extent(page: PageText, x0: float, x1: float, y: float) -> list[float] | None:
    """A lone rule under a header line: the table runs from the line above down through the columnar lines below."""
    above = [ln for ln in page.lines if ln.y1 <= y + 1 and y - ln.y1 < 1.5 * max(ln.size, 6) and ln.x0 >= x0 - 2]
    if not above or len(above[-1].segments(SEG_GAP_EM * above[-1].size)) < 2:
        return None
    top = min(ln.y0 for ln in above) - 1
    bottom = _extend_down(page, x0, y)
    return [top, y, bottom] if bottom > y else None


def _extend_down(page: PageText, x0: float, y: float) -> float:
    """Bottom of the columnar lines running on below ``y`` (a longtable's body continues past its last rule)."""
    bottom = y
    for ln in sorted((ln for ln in page.lines if ln.y0 > y), key=lambda ln: ln.y0):
        limit = (1.2 if bottom == y else 1.8) * max(ln.size, 6)  # a rule sits close above the next row's text
        if ln.y0 - bottom > limit or ln.x0 < x0 - 4:
            break
        if len(ln.segments(SEG_GAP_EM * ln.size)) < 2 and ln.y0 - bottom > 0.6 * max(ln.size, 6):
            # A single-cell line only belongs to the table when it wraps the row just above.
            break
        bottom = ln.y1 + 0.5
    return bottom


def _build(page: PageText, rules: Rules, bands: list[tuple[float, float]], x0: float, x1: float,
           centres: list[tuple[float, float]], taken: set[int]) -> Table | None:
    if not bands:
        return None
    top, bottom = bands[0][0], bands[-1][1]
    idx = [i for i, (cy, cx) in enumerate(centres) if top < cy < bottom and x0 - 2 < cx < x1 + 2 and i not in taken]
    if not idx:
        return None
    height = bottom - top
    cuts = sorted({round(v[0]) for v in _join_vertical(rules.vertical)
                   if x0 + 3 < v[0] < x1 - 3 and min(v[2], bottom) - max(v[1], top) > 0.3 * height})
    cuts = [c for k, c in enumerate(cuts) if k == 0 or c - cuts[k - 1] > 3]
    segs = _segments(page, idx, [float(c) for c in cuts])
    if not segs:
        return None
    found = _columns(segs, [float(c) for c in cuts])
    whole = segs  # before splitting: a header label spanning columns is kept whole for the header
    segs = _split_crossing(page, segs, found)
    seps = [x for x, _, _ in found]
    ncols = len(seps) + 1
    per_band: list[list[list[str]]] = []
    band_segs: list[list[Seg]] = []
    # A grid (ruled columns and a rule under every row) holds one row per band: every line of a band is part of
    # that row, so a cell wrapped over lines ("Bergen Service / Center") stays one cell.
    filled = [[s for s in segs if a < s.y < b] for a, b in bands]
    grid = bool(cuts) and sum(1 for f in filled if f) >= 3
    for in_band in filled:
        if in_band:
            per_band.append(band_rows(in_band, seps, ncols, merge_all=grid))
            band_segs.append(in_band)
    first = band_segs[0] if band_segs else []  # the first band holding text (an empty band above is common)
    rows = [r for br in per_band for r in br]
    # Drop columns empty in every row (ruled frames at the table's edges make some).
    keep = [c for c in range(ncols) if any(r[c] for r in rows)]
    rows = [[r[c] for c in keep] for r in rows]
    if len(keep) < 2 or len(rows) < 2:
        return None
    if len(bands) == 1 and cuts and not any(DIGITS.search(YEAR_OR_DATE.sub("", c)) for r in rows for c in r):
        return None  # one row of ruled cells holding labels: a header whose body was read as aligned figures
    lefts = [min((s.x0 for s in segs if column_of(s.x0, s.x1, seps) == c), default=x0) for c in keep]
    rights = [max((s.x1 for s in segs if column_of(s.x0, s.x1, seps) == c), default=x1) for c in keep]
    n_head = 0
    bold_head = False
    if len(per_band) >= 2 and len(per_band[0]) <= 3 and (
        all(s.bold for s in first)
        or (len(per_band[0]) < sum(len(br) for br in per_band[1:]) and len(bands) <= 4)
        or (not any(DIGITS.search(c) for c in rows[0]) and any(DIGITS.search(c) for r in rows[1:] for c in r))
        or headerish(rows[0])
    ):
        n_head, bold_head = len(per_band[0]), all(s.bold for s in first)
    # A header may go on over further bands: rows with no label and no figures but years and dates
    # ("2024 | 2023" under "Three Months Ended June 30,"). Only whole bands count, so a data row never joins.
    head_bands = 1 if n_head else 0
    while n_head and head_bands < len(per_band) - 1 and len(per_band[head_bands]) <= 2 and (
            all(headerish(r) for r in per_band[head_bands])
            or (all(sg.bold for sg in band_segs[head_bands]) and not any(s.bold for s in band_segs[head_bands + 1])
                and not any(DIGITS.search(YEAR_OR_DATE.sub("", c)) for r in per_band[head_bands] for c in r))):
        n_head += len(per_band[head_bands])
        head_bands += 1
    # A header with nothing over the value columns ("2022" alone in bold over a year's rows) is a group label;
    # the columns' labels may then be set above the body, as for a table with no header at all.
    stub_head = n_head and not any(c for r in rows[:n_head] for c in r[1:])
    if not n_head or stub_head:
        above = header_above(page, idx, segs, seps, x0, x1, taken)
        if above:
            head_segs = _segments(page, above, [])  # the body's column rules do not cut labels set above them
            header = compose_header(_split_crossing(page, head_segs, found), head_segs, seps, keep, segs, [])
            if sum(1 for h in header[1:] if h) >= max(1, (len(keep) - 1) // 2):
                header, body, kept = merge_sign_columns(header, [list(r) for r in rows])
                top = min(page.lines[i].y0 for i in above) - 1
                return Table((x0, top, x1, bottom), clean_cells([header])[0], clean_cells(body), set(idx) | set(above),
                             columns=[lefts[k] for k in kept], labels_above=True, rights=[rights[k] for k in kept])
    if not n_head:
        _, body, kept = merge_sign_columns([""] * len(keep), [list(r) for r in rows])
        return Table((x0, top, x1, bottom), None, clean_cells(body), set(idx), columns=[lefts[k] for k in kept])
    head_segs = [sg for band in band_segs[:head_bands] for sg in band]
    body_segs = [sg for band in band_segs[head_bands:] for sg in band]
    head_y = bands[0][0], max(sg.y for sg in head_segs) + 1
    # A spanning label's rule is narrower than the table. In a grid with ruled columns that is the width of the
    # grid's own rules, not the stack's: a banner's box above the grid may widen the stack, and the full-width rule
    # under the grid's header would read as a span over every column.
    joined = _join_abutting(rules.horizontal)
    width = x1 - x0
    if cuts:
        width = min(width, max((r[1] - r[0] for r in joined if top - 0.5 <= r[2] <= bottom + 0.5
                                and r[0] < x1 and r[1] > x0), default=width))
    spans = [r for r in joined if head_y[0] < r[2] < head_y[1] and r[1] - r[0] < width - 4]
    header = compose_header(head_segs, [sg for sg in whole if head_y[0] < sg.y < head_y[1]], seps, keep, body_segs,
                             spans)
    header, body, kept = merge_sign_columns(header, [list(r) for r in rows[n_head:]])
    return Table((x0, top, x1, bottom), clean_cells([header])[0], clean_cells(body), set(idx),
                 clean_cells(rows[:n_head]), bold_head, [lefts[k] for k in kept], rights=[rights[k] for k in kept])


def same_layout(a: list[float], b: list[float], tol: float = 25.0) -> bool:
    """Two tables' columns (left x of each) line up: a table on the next page continues the open one. Unknown
    layouts (empty lists: a header carried in from another batch) are taken to match."""
    if not a or not b:
        return True
    return len(a) == len(b) and all(abs(x - y) <= tol for x, y in zip(a, b))


def pipe_row(cells: list[str]) -> str:
    return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"
