"""Normalising images and office files to PDF, intake over file:// URIs, and the streamed listing."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from chunker.config import IntakeConfig, load_config
from chunker.intake.inputs import InputFile, iter_inputs
from chunker.intake.prepare import file_digest, prepare
from chunker.intake.normalize import NormalizeError, kind_of, soffice_path, to_pdf


def _png(path: Path, text: str = "Receipt total 42 EUR") -> Path:
    from PIL import Image, ImageDraw

    im = Image.new("RGBA", (400, 200), "white")
    ImageDraw.Draw(im).text((10, 10), text, fill="black")
    im.save(path)
    return path


def test_kinds():
    assert [kind_of(p) for p in ["a.PDF", "b.JPG", "c.tiff", "d.docx", "e.XLSX", "s3://b/k.pptx?v=1", "f"]] == \
        ["pdf", "image", "image", "office", "office", "office", "pdf"]


def test_image_and_multiframe_tiff_become_pdfs(tmp_path):
    import pypdfium2 as pdfium
    from PIL import Image

    png = to_pdf(_png(tmp_path / "scan.png"), tmp_path)
    assert len(pdfium.PdfDocument(str(png))) == 1
    frames = [Image.new("L", (100, 100), v) for v in (0, 128, 255)]
    frames[0].save(tmp_path / "multi.tiff", save_all=True, append_images=frames[1:])
    assert len(pdfium.PdfDocument(str(to_pdf(tmp_path / "multi.tiff", tmp_path)))) == 3
    (tmp_path / "broken.jpg").write_bytes(b"not a jpeg")
    with pytest.raises(NormalizeError, match="unreadable image"):
        to_pdf(tmp_path / "broken.jpg", tmp_path)


def test_doc_id_is_the_hash_of_the_original(tmp_path):
    src = _png(tmp_path / "scan.png")
    work = tmp_path / "work"
    work.mkdir()
    rec, pdf = prepare(InputFile(f"file://{src}", "scan.png"), IntakeConfig(), work)
    assert rec.status == "ok" and rec.num_pages == 1 and pdf.endswith(".pdf")
    assert rec.doc_id == file_digest(str(src))[0] and rec.source_uri == str(src)
    # Skipped right after hashing: no normalising for a document the ledger already has.
    rec2, pdf2 = prepare(InputFile(str(src), "scan.png"), IntakeConfig(), work, skip=lambda d: d == rec.doc_id)
    assert (rec2.status, pdf2, rec2.doc_id) == ("skipped", "", rec.doc_id)


def _docx(path: Path) -> Path:
    """A minimal valid DOCX written by hand (no python-docx needed)."""
    import zipfile

    parts = {
        "[Content_Types].xml": '<?xml version="1.0"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/'
        'content-types"><Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships'
        '+xml"/><Default Extension="xml" ContentType="application/xml"/><Override PartName="/word/document.xml" '
        'ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/></Types>',
        "_rels/.rels": '<?xml version="1.0"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/'
        'relationships"><Relationship Id="r1" Type="http://schemas.openxmlformats.org/officeDocument/2006/'
        'relationships/officeDocument" Target="word/document.xml"/></Relationships>',
        "word/document.xml": '<?xml version="1.0"?><w:document xmlns:w="http://schemas.openxmlformats.org/'
        'wordprocessingml/2006/main"><w:body><w:p><w:r><w:t>Warranty claims are due within 30 days.</w:t></w:r>'
        '</w:p></w:body></w:document>',
    }
    with zipfile.ZipFile(path, "w") as z:
        for name, body in parts.items():
            z.writestr(name, body)
    return path


@pytest.mark.slow
def test_docx_through_libreoffice(tmp_path):
    if soffice_path() is None:
        pytest.skip("LibreOffice (soffice) not installed: apt-get install libreoffice-writer-nogui")
    src = _docx(tmp_path / "policy.docx")
    rec, pdf = prepare(InputFile(str(src), "policy.docx"), IntakeConfig(), tmp_path)
    assert rec.status == "ok", rec.error
    assert rec.doc_id == file_digest(str(src))[0]
    import pypdfium2 as pdfium

    text = pdfium.PdfDocument(pdf)[0].get_textpage().get_text_range()
    assert "Warranty claims" in text


def test_office_without_libreoffice_fails_with_a_reason(tmp_path, monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    src = _docx(tmp_path / "policy.docx")
    rec, pdf = prepare(InputFile(str(src), "policy.docx"), IntakeConfig(), tmp_path)
    assert rec.status == "failed" and "LibreOffice not installed" in rec.error and pdf == ""


def test_uris_globs_and_case_insensitive_patterns(tmp_path):
    (tmp_path / "a").mkdir()
    _png(tmp_path / "a" / "X.PNG")
    (tmp_path / "a" / "doc.PDF").write_bytes(b"%PDF-1.4")
    (tmp_path / "a" / "notes.md").write_text("skip me")
    cfg = IntakeConfig()
    got = [(f.path, f.source) for f in iter_inputs(f"file://{tmp_path}", cfg)]
    assert got == [(str(tmp_path / "a" / "X.PNG"), "a/X.PNG"), (str(tmp_path / "a" / "doc.PDF"), "a/doc.PDF")]
    assert [f.source for f in iter_inputs(str(tmp_path / "**" / "*.PDF"), cfg)] == ["a/doc.PDF"]


def test_listing_is_written_in_bounded_parts(tmp_path):
    from chunker.run.layout import RunStore
    from chunker.run.listing import manifest_rows, write_listing

    for i in range(7):
        (tmp_path / "in").mkdir(exist_ok=True)
        (tmp_path / "in" / f"d{i}.pdf").write_bytes(b"%PDF")
    cfg = load_config(None, ["intake.listing_block=3"])
    parts = write_listing(str(tmp_path / "in"), cfg, RunStore(str(tmp_path / "out")))
    lines = [ln for p in parts for ln in Path(p).read_text().splitlines()]
    assert len(parts) == 3 and len(lines) == 7
    assert manifest_rows({"text": lines[0]}, "") == [{"path": str(tmp_path / "in" / "d0.pdf"), "source": "d0.pdf",
                                                      "error": "", "unmatched": False}]
    assert manifest_rows({"text": "  "}, "") == []
    bad = manifest_rows({"text": json.dumps({"nopath": 1})}, "")
    assert bad[0]["path"] == "" and "no 'path'" in bad[0]["error"]
    assert manifest_rows({"text": "rel/x.pdf"}, "/base")[0]["path"] == "/base/rel/x.pdf"
