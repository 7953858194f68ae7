"""A pump maker: per-series specification sheets, a catalogue that repeats every sheet (near-duplicates), usage
guides per series, and a service-center directory whose table cells hold bullet lists."""

from __future__ import annotations

from chunker.eval.devset.common import Corpus
from chunker.eval.devset.pdfdoc import DevPdf, Style, TableSpec

ORG = "halvorsen"
COMPANY = "Halvorsen Pumps"

_FAMILIES = {
    "HX": ("end-suction centrifugal pump", "water supply, irrigation and building services", ("100", "200", "300")),
    "VX": ("vertical multistage pump", "boiler feed, washing plants and pressure boosting", ("40", "60")),
    "SX": ("submersible drainage pump", "dewatering of pits, basements and construction sites", ("10",)),
}
_SEALS = ("Carbon/silicon carbide mechanical seal", "Silicon carbide/silicon carbide mechanical seal",
          "Double mechanical seal with oil chamber", "Tungsten carbide cartridge seal")
_CASINGS = ("Cast iron EN-GJL-250", "Stainless steel 1.4408", "Ductile iron EN-GJS-500", "Bronze CC491K")
_IMPELLERS = ("Stainless steel 1.4301", "Bronze CC480K", "Glass-fibre reinforced PPO", "Cast iron EN-GJL-200")
_CENTERS = (
    ("Bergen", "Kokstadvegen 41, 5257 Kokstad", "Mon-Fri 07:30-16:00"),
    ("Trondheim", "Heggstadmyra 6, 7080 Heimdal", "Mon-Fri 08:00-15:30"),
    ("Stavanger", "Forusbeen 78, 4033 Stavanger", "Mon-Thu 07:00-15:00, Fri 07:00-13:00"),
    ("Gothenburg", "Importgatan 12, 422 46 Hisings Backa", "Mon-Fri 07:00-16:30"),
    ("Aarhus", "Hasselager Centervej 9, 8260 Viby J", "Mon-Fri 08:00-16:00"),
    ("Tampere", "Hatanpaan valtatie 34, 33100 Tampere", "Mon-Fri 08:00-16:00"),
    ("Rotterdam", "Waalhaven Oostzijde 101, 3087 BM Rotterdam", "Mon-Fri 07:30-17:00"),
    ("Gdansk", "ul. Marynarki Polskiej 59, 80-557 Gdansk", "Mon-Fri 08:00-16:00, Sat 09:00-12:00"),
)
_SERVICES = ("Pump overhaul", "Motor rewinding", "Seal replacement", "Vibration analysis", "On-site commissioning",
             "Spare parts counter", "Impeller balancing", "Warranty inspections", "Energy audits",
             "Emergency call-out (24 h)")
_SYMPTOMS = (
    ("Pump does not deliver water", "Suction line not primed or air leak at the suction flange",
     "Prime the casing and tighten the suction flange bolts"),
    ("Excessive vibration", "Impeller clogged or out of balance",
     "Clean the impeller and have it balanced at a service center"),
    ("Motor trips on overload", "Viscosity or density of the fluid above the design value",
     "Check the fluid data and reduce the flow with the discharge valve"),
    ("Leak at the shaft seal", "Seal faces worn or run dry",
     "Replace the mechanical seal and fit a dry-run sensor"),
    ("Noisy operation (cavitation)", "Net positive suction head available too low",
     "Raise the suction level or reduce the suction line losses"),
    ("Bearing temperature above 90 \u00b0C", "Too much or too little grease in the bearing housing",
     "Regrease with the specified quantity and check the bearing"),
)


