"""Sample documents with hard structure, generated on demand, and the facts a correct conversion must recover.

No binary is committed: :func:`generate_samples` writes the PDFs with fpdf2's core fonts (no TTF files, so it runs on
a bare machine) and Pillow, and writes the same bytes on every run. :data:`SAMPLE_FACTS` names what tests and the
README demo query look for in them.

    python -m chunker.eval.samples OUT_DIR
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from chunker.eval.sample_pdf import SamplePdf, flow_diagram, scan_image


@dataclass(frozen=True)
class TableFacts:
    headers: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    repeated_header: bool  # header row drawn again on each continuation page
    pages: tuple[int, ...]  # 1-based pages the body rows span


@dataclass(frozen=True)
class ManualFacts:
    file: str
    num_pages: int
    title: str
    title_page_lines: tuple[str, ...]  # body text under the title on page 1
    running_header: str
    running_footer: str
    page_label: str  # str.format(n=..., m=...) gives the footer's page number
    toc_page: int
    toc: tuple[tuple[str, int], ...]  # (heading text, 1-based page) in TOC order
    procedure_heading: str
    steps: tuple[str, ...]  # step texts, numbers left out
    steps_pages: tuple[int, int]  # page of the first and of the last step
    parts_table: TableFacts
    torque_table: TableFacts
    faq: tuple[tuple[str, str], ...]  # (question, answer)
    figure_caption: str
    figure_page: int
    non_english: str


@dataclass(frozen=True)
class ScannedFacts:
    file: str
    num_pages: int
    image_page: int  # 1-based page with no text layer
    sentence: str  # only reachable through OCR
    image_lines: tuple[str, ...]


@dataclass(frozen=True)
class PlainFacts:
    file: str
    num_pages: int
    title: str
    headings: tuple[str, ...]
    bullets: tuple[str, ...]


@dataclass(frozen=True)
class SampleQuestion:
    question: str
    file: str  # the sample that answers it
    answer: str  # text the answering chunk contains


@dataclass(frozen=True)
class SampleFacts:
    manual: ManualFacts
    scanned: ScannedFacts
    plain: tuple[PlainFacts, ...]
    questions: tuple[SampleQuestion, ...]

    @property
    def files(self) -> tuple[str, ...]:
        return (self.manual.file, self.scanned.file, *(p.file for p in self.plain))


# --- content ---------------------------------------------------------------------------------------------------

_PART_NAMES = (
    "Mechanical seal", "Impeller", "Casing gasket", "Shaft sleeve", "Drive-end bearing", "Non-drive-end bearing",
    "Coupling insert", "Wear ring", "Drain plug", "Priming plug",
)
_PART_SIZES = ("DN50", "DN65", "DN80", "DN100")
_INTERVALS = ("6 months", "12 months", "24 months", "As needed")
_PARTS_ROWS = tuple(
    (f"AP-{1001 + i}", f"{_PART_NAMES[i % 10]} {_PART_SIZES[i // 10]}", str(i % 4 + 1), _INTERVALS[(i * 3) % 4])
    for i in range(40)
)
_TORQUE_ROWS = (
    ("Impeller nut", "M16", "45"), ("Casing bolt", "M12", "60"), ("Bearing cover screw", "M8", "18"),
    ("Motor foot bolt", "M16", "90"), ("Coupling guard screw", "M6", "8"), ("Seal gland nut", "M10", "25"),
    ("Drain plug", "G 1/2", "30"), ("Priming plug", "G 3/8", "22"), ("Baseplate anchor", "M20", "150"),
    ("Suction flange bolt", "M16", "80"), ("Discharge flange bolt", "M16", "80"), ("Lifting eye", "M12", "40"),
    ("Terminal box screw", "M5", "4"), ("Earth terminal", "M6", "6"),
)
_STEPS = (
    "Switch off the motor at the main isolator and lock it in the off position.",
    "Close the suction and discharge valves and drain the casing through the drain plug.",
    "Remove the coupling guard screws and lift the coupling guard away from the baseplate.",
    "Hold the shaft with the shaft lock tool and loosen the impeller nut with a 24 mm socket.",
    "Slide the old mechanical seal off the shaft and clean the seal seat with isopropyl alcohol.",
    "Press the new seal onto the shaft until its spring seat touches the shaft shoulder.",
    "Refit the impeller, tighten the impeller nut to 45 N·m and refill the casing before restarting.",
)
_FAQ = (
    ("How often should the mechanical seal be inspected?",
     "Inspect the mechanical seal every 2,000 operating hours, or sooner if drops appear at the seal gland. A seal "
     "that leaks more than ten drops per minute must be replaced using the procedure in section 2.1."),
    ("Can the pump run dry for a short time?",
     "No. Even thirty seconds of dry running overheats the seal faces and can crack the carbon ring. Fit the "
     "optional dry-run sensor if the suction tank can empty during operation."),
    ("What should I do if the motor trips on start-up?",
     "Check that the discharge valve is not fully open at start-up, measure the supply voltage on all three phases "
     "and confirm that the overload relay is set to the motor's rated current."),
    ("Which grease is approved for the bearings?",
     "Use a lithium-complex grease of NLGI grade 2, such as Acme Lube LX2. Do not mix greases of different "
     "thickener types, because the mixture can soften and leak out of the bearing housing."),
)
_GERMAN = (
    "Sicherheitshinweis: Vor Beginn der Wartungsarbeiten muss die Pumpe vollständig drucklos und abgekühlt sein; "
    "öffnen Sie das Gehäuse niemals während des Betriebs und schließen Sie beide Absperrventile."
)
_CAPTION = "Figure 1: Flow path through the P-200 pump, from the suction inlet through the impeller and volute."

_TOC = (
    ("1 Overview", 3), ("1.1 Safety precautions", 3), ("1.2 Tools and materials", 3), ("2 Maintenance", 3),
    ("2.1 Replacing the mechanical seal", 3), ("2.2 Pump flow path", 4), ("3 Specifications", 5),
    ("3.1 Parts catalogue", 5), ("3.2 Torque values", 6), ("4 Frequently asked questions", 7),
    ("5 Troubleshooting", 8),
)

SAMPLE_FACTS = SampleFacts(
    manual=ManualFacts(
        file="field-service-manual.pdf", num_pages=8, title="Acme P-200 Field Service Manual",
        title_page_lines=(
            "Installation, maintenance and troubleshooting of the P-200 centrifugal pump series.",
            "Revision 3, January 2024. Acme Pumps GmbH, Hamburg.",
        ),
        running_header="Acme Pumps — Field Service Manual", running_footer="Confidential — Rev 3",
        page_label="Page {n} of {m}", toc_page=2, toc=_TOC,
        procedure_heading="2.1 Replacing the mechanical seal", steps=_STEPS, steps_pages=(3, 4),
        parts_table=TableFacts(("Part No.", "Description", "Quantity", "Service Interval"), _PARTS_ROWS, True, (5, 6)),
        torque_table=TableFacts(("Fastener", "Thread", "Torque (N·m)"), _TORQUE_ROWS, False, (6, 7)),
        faq=_FAQ, figure_caption=_CAPTION, figure_page=4, non_english=_GERMAN,
    ),
    scanned=ScannedFacts(
        file="scanned-notice.pdf", num_pages=2, image_page=2,
        sentence="Warranty claims must be filed within 90 days of installation.",
        image_lines=(
            "ACME PUMPS CUSTOMER NOTICE", "Warranty claims must be filed within 90 days of installation.",
            "Include the serial number from the pump nameplate.", "Replacement seals ship within 5 working days.",
        ),
    ),
    plain=(
        PlainFacts(
            file="travel-expense-policy.pdf", num_pages=1, title="Travel and Expense Policy",
            headings=("1 Purpose", "2 Booking travel", "3 Meal allowances", "4 Submitting a claim"),
            bullets=(
                "Domestic trips: EUR 28 per full day.", "International trips: EUR 42 per full day.",
                "Half days (under 8 hours away): half the daily rate.",
            ),
        ),
        PlainFacts(
            file="controller-release-notes.pdf", num_pages=1, title="PumpSense Controller Release Notes",
            headings=("Version 2.4", "Version 2.3"),
            bullets=(
                "Adds a warranty registration screen to the setup wizard.", "Dry-run alarm now trips after 10 seconds.",
                "Fixes a Modbus timeout when polling faster than 100 ms.",
            ),
        ),
    ),
    questions=(
        SampleQuestion("How many days do I have to file a warranty claim?", "scanned-notice.pdf", "within 90 days"),
        SampleQuestion("What torque does the impeller nut need?", "field-service-manual.pdf", "45"),
        SampleQuestion("What is the meal allowance for international trips?", "travel-expense-policy.pdf", "EUR 42"),
        SampleQuestion("How do I replace the mechanical seal?", "field-service-manual.pdf", _STEPS[4]),
        SampleQuestion("Which diagram shows the flow path through the pump?", "field-service-manual.pdf", _CAPTION),
    ),
)


def _manual(path: Path) -> None:
    f = SAMPLE_FACTS.manual
    pdf = SamplePdf(f.running_header, f.running_footer)
    pdf.add_page()
    pdf.set_y(90)
    pdf.heading(f.title, 1)
    for line in f.title_page_lines:
        pdf.para(line, size=12)

    pdf.add_page()
    pdf.heading("Contents", 2)
    pdf.set_font("Helvetica", "", 10)
    for title, page in f.toc:
        indent = 8 if "." in title.split()[0] else 0  # subsections are indented
        pdf.set_x(20 + indent)
        room = 170 - indent - pdf.get_string_width(f"{title} ") - pdf.get_string_width(f" {page}")
        dots = "." * int(room / pdf.get_string_width("."))
        pdf.cell(0, 7, f"{title} {dots} {page}", new_x="LMARGIN", new_y="NEXT")

    pdf.add_page()
    pdf.heading("1 Overview", 2)
    pdf.para("The P-200 is a single-stage end-suction centrifugal pump for clean water and mild chemical service. "
             "This manual covers routine maintenance that a trained field technician can carry out on site without "
             "removing the pump from its baseplate.")
    pdf.heading("1.1 Safety precautions", 3)
    pdf.para("Never work on a pump that is running or pressurised. Wear eye protection when draining the casing, "
             "because trapped liquid can spray out when the drain plug is loosened.")
    pdf.para(f.non_english)
    pdf.heading("1.2 Tools and materials", 3)
    pdf.items(["24 mm socket and torque wrench (10-150 N·m).", "Shaft lock tool AP-T12.",
               "Isopropyl alcohol and lint-free cloths.", "Replacement mechanical seal kit."])
    pdf.heading("2 Maintenance", 2)
    pdf.para("Plan maintenance during a scheduled stop and record every intervention in the pump logbook.")
    pdf.para("Most wear parts are listed in the parts catalogue in section 3.1. Order seal kits before the stop: "
             "the stock at regional depots is limited, and a pump left open waiting for parts collects dirt in the "
             "seal chamber. Keep the removed parts until the repair has passed its first week of operation.")
    # Push the procedure to the foot of page 3 so its steps must be joined across the page break.
    pdf.set_y(max(pdf.get_y(), 206))
    pdf.heading(f.procedure_heading, 3)
    pdf.para("Follow these steps in order. Each step assumes the previous one is complete.")
    pdf.items(f.steps[:3], numbered=True)
    pdf.add_page()
    pdf.items(f.steps[3:], numbered=True, start=4)
    pdf.heading("2.2 Pump flow path", 3)
    pdf.para("Liquid enters axially, is accelerated by the impeller and leaves through the volute, which turns "
             "velocity into pressure.")
    pdf.image(flow_diagram(), x=25, w=160)
    pdf.ln(2)
    pdf.para(f.figure_caption, style="I", size=9)

    pdf.add_page()
    pdf.heading("3 Specifications", 2)
    pdf.heading("3.1 Parts catalogue", 3)
    pdf.para("Order spare parts by part number. Quantities are per pump.")
    t = f.parts_table
    parts_pages = pdf.table(t.headers, t.rows, (30, 75, 25, 40), t.repeated_header)
    pdf.heading("3.2 Torque values", 3)
    pdf.para("Tighten fasteners in a cross pattern to the values below, using a calibrated torque wrench.")
    pdf.set_y(max(pdf.get_y(), 222))  # so the torque table breaks across pages without its header
    t = f.torque_table
    torque_pages = pdf.table(t.headers, t.rows, (70, 40, 60), t.repeated_header)
    pdf.heading("4 Frequently asked questions", 2)
    for question, answer in f.faq:
        pdf.para(question, style="B")
        pdf.para(answer)
    pdf.add_page()
    pdf.heading("5 Troubleshooting", 2)
    pdf.para("Match the symptom with its most likely cause before ordering parts.")
    pdf.items([
        "Noise like gravel in the casing: cavitation; raise the suction level or open the suction valve fully.",
        "Vibration after a seal change: the coupling is misaligned; realign it to within 0.05 mm.",
        "Low flow at normal speed: the impeller or wear ring is worn; measure the wear ring clearance.",
        "Hot bearing housing: too much grease; run the pump for an hour with the grease plug removed.",
    ])
    pdf.output(str(path))

    # The facts are hand-written; fail loudly if the layout drifted away from them.
    got = {
        "pages": pdf.page_no(), "toc": tuple((t, pdf.heading_pages.get(t)) for t, _ in f.toc),
        "parts": tuple(sorted(set(parts_pages))), "torque": tuple(sorted(set(torque_pages))),
    }
    want = {"pages": f.num_pages, "toc": f.toc, "parts": f.parts_table.pages, "torque": f.torque_table.pages}
    if got != want:
        raise RuntimeError(f"manual layout drifted from SAMPLE_FACTS: got {got}, want {want}")


def _scanned(path: Path) -> None:
    f = SAMPLE_FACTS.scanned
    pdf = SamplePdf()
    pdf.add_page()
    pdf.heading("Customer notice", 2)
    pdf.para("The notice below was received on paper and scanned for the service archive. It applies to all P-200 "
             "pumps sold through authorised dealers.")
    pdf.add_page()
    pdf.image(scan_image(f.image_lines), x=10, y=15, w=190)  # image only: no text layer on this page
    pdf.output(str(path))


def _plain(path: Path, f: PlainFacts, sections: tuple[tuple[str, str, tuple[str, ...]], ...]) -> None:
    pdf = SamplePdf()
    pdf.add_page()
    pdf.heading(f.title, 1)
    for heading, text, bullets in sections:
        pdf.heading(heading, 2)
        pdf.para(text)
        if bullets:
            pdf.items(bullets)
    pdf.output(str(path))


def generate_samples(out_dir: Path) -> list[Path]:
    """Write every sample PDF into out_dir (created if needed); same bytes on every run."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    travel, notes = SAMPLE_FACTS.plain
    paths = [out_dir / name for name in SAMPLE_FACTS.files]
    _manual(paths[0])
    _scanned(paths[1])
    _plain(paths[2], travel, (
        (travel.headings[0], "This policy sets out how staff book business travel and claim expenses.", ()),
        (travel.headings[1], "Book flights and hotels through the travel portal at least 14 days ahead.",
         ("Economy class for flights under 6 hours.", "Hotels up to EUR 150 per night.")),
        (travel.headings[2], "Meal allowances replace receipts for meals.", travel.bullets),
        (travel.headings[3], "Submit claims in the expense tool within 30 days of returning, with receipts "
                             "attached for every item above EUR 25.", ()),
    ))
    _plain(paths[3], notes, (
        (notes.headings[0], "Released 12 March 2024 for all PumpSense controllers.", notes.bullets),
        (notes.headings[1], "Released 5 December 2023.",
         ("Adds Italian and Polish display languages.", "Improves flow estimate accuracy at low speed.")),
    ))
    return paths


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m chunker.eval.samples",
                                description="Write the sample PDFs (the same bytes on every run) into OUT_DIR.")
    p.add_argument("out_dir", metavar="OUT_DIR", help="folder to write the PDFs into (made if missing)")
    args = p.parse_args(argv)
    for path in generate_samples(Path(args.out_dir)):
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
