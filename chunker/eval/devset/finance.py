"""Two listed companies' quarterly reports: financial statements with spanning period headers ("Three Months
Ended" / "Six Months Ended" over years), a currency-sign column, totals with rules, negatives in parentheses; the
company and the period live on the cover page and in the file name, not in the tables."""

from __future__ import annotations

from dataclasses import dataclass

from chunker.eval.devset.common import Corpus, money
from chunker.eval.devset.pdfdoc import DevPdf, Style, TableSpec

ORG = "finance"
_ISSUERS = (
    # name, short, file prefix, industry, segments, metadata title?
    ("Brightwater Holdings, Inc.", "Brightwater Holdings", "BWH", "industrial flow-control equipment",
     ("Fluid Systems", "Motion Control", "Aftermarket Services"), False),
    ("Castellan Foods Corporation", "Castellan Foods", "CSTL", "packaged foods and beverages",
     ("Snacks", "Beverages", "Foodservice"), True),
)
_PERIODS = ((2023, 2), (2023, 3), (2024, 1), (2024, 2), (2024, 3))
_END = {1: ("March", 31), 2: ("June", 30), 3: ("September", 30), 4: ("December", 31)}
_YTD = {2: "Six", 3: "Nine"}


@dataclass
class Quarter:
    sales: int
    cogs: int
    sga: int
    rnd: int
    restructuring: int
    interest: int
    other: int  # signed
    tax_rate: float
    shares: int  # weighted diluted shares, thousands
    segments: tuple[int, ...]
    ocf_adj: int  # depreciation and amortisation
    wc: int  # signed change in working capital
    capex: int
    dividends: int
    repay: int

    @property
    def gross(self) -> int:
        return self.sales - self.cogs

    @property
    def operating(self) -> int:
        return self.gross - self.sga - self.rnd - self.restructuring

    @property
    def pretax(self) -> int:
        return self.operating - self.interest + self.other

    @property
    def tax(self) -> int:
        return round(self.pretax * self.tax_rate)

    @property
    def net(self) -> int:
        return self.pretax - self.tax


def _quarters(c: Corpus, scale: int) -> dict[tuple[int, int], Quarter]:
    rng = c.rng
    out: dict[tuple[int, int], Quarter] = {}
    sales = scale
    for year in (2022, 2023, 2024):
        for q in (1, 2, 3, 4):
            sales = int(sales * rng.uniform(0.97, 1.06))
            cogs = int(sales * rng.uniform(0.58, 0.68))
            seg_a = int(sales * rng.uniform(0.42, 0.5))
            seg_b = int(sales * rng.uniform(0.28, 0.34))
            out[(year, q)] = Quarter(
                sales=sales, cogs=cogs, sga=int(sales * rng.uniform(0.14, 0.19)), rnd=int(sales * rng.uniform(0.02, 0.05)),
                restructuring=rng.choice([0, 0, 0, int(sales * 0.01)]), interest=int(scale * rng.uniform(0.008, 0.014)),
                other=int(scale * rng.uniform(-0.012, 0.006)), tax_rate=rng.uniform(0.19, 0.26),
                shares=int(scale * rng.uniform(0.3, 0.32)) + 1, segments=(seg_a, seg_b, sales - seg_a - seg_b),
                ocf_adj=int(sales * rng.uniform(0.03, 0.045)), wc=int(sales * rng.uniform(-0.06, 0.03)),
                capex=int(sales * rng.uniform(0.025, 0.05)), dividends=int(scale * 0.02),
                repay=int(scale * rng.choice([0, 0.02, 0.05])),
            )
    return out


def _sum(qs: list[Quarter], attr: str) -> int:
    return sum(getattr(q, attr) for q in qs)


def _eps(net: int, shares: int) -> str:
    return f"{net / shares:.2f}" if net >= 0 else f"({abs(net) / shares:.2f})"