def _specs(c: Corpus) -> dict[str, dict[str, str]]:
    rng = c.rng
    out: dict[str, dict[str, str]] = {}
    for fam, (_, _, sizes) in _FAMILIES.items():
        base_seal = rng.choice(_SEALS)
        base_casing = rng.choice(_CASINGS)
        for k, size in enumerate(sizes):
            n = int(size)
            flow = round((18 + 0.55 * n + rng.randint(-4, 4)) if fam == "HX"
                         else (6 + 0.4 * n) if fam == "VX" else 22 + rng.randint(0, 6))
            out[f"{fam}-{size}"] = {
                "Maximum flow rate": f"{flow} m\u00b3/h",
                "Maximum head": f"{(28 + k * 17 + rng.randint(0, 6)) if fam != 'VX' else 85 + n + rng.randint(0, 9)} m",
                "Motor power": f"{[1.5, 2.2, 3.0, 4.0, 5.5, 7.5, 11.0][min(6, k * 2 + rng.randint(0, 1))]} kW",
                "Rated speed": f"{rng.choice(['1450', '2900'])} rpm",
                "Inlet connection": f"DN{[40, 50, 65, 80, 100][min(4, k + rng.randint(0, 1))]}",
                "Maximum fluid temperature": f"{rng.choice([60, 80, 90, 110, 120])} \u00b0C",
                "Maximum operating pressure": f"{rng.choice([6, 10, 16, 25])} bar",
                "Shaft seal": base_seal if rng.random() < 0.7 else rng.choice(_SEALS),
                "Protection class": rng.choice(["IP55", "IP55", "IP65", "IP68"]) if fam != "SX" else "IP68",
                "Noise level": f"{rng.randint(58, 74)} dB(A)",
                "Net weight": f"{30 + n // 2 + rng.randint(0, 12) + 10 * k} kg",
                "Casing material": base_casing,
                "Impeller material": rng.choice(_IMPELLERS),
                "Warranty": f"{rng.choice([24, 24, 36, 60])} months",
            }
    return out


def _spec_table(spec: dict[str, str], grid: bool) -> TableSpec:
    return TableSpec(header=[["Parameter", "Value"]], rows=[[k, v] for k, v in spec.items()],
                     widths=[85.0, 75.0], grid=grid)


