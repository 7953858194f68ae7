"""Hostile inputs for robustness runs, generated on demand (nothing binary is committed) and the same bytes for the
same seed: broken text layers (lone surrogates, astral characters, control codes), hostile metadata and file names,
broken or missing xref tables, truncated and encrypted files, zero pages, huge and degenerate page boxes, pages
with only an image, a 1,200-page document, non-PDF bytes named ``.pdf``, an empty file, JavaScript actions,
garbage after ``%%EOF``, object streams (one extending another), PDFs under names no pattern matches, and a control
set of normal documents mixed in.

Each file comes with what a correct pipeline must make of it (:class:`Hostile`): the statuses it may end with and,
where one is certain, the problem code. Most PDFs are written object by object by :class:`RawPdf` (so the damage
is exact); encrypted ones by fpdf2.

    python -m chunker.eval.hostile OUT_DIR [SEED]
"""

from __future__ import annotations

import argparse
import os
import random
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

OK = frozenset({"ok"})
FAILED = frozenset({"failed"})
ANY = frozenset({"ok", "partial", "failed"})
WORDS = ("invoice quarterly freight turbine pension council warranty ledger harbour clinic module tariff "
         "parcel voltage audit permit rebate sensor payroll lease grant dosage bridge vendor claim schedule "
         "routing tender compliance storage filter valve budget shipment license metric").split()


@dataclass(frozen=True)
class Hostile:
    name: bytes  # the file name (bytes: it need not be UTF-8)
    case: str  # what is wrong with it
    expect: frozenset[str]  # the statuses a correct pipeline may give it
    code: str = ""  # the problem code it must carry, where one is certain
    control: bool = False  # a normal document: must end ok, with chunks in the index

    @property
    def source(self) -> str:
        """The name as the pipeline sees it (``os.fsdecode``: undecodable bytes as lone surrogates)."""
        return os.fsdecode(self.name)


# ----------------------------------------------------------------------------------------------- raw PDF writer
class RawPdf:
    """A PDF written object by object; :meth:`build` lays out the file and its cross-reference (table, stream or
    none, right or wrong offsets)."""

    def __init__(self) -> None:
        self.objects: list[bytes] = []
        self.root = 1
        self.info: int | None = None

    def add(self, body: bytes | str) -> int:
        self.objects.append(body.encode("latin-1") if isinstance(body, str) else body)
        return len(self.objects)

    def set(self, num: int, body: bytes | str) -> None:
        self.objects[num - 1] = body.encode("latin-1") if isinstance(body, str) else body

    @staticmethod
    def stream(data: bytes, extra: str = "", compress: bool = False) -> bytes:
        if compress:
            data, extra = zlib.compress(data), extra + " /Filter /FlateDecode"
        return b"<< /Length %d %s >>\nstream\n" % (len(data), extra.encode()) + data + b"\nendstream"

    def build(self, xref: str = "table", version: str = "1.4", offset_shift: int = 0) -> bytes:
        root, info = self.root, self.info
        out = bytearray(f"%PDF-{version}\n%\xe2\xe3\xcf\xd3\n".encode("latin-1"))
        offsets = []
        for i, body in enumerate(self.objects, 1):
            offsets.append(len(out))
            out += b"%d 0 obj\n" % i + body + b"\nendobj\n"
        trailer = f"/Size {len(self.objects) + 1} /Root {root} 0 R" + (f" /Info {info} 0 R" if info else "")
        start = len(out)
        if xref == "none":
            out += f"trailer\n<< {trailer} >>\n%%EOF\n".encode()
            return bytes(out)
        if xref == "stream":  # a cross-reference stream (PDF 1.5) as the last object
            n = len(self.objects) + 1
            rows = b"\x00\x00\x00\x00\xff" + b"".join(b"\x01" + o.to_bytes(4, "big") for o in offsets)
            rows += b"\x01" + start.to_bytes(4, "big")
            body = self.stream(rows, f"/Type /XRef /W [1 4 0] /Size {n + 1} /Root {root} 0 R", compress=True)
            out += b"%d 0 obj\n" % n + body + b"\nendobj\n"
            out += f"startxref\n{start}\n%%EOF\n".encode()
            return bytes(out)
        out += f"xref\n0 {len(self.objects) + 1}\n0000000000 65535 f \n".encode()
        for o in offsets:
            out += f"{max(0, o + offset_shift):010d} 00000 n \n".encode()
        out += f"trailer\n<< {trailer} >>\nstartxref\n{start}\n%%EOF\n".encode()
        return bytes(out)


