"""OCR inference runs outside the process-wide pdfium lock: only rasterising the scanned page holds it."""

from __future__ import annotations

import threading
from pathlib import Path

from chunker.config import ConverterConfig
from chunker.convert.pdf_text import PdfTextConverter
from chunker.convert.render import PDFIUM_LOCK, RenderedDocument
from chunker.config import RenderConfig


def _scanned_pdf(path: Path, pages: int = 2) -> str:
    from fpdf import FPDF
    from PIL import Image, ImageDraw

    img = Image.new("RGB", (420, 594), "white")
    ImageDraw.Draw(img).text((30, 60), "Scanned memo text", fill="black")
    img.save(path.with_suffix(".png"))
    pdf = FPDF(format="A4")
    for _ in range(pages):
        pdf.add_page()
        pdf.image(str(path.with_suffix(".png")), x=0, y=0, w=210, h=297)
    pdf.output(str(path))
    return str(path)


class FakeRecogniser:
    """RapidOCR's call protocol (pixels in; rows of [box, text, score] and the timings out). While it "reads",
    another thread renders a page of another document: that must not wait for the OCR to finish."""

    def __init__(self, other: RenderedDocument) -> None:
        self.other = other
        self.locked: list[bool] = []
        self.rendered_meanwhile: list[bool] = []

    def __call__(self, pixels, return_word_box: bool = False):  # noqa: ANN001
        self.locked.append(PDFIUM_LOCK.locked())
        t = threading.Thread(target=self.other.image, args=(len(self.locked),))
        t.start()
        t.join(timeout=20)  # with the lock held by this thread, the render would wait until OCR ends: a deadlock
        self.rendered_meanwhile.append(not t.is_alive())
        h, w = pixels.shape[:2]
        text = ["The pump ships with a hose", "Claims are filed within thirty days"][len(self.locked) - 1]
        return [[[[10, h / 2], [w - 10, h / 2], [w - 10, h / 2 + 30], [10, h / 2 + 30]], text, 0.99]], 0.1


def test_ocr_reads_while_other_threads_render(tmp_path: Path) -> None:
    other = RenderedDocument(_scanned_pdf(tmp_path / "other.pdf"), RenderConfig(max_side_px=200))
    conv = PdfTextConverter(ConverterConfig())
    fake = FakeRecogniser(other)
    conv._ocr._engine = fake  # the loaded RapidOCR object stands here
    md = conv.markdown_for_pages(_scanned_pdf(tmp_path / "scan.pdf"), [1, 2])
    other.close()
    assert fake.locked == [False, False]
    assert fake.rendered_meanwhile == [True, True]
    assert "The pump ships with a hose" in md and "Claims are filed within thirty days" in md
