"""A generated balance sheet whose text reports a font size fifty times what the page shows, as some filings printed
from HTML do: each run is set at 400-odd points and drawn through a 0.02 text matrix (``Tm``) or a 0.02
transformation (``cm``), so its glyphs stand 8 points tall and pdfium reports 400. Written by hand (fpdf2 has no
scaled text): a minimal PDF with the Helvetica core font, fixed bytes every time. Also a sales table drawn glyph by
glyph (``write_glyphs``), each glyph a text object of its own."""

from __future__ import annotations

from pathlib import Path

SCALE = 0.02
HEIGHT = 800
# (x, y from the top, size in points as shown, text)
BALANCE_SHEET = [
    (230, 60, 9, "CONSOLIDATED BALANCE SHEETS"),
    (220, 74, 8, "(in thousands, except share and per share data)"),
    (480, 100, 7, "As of December 31,"),
    (470, 114, 7, "2017"),
    (540, 114, 7, "2016"),
    (40, 130, 8, "Current assets:"),
    (55, 144, 8, "Cash and cash equivalents"), (470, 144, 8, "2,822,795"), (540, 144, 8, "1,467,576"),
    (55, 158, 8, "Other current assets"), (470, 158, 8, "536,245"), (540, 158, 8, "260,202"),
    (55, 172, 8, "Total current assets"), (470, 172, 8, "7,669,974"), (540, 172, 8, "5,720,291"),
    (40, 190, 8, "Property and equipment, net"), (470, 190, 8, "319,404"), (540, 190, 8, "250,395"),
    (40, 204, 8, "Total assets"), (470, 204, 8, "19,012,742"), (540, 204, 8, "13,586,610"),
]


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


def write_scaled(path: Path, items: list[tuple[float, float, float, str]] = BALANCE_SHEET, how: str = "tm",
                 scale: float = SCALE) -> Path:
    """``how``: "tm" scales through the text matrix, "cm" through the graphics state; pdfium reports 400-odd for
    both. ``scale`` 9 sets 9-point text at 1 point scaled up nine times, as Verizon's 10-Ks do: pdfium reports
    1.0."""
    ops = []
    for x, y, size, text in items:
        tf = f"/F1 {size / scale:.4g} Tf"
        if how == "tm":
            ops.append(f"BT {tf} {scale} 0 0 {scale} {x} {HEIGHT - y} Tm ({_escape(text)}) Tj ET")
        else:
            ops.append(f"q {scale} 0 0 {scale} {x} {HEIGHT - y} cm BT {tf} 0 0 Td ({_escape(text)}) Tj ET Q")
    return _write(path, ops)


# A sales table as some filings print it (JOHNSON_JOHNSON_2022_10K's supplementary sales pages): every glyph a
# text object of its own, under a text matrix scaled to 0.675, so pdfium breaks the line after each glyph.
SALES = [
    (40, 60, 9, "Pulmonary Hypertension"),
    (250, 80, 9, "2022"), (320, 80, 9, "2021"), (390, 80, 9, "% Change"),
    (40, 96, 9, "U.S."), (250, 96, 9, "2,346"), (320, 96, 9, "2,365"), (390, 96, 9, "(0.8)"),
    (40, 110, 9, "International"), (250, 110, 9, "1,071"), (320, 110, 9, "1,085"), (390, 110, 9, "(1.3)"),
    (40, 124, 9, "Worldwide"), (250, 124, 9, "3,417"), (320, 124, 9, "3,450"), (390, 124, 9, "(1.0)"),
]
GLYPH_SCALE = 0.675
# Helvetica's advance widths (per 1,000 units of the font size) of the characters SALES uses.
_ADVANCE = {**dict.fromkeys("0123456789", 556), " ": 278, ",": 278, ".": 278, "(": 333, ")": 333, "%": 889,
            "C": 722, "H": 722, "I": 278, "P": 667, "S": 667, "U": 722, "W": 944, "a": 556, "d": 556, "e": 556,
            "g": 556, "h": 556, "i": 222, "l": 222, "m": 833, "n": 556, "o": 556, "p": 556, "r": 333, "s": 500,
            "t": 278, "u": 556, "w": 722, "y": 500}


def write_glyphs(path: Path, items: list[tuple[float, float, float, str]] = SALES) -> Path:
    """Each item's text drawn glyph by glyph, each glyph in its own ``BT ... ET`` under a scaled text matrix,
    placed at Helvetica's advance (a space is an advance, not a glyph)."""
    ops = []
    for x, y, size, text in items:
        tf = f"/F1 {size / GLYPH_SCALE:.2f} Tf"
        for ch in text:
            if ch != " ":
                ops.append(f"BT {tf} {GLYPH_SCALE} 0 0 {GLYPH_SCALE} {x:.3f} {HEIGHT - y} Tm ({_escape(ch)}) Tj ET")
            x += _ADVANCE[ch] / 1000 * size
    return _write(path, ops)


def _write(path: Path, ops: list[str]) -> Path:
    """A one-page PDF of the content-stream operators ``ops`` with Helvetica as /F1."""
    content = "\n".join(ops).encode()
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 %d] /Resources << /Font << /F1 4 0 R >> >> "
        b"/Contents 5 0 R >>" % HEIGHT,
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        b"<< /Length %d >>\nstream\n" % len(content) + content + b"\nendstream",
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    path.write_bytes(bytes(out))
    return path