def build(c: Corpus) -> None:
    rng = c.rng
    specs = _specs(c)
    style = Style(family="Helvetica", body=10, sizes=(19, 13, 11), footer=f"{COMPANY} AS", page_label="{n}")
    cat_name = f"{COMPANY} Product Catalogue 2024.pdf"
    founded = rng.randint(1948, 1975)
    countries = rng.randint(28, 46)
    employees = rng.randint(600, 1400)
    # -- specification sheets ------------------------------------------------------------------------------------
    sheet_names: dict[str, str] = {}
    for series, spec in specs.items():
        fam = series.split("-")[0]
        kind, use, _ = _FAMILIES[fam]
        st = Style(family="Helvetica", body=10, sizes=(20, 13, 11),
                   footer=f"{COMPANY} AS \u00b7 Technical Specification {series} \u00b7 Rev. {rng.choice('BCD')}",
                   page_label="Page {n} of {m}")
        pdf = DevPdf(st, title=f"{series} Technical Specification")
        pdf.add_page()
        pdf.doc_title(f"{series} Series {kind.title()} \u2013 Technical Specification Sheet")
        pdf.para(f"The {series} is an {kind} for {use}. This sheet lists the performance data, materials and "
                 f"ordering codes of the standard build; options are described in the catalogue.")
        pdf.heading("Performance Data", 2)
        pdf.ruled_table(_spec_table(spec, grid=fam != "VX"))
        pdf.heading("Ordering Codes", 2)
        codes = [[f"{series}-{v}-{m}", f"{d}", f"{p}"] for v, m, d, p in (
            ("S", "A", "Standard build, cast casing", spec["Motor power"]),
            ("H", "A", "High-temperature build with cooled seal chamber", spec["Motor power"]),
            ("S", "E", "Standard build with IE4 motor", spec["Motor power"]),
        )]
        pdf.ruled_table(TableSpec(header=[["Ordering code", "Variant", "Motor"]], rows=codes, widths=[45.0, 85.0, 30.0],
                            grid=fam != "VX"))
        pdf.heading("Materials", 2)
        pdf.items([f"Casing: {spec['Casing material']}", f"Impeller: {spec['Impeller material']}",
                   f"Shaft seal: {spec['Shaft seal']}", "Shaft: stainless steel 1.4021"])
        name = c.save(pdf, f"{series} Specification Sheet.pdf", ORG)
        sheet_names[series] = name
        params = list(spec)
        for p in rng.sample(params, 5):
            q = c.pick([f"What is the {p.lower()} of the {series} pump?",
                        f"According to its specification sheet, what {p.lower()} does the {series} have?",
                        f"{p} of the {series} series?",
                        f"Which {p.lower()} is listed for the {series}?"])
            c.ask(ORG, "Identity", q, [(name, f"{p} {spec[p]}"), (cat_name, f"{p} {spec[p]}")], spec[p])
        c.ask(ORG, "Table", c.pick([f"What is the ordering code of the high-temperature {series}?",
                                    f"Which ordering code do I use for an {series} with a cooled seal chamber?"]),
              [(name, f"{codes[1][0]} High-temperature build with cooled seal chamber")], codes[1][0])
    # -- the catalogue: every sheet again, after a two-column overview ---------------------------------------------
    pdf = DevPdf(style, title=f"{COMPANY} Product Catalogue 2024")
    pdf.add_page()
    pdf.doc_title(f"{COMPANY} Product Catalogue 2024")
    about = (f"{COMPANY} was founded in {founded} in Bergen as a repair shop for ship pumps. Today the company "
             f"designs and builds centrifugal, multistage and submersible pumps and sells them in {countries} "
             f"countries through its own subsidiaries and distributors.")
    staff = (f"The group employs about {employees} people. All pumps are assembled and tested in Bergen; every pump "
             f"leaves the factory with a test certificate that records flow, head and power at three duty points.")
    pdf.two_columns([("h", "About us"), ("p", about), ("p", staff),
                     ("h", "How to choose a series"),
                     ("p", "HX pumps suit clean water at moderate heads. VX pumps build high pressure in a small "
                           "footprint and are the usual choice for boiler feed and washing plants. The SX series "
                           "handles water with solids up to 35 mm."),
                     ("h", "Warranty and spare parts"),
                     ("p", "Spare parts are stocked for at least fifteen years after a series is discontinued. "
                           "Warranty terms for each series are given in its performance table.")])
    for series, spec in specs.items():
        fam = series.split("-")[0]
        pdf.add_page()
        pdf.heading(f"{series} Series", 1)
        pdf.para(f"{_FAMILIES[fam][0].capitalize()} for {_FAMILIES[fam][1]}.")
        pdf.ruled_table(_spec_table(spec, grid=True))
    c.save(pdf, cat_name, ORG)
    c.ask(ORG, "Factual", c.pick([f"When was {COMPANY} founded?", f"In which year did {COMPANY} start?"]),
          [(cat_name, f"{COMPANY} was founded in {founded} in Bergen as a repair shop for ship pumps.")], str(founded))
    c.ask(ORG, "Factual", f"In how many countries does {COMPANY} sell its pumps?",
          [(cat_name, f"sells them in {countries} countries through its own subsidiaries and distributors")],
          str(countries))
    c.ask(ORG, "Factual", f"How long does {COMPANY} stock spare parts after a series is discontinued?",
          [(cat_name, "Spare parts are stocked for at least fifteen years after a series is discontinued.")],
          "fifteen years")
    c.ask(ORG, "Factual", f"How many people work for {COMPANY}?",
          [(cat_name, f"The group employs about {employees} people.")], str(employees))
    # -- usage guides ------------------------------------------------------------------------------------------------
    for series, spec in specs.items():
        st = Style(family="Times", body=11, sizes=(18, 14, 12), header=f"{series} Series \u2013 Usage Guide",
                   footer=COMPANY, page_label="{n}", title_align="C")
        pdf = DevPdf(st, title=f"{series} Usage Guide")
        pdf.add_page()
        pdf.doc_title(f"{series} Series Installation, Operation and Maintenance \u2013 Usage Guide")
        torque = rng.choice([45, 60, 85, 110, 140])
        gap = rng.choice([300, 400, 500, 600])
        steps = [
            f"Place the pump on a level foundation and leave at least {gap} mm of free space around the motor fan.",
            f"Tighten the foundation bolts crosswise to {torque} N\u00b7m.",
            "Connect the suction and discharge pipes without stress; support them independently of the pump.",
            "Fill the casing and suction line with liquid and vent the casing through the priming plug.",
            "Check the direction of rotation against the arrow on the motor fan cover.",
        ]
        pdf.heading("1. Installation", 2)
        pdf.para("Read this guide before installing the pump. Installation must be carried out by qualified staff.")
        pdf.items(steps, numbered=True)
        hours = rng.choice([2000, 4000, 8000])
        grease = rng.choice([3000, 4000, 6000])
        pdf.heading("2. Maintenance Schedule", 2)
        maint = [["Check the shaft seal for leaks", "Weekly"],
                 ["Regrease the motor bearings", f"Every {grease} operating hours"],
                 ["Inspect the impeller and wear ring", f"Every {hours} operating hours"],
                 ["Replace the mechanical seal", f"Every {hours * 2} operating hours or when leaking"],
                 ["Check the alignment of the coupling", "After every repair"]]
        pdf.ruled_table(TableSpec(header=[["Task", "Interval"]], rows=maint, widths=[95.0, 65.0], grid=False))
        pdf.heading("3. Troubleshooting", 2)
        trouble = rng.sample(list(_SYMPTOMS), 4)
        pdf.ruled_table(TableSpec(header=[["Symptom", "Possible cause", "Remedy"]], rows=[list(t) for t in trouble],
                            widths=[45.0, 60.0, 65.0], grid=True))
        pdf.heading("4. Service", 2)
        pdf.para("Repairs under warranty must be carried out by a Halvorsen service center; the Service Center "
                 "Directory lists addresses, opening hours and services.")
        name = c.save(pdf, f"{series} Usage Guide.pdf", ORG)
        c.ask(ORG, "Procedural", c.pick([f"What torque should the foundation bolts of the {series} be tightened to?",
                                         f"How tight must the {series} foundation bolts be?"]),
              [(name, f"Tighten the foundation bolts crosswise to {torque} N\u00b7m.")], f"{torque} N\u00b7m")
        c.ask(ORG, "Table", c.pick([f"How often should the motor bearings of the {series} be regreased?",
                                    f"What is the regreasing interval for the {series} motor bearings?"]),
              [(name, f"Regrease the motor bearings Every {grease} operating hours")], f"{grease} operating hours")
        sym, cause, remedy = trouble[rng.randrange(4)]
        c.ask(ORG, "Table", c.pick([f"What should I do if my {series} shows this problem: {sym.lower()}?",
                                    f"{series} usage guide: remedy for '{sym}'?"]),
              [(name, f"{sym} {cause} {remedy}")], remedy)
        if rng.random() < 0.5:
            c.ask(ORG, "Procedural", f"How much free space is needed around the motor fan of the {series}?",
                  [(name, f"leave at least {gap} mm of free space around the motor fan")], f"{gap} mm")
    # -- the service center directory: bullet lists inside table cells --------------------------------------------------
    pdf = DevPdf(Style(family="Helvetica", body=10, sizes=(18, 13, 11), footer=f"{COMPANY} Service Center Directory",
                       page_label="{n}"), title="Service Center Directory")
    pdf.add_page()
    pdf.doc_title(f"{COMPANY} Service Center Directory")
    pdf.para("Our service centers repair all current and discontinued Halvorsen pumps. Book a visit by phone or "
             "through the customer portal; emergency call-outs are answered around the clock where offered.")
    rows = []
    offered: dict[str, list[str]] = {}
    for city, address, hours in _CENTERS:
        services = rng.sample(list(_SERVICES), rng.randint(2, 4))
        offered[city] = services
        rows.append([f"{city} Service Center", address, "\n".join(f"\u2022 {s}" for s in services), hours])
    pdf.ruled_table(TableSpec(header=[["Service Center", "Address", "Services", "Opening hours"]], rows=rows,
                        widths=[32.0, 45.0, 50.0, 43.0], grid=True))
    name = c.save(pdf, f"{COMPANY} Service Center Directory.pdf", ORG)
    for city, address, hours in rng.sample(list(_CENTERS), 6):
        kind = rng.randrange(3)
        if kind == 0:
            c.ask(ORG, "Table", f"What are the opening hours of the {city} service center?",
                  [(name, f"{city} Service Center {hours}")], hours)
        elif kind == 1:
            c.ask(ORG, "Table", c.pick([f"Where is the {city} service center located?",
                                        f"What is the address of Halvorsen's {city} service center?"]),
                  [(name, f"{city} Service Center {address}")], address)
        else:
            c.ask(ORG, "Table", f"Which services does the {city} service center offer?",
                  [(name, f"{city} Service Center " + " ".join(offered[city]))], ", ".join(offered[city]))