def _statement(cols: list[tuple[str, dict[str, str]]], spans: list[tuple[str, int]], labels: list[tuple[str, str]],
               size: float = 8.5) -> TableSpec:
    """A statement table: label | ($ | value) per column. ``labels`` are (key, style): style "" (a line item),
    "section" (a label row without values), "total" (rule above), "grand" (rule above, double rule below, $), "first"
    (a line item with $). ``cols`` are (year header, values by key)."""
    n = len(cols)
    widths = [64.0] + [5.0, 19.5] * n
    header = [[""] + [x for y, _ in cols for x in ("", y)]]
    rows: list[list[str]] = []
    bold: set[int] = set()
    above: set[int] = set()
    double: set[int] = set()
    indent: dict[int, float] = {}
    for r, (key, kind) in enumerate(labels):
        if kind == "section":
            rows.append([key] + [""] * (2 * n))
            continue
        dollar = "$" if kind in ("first", "grand") else ""
        row = [key]
        for _, values in cols:
            row += [dollar, values[key]]
        rows.append(row)
        if kind in ("total", "grand"):
            above.add(r)
            indent[r] = 4.0
        else:
            indent[r] = 2.0
        if kind == "grand":
            double.add(r)
    span_specs = []
    col = 1
    for label, count in spans:
        span_specs.append((label, col, 2 * count))
        col += 2 * count
    return TableSpec(header=header, rows=rows, widths=widths, aligns=["L"] + ["R"] * (2 * n), bold_rows=bold,
                     rule_above=above, double_below=double, indent=indent, value_from=1, spans=span_specs,
                     repeat_header=True, size=size, line_h=5.2)


def _income_values(q: Quarter) -> dict[str, str]:
    return {
        "Net sales": money(q.sales), "Cost of sales": money(q.cogs), "Gross profit": money(q.gross),
        "Selling, general and administrative": money(q.sga), "Research and development": money(q.rnd),
        "Restructuring charges": money(q.restructuring) if q.restructuring else "\u2014",
        "Operating income": money(q.operating), "Interest expense": money(-q.interest),
        "Other income (expense), net": money(q.other), "Income before income taxes": money(q.pretax),
        "Provision for income taxes": money(q.tax), "Net income": money(q.net),
        "Diluted earnings per share": _eps(q.net, q.shares),
    }


def _merge(qs: list[Quarter]) -> Quarter:
    """Year-to-date figures: flows add up, the share count is the last quarter's."""
    last = qs[-1]
    return Quarter(
        sales=_sum(qs, "sales"), cogs=_sum(qs, "cogs"), sga=_sum(qs, "sga"), rnd=_sum(qs, "rnd"),
        restructuring=_sum(qs, "restructuring"), interest=_sum(qs, "interest"), other=_sum(qs, "other"),
        tax_rate=last.tax_rate, shares=last.shares, segments=tuple(sum(s) for s in zip(*(q.segments for q in qs))),
        ocf_adj=_sum(qs, "ocf_adj"), wc=_sum(qs, "wc"), capex=_sum(qs, "capex"), dividends=_sum(qs, "dividends"),
        repay=_sum(qs, "repay"),
    )


def _ytd_quarter(quarters: dict[tuple[int, int], Quarter], year: int, q: int) -> Quarter:
    # Tax on the merged figures is recomputed from the merged pre-tax income; good enough for a consistent set.
    return _merge([quarters[(year, k)] for k in range(1, q + 1)])


_INCOME_LABELS = [("Net sales", "first"), ("Cost of sales", ""), ("Gross profit", "total"),
                  ("Operating expenses:", "section"), ("Selling, general and administrative", ""),
                  ("Research and development", ""), ("Restructuring charges", ""), ("Operating income", "total"),
                  ("Interest expense", ""), ("Other income (expense), net", ""),
                  ("Income before income taxes", "total"), ("Provision for income taxes", ""),
                  ("Net income", "grand"), ("Diluted earnings per share", "first")]