def _esc(text: str) -> str:
    return text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


def _lines(rng: random.Random, n: int, width: int = 78) -> list[str]:
    words = [rng.choice(WORDS) for _ in range(n * 11)]
    out, line = [], ""
    for w in words:
        if len(line) + len(w) + 1 > width:
            out.append(line)
            line = ""
        line = f"{line} {w}".strip()
    return out + ([line] if line else [])


def text_content(lines: list[str], x: float = 72, y: float = 720, size: float = 11) -> bytes:
    body = "".join(f"({_esc(ln)}) Tj T*\n" for ln in lines)
    return f"BT /F1 {size:g} Tf {size * 1.3:g} TL {x:g} {y:g} Td\n{body}ET".encode("latin-1")


def text_pdf(pages: list[bytes], box: str = "0 0 612 792", tounicode: bytes | None = None, info: str | None = None,
             catalog_extra: str = "", page_extra: str = "") -> RawPdf:
    """Pages of raw content streams over Helvetica (with a ToUnicode map when given); nothing is laid out until
    :meth:`RawPdf.build`, so a case can damage the file exactly."""
    pdf = RawPdf()
    catalog = pdf.add("")
    tree = pdf.add("")
    extra = f"/ToUnicode {pdf.add(RawPdf.stream(tounicode))} 0 R" if tounicode else ""
    font = pdf.add(f"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding {extra} >>")
    kids = []
    for content in pages:
        c = pdf.add(RawPdf.stream(content, compress=True))
        kids.append(pdf.add(f"<< /Type /Page /Parent {tree} 0 R /MediaBox [{box}] /Contents {c} 0 R "
                            f"/Resources << /Font << /F1 {font} 0 R >> >> {page_extra} >>"))
    pdf.set(catalog, f"<< /Type /Catalog /Pages {tree} 0 R {catalog_extra} >>")
    pdf.set(tree, f"<< /Type /Pages /Kids [{' '.join(f'{k} 0 R' for k in kids)}] /Count {len(kids)} >>")
    if info is not None:
        pdf.info = pdf.add(info)
    return pdf


def plain(rng: random.Random, pages: int = 2, **kw: str) -> RawPdf:
    heading = f"{rng.choice(WORDS).title()} {rng.choice(WORDS)} report {rng.randrange(10**6)}"
    contents = [text_content([heading if p == 0 else f"Section {p + 1}", *_lines(rng, 24)]) for p in range(pages)]
    return text_pdf(contents, **kw)


# ------------------------------------------------------------------------------------------------------ the cases
# UTF-16BE targets of a ToUnicode map: what broken producers write into text layers.
EXOTIC = ("D835", "DC00", "D835DC00", "D83DDE00", "D840DC0B", "FFFF", "FFFE", "0000", "001B", "0007", "05D0",
          "0627", "0301", "FEFF", "00660069", "DC00D835", "0041004200430044004500460047")


def surrogate_text(rng: random.Random, k: int) -> bytes:
    targets = rng.sample(EXOTIC, k)
    cmap = "\n".join(f"<{0x80 + i:02X}> <{t}>" for i, t in enumerate(targets))
    stream = (f"/CIDInit /ProcSet findresource begin 12 dict begin begincmap /CIDSystemInfo << /Registry (Adobe) "
              f"/Ordering (UCS) /Supplement 0 >> def /CMapName /Hostile-UCS def /CMapType 2 def\n1 begincodespacerange "
              f"<00> <FF> endcodespacerange\n{len(targets)} beginbfchar\n{cmap}\nendbfchar\nendcmap CMapName currentdict "
              f"/CMap defineresource pop end end").encode()
    lines = _lines(rng, 10)
    odd = "".join(f"<{0x80 + i:02X}>" for i in range(len(targets)))
    body = "".join(f"({_esc(ln)}) Tj T*\n{odd} Tj ( {rng.choice(WORDS)}) Tj T*\n" for ln in lines)
    content = f"BT /F1 11 Tf 14 TL 72 720 Td\n{body}ET".encode("latin-1")
    return text_pdf([content], tounicode=stream).build()


