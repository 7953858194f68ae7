"""A freight carrier: regional rate cards (near-duplicates: the same grid, other prices) with a currency column
and a spanning header, service guides per product, a claims policy full of deadlines, a depot directory."""

from __future__ import annotations

from chunker.eval.devset.common import Corpus
from chunker.eval.devset.pdfdoc import DevPdf, Style, TableSpec

ORG = "freight"
CARRIER = "Trevisa Freight"
_REGIONS = ("Northern", "Central", "Southern")
_BANDS = ("up to 1", "1 to 2", "2 to 5", "5 to 10", "10 to 15", "15 to 20", "20 to 25", "25 to 31.5", "31.5 to 40",
          "40 to 50", "50 to 70", "70 to 100", "100 to 150", "150 to 200", "200 to 300", "300 to 500",
          "500 to 750", "750 to 1000")
_ZONES = ("A", "B", "C", "D")
_PRODUCTS = (
    ("Express", "next working day before 12:00", 31.5),
    ("Economy", "two to four working days", 31.5),
    ("Pallet", "two working days", 1000),
)
_DEPOTS = (
    ("Vicenza", "Via dell'Industria 21, 36100 Vicenza"), ("Bologna", "Via del Lavoro 8, 40127 Bologna"),
    ("Bari", "Strada Provinciale 54, 70026 Modugno"), ("Turin", "Corso Romania 460, 10156 Torino"),
    ("Naples", "Via Galileo Ferraris 200, 80142 Napoli"), ("Verona", "Via Sommacampagna 63, 37137 Verona"),
)
_DEPOT_SERVICES = ("Parcel drop-off", "Pallet collection", "Customs clearance", "Cold storage", "Dangerous goods "
                   "acceptance", "Returns processing", "Saturday collection")


