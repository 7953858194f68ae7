"""A health trust: two-column patient leaflets per clinic (near-identical structure, different facts), policies
with long wrapped titles, and a clinic directory whose table cells hold bullet lists."""

from __future__ import annotations

from chunker.eval.devset.common import Corpus
from chunker.eval.devset.pdfdoc import DevPdf, Style, TableSpec

ORG = "health"
TRUST = "Northmere Health Trust"
_CLINICS = (
    ("Physiotherapy", "Eastgate Health Centre", "loose, comfortable clothing and a list of your current medicines"),
    ("Audiology", "Riverside Clinic", "your hearing aids, their charger and any earlier hearing test results"),
    ("Dermatology", "Northmere General Hospital, Outpatients Block B", "photographs of how the skin problem changed"),
    ("Diabetes Care", "Hollins Lane Medical Centre", "your blood glucose meter and your most recent HbA1c result"),
    ("Podiatry", "Eastgate Health Centre", "the shoes you wear most days and any insoles"),
    ("Sleep Medicine", "Northmere General Hospital, Level 3", "a two-week sleep diary and the name of your GP"),
    ("Speech and Language Therapy", "Westbrook Children's Centre", "any reports from school or nursery"),
    ("Cardiac Rehabilitation", "Riverside Clinic", "trainers, a water bottle and your discharge letter"),
)
_POLICIES = (
    ("Policy on Requesting Access to Personal Health Records and Correspondence", "records"),
    ("Procedure for Raising Concerns, Compliments and Formal Complaints about Care", "complaints"),
    ("Guidance on Patient Transport Eligibility and Reimbursement of Travel Expenses", "transport"),
)
_SITES = (
    ("Eastgate Health Centre", "14 Eastgate Road, Northmere NM2 4QA", "01632 960 211"),
    ("Riverside Clinic", "Riverside Walk, Northmere NM1 7RB", "01632 960 348"),
    ("Northmere General Hospital", "Infirmary Street, Northmere NM1 2HH", "01632 960 100"),
    ("Hollins Lane Medical Centre", "52 Hollins Lane, Ashby NM5 9TL", "01632 960 577"),
    ("Westbrook Children's Centre", "3 Westbrook Close, Northmere NM3 8EW", "01632 960 690"),
    ("Canal Street Community Hub", "Canal Street, Lowmoor NM6 1DD", "01632 960 732"),
)
_SITE_SERVICES = ("Blood tests", "Physiotherapy", "Hearing tests", "Minor injuries", "Child development checks",
                  "Diabetes education", "Wound care", "Vaccinations", "Podiatry", "Sleep studies", "X-ray",
                  "Talking therapies")