def hostile_info(rng: random.Random) -> str:
    title = "<FEFF" + "".join(rng.sample(["D800", "DC01", "D835DC00", "0041", "FFFF", "0000", "D83DDE00"], 5)) + ">"
    junk = "".join(f"\\{rng.randrange(128, 256):03o}" for _ in range(40))
    return (f"<< /Title {title} /Author ({junk}) /Subject <FEFFDBFF> /Keywords ({'x' * rng.randrange(1000, 60000)}) "
            f"/CreationDate (D:99999999999999+99'99') /Producer <FEFF> >>")


def image_only(rng: random.Random, box: str = "0 0 612 792") -> bytes:
    pdf = RawPdf()
    side = 64
    pixels = bytes(rng.randrange(256) for _ in range(side * side))
    img = pdf.add(RawPdf.stream(pixels, f"/Type /XObject /Subtype /Image /Width {side} /Height {side} "
                                        "/ColorSpace /DeviceGray /BitsPerComponent 8", compress=True))
    w, h = (float(v) for v in box.split()[2:])
    content = pdf.add(RawPdf.stream(f"q {w:g} 0 0 {h:g} 0 0 cm /Im0 Do Q".encode()))
    page = pdf.add(f"<< /Type /Page /Parent 5 0 R /MediaBox [{box}] /Contents {content} 0 R "
                   f"/Resources << /XObject << /Im0 {img} 0 R >> >> >>")
    pdf.root = pdf.add("<< /Type /Catalog /Pages 5 0 R >>")
    pdf.add(f"<< /Type /Pages /Kids [{page} 0 R] /Count 1 >>")
    return pdf.build()


def long_document(rng: random.Random, pages: int = 1200) -> bytes:
    contents = [f"BT /F1 6 Tf 4 40 Td (p{p + 1} {rng.choice(WORDS)} {rng.choice(WORDS)}) Tj ET".encode()
                for p in range(pages)]
    return text_pdf(contents, box="0 0 72 72").build()


def object_streams(rng: random.Random, nested: bool) -> bytes:
    """Catalog, page tree, page and font inside object streams (the second /Extends the first), an xref stream."""
    content = zlib.compress(text_content([f"Packed {rng.choice(WORDS)} {rng.randrange(10**6)}", *_lines(rng, 12)]))
    objs = {1: "<< /Type /Catalog /Pages 2 0 R >>", 2: "<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
            3: "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 5 0 R "
               "/Resources << /Font << /F1 4 0 R >> >> >>",
            4: "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>"}
    packs = [[1, 2], [3, 4]] if nested else [[1, 2, 3, 4]]
    out = bytearray(b"%PDF-1.5\n%\xe2\xe3\xcf\xd3\n")
    where: dict[int, tuple[int, int, int]] = {}  # obj -> (type, field2, field3)
    where[5] = (1, len(out), 0)
    out += b"5 0 obj\n<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(content) + content + b"\nendstream\nendobj\n"
    for k, pack in enumerate(packs):
        num = 6 + k
        bodies = [objs[o].encode() for o in pack]
        header, pos = [], 0
        for o, b in zip(pack, bodies):
            header.append(f"{o} {pos}")
            pos += len(b) + 1
        head = (" ".join(header) + "\n").encode()
        data = head + b"\n".join(bodies) + b"\n"
        extends = f" /Extends {num - 1} 0 R" if k else ""
        for i, o in enumerate(pack):
            where[o] = (2, num, i)
        where[num] = (1, len(out), 0)
        body = RawPdf.stream(data, f"/Type /ObjStm /N {len(pack)} /First {len(head)}{extends}", compress=True)
        out += b"%d 0 obj\n" % num + body + b"\nendobj\n"
    xref_num = 6 + len(packs)
    where[xref_num] = (1, len(out), 0)
    rows = b"\x00\x00\x00\x00\x00\xff\xff" + b"".join(
        bytes([where[o][0]]) + where[o][1].to_bytes(4, "big") + where[o][2].to_bytes(2, "big")
        for o in range(1, xref_num + 1))
    xref = RawPdf.stream(rows, f"/Type /XRef /W [1 4 2] /Size {xref_num + 1} /Root 1 0 R", compress=True)
    start = len(out)
    out += b"%d 0 obj\n" % xref_num + xref + b"\nendobj\n" + f"startxref\n{start}\n%%EOF\n".encode()
    return bytes(out)


