import io
from concurrent.futures import ThreadPoolExecutor

from fpdf import FPDF

from chunker.config import RenderConfig
from chunker.convert.render import RenderedDocument, render_scale


def _pdf(tmp_path, pages=20):
    pdf = FPDF(format="A4")
    pdf.set_font("Helvetica", size=12)
    for i in range(pages):
        pdf.add_page()
        pdf.cell(0, 10, f"page {i + 1}")
    path = tmp_path / "a.pdf"
    pdf.output(str(path))
    return str(path)


def test_scale_is_200_dpi_capped_at_the_longest_side():
    cfg = RenderConfig()
    assert render_scale(200, 100, cfg) == 200 / 72  # small page: plain 200 DPI
    a4 = render_scale(595, 842, cfg)
    assert round(842 * a4) == 1568  # A4 at 200 DPI would be 2339 px: capped directly, not shrunk later


def test_pages_render_capped_and_cache_stays_bounded(tmp_path):
    doc = RenderedDocument(_pdf(tmp_path), RenderConfig(), max_cached=4)
    for p in range(1, 21):
        w, h = doc.size(p)
        assert max(w, h) <= 1568 and doc.image(p)[:2] == b"\xff\xd8"  # JPEG
    assert len(doc.pages) == 4, "only the last pages stay in memory"
    doc.close()


def test_rendering_from_threads_is_safe_and_deterministic(tmp_path):
    path = _pdf(tmp_path, 8)
    doc = RenderedDocument(path, RenderConfig(max_side_px=400), max_cached=2)
    with ThreadPoolExecutor(4) as pool:
        first = list(pool.map(doc.image, [1, 2, 3, 4, 5, 6, 7, 8] * 2))
    assert first[:8] == first[8:]
    doc.close()


def test_only_pdfium_calls_hold_the_pdfium_lock(tmp_path, monkeypatch):
    # pdfium is not thread-safe, PIL is: the JPEG encode (as long as the rasterising) runs outside the lock, so
    # concurrent chains of one actor render in parallel up to pdfium itself.
    import pypdfium2
    from PIL import Image

    from chunker.convert.render import PDFIUM_LOCK

    seen: dict[str, list[bool]] = {"render": [], "save": []}
    real_render, real_save = pypdfium2.PdfPage.render, Image.Image.save

    def render(self, *a, **kw):
        seen["render"].append(PDFIUM_LOCK.locked())
        return real_render(self, *a, **kw)

    def save(self, *a, **kw):
        seen["save"].append(PDFIUM_LOCK.locked())
        return real_save(self, *a, **kw)

    monkeypatch.setattr(pypdfium2.PdfPage, "render", render)
    monkeypatch.setattr(Image.Image, "save", save)
    for fmt in ("jpeg", "png"):
        doc = RenderedDocument(_pdf(tmp_path, 3), RenderConfig(max_side_px=300, image_format=fmt))
        data = [doc.image(p) for p in (1, 2, 3)]
        doc.close()
        assert data[0].startswith(b"\xff\xd8" if fmt == "jpeg" else b"\x89PNG")
        with Image.open(io.BytesIO(data[0])) as im:
            assert max(im.size) == 300 and im.getpixel((5, 5))[:3] == (255, 255, 255)
    assert seen["render"] == [True] * 6
    assert seen["save"] == [False] * 6
