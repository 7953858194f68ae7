"""A city council: two-column ward newsletters (same layout, different wards), fee tables with a currency
column, a council-tax band table, a planning procedure and a grants programme."""

from __future__ import annotations

from chunker.eval.devset.common import Corpus
from chunker.eval.devset.pdfdoc import DevPdf, Style, TableSpec

ORG = "council"
COUNCIL = "Oakridge City Council"
_WARDS = ("Ashgrove", "Bellfield", "Carrow Hill", "Dunmore", "Elmstead")
_PROJECTS = ("resurfacing of the High Street footpaths", "new play equipment in Victoria Park",
             "a community orchard on the old allotment site", "LED street lighting on the ring road",
             "a safer crossing outside St Anne's Primary School", "tree planting along the canal towpath",
             "a youth club in the former library building", "repairs to the bandstand roof")
_BANDS = (("A", "up to \u00a340,000"), ("B", "\u00a340,001 to \u00a352,000"), ("C", "\u00a352,001 to \u00a368,000"),
          ("D", "\u00a368,001 to \u00a388,000"), ("E", "\u00a388,001 to \u00a3120,000"),
          ("F", "\u00a3120,001 to \u00a3160,000"), ("G", "\u00a3160,001 to \u00a3320,000"), ("H", "over \u00a3320,000"))
_RATIO = {"A": 6, "B": 7, "C": 8, "D": 9, "E": 11, "F": 13, "G": 15, "H": 18}