def build(c: Corpus) -> None:
    rng = c.rng
    # -- rate cards: one per region, same grid --------------------------------------------------------------------
    base = {z: 6.0 + 1.7 * k for k, z in enumerate(_ZONES)}
    for region in _REGIONS:
        factor = {"Northern": 1.0, "Central": 0.94, "Southern": 1.08}[region] * rng.uniform(0.97, 1.03)
        st = Style(family="Helvetica", body=9.5, sizes=(17, 12.5, 10.5), header=f"{CARRIER} \u2013 Rate Card 2024",
                   footer=f"{region} Region", page_label="{n}")
        pdf = DevPdf(st, title=f"Rate Card {region} Region 2024")
        pdf.add_page()
        pdf.doc_title(f"{CARRIER} Rate Card 2024 \u2013 {region} Region")
        pdf.para(f"Prices apply to shipments collected in the {region} region from 1 January 2024. Zones are "
                 f"defined by the destination postcode; see the zone map on the last page. Prices exclude VAT and "
                 f"the fuel surcharge.")
        rates: dict[tuple[str, str], str] = {}
        rows = []
        for i, band in enumerate(_BANDS):
            row = [band]
            for z in _ZONES:
                price = (base[z] + 2.1 * i ** 1.35) * factor
                rates[(band, z)] = f"{price:,.2f}"
                row += ["\u20ac", rates[(band, z)]]
            rows.append(row)
        pdf.heading("Parcel and Pallet Prices", 2)
        pdf.ruled_table(TableSpec(header=[["Weight (kg)"] + sum((["", f"Zone {z}"] for z in _ZONES), [])], rows=rows,
                                  widths=[34.0] + [6.0, 28.0] * 4, aligns=["L"] + ["R"] * 8,
                                  spans=[("Price per shipment (EUR)", 1, 8)], repeat_header=True))
        fuel = rng.choice([8.5, 9.75, 11.25, 12.0])
        remote = rng.choice([4.5, 6.0, 7.5])
        pdf.heading("Surcharges", 2)
        pdf.ruled_table(TableSpec(header=[["Surcharge", "Amount"]], rows=[
            ["Fuel surcharge", f"{fuel}% of the freight price"],
            ["Islands and remote areas", f"\u20ac {remote:.2f} per shipment"],
            ["Tail-lift delivery", "\u20ac 18.00 per pallet"], ["Saturday delivery", "\u20ac 12.50 per shipment"]],
            widths=[70.0, 90.0]))
        name = c.save(pdf, f"Rate Card {region} 2024.pdf", ORG)
        for band, z in rng.sample(list(rates), 4):
            c.ask(ORG, "Numeric", c.pick([f"How much does it cost to send a {band} kg shipment to zone {z} from the "
                                          f"{region} region?",
                                          f"What is the {region} region price for {band} kg to zone {z}?"]),
                  [(name, f"{band} Zone {z} \u20ac {rates[(band, z)]}")], rates[(band, z)])
        c.ask(ORG, "Numeric", f"What is the fuel surcharge for shipments from the {region} region?",
              [(name, f"Fuel surcharge {fuel}% of the freight price")], f"{fuel}%")
        if rng.random() < 0.5:
            c.ask(ORG, "Numeric", f"What does delivery to islands and remote areas cost extra in the {region} region?",
                  [(name, f"Islands and remote areas \u20ac {remote:.2f} per shipment")], f"{remote:.2f}")
    # -- service guides ------------------------------------------------------------------------------------------------
    for product, transit, maxw in _PRODUCTS:
        cutoff = rng.choice(["15:00", "16:30", "17:00", "18:00"])
        attempts = rng.choice([2, 3])
        hold = rng.choice([5, 7, 10])
        st = Style(family="Times", body=10.5, sizes=(17, 13, 11), header=f"{CARRIER} {product}", footer=CARRIER,
                   page_label="{n}")
        pdf = DevPdf(st, title=f"{product} Service Guide")
        pdf.add_page()
        pdf.doc_title(f"{CARRIER} {product} Service Guide")
        pdf.heading("Transit Times", 2)
        pdf.para(f"{product} shipments are delivered {transit} within mainland Italy when collected before the "
                 f"cut-off time of {cutoff}. The maximum weight per item is {maxw:g} kg.")
        pdf.heading("Failed Deliveries", 2)
        pdf.para(f"We make {attempts} delivery attempts. After the last attempt the shipment is held at the local depot "
                 f"for {hold} calendar days and then returned to the sender at the sender's cost.")
        pdf.heading("Preparing Your Shipment", 2)
        pdf.items(["Use a strong outer box or a wooden pallet in good condition.",
                   "Stick the label on the largest side; remove old labels.",
                   "Declare the real weight; items found heavier are re-weighed and charged."])
        name = c.save(pdf, f"{product} Service Guide.pdf", ORG)
        c.ask(ORG, "Identity", f"What is the cut-off time for {CARRIER} {product} collections?",
              [(name, f"collected before the cut-off time of {cutoff}")], cutoff)
        c.ask(ORG, "Identity", f"How long is a {product} shipment held at the depot after failed deliveries?",
              [(name, f"held at the local depot for {hold} calendar days")], f"{hold} days")
        c.ask(ORG, "Identity", f"What is the maximum weight per item for {product}?",
              [(name, f"The maximum weight per item is {maxw:g} kg.")], f"{maxw:g} kg")
    # -- claims policy: many deadlines -----------------------------------------------------------------------------------
    damage = rng.choice([3, 5, 7])
    loss = rng.choice([14, 21, 30])
    proof = rng.choice([30, 60])
    cap = rng.choice([8.33, 10.0])
    st = Style(family="Helvetica", body=10, sizes=(18, 13, 11), footer=f"{CARRIER} \u2013 Claims Policy",
               page_label="Page {n} of {m}")
    pdf = DevPdf(st, title="Claims Policy")
    pdf.add_page()
    pdf.doc_title(f"{CARRIER} Claims Policy for Damaged, Lost and Delayed Shipments")
    pdf.heading("1. Visible Damage", 2)
    pdf.para(f"Note any visible damage on the delivery receipt. Damage must be reported in writing within {damage} "
             f"days of delivery, with photographs of the packaging and the contents.")
    pdf.heading("2. Lost Shipments", 2)
    pdf.para(f"A shipment not delivered within {loss} days of collection may be claimed as lost. Submit the claim "
             f"with the commercial invoice showing the value of the goods.")
    pdf.heading("3. Documents and Compensation", 2)
    pdf.para(f"Supporting documents must reach us within {proof} days of the claim. Compensation is limited to "
             f"{cap} SDR per kilogram of gross weight unless a higher value was declared and insured.")
    name = c.save(pdf, f"{CARRIER} Claims Policy.pdf", ORG)
    c.ask(ORG, "Factual", c.pick(["How many days do I have to report damage to a delivered shipment?",
                                  "What is the deadline for reporting visible damage to a Trevisa delivery?"]),
          [(name, f"Damage must be reported in writing within {damage} days of delivery")], f"{damage} days")
    c.ask(ORG, "Factual", "When can a Trevisa shipment be claimed as lost?",
          [(name, f"A shipment not delivered within {loss} days of collection may be claimed as lost.")], f"{loss} days")
    c.ask(ORG, "Factual", "What is the compensation limit for a damaged freight shipment per kilogram?",
          [(name, f"Compensation is limited to {cap} SDR per kilogram of gross weight")], f"{cap}")
    c.ask(ORG, "Factual", "How long do I have to send supporting documents for a freight claim?",
          [(name, f"Supporting documents must reach us within {proof} days of the claim.")], f"{proof} days")
    # -- depots: bullets in cells, boxed or ruled ----------------------------------------------------------------
    st = Style(family="Helvetica", body=9.5, sizes=(17, 12.5, 10.5), footer=f"{CARRIER} Depots", page_label="{n}")
    pdf = DevPdf(st, title="Depot Directory")
    pdf.add_page()
    pdf.doc_title(f"{CARRIER} Depot Directory")
    rows = []
    offered: dict[str, list[str]] = {}
    hours: dict[str, str] = {}
    for city, address in _DEPOTS:
        offered[city] = rng.sample(list(_DEPOT_SERVICES), rng.randint(2, 4))
        hours[city] = rng.choice(["Mon-Fri 07:00-19:00", "Mon-Fri 08:00-18:00, Sat 08:00-12:00", "Mon-Sat 06:00-20:00"])
        rows.append([f"{city} Depot", address, "\n".join(f"\u2022 {s}" for s in offered[city]), hours[city]])
    pdf.ruled_table(TableSpec(header=[["Depot", "Address", "Services", "Opening hours"]], rows=rows,
                              widths=[30.0, 50.0, 50.0, 40.0], grid=rng.random() < 0.5))
    name = c.save(pdf, f"{CARRIER} Depot Directory.pdf", ORG)
    for city, address in rng.sample(list(_DEPOTS), 5):
        if rng.random() < 0.5:
            c.ask(ORG, "Table", f"What services does the {city} depot provide?",
                  [(name, f"{city} Depot " + " ".join(offered[city]))], ", ".join(offered[city]))
        else:
            c.ask(ORG, "Table", f"What are the opening hours of the {CARRIER} depot in {city}?",
                  [(name, f"{city} Depot {hours[city]}")], hours[city])