def encrypted(rng: random.Random, method: str, user: bool) -> bytes:
    from datetime import datetime, timezone

    from fpdf import FPDF
    from fpdf.enums import EncryptionMethod

    pdf = FPDF()
    pdf.set_creation_date(datetime(2024, 1, 1, tzinfo=timezone.utc))
    pdf.add_page()
    pdf.set_font("Helvetica", size=11)
    pdf.multi_cell(0, 6, " ".join(_lines(rng, 8)))
    pdf.set_encryption(owner_password="owner-" + rng.choice(WORDS), user_password="user" if user else None,
                       encryption_method=getattr(EncryptionMethod, method))
    # Salts and IVs from the seed (fpdf2 draws them from os.urandom at output), so the bytes repeat.
    pdf._security_handler.get_random_bytes = rng.randbytes  # noqa: SLF001
    return bytes(pdf.output())


def _cases(rng: random.Random) -> list[tuple[str, str, Callable[[], bytes], frozenset[str], str]]:
    """(file name, case, bytes factory, expected statuses, expected code) for every hostile file."""
    r = rng
    cases: list[tuple[str, str, Callable[[], bytes], frozenset[str], str]] = []

    def add(name: str, case: str, make: Callable[[], bytes], expect: frozenset[str] = ANY, code: str = "") -> None:
        cases.append((name, case, make, expect, code))

    for i in range(60):
        add(f"surrogates-{i:02d}.pdf", "text layer: lone surrogates, astral, control codes",
            lambda k=1 + i % 8: surrogate_text(r, k), OK)
    for i in range(20):
        add(f"metadata-{i:02d}.pdf", "metadata: lone surrogates, bad dates, 60 KB keywords",
            lambda: plain(r, 1, info=hostile_info(r)).build(), OK)
    for i in range(40):
        shift = (-7, 13, 1000, -10**6, 10**9)[i % 5]
        add(f"xref-offsets-{i:02d}.pdf", "xref table with wrong offsets", lambda s=shift: plain(r, 2).build(offset_shift=s))
    for i in range(10):
        add(f"xref-missing-{i:02d}.pdf", "no xref table at all", lambda: plain(r, 2).build(xref="none"))
    for i in range(10):
        add(f"startxref-beyond-{i:02d}.pdf", "startxref past the end",
            lambda: plain(r, 1).build().replace(b"startxref\n", b"startxref\n99999999") )
    for i in range(32):
        add(f"truncated-{i:02d}.pdf", "truncated", lambda f=(i % 8 + 1) / 10: (lambda b: b[: max(9, int(len(b) * f))])(
            plain(r, 3).build()))
    for method in ("RC4", "AES_128", "AES_256"):
        for i in range(3):
            add(f"encrypted-{method.lower()}-{i}.pdf", "encrypted: needs a user password",
                lambda m=method: encrypted(r, m, True), FAILED, "encrypted")
        add(f"owner-only-{method.lower()}.pdf", "encrypted with an owner password only (opens without one)",
            lambda m=method: encrypted(r, m, False), OK)
    for i in range(4):
        add(f"zero-pages-{i}.pdf", "zero pages", lambda: text_pdf([]).build(), FAILED, "zero_pages")
    for i, box in enumerate(("0 0 14400 14400", "0 0 14400 72", "-7200 -7200 7200 7200", "0 0 200000 200000")):
        add(f"huge-page-{i}.pdf", "huge page box", lambda b=box: plain(r, 1, box=b).build(), OK)
        add(f"huge-image-page-{i}.pdf", "huge page box, image only", lambda b=box: image_only(r, b))
    add("huge-userunit.pdf", "UserUnit 75 on a 14400 pt page",
        lambda: plain(r, 1, box="0 0 14400 14400", page_extra="/UserUnit 75").build(), OK)
    for i, box in enumerate(("0 0 1 1", "0 0 0 0", "612 792 0 0", "0 0 -5 -5", "0 0 1e9 1e9")):
        add(f"odd-box-{i}.pdf", "degenerate page box", lambda b=box: plain(r, 1, box=b).build())
    for i in range(6):
        add(f"image-only-{i}.pdf", "image only, no text layer", lambda: image_only(r))
    add("long-1200-pages.pdf", "1,200 tiny pages", lambda: long_document(r), OK)
    for i, make in enumerate((lambda: r.randbytes(3000), lambda: b"\x89PNG\r\n\x1a\n" + r.randbytes(200),
                              lambda: b"<html><body>not a pdf</body></html>", lambda: b"PK\x03\x04" + r.randbytes(300),
                              lambda: b"%!PS-Adobe-3.0\n" + r.randbytes(100), lambda: b" " * 500,
                              lambda: b"\x00" * 2048 + b"%PDF-1.4\n" + plain(r, 1).build())):
        add(f"not-a-pdf-{i}.pdf", "not PDF bytes named .pdf", make, FAILED, "not_pdf")
    add("empty.pdf", "empty file", lambda: b"", FAILED, "empty")
    js = ("/OpenAction << /S /JavaScript /JS (app.alert\\('x'\\); while\\(true\\){}) >> "
          "/AA << /WC << /S /Launch /F (calc.exe) >> >> /Names << /JavaScript << /Names [(a) << /S /JavaScript /JS (1) >>] >> >>")
    for i in range(8):
        add(f"javascript-{i}.pdf", "JavaScript and Launch actions", lambda: plain(r, 1, catalog_extra=js).build(), OK)
    for i in range(10):
        add(f"garbage-after-eof-{i}.pdf", "garbage after %%EOF",
            lambda n=10 ** (i % 4 + 2): plain(r, 1).build() + r.randbytes(n), OK)
    for i in range(4):
        add(f"object-streams-{i}.pdf", "object streams and an xref stream" + (", one extending another" if i % 2 else ""),
            lambda n=bool(i % 2): object_streams(r, n), OK)
    for i in range(3):
        add(f"xref-stream-{i}.pdf", "cross-reference stream", lambda: plain(r, 1).build(xref="stream", version="1.5"), OK)
    for i, ops in enumerate(("BT /F1 1e300 Tf 1 0 0 1 nan inf Tm (x) Tj", "BT BT BT ( unbalanced", "q q q q Q 9 9 9 9 9 re f",
                             "BT /F9 12 Tf (no such font) Tj ET", "BT /F1 12 Tf 72 700 Td <" + "41" * 30000 + "> Tj ET")):
        add(f"content-garbage-{i}.pdf", "broken content stream", lambda o=ops: text_pdf([o.encode()]).build())
    add("page-tree-loop.pdf", "page tree whose Kids hold itself",
        lambda: plain(r, 1).build().replace(b"/Kids [", b"/Kids [2 0 R ", 1))
    add("nested-arrays.pdf", "arrays nested 300 deep", lambda: plain(r, 1, catalog_extra="/X " + "[" * 300 + "]" * 300).build())
    add("wrong-length.pdf", "stream /Length wrong", lambda: plain(r, 1).build().replace(b"/Length ", b"/Length 9", 1))
    add("rotate-45.pdf", "invalid /Rotate", lambda: plain(r, 1, page_extra="/Rotate 45").build())
    add("one-long-word.pdf", "30,000 characters without a space",
        lambda: text_pdf([text_content(["".join(r.choice("abcdefgh") for _ in range(30000))])]).build(), OK)
    add("blank-pages.pdf", "40 blank pages", lambda: text_pdf([b""] * 40).build())
    add("version-9.9.pdf", "header %PDF-9.9", lambda: plain(r, 1).build(version="9.9"), OK)
    add("header-after-junk.pdf", "400 bytes of junk before %PDF", lambda: r.randbytes(400).replace(b"%PDF", b"") +
        plain(r, 1).build(), OK)
    return cases