def build(c: Corpus) -> None:
    rng = c.rng
    # -- ward newsletters ---------------------------------------------------------------------------------------------
    for ward in _WARDS:
        day = rng.choice(["Monday", "Tuesday", "Wednesday", "Thursday", "Friday"])
        bins = rng.choice(["green (garden waste)", "blue (paper and card)", "grey (general waste)"])
        surgery_day = rng.choice(["first Saturday", "second Tuesday", "last Thursday"])
        venue = rng.choice(["the Community Centre", "the Methodist Hall", "the public library", "the sports pavilion"])
        project, budget = rng.choice(_PROJECTS), rng.choice([18_000, 35_000, 62_000, 120_000])
        st = Style(family="Helvetica", body=9.5, sizes=(18, 12.5, 10.5), header=f"{COUNCIL} \u2013 Ward News",
                   footer=f"{ward} Ward Newsletter \u2013 Spring 2024", page_label="{n}")
        pdf = DevPdf(st, title=f"{ward} Ward Newsletter")
        pdf.add_page()
        pdf.doc_title(f"{ward} Ward Newsletter \u2013 Spring 2024")
        pdf.two_columns([
            ("h", "Bin collections"),
            ("p", f"In {ward} the {bins} bin is now collected every other {day}. Put bins out by 7am on "
                  f"collection day and take them in the same evening."),
            ("h", "Meet your councillors"),
            ("p", f"Your ward councillors hold a drop-in surgery on the {surgery_day} of every month at {venue}, "
                  f"from 10am to midday. No appointment is needed."),
            ("h", "Local improvements"),
            ("p", f"This year the ward budget of \u00a3{budget:,} pays for {project}. Work starts in the summer and "
                  f"residents will be told about any road closures two weeks in advance."),
            ("h", "Report it"),
            ("p", "Potholes, fly-tipping and broken street lights can be reported online at any time. Emergencies on "
                  "the road should be reported by phone."),
        ])
        name = c.save(pdf, f"{ward} Ward Newsletter Spring 2024.pdf", ORG)
        c.ask(ORG, "Identity", c.pick([f"When is the {bins.split(' ')[0]} bin collected in {ward}?",
                                       f"Which day are {bins.split(' ')[0]} bins collected in the {ward} ward?"]),
              [(name, f"In {ward} the {bins} bin is now collected every other {day}.")], day)
        c.ask(ORG, "Identity", f"Where and when do the {ward} ward councillors hold their surgery?",
              [(name, f"drop-in surgery on the {surgery_day} of every month at {venue}")], f"{surgery_day}, {venue}")
        c.ask(ORG, "Identity", c.pick([f"What does the {ward} ward budget pay for this year?",
                                       f"How much is the {ward} ward budget and what is it spent on?"]),
              [(name, f"the ward budget of \u00a3{budget:,} pays for {project}")], f"\u00a3{budget:,}")
    # -- parking permits: a currency column -------------------------------------------------------------------------------
    st = Style(family="Times", body=10.5, sizes=(17, 13, 11), footer=COUNCIL, page_label="Page {n}")
    pdf = DevPdf(st, title="Parking Permits")
    pdf.add_page()
    pdf.doc_title("Residents' and Business Parking Permits: Charges and Conditions 2024/25")
    pdf.para("Permits are issued for a controlled parking zone and are valid only in that zone. Apply online; "
             "permits are virtual and linked to the vehicle registration.")
    fees = [("First resident permit", rng.choice([45, 60, 75])), ("Second resident permit", rng.choice([90, 120])),
            ("Visitor permit (book of 20 days)", rng.choice([20, 25, 30])), ("Business permit", rng.choice([350, 420, 480])),
            ("Carer permit", 0), ("Electric vehicle, first permit", rng.choice([15, 20]))]
    pdf.ruled_table(TableSpec(header=[["Permit", "", "Annual charge"]],
                              rows=[[p, "\u00a3", f"{v:.2f}" if v else "Free"] for p, v in fees],
                              widths=[100.0, 8.0, 52.0], aligns=["L", "R", "R"]))
    refund = rng.choice([14, 28])
    pdf.para(f"A permit cancelled within {refund} days of issue is refunded in full; after that, refunds are made for "
             f"each whole remaining month.")
    name = c.save(pdf, "Parking Permits 2024-25.pdf", ORG)
    for p, v in rng.sample(fees, 4):
        c.ask(ORG, "Numeric" if v else "Table", f"How much does a {p.lower()} cost in Oakridge?",
              [(name, f"{p} \u00a3 {v:.2f}" if v else f"{p} Free")], f"\u00a3{v:.2f}" if v else "Free")
    c.ask(ORG, "Factual", "Can I get a refund if I cancel my parking permit?",
          [(name, f"A permit cancelled within {refund} days of issue is refunded in full")], f"{refund} days")
    # -- council tax bands ------------------------------------------------------------------------------------------------
    pdf = DevPdf(Style(family="Helvetica", body=10, sizes=(18, 13, 11), footer=COUNCIL, page_label="{n}"),
                 title="Council Tax 2024/25")
    pdf.add_page()
    pdf.doc_title("Council Tax Charges 2024/25")
    band_d = rng.choice([1980.45, 2104.10, 2231.76])
    rows = []
    charges = {}
    for band, value in _BANDS:
        charges[band] = f"{band_d * _RATIO[band] / 9:,.2f}"
        rows.append([band, value, "\u00a3", charges[band]])
    pdf.para("Your band depends on the value of your home on 1 April 1991. The charge for 2024/25 includes the "
             "police and fire precepts.")
    pdf.ruled_table(TableSpec(header=[["Band", "Property value (1 April 1991)", "", "Annual charge"]], rows=rows,
                              widths=[20.0, 80.0, 8.0, 52.0], aligns=["L", "L", "R", "R"]))
    discount = rng.choice([25, 30])
    pdf.para(f"A person who lives alone receives a {discount}% single person discount. Apply online or by phone.")
    name = c.save(pdf, "Council Tax Charges 2024-25.pdf", ORG)
    for band in rng.sample([b for b, _ in _BANDS], 4):
        c.ask(ORG, "Numeric", c.pick([f"What is the annual council tax for a band {band} property in Oakridge?",
                                      f"How much council tax does a band {band} home pay in 2024/25?"]),
              [(name, f"{band} \u00a3 {charges[band]}")], charges[band])
    c.ask(ORG, "Factual", "How much is the single person discount on council tax?",
          [(name, f"A person who lives alone receives a {discount}% single person discount.")], f"{discount}%")
    # -- planning procedure ---------------------------------------------------------------------------------------------
    decide = rng.choice([8, 10, 13])
    consult = rng.choice([21, 28])
    pdf = DevPdf(Style(family="Times", body=10.5, sizes=(17, 13, 11), footer=f"{COUNCIL} Planning Service",
                       page_label="{n}"), title="Planning Applications")
    pdf.add_page()
    pdf.doc_title("How to Apply for Planning Permission for Householder Extensions and Alterations")
    pdf.heading("Steps", 2)
    pdf.items(["Check whether your project needs permission using the online guide.",
               "Ask for pre-application advice if the site is in a conservation area.",
               "Submit the application with location and site plans, drawings and the fee.",
               f"Neighbours are consulted for {consult} days and a site notice is displayed.",
               f"A decision is made within {decide} weeks of a valid application."], numbered=True)
    fee = rng.choice([258, 298, 320])
    pdf.para(f"The fee for a householder application is \u00a3{fee}. Applications for listed building consent are "
             f"free.")
    name = c.save(pdf, "Planning Applications Householder Guide.pdf", ORG)
    c.ask(ORG, "Procedural", "How long are neighbours consulted on a householder planning application?",
          [(name, f"Neighbours are consulted for {consult} days and a site notice is displayed.")], f"{consult} days")
    c.ask(ORG, "Procedural", "How long does the council take to decide a householder planning application?",
          [(name, f"A decision is made within {decide} weeks of a valid application.")], f"{decide} weeks")
    c.ask(ORG, "Numeric", "What is the fee for a householder planning application in Oakridge?",
          [(name, f"The fee for a householder application is \u00a3{fee}.")], f"\u00a3{fee}")
    # -- grants programme ---------------------------------------------------------------------------------------------
    grant = rng.choice([2500, 5000, 7500])
    match = rng.choice([25, 50])
    deadline = rng.choice(["31 May 2024", "30 June 2024", "15 September 2024"])
    pdf = DevPdf(Style(family="Helvetica", body=10, sizes=(18, 13, 11), footer=f"{COUNCIL} Community Grants",
                       page_label="{n}"), title="Community Grants")
    pdf.add_page()
    pdf.doc_title("Community Grants Programme 2024: Guidance for Applicants")
    pdf.heading("Who can apply", 2)
    pdf.items(["Voluntary and community groups based in Oakridge.", "Registered charities with a local project.",
               "Parish and residents' associations."])
    pdf.heading("What we fund", 2)
    pdf.para(f"Grants of up to \u00a3{grant:,} for projects that bring residents together, improve green spaces or "
             f"support older people. Groups must raise at least {match}% of the project cost from other sources.")
    pdf.heading("Deadline", 2)
    pdf.para(f"Applications close on {deadline}. Decisions are sent within eight weeks of the closing date.")
    name = c.save(pdf, "Community Grants Programme 2024.pdf", ORG)
    c.ask(ORG, "Factual", "What is the maximum community grant the council awards?",
          [(name, f"Grants of up to \u00a3{grant:,} for projects")], f"\u00a3{grant:,}")
    c.ask(ORG, "Factual", "When do applications for community grants close?",
          [(name, f"Applications close on {deadline}.")], deadline)
    c.ask(ORG, "Factual", "How much match funding must a group raise for a community grant?",
          [(name, f"Groups must raise at least {match}% of the project cost from other sources.")], f"{match}%")