def build(c: Corpus) -> None:
    rng = c.rng
    # -- clinic leaflets: two columns, same structure for every clinic ------------------------------------------------
    for clinic, place, bring in _CLINICS:
        notice = rng.choice([24, 48, 72])
        length = rng.choice([30, 45, 60, 90])
        wait = rng.choice([6, 8, 12, 18])
        parking = rng.choice(["free for the first two hours", "charged at \u00a31.50 per hour",
                              "free for Blue Badge holders only",
                              "available in the multi-storey car park on Station Road"])
        st = Style(family="Helvetica", body=9.5, sizes=(17, 12.5, 10.5), header=f"{TRUST} \u2013 Patient Information",
                   footer=f"Leaflet {clinic[:3].upper()}-{rng.randint(10, 99)}", page_label="Page {n} of {m}")
        pdf = DevPdf(st, title=f"{clinic} Patient Information")
        pdf.add_page()
        pdf.doc_title(f"Your Appointment at the {clinic} Service: Information for Patients and Carers")
        intro = (f"This leaflet explains what happens at the {clinic.lower()} service of {TRUST}, what to bring and "
                 f"how to change your appointment. The service runs at {place}.")
        pdf.para(intro)
        blocks = [
            ("h", "Before your appointment"),
            ("p", f"Please bring {bring}. A first appointment usually lasts about {length} minutes; follow-up "
                  f"appointments are shorter."),
            ("h", "Waiting times"),
            ("p", f"Most patients referred to {clinic.lower()} are seen within {wait} weeks of the referral. Urgent "
                  f"referrals are seen sooner and are booked by the clinical team directly."),
            ("h", "Changing or cancelling"),
            ("p", f"If you cannot attend, tell us at least {notice} hours before your appointment so that it can be "
                  f"offered to another patient. Two missed appointments without notice may mean you are discharged "
                  f"back to your GP."),
            ("h", "Parking and access"),
            ("p", f"Parking at {place.split(',')[0]} is {parking}. All clinic rooms are step-free and a hearing loop "
                  f"is fitted at reception."),
            ("h", "Interpreters"),
            ("p", "Tell us when you book if you need an interpreter, including British Sign Language. The service is "
                  "free and we will book it for you."),
        ]
        pdf.two_columns(blocks)
        name = c.save(pdf, f"{clinic} Patient Leaflet.pdf", ORG)
        c.ask(ORG, "Factual", c.pick([f"How much notice do I need to give to cancel a {clinic.lower()} appointment?",
                                      f"How many hours before a {clinic.lower()} appointment must I cancel?"]),
              [(name, f"tell us at least {notice} hours before your appointment")], f"{notice} hours")
        c.ask(ORG, "Factual", c.pick([f"What should I bring to my {clinic.lower()} appointment?",
                                      f"What do patients need to bring to the {clinic} service?"]),
              [(name, f"Please bring {bring}.")], bring)
        c.ask(ORG, "Factual", f"How long does a first {clinic.lower()} appointment take?",
              [(name, f"A first appointment usually lasts about {length} minutes")], f"{length} minutes")
        if rng.random() < 0.6:
            c.ask(ORG, "Factual", f"How soon are patients referred to {clinic.lower()} usually seen?",
                  [(name, f"Most patients referred to {clinic.lower()} are seen within {wait} weeks of the referral.")],
                  f"{wait} weeks")
        if rng.random() < 0.4:
            c.ask(ORG, "Factual", f"What does parking cost for the {clinic.lower()} service?",
                  [(name, f"Parking at {place.split(',')[0]} is {parking}.")], parking)
    # -- policies with long titles --------------------------------------------------------------------------------
    for title, kind in _POLICIES:
        st = Style(family="Times", body=10.5, sizes=(17, 13, 11),
                   footer=f"{TRUST} \u2013 Policy {kind.upper()}-0{rng.randint(1, 9)}",
                   page_label="Page {n}", title_align="C", title_leading=1.6)
        pdf = DevPdf(st, title=title)
        pdf.add_page()
        pdf.doc_title(title)
        owner = rng.choice(["the Director of Nursing", "the Head of Patient Experience", "the Caldicott Guardian",
                            "the Medical Director"])
        review = rng.choice([2025, 2026, 2027])
        pdf.para(f"Policy owner: {owner}. Next review: {rng.choice(['March', 'June', 'October'])} {review}.")
        name = f"{TRUST} {kind.title()} Policy.pdf"
        if kind == "records":
            days = rng.choice([21, 28, 30])
            ext = rng.choice([60, 90])
            pdf.heading("1. Purpose", 2)
            pdf.para("Patients have a right to see and to receive a copy of the information the Trust holds about "
                     "them. This policy explains how to ask and how quickly we respond.")
            pdf.heading("2. How to Make a Request", 2)
            pdf.items(["Complete the subject access form on the Trust website or write to the Information Governance "
                       "Team.", "Enclose a copy of photographic identification and proof of address.",
                       "Say which records you want and for which dates, if you can."], numbered=True)
            pdf.heading("3. Response Times and Fees", 2)
            pdf.para(f"We respond within {days} calendar days of receiving a valid request. Complex requests may be "
                     f"extended by up to {ext} days; we will tell you why within the first {days} days.")
            fees = [["Electronic copy", "Free"], ["Paper copy of up to 50 pages", "Free"],
                    ["Further paper copies of the same records", f"\u00a3{rng.choice([10, 15, 20])} per request"],
                    ["Copies of X-ray images on disc", f"\u00a3{rng.choice([5, 8, 12])} per disc"]]
            pdf.ruled_table(TableSpec(header=[["Type of copy", "Fee"]], rows=fees, widths=[110.0, 50.0]))
            c.save(pdf, name, ORG)
            c.ask(ORG, "Factual", c.pick(["How long does the trust take to respond to a request for my health records?",
                                          "Within how many days must a subject access request be answered?"]),
                  [(name, f"We respond within {days} calendar days of receiving a valid request.")], f"{days} days")
            c.ask(ORG, "Table", "How much do copies of X-ray images on disc cost?",
                  [(name, f"Copies of X-ray images on disc {fees[3][1]}")], fees[3][1])
            c.ask(ORG, "Procedural", "What identification do I need to send with a request to see my health records?",
                  [(name, "Enclose a copy of photographic identification and proof of address.")], "photo ID")
        elif kind == "complaints":
            ack = rng.choice([2, 3, 5])
            full = rng.choice([25, 30, 40])
            months = rng.choice([6, 12])
            pdf.heading("1. Raising a Concern", 2)
            pdf.para("Most concerns are best raised with the ward or clinic manager straight away. If that does not "
                     "resolve the matter, contact the Patient Advice and Liaison Service (PALS).")
            pdf.heading("2. Formal Complaints", 2)
            pdf.para(f"Complaints should be made within {months} months of the events, or of the date you became "
                     f"aware of them. We acknowledge every complaint within {ack} working days and aim to send a full "
                     f"written response within {full} working days.")
            pdf.heading("3. If You Are Not Satisfied", 2)
            pdf.para("You may ask the Parliamentary and Health Service Ombudsman to review your complaint once our "
                     "process is complete.")
            c.save(pdf, name, ORG)
            c.ask(ORG, "Factual", "How long after an incident can I make a formal complaint to the health trust?",
                  [(name, f"Complaints should be made within {months} months of the events")], f"{months} months")
            c.ask(ORG, "Factual", c.pick(["How quickly is a complaint acknowledged?",
                                          "Within how many working days will the trust acknowledge my complaint?"]),
                  [(name, f"We acknowledge every complaint within {ack} working days")], f"{ack} working days")
            c.ask(ORG, "Factual", "When can I expect a full written response to my complaint?",
                  [(name, f"aim to send a full written response within {full} working days")], f"{full} working days")
        else:
            rate = rng.choice(["25p", "30p", "45p"])
            claim = rng.choice([3, 6])
            pdf.heading("1. Who Is Eligible", 2)
            pdf.items(["Patients who need a stretcher or continuous oxygen during the journey.",
                       "Patients whose condition means travelling by other means would harm their health.",
                       "Patients on renal dialysis or receiving radiotherapy."])
            pdf.heading("2. Reimbursement of Travel Costs", 2)
            pdf.para(f"Patients on qualifying benefits can claim back travel costs. Car travel is refunded at {rate} "
                     f"per mile. Claims must be made within {claim} months of the appointment, with receipts.")
            c.save(pdf, name, ORG)
            c.ask(ORG, "Factual", "At what rate per mile is car travel to hospital appointments refunded?",
                  [(name, f"Car travel is refunded at {rate} per mile.")], rate)
            c.ask(ORG, "Factual", "How long do I have to claim back travel costs for a hospital appointment?",
                  [(name, f"Claims must be made within {claim} months of the appointment, with receipts.")],
                  f"{claim} months")
            c.ask(ORG, "Procedural", "Who is eligible for patient transport?",
                  [(name, "Patients who need a stretcher or continuous oxygen during the journey.")], "stretcher")
    # -- directory: bullets in cells ------------------------------------------------------------------------------------
    st = Style(family="Helvetica", body=9.5, sizes=(17, 12.5, 10.5), footer=f"{TRUST} \u2013 Sites and Services",
               page_label="{n}")
    pdf = DevPdf(st, title="Sites and Services")
    pdf.add_page()
    pdf.doc_title(f"{TRUST} Sites and Services Directory")
    pdf.para("Walk-in services are marked in each site's list. Please check opening times before you travel.")
    rows = []
    offered: dict[str, list[str]] = {}
    hours: dict[str, str] = {}
    for site, address, phone in _SITES:
        services = rng.sample(list(_SITE_SERVICES), rng.randint(3, 5))
        offered[site] = services
        hours[site] = rng.choice(["Mon-Fri 08:00-18:30", "Mon-Fri 08:30-17:00", "24 hours, every day",
                                  "Mon-Sat 08:00-20:00"])
        rows.append([site, f"{address}\nTel. {phone}", "\n".join(f"\u2022 {s}" for s in services), hours[site]])
    pdf.ruled_table(TableSpec(header=[["Site", "Address and telephone", "Services", "Opening times"]], rows=rows,
                              widths=[38.0, 50.0, 45.0, 37.0], grid=False, hanging_bullets=True))
    name = c.save(pdf, f"{TRUST} Sites and Services Directory.pdf", ORG)
    for site, address, phone in _SITES:
        k = rng.randrange(3)
        if k == 0:
            c.ask(ORG, "Table", f"What is the telephone number of {site}?", [(name, f"{site} Tel. {phone}")], phone)
        elif k == 1:
            c.ask(ORG, "Table", f"Which services are available at {site}?",
                  [(name, f"{site} " + " ".join(offered[site]))], ", ".join(offered[site]))
        else:
            c.ask(ORG, "Table", f"When is {site} open?", [(name, f"{site} {hours[site]}")], hours[site])
