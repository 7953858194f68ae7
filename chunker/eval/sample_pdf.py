"""Drawing helpers for :mod:`chunker.eval.samples`: an fpdf2 page with running header/footer, and Pillow images.

Only fpdf2's core fonts are used (no TTF files), so samples build on a bare machine.
"""

from __future__ import annotations

from datetime import datetime, timezone

from fpdf import FPDF
from PIL import Image, ImageDraw, ImageFont

# Fixed so the PDF's metadata, and therefore its bytes (and doc_id), never change between runs.
CREATED = datetime(2024, 1, 1, tzinfo=timezone.utc)

_SIZES = {1: 20, 2: 15, 3: 12}  # title, section, subsection; body text is 10 pt


class SamplePdf(FPDF):
    """A4 page with an optional running header and footer, and the fonts every sample uses."""

    def __init__(self, header_text: str = "", footer_text: str = "") -> None:
        super().__init__(format="A4", unit="mm")
        # cp1252 lets the core fonts carry the em dash, the bullet and the middle dot; pdfium maps them back to Unicode.
        self.core_fonts_encoding = "windows-1252"
        self.set_creation_date(CREATED)
        self.set_producer("chunker.eval.samples")
        self.set_margins(20, 25, 20)
        self.set_auto_page_break(True, margin=22)
        self.header_text = header_text
        self.footer_text = footer_text
        self.heading_pages: dict[str, int] = {}

    def header(self) -> None:
        if self.header_text:
            self.set_font("Helvetica", "", 8)
            self.set_xy(20, 10)
            self.cell(0, 5, self.header_text, align="L")
            self.line(20, 16, 190, 16)
            self.set_y(25)

    def footer(self) -> None:
        if self.footer_text:
            self.set_font("Helvetica", "", 8)
            self.set_y(-15)
            self.cell(85, 5, self.footer_text, align="L")
            self.cell(0, 5, f"Page {self.page_no()} of {{nb}}", align="R")

    def heading(self, text: str, level: int) -> None:
        self.set_font("Helvetica", "B", _SIZES[level])
        self.ln(3 if level > 1 else 0)
        self.multi_cell(0, _SIZES[level] * 0.5, text, new_x="LMARGIN", new_y="NEXT")
        self.ln(2)
        self.heading_pages[text] = self.page_no()

    def para(self, text: str, style: str = "", size: float = 10) -> None:
        self.set_font("Helvetica", style, size)
        self.multi_cell(0, 5, text, new_x="LMARGIN", new_y="NEXT")
        self.ln(2)

    def items(self, texts: tuple[str, ...] | list[str], numbered: bool = False, start: int = 1) -> None:
        self.set_font("Helvetica", "", 10)
        for i, text in enumerate(texts, start):
            self.set_x(24)
            self.cell(7, 5, f"{i}." if numbered else "•")
            self.multi_cell(0, 5, text, new_x="LMARGIN", new_y="NEXT")
            self.ln(1)
        self.ln(1)

    def table(self, headers: tuple[str, ...], rows: tuple[tuple[str, ...], ...], widths: tuple[float, ...],
              repeat_header: bool) -> list[int]:
        """Ruled table; returns the page of each body row. Breaks pages itself so a row is never split."""
        pages: list[int] = []

        def head() -> None:
            self.set_font("Helvetica", "B", 10)
            self.set_fill_color(225, 225, 225)
            for h, w in zip(headers, widths):
                self.cell(w, 7, h, border=1, fill=True)
            self.ln(7)

        head()
        for row in rows:
            if self.get_y() + 7 > self.page_break_trigger:
                self.add_page()
                if repeat_header:
                    head()
            self.set_font("Helvetica", "", 10)
            for cell, w in zip(row, widths):
                self.cell(w, 7, cell, border=1)
            self.ln(7)
            pages.append(self.page_no())
        self.ln(3)
        return pages


def flow_diagram() -> Image.Image:
    """Four boxes joined by arrows: the figure a converter must describe and caption."""
    img = Image.new("RGB", (900, 260), "white")
    draw = ImageDraw.Draw(img)
    font = ImageFont.load_default(size=24)
    labels = ("Suction inlet", "Impeller", "Volute", "Discharge")
    for i, label in enumerate(labels):
        x0 = 20 + i * 225
        draw.rectangle((x0, 80, x0 + 170, 180), outline="black", width=4, fill=(220, 235, 250))
        w = draw.textlength(label, font=font)
        draw.text((x0 + 85 - w / 2, 116), label, fill="black", font=font)
        if i < len(labels) - 1:
            draw.line((x0 + 172, 130, x0 + 220, 130), fill="black", width=4)
            draw.polygon(((x0 + 222, 130), (x0 + 208, 120), (x0 + 208, 140)), fill="black")
    return img


def scan_image(lines: tuple[str, ...]) -> Image.Image:
    """A 'scanned' notice: text drawn as pixels, large and clean so OCR is fast and reliable."""
    img = Image.new("L", (880, 420), 255)
    draw = ImageDraw.Draw(img)
    for i, line in enumerate(lines):
        font = ImageFont.load_default(size=34 if i == 0 else 28)
        draw.text((40, 50 + i * 85), line, fill=0, font=font)
    return img
