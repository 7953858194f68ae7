"""Generated financial statements for the table tests: the layout of filings printed from HTML, with no rules.

A title block, a unit line, a two-level header (spanning "Three Months Ended" / "Six Months Ended" over dates and
years), row labels with section labels and indented rows, totals, "$" signs set apart from their figures, negatives
in parentheses, a statement continuing on the next page without its header, and a running header and footer on
every page. Core fonts only, fixed metadata: the same bytes every time.
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

from fpdf import FPDF

COLUMNS = [440.0, 500.0, 560.0, 620.0]  # right edges of the figure columns (points, page 680 wide)
SPANS = [("Three Months Ended", 0, 2), ("Six Months Ended", 2, 4)]
DATES = ["March 30, 2024", "April 1, 2023", "March 30, 2024", "April 1, 2023"]
UNIT = "(In millions, except per share amounts)"

# (label, indent level, figures or None for a section label)
INCOME = [
    ("Net sales:", 0, None),
    ("Products", 1, ["$ 66,886", "$ 73,929", "$ 163,344", "$ 170,317"]),
    ("Services", 1, ["23,867", "20,907", "46,117", "41,673"]),
    ("Total net sales", 2, ["90,753", "94,836", "209,461", "211,990"]),
    ("Operating expenses:", 0, None),
    ("Research and development", 1, ["7,903", "7,457", "15,599", "15,166"]),
    ("Selling, general and administrative", 1, ["6,468", "6,201", "13,254", "12,808"]),
    ("Total operating expenses", 2, ["14,371", "13,658", "28,853", "27,974"]),
    ("Operating income", 0, ["27,900", "28,318", "68,307", "64,634"]),
    ("Other income/(expense), net", 0, ["158", "64", "(50)", "(329)"]),
]
# Continued on the next page, no header repeated.
INCOME_CONTINUED = [
    ("Income before provision for income taxes", 0, ["28,058", "28,382", "68,257", "64,305"]),
    ("Provision for income taxes", 0, ["4,422", "4,222", "10,829", "9,847"]),
    ("Net income", 0, ["$ 23,636", "$ 24,160", "$ 57,428", "$ 54,458"]),
]
RUNNING_HEADER = "Acme Devices Inc. | Q2 2024 Form 10-Q | {n}"


class _Doc(FPDF):
    def __init__(self) -> None:
        super().__init__(unit="pt", format=(680, 820))
        self.set_creation_date(datetime(2024, 1, 1, tzinfo=timezone.utc))
        self.set_auto_page_break(False)
        self.set_margins(40, 40, 40)

    def header(self) -> None:
        self.set_font("Helvetica", "", 8)
        self.set_xy(40, 20)
        self.cell(600, 10, "Acme Devices Inc. | Q2 2024 Form 10-Q", align="C")

    def footer(self) -> None:
        self.set_font("Helvetica", "", 8)
        self.set_xy(40, 795)
        self.cell(600, 10, RUNNING_HEADER.format(n=self.page_no()), align="C")


def _figure(doc: FPDF, y: float, col: int, text: str, bold: bool) -> None:
    right = COLUMNS[col]
    doc.set_font("Helvetica", "B" if bold else "", 9)
    if text.startswith("$ "):
        doc.set_xy(right - 55, y)
        doc.cell(8, 12, "$")
        text = text[2:]
    doc.set_xy(right - 45, y)
    doc.cell(45 + (4 if text.endswith(")") else 0), 12, text, align="R")


def _rows(doc: FPDF, y: float, rows: list[tuple[str, int, list[str] | None]]) -> float:
    for label, level, figs in rows:
        bold = label.startswith("Total") or label == "Net income"
        doc.set_font("Helvetica", "B" if bold else "", 9)
        doc.set_xy(40 + 10 * level, y)
        doc.cell(250, 12, label)
        for k, text in enumerate(figs or []):
            _figure(doc, y, k, text, bold)
        y += 16
    return y


def _header(doc: FPDF, y: float) -> float:
    doc.set_font("Helvetica", "B", 9)
    for text, a, b in SPANS:
        left, right = COLUMNS[a] - 50, COLUMNS[b - 1]
        doc.set_xy(left, y)
        doc.cell(right - left, 12, text, align="C")
    y += 14
    for k, date in enumerate(DATES):
        doc.set_xy(COLUMNS[k] - 58, y)
        doc.cell(58, 12, date, align="R")
    return y + 18


def write_statement(path: Path) -> Path:
    """A two-page 10-Q-like document: a cover page, then the income statement over pages 2 and 3."""
    doc = _Doc()
    doc.add_page()
    doc.set_font("Helvetica", "B", 14)
    doc.set_xy(40, 120)
    doc.cell(600, 18, "UNITED STATES SECURITIES AND EXCHANGE COMMISSION", align="C")
    doc.set_font("Helvetica", "B", 20)
    doc.set_xy(40, 160)
    doc.cell(600, 24, "FORM 10-Q", align="C")
    doc.set_font("Helvetica", "", 10)
    doc.set_xy(40, 200)
    doc.cell(600, 14, "For the quarterly period ended March 30, 2024", align="C")
    doc.set_font("Helvetica", "B", 20)
    doc.set_xy(40, 240)
    doc.cell(600, 24, "Acme Devices Inc.", align="C")
    doc.set_font("Helvetica", "", 10)
    doc.set_xy(40, 280)
    doc.multi_cell(600, 14, "Indicate by check mark whether the registrant has filed all reports required to be "
                   "filed during the preceding 12 months. Yes [X] No [ ]")
    doc.add_page()
    doc.set_font("Helvetica", "B", 11)
    doc.set_xy(40, 70)
    doc.cell(600, 14, "CONDENSED CONSOLIDATED STATEMENTS OF OPERATIONS (Unaudited)", align="C")
    doc.set_font("Helvetica", "", 9)
    doc.set_xy(40, 86)
    doc.cell(600, 12, UNIT, align="C")
    y = _header(doc, 120)
    _rows(doc, y, INCOME)
    doc.add_page()
    _rows(doc, 70, INCOME_CONTINUED)
    doc.set_font("Helvetica", "", 9)
    doc.set_xy(40, 140)
    doc.multi_cell(600, 12, "See accompanying Notes to Condensed Consolidated Financial Statements.")
    doc.output(str(path))
    return path


def _centred(doc: FPDF, y: float, text: str, bold: bool = True) -> None:
    doc.set_font("Helvetica", "B" if bold else "", 9)
    doc.set_xy(40, y)
    doc.cell(600, 11, text, align="C")


def _years_header(doc: FPDF, y: float, over: str, labels: list[str]) -> float:
    doc.set_font("Helvetica", "B", 9)
    doc.set_xy(COLUMNS[0] - 50, y)
    doc.cell(COLUMNS[len(labels) - 1] - COLUMNS[0] + 50, 11, over, align="C")
    for k, label in enumerate(labels):
        doc.set_xy(COLUMNS[k] - 58, y + 13)
        doc.cell(58, 11, label, align="R")
    return y + 32


def write_title_stacks(path: Path) -> Path:
    """Statements as filings printed from HTML set them: a stack of short centred lines at body size over each
    statement (company, title, unit; or title, company, unit), all bold, close together, after a report that ends
    on a bold date line. Page 2: company over title over unit; page 3: title over company over unit; page 4: set
    left, the title larger than the company, and a header row in small type."""
    doc = _Doc()
    doc.add_page()
    doc.set_font("Helvetica", "", 9)
    doc.set_xy(40, 70)
    doc.multi_cell(600, 11, "We have served as the Company's auditor since 1928. In our opinion, the consolidated "
                   "financial statements present fairly, in all material respects, the financial position of the "
                   "Company and the results of its operations for each of the years in the three-year period.")
    doc.set_font("Helvetica", "B", 9)
    doc.set_xy(40, 130)
    doc.cell(200, 11, "July 2, 2024")
    doc.add_page()
    _centred(doc, 60, "ACME DEVICES, INC.")
    _centred(doc, 74, "CONSOLIDATED STATEMENTS OF OPERATIONS")
    _centred(doc, 85, "(in millions, except per share data)")
    y = _years_header(doc, 110, "Year Ended December 31,", ["2022", "2023"])
    y = _rows(doc, y, [("Net product sales", 0, ["$ 94,665", "$ 118,573"]), ("Net service sales", 0, ["41,322", "59,293"]),
                       ("Total net sales", 0, ["135,987", "177,866"])])
    _centred(doc, y + 10, "See accompanying notes to consolidated financial statements.", bold=False)
    doc.add_page()
    _centred(doc, 60, "Consolidated Balance Sheets")
    _centred(doc, 73, "ACME DEVICES, INC. AND SUBSIDIARIES")
    _centred(doc, 86, "(In Millions)")
    y = _years_header(doc, 110, "As of", ["May 31, 2024", "May 26, 2023"])
    y = _rows(doc, y, [("ASSETS", 0, None), ("Cash and cash equivalents", 1, ["$ 1,677.8", "$ 450.0"]),
                       ("Total assets", 0, ["$ 30,806.7", "$ 30,111.2"])])
    _centred(doc, y + 10, "See accompanying notes to consolidated financial statements.", bold=False)
    doc.add_page()
    # Page 4: the title block set left, the title a point larger than the company's name under it; the header
    # row in smaller type than the body, its label and the years on one line, a section label under it.
    doc.set_font("Helvetica", "B", 10)
    doc.set_xy(40, 40)
    doc.cell(300, 12, "Consolidated Statements of Income")
    doc.set_font("Helvetica", "B", 9)
    doc.set_xy(40, 55)
    doc.cell(300, 11, "Acme Devices Inc. and Subsidiaries")
    doc.set_font("Helvetica", "", 9)
    doc.set_xy(380, 78)
    doc.cell(240, 11, "(dollars in millions, except per share amounts)", align="R")
    doc.set_font("Helvetica", "", 7.5)
    doc.set_xy(40, 92)
    doc.cell(200, 10, "Years Ended December 31,")
    for k, year in enumerate(["2023", "2022", "2021"]):
        doc.set_xy(COLUMNS[k] - 40, 92)
        doc.cell(40, 10, year, align="R")
    doc.set_font("Helvetica", "B", 9)
    doc.set_xy(40, 116)
    doc.cell(250, 12, "Operating Revenues")
    _rows(doc, 130, [("Service revenues and other", 1, ["$ 109,625", "$ 110,449", "$ 109,872"]),
                     ("Wireless equipment revenues", 1, ["27,210", "23,164", "18,420"]),
                     ("Total Operating Revenues", 0, ["136,835", "133,613", "128,292"])])
    doc.output(str(path))
    return path