def build(c: Corpus) -> None:
    rng = c.rng
    for name, short, prefix, industry, segments, with_title in _ISSUERS:
        scale = rng.choice([120_000, 180_000, 260_000, 410_000])
        quarters = _quarters(c, scale)
        # Balance-sheet stocks per quarter end, drifting.
        cash = int(scale * 0.5)
        debt = {"Term loan due 2027": int(scale * 0.6), "Senior notes 4.25% due 2029": int(scale * 0.9),
                "Revolving credit facility": int(scale * 0.15)}
        balances: dict[tuple[int, int], dict[str, int]] = {}
        for (year, q), qq in sorted(quarters.items()):
            cash = max(int(scale * 0.1), cash + qq.net + qq.ocf_adj + qq.wc - qq.capex - qq.dividends - qq.repay)
            debt = {k: max(0, v - (qq.repay if k.startswith("Term") else 0)
                           + (int(scale * rng.uniform(-0.05, 0.05)) if k.startswith("Rev") else 0))
                    for k, v in debt.items()}
            ar, inv = int(qq.sales * rng.uniform(0.55, 0.7)), int(qq.sales * rng.uniform(0.6, 0.8))
            ppe, gw = int(scale * 1.4 + year % 10 * 1000), int(scale * 0.9)
            ap, accrued = int(qq.cogs * rng.uniform(0.45, 0.6)), int(qq.sales * rng.uniform(0.12, 0.2))
            current_debt = int(scale * 0.05)
            total_debt = sum(debt.values())
            tca = cash + ar + inv + int(scale * 0.04)
            tl = ap + accrued + total_debt
            assets = tca + ppe + gw
            balances[(year, q)] = {
                "Cash and cash equivalents": cash, "Accounts receivable, net": ar, "Inventories": inv,
                "Prepaid expenses and other current assets": int(scale * 0.04), "Total current assets": tca,
                "Property, plant and equipment, net": ppe, "Goodwill": gw, "Total assets": assets,
                "Accounts payable": ap, "Accrued liabilities": accrued, "Current portion of long-term debt": current_debt,
                "Total current liabilities": ap + accrued + current_debt, "Long-term debt": total_debt - current_debt,
                "Total liabilities": tl, "Total stockholders' equity": assets - tl,
                "Total liabilities and stockholders' equity": assets, "Total debt": total_debt, **debt,
            }
        for year, q in _PERIODS:
            month, day = _END[q]
            end = f"{month} {day}, {year}"
            fname = f"{prefix}_QR_{year}-{q * 3:02d}-{day}.pdf"
            st = Style(family="Times", body=10, sizes=(16, 12, 10.5), bold_subheads=True, footer="", page_label="{n}")
            pdf = DevPdf(st, title=f"{name} Quarterly Report Q{q} {year}" if with_title else "")
            pdf.add_page()
            pdf.ln(20)
            pdf.use_font("B", 12)
            pdf.multi_cell(0, 6, "QUARTERLY REPORT", align="C", new_x="LMARGIN", new_y="NEXT")
            pdf.use_font("", 10)
            pdf.multi_cell(0, 6, f"For the quarterly period ended {end}", align="C", new_x="LMARGIN", new_y="NEXT")
            pdf.ln(10)
            pdf.use_font("B", 18)
            pdf.multi_cell(0, 9, name, align="C", new_x="LMARGIN", new_y="NEXT")
            pdf.use_font("", 9)
            pdf.multi_cell(0, 5, "(Exact name of registrant as specified in its charter)", align="C",
                           new_x="LMARGIN", new_y="NEXT")
            pdf.ln(8)
            shares_out = quarters[(year, q)].shares * 1000 + rng.randint(0, 999)
            pdf.para(f"{name} designs, manufactures and sells {industry}. As of {_END[q][0]} {day}, {year} the "
                     f"registrant had {shares_out:,} shares of common stock outstanding.")
            # -- statements of operations ----------------------------------------------------------------------
            cur, prior = quarters[(year, q)], quarters[(year - 1, q)]
            cols = [(str(year), _income_values(cur)), (str(year - 1), _income_values(prior))]
            spans = [(f"Three Months Ended {month} {day},", 2)]
            if q > 1:
                ycur, yprior = _ytd_quarter(quarters, year, q), _ytd_quarter(quarters, year - 1, q)
                cols += [(str(year), _income_values(ycur)), (str(year - 1), _income_values(yprior))]
                spans.append((f"{_YTD[q]} Months Ended {month} {day},", 2))
            pdf.add_page()
            pdf.heading("PART I. FINANCIAL INFORMATION", 2)
            pdf.heading("Condensed Consolidated Statements of Operations", 3)
            pdf.para("(In thousands, except per share amounts; unaudited)", "I")
            pdf.ruled_table(_statement(cols, spans, _INCOME_LABELS))
            # -- balance sheet ---------------------------------------------------------------------------------
            bal_cur, bal_ye = balances[(year, q)], balances[(year - 1, 4)]
            fmt = lambda b: {k: money(v) for k, v in b.items()}  # noqa: E731
            bs_labels = [("Current assets:", "section"), ("Cash and cash equivalents", "first"),
                         ("Accounts receivable, net", ""), ("Inventories", ""),
                         ("Prepaid expenses and other current assets", ""), ("Total current assets", "total"),
                         ("Property, plant and equipment, net", ""), ("Goodwill", ""), ("Total assets", "grand"),
                         ("Current liabilities:", "section"), ("Accounts payable", "first"), ("Accrued liabilities", ""),
                         ("Current portion of long-term debt", ""), ("Total current liabilities", "total"),
                         ("Long-term debt", ""), ("Total liabilities", "total"),
                         ("Total stockholders' equity", ""), ("Total liabilities and stockholders' equity", "grand")]
            pdf.heading("Condensed Consolidated Balance Sheets", 3)
            pdf.para("(In thousands; unaudited)", "I")
            pdf.ruled_table(_statement([(end, fmt(bal_cur)), (f"December 31, {year - 1}", fmt(bal_ye))], [],
                                       bs_labels))
            # -- debt note -------------------------------------------------------------------------------------------
            pdf.heading("Note 6. Debt", 3)
            pdf.para("Our outstanding debt consisted of the following:")
            debt_labels = [(k, "first" if i == 0 else "") for i, k in enumerate(debt)] + \
                [("Total debt", "grand"), ("Less: current portion", ""), ("Long-term debt", "grand")]
            dcol = lambda b: {**{k: money(b[k]) for k in debt}, "Total debt": money(b["Total debt"]),  # noqa: E731
                              "Less: current portion": money(-b["Current portion of long-term debt"]),
                              "Long-term debt": money(b["Long-term debt"])}
            pdf.ruled_table(_statement([(end, dcol(bal_cur)), (f"December 31, {year - 1}", dcol(bal_ye))], [],
                                       debt_labels))
            # -- segments -------------------------------------------------------------------------------------------
            pdf.heading("Note 9. Segment Information", 3)
            pdf.para(f"We report three segments: {', '.join(segments[:-1])} and {segments[-1]}. Net sales by segment:")
            seg_vals = lambda qq: {**{s: money(v) for s, v in zip(segments, qq.segments)},  # noqa: E731
                                   "Total net sales": money(qq.sales)}
            pdf.ruled_table(_statement([(str(year), seg_vals(cur)), (str(year - 1), seg_vals(prior))],
                                       [(f"Three Months Ended {month} {day},", 2)],
                                       [(s, "first" if i == 0 else "") for i, s in enumerate(segments)]
                                       + [("Total net sales", "grand")]))
            # -- cash flows (year to date) ----------------------------------------------------------------------------
            ycur = _ytd_quarter(quarters, year, q)
            ocf = ycur.net + ycur.ocf_adj + ycur.wc
            cf = {"Net income": money(ycur.net), "Depreciation and amortization": money(ycur.ocf_adj),
                  "Changes in operating assets and liabilities": money(ycur.wc),
                  "Net cash provided by operating activities": money(ocf),
                  "Capital expenditures": money(-ycur.capex), "Net cash used in investing activities": money(-ycur.capex),
                  "Repayments of long-term debt": money(-ycur.repay) if ycur.repay else "\u2014",
                  "Dividends paid": money(-ycur.dividends),
                  "Net cash used in financing activities": money(-ycur.repay - ycur.dividends)}
            period_name = "Three" if q == 1 else _YTD[q]
            pdf.heading("Condensed Consolidated Statements of Cash Flows", 3)
            pdf.para(f"({period_name} months ended {end}; in thousands; unaudited)", "I")
            pdf.ruled_table(_statement([(str(year), cf)], [],
                                       [("Net income", "first"), ("Depreciation and amortization", ""),
                                        ("Changes in operating assets and liabilities", ""),
                                        ("Net cash provided by operating activities", "total"),
                                        ("Capital expenditures", ""), ("Net cash used in investing activities", "total"),
                                        ("Repayments of long-term debt", ""), ("Dividends paid", ""),
                                        ("Net cash used in financing activities", "total")]))
            # -- management's discussion --------------------------------------------------------------------------------
            growth = (cur.sales - prior.sales) / prior.sales * 100
            margin = cur.gross / cur.sales * 100
            pdf.heading("Item 2. Management's Discussion and Analysis", 2)
            direction = "increased" if growth >= 0 else "decreased"
            driver = rng.choice(["higher volumes", "pricing actions", "the ramp-up of new products",
                                 "stronger demand in North America", "lower shipments to distributors"])
            mdna = (f"Net sales for the three months ended {end} {direction} {abs(growth):.1f}% to "
                    f"${cur.sales / 1000:,.1f} million, compared with ${prior.sales / 1000:,.1f} million in the same "
                    f"period of {year - 1}, mainly due to {driver}. Gross margin was {margin:.1f}% of net sales.")
            pdf.para(mdna)
            liquidity = (f"As of {end}, we had ${bal_cur['Cash and cash equivalents'] / 1000:,.1f} million of cash and "
                         f"cash equivalents and ${bal_cur['Total debt'] / 1000:,.1f} million of total debt.")
            pdf.para(liquidity)
            doc = c.save(pdf, fname, ORG)
            docs_with = lambda y, qq: [f"{prefix}_QR_{yy}-{pq * 3:02d}-{_END[pq][1]}.pdf"  # noqa: E731
                                       for yy, pq in _PERIODS if pq == qq and yy in (y, y + 1)]
            # -- questions -------------------------------------------------------------------------------------------
            qend = f"the three months ended {end}"
            iv = _income_values(cur)
            for key in rng.sample(["Net sales", "Gross profit", "Operating income", "Net income", "Cost of sales",
                                   "Selling, general and administrative", "Interest expense",
                                   "Other income (expense), net", "Provision for income taxes",
                                   "Research and development"], 4):
                qtext = c.pick([f"What was {short}'s {key.lower()} for {qend}?",
                                f"How much {key.lower()} did {short} report for {qend}?",
                                f"{short} {key.lower()}, quarter ended {end}?"])
                c.ask(ORG, "Numeric", qtext,
                      [(d, f"{key} Three Months Ended {month} {day} {year} {iv[key]}") for d in docs_with(year, q)],
                      iv[key])
            c.ask(ORG, "Numeric", f"What were {short}'s diluted earnings per share for {qend}?",
                  [(d, f"Diluted earnings per share Three Months Ended {month} {day} {year} "
                       f"{iv['Diluted earnings per share']}")
                   for d in docs_with(year, q)], iv["Diluted earnings per share"])
            if q > 1:
                yv = _income_values(_ytd_quarter(quarters, year, q))
                key = rng.choice(["Net sales", "Net income", "Operating income", "Gross profit"])
                c.ask(ORG, "Numeric", f"What was {short}'s {key.lower()} for the {_YTD[q].lower()} months ended {end}?",
                      [(d, f"{key} {_YTD[q]} Months Ended {month} {day} {year} {yv[key]}") for d in docs_with(year, q)],
                      yv[key])
            if year == 2024 and rng.random() < 0.6:
                pv = _income_values(prior)
                key = rng.choice(["Net sales", "Net income", "Operating income"])
                pend = f"{month} {day}, {year - 1}"
                c.ask(ORG, "Numeric", f"What was {short}'s {key.lower()} for the three months ended {pend}?",
                      [(d, f"{key} Three Months Ended {month} {day} {year - 1} {pv[key]}")
                       for d in docs_with(year - 1, q)], pv[key])
            for key in rng.sample(["Cash and cash equivalents", "Inventories", "Total assets", "Accounts payable",
                                   "Total current liabilities", "Total stockholders' equity", "Goodwill"], 2):
                c.ask(ORG, "Numeric", c.pick([f"What was {short}'s {key.lower()} as of {end}?",
                                              f"How much {key.lower()} did {short} report at {end}?"]),
                      [(doc, f"{key} {end} {money(bal_cur[key])}")], money(bal_cur[key]))
            c.ask(ORG, "Numeric", c.pick([f"What was {short}'s total debt as of {end}?",
                                          f"How much total debt did {short} have at {end}?"]),
                  [(doc, f"Total debt {end} {money(bal_cur['Total debt'])}")], money(bal_cur["Total debt"]))
            seg = rng.randrange(3)
            c.ask(ORG, "Numeric", f"What were the net sales of {short}'s {segments[seg]} segment in {qend}?",
                  [(d, f"{segments[seg]} Three Months Ended {month} {day} {year} {money(cur.segments[seg])}")
                   for d in docs_with(year, q)], money(cur.segments[seg]))
            c.ask(ORG, "Numeric", f"How much net cash did {short}'s operating activities provide in the "
                  f"{period_name.lower()} months ended {end}?",
                  [(doc, f"Net cash provided by operating activities {end} {money(ocf)}")], money(ocf))
            c.ask(ORG, "Factual", c.pick([f"By how much did {short}'s net sales change in {qend} and why?",
                                          f"Why did {short}'s quarterly net sales change in the quarter ended {end}?"]),
                  [(doc, mdna.split(" Gross margin")[0])], f"{abs(growth):.1f}%")