# Names a filesystem allows and a pipeline trips on: bytes that are not UTF-8, controls, RTL, very long, wildcards.
ODD_NAMES = (b"odd-\xff\xfe-latin1-\xe9t\xe9.pdf", b"new\nline.pdf", b"tab\there.pdf", "emoji-\U0001F600.pdf".encode(),
             "rtl-\u05e9\u05dc\u05d5\u05dd.pdf".encode(), "combining-e\u0301.pdf".encode(), b"-leading-dash.pdf",
             b"sp ace  s .pdf", b"percent-%41%ZZ.pdf", b"hash#frag.pdf", b"question?.pdf", b"star*[x].pdf",
             b"back\\slash.pdf", b"quote'\"s.pdf", b"x" * 240 + b".pdf")
# PDFs under names no default pattern matches (taken by their %PDF bytes), and files that are no PDF at all.
UNMATCHED_PDF = (b"scan-0001.dat", b"report-no-extension", b"statement.PDF.bak", b"notes.txt", b"archive.pdf~")
UNMATCHED_OTHER = (b"README.md", b"data.dat", b"thumbs.db", b".hidden")


def generate(out: Path, seed: int = 0, controls: int = 20) -> list[Hostile]:
    """Write every hostile file (and ``controls`` normal ones) into ``out``; returns them with their expectations."""
    rng = random.Random(seed)
    out.mkdir(parents=True, exist_ok=True)
    made: list[Hostile] = []

    def write(name: bytes, data: bytes, spec: Hostile) -> None:
        with open(os.path.join(os.fsencode(out), name), "wb") as fh:
            fh.write(data)
        made.append(spec)

    control_bytes = []
    for i in range(controls):
        name = f"control-{i:02d}.pdf".encode()
        data = plain(rng, 2 + i % 3).build(xref="stream" if i % 4 == 3 else "table", version="1.5")
        control_bytes.append(data)
        write(name, data, Hostile(name, "control: a normal document", OK, control=True))
    write(b"control-00-copy.pdf", control_bytes[0],
          Hostile(b"control-00-copy.pdf", "control: the same bytes as another file", OK, control=True))
    for name, case, make, expect, code in _cases(rng):
        write(name.encode(), make(), Hostile(name.encode(), case, expect, code))
    for name in ODD_NAMES:
        write(name, plain(rng, 1).build(), Hostile(name, "odd file name", OK, control=True))
    for name in UNMATCHED_PDF:
        write(name, plain(rng, 1).build(), Hostile(name, "a PDF under a name no pattern matches", OK, control=True))
    for name in UNMATCHED_OTHER:
        write(name, b"# not a document\n" + rng.randbytes(64), Hostile(name, "not a PDF, name matches no pattern",
                                                                      FAILED, "not_matched"))
    return made


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m chunker.eval.hostile",
                                description="Write the hostile robustness files and the control documents into OUT_DIR.")
    p.add_argument("out_dir", metavar="OUT_DIR", help="folder to write the files into (made if missing)")
    p.add_argument("seed", metavar="SEED", nargs="?", type=int, default=0,
                   help="the files are a pure function of the seed (default 0)")
    args = p.parse_args(argv)
    made = generate(Path(args.out_dir), args.seed)
    print(f"{len(made)} files in {args.out_dir} ({sum(h.control for h in made)} that must end ok and indexed)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
