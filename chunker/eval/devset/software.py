"""A software vendor: an API reference whose error-code table runs over several pages, release notes per version
(same structure, different content), an SLA with a service-credit table, a price list with a currency column."""

from __future__ import annotations

from chunker.eval.devset.common import Corpus
from chunker.eval.devset.pdfdoc import DevPdf, Style, TableSpec

ORG = "software"
VENDOR = "Quillon Software"
PRODUCT = "Quillon Ledger"
_AREAS = ("authentication", "invoices", "payments", "webhooks", "exports", "users", "projects", "reports",
          "attachments", "currencies", "tax rules", "audit log")
_PROBLEMS = ("the request body is not valid JSON", "the access token has expired", "the caller lacks the required scope",
             "the resource was deleted", "a field exceeds its maximum length", "the idempotency key was reused with a "
             "different body", "the account is suspended", "the rate limit was exceeded", "an upstream bank "
             "connection timed out", "the export is still being generated", "the currency is not enabled for the "
             "account", "the webhook endpoint returned an error")
_FEATURES = ("bulk invoice approval", "scheduled CSV exports", "multi-currency bank feeds", "single sign-on with SAML",
             "custom tax rules per region", "webhook signing with rotating secrets", "a dark mode for the web app",
             "PDF invoice templates", "two-step approval for payments", "project-level budgets", "an audit log API",
             "attachments on journal entries")
_FIXES = ("CSV exports dropped rows with line breaks in the memo field", "rounding of VAT on invoices with more than "
          "100 lines", "webhook retries stopped after a server restart", "the dashboard showed last month's totals "
          "on the first day of a month", "SSO users were logged out after 15 minutes", "attachments larger than 10 MB "
          "failed to upload", "currency conversion used the previous day's rate at midnight UTC", "time-outs when "
          "searching more than 50,000 invoices")


def build(c: Corpus) -> None:
    rng = c.rng
    st = Style(family="Helvetica", body=9.5, sizes=(18, 13, 11), header=f"{PRODUCT} API Reference",
               footer=VENDOR, page_label="{n}")
    # -- API reference: rate limits and a long error table -------------------------------------------------------------
    pdf = DevPdf(st, title=f"{PRODUCT} API Reference")
    pdf.add_page()
    pdf.doc_title(f"{PRODUCT} REST API Reference, Version 3")
    pdf.para("All endpoints accept and return JSON over HTTPS. Authenticate with an OAuth 2.0 bearer token; tokens "
             "expire after one hour and are renewed with the refresh token.")
    pdf.heading("Rate Limits", 2)
    limits = {"Starter": rng.choice([60, 120]), "Team": rng.choice([300, 600]), "Business": rng.choice([1200, 1800]),
              "Enterprise": rng.choice([3000, 6000])}
    burst = {k: v // 4 for k, v in limits.items()}
    pdf.ruled_table(TableSpec(header=[["Plan", "Requests per minute", "Burst (per second)", "Concurrent exports"]],
                              rows=[[k, str(v), str(burst[k]), str(i + 1)] for i, (k, v) in enumerate(limits.items())],
                              widths=[40.0, 45.0, 45.0, 40.0]))
    pdf.heading("Error Codes", 2)
    pdf.para("Every error response carries a code, a message and a request identifier. Codes below 5000 are client "
             "errors; codes from 5000 are server-side and may be retried with exponential back-off.")
    errors = []
    used: set[int] = set()
    for i in range(64):
        area = _AREAS[i % len(_AREAS)]
        base = 4000 if i < 44 else 5000
        code = base + rng.randint(1, 899)
        while code in used:
            code += 1
        used.add(code)
        problem = _PROBLEMS[(i * 7 + rng.randint(0, 3)) % len(_PROBLEMS)]
        http = rng.choice(["400", "401", "403", "404", "409", "422", "429"]) if base == 4000 \
            else rng.choice(["500", "502", "503"])
        retry = "Yes" if base == 5000 or http == "429" else "No"
        errors.append([f"QL-{code}", http, f"{area.capitalize()}: {problem}", retry])
    errors.sort(key=lambda r: r[0])
    pdf.ruled_table(TableSpec(header=[["Code", "HTTP", "Meaning", "Retry"]], rows=errors,
                              widths=[25.0, 17.0, 108.0, 20.0], repeat_header=rng.random() < 0.5))
    name = c.save(pdf, f"{PRODUCT} API Reference.pdf", ORG)
    for plan in rng.sample(list(limits), 3):
        c.ask(ORG, "Table", c.pick([f"How many API requests per minute does the {plan} plan allow?",
                                    f"What is the rate limit for {plan} customers?"]),
              [(name, f"{plan} {limits[plan]} requests per minute")], str(limits[plan]))
    for code, http, meaning, retry in rng.sample(errors, 12):
        if rng.random() < 0.6:
            c.ask(ORG, "Table", c.pick([f"What does error {code} mean?", f"What causes the {code} error?"]),
                  [(name, f"{code} {http} {meaning}")], meaning)
        else:
            c.ask(ORG, "Table", f"Can a client retry a request that failed with {code}?",
                  [(name, f"{code} {http} {meaning} {retry}")], retry)
    c.ask(ORG, "Factual", f"How long are {PRODUCT} API access tokens valid?",
          [(name, "tokens expire after one hour and are renewed with the refresh token")], "one hour")
    # -- release notes: same structure for every version ---------------------------------------------------------------
    feats = rng.sample(list(_FEATURES), len(_FEATURES))
    fixes = rng.sample(list(_FIXES), len(_FIXES))
    for k, minor in enumerate(range(1, 7)):
        version = f"3.{minor}"
        month = ["January", "March", "May", "July", "September", "November"][k]
        stn = Style(family="Helvetica", body=10, sizes=(18, 13, 11), footer=f"{PRODUCT} {version} Release Notes",
                    page_label="{n}")
        pdf = DevPdf(stn, title=f"{PRODUCT} {version} Release Notes")
        pdf.add_page()
        pdf.doc_title(f"{PRODUCT} {version} Release Notes")
        pdf.para(f"Released {month} 2024. This release is installed automatically for cloud customers; on-premises "
                 f"customers can download it from the customer portal.")
        new = feats[2 * k: 2 * k + 2]
        fixed = fixes[k] if k < len(fixes) else fixes[0]
        pdf.heading("New Features", 2)
        pdf.items([f"{f[0].upper()}{f[1:]} is now available to all plans." if j == 0 else
                   f"{f[0].upper()}{f[1:]} (Business and Enterprise plans)." for j, f in enumerate(new)])
        pdf.heading("Fixed Issues", 2)
        pdf.items([f"Fixed: {fixed}.", "Fixed: several typographical errors in the settings pages."])
        pdf.heading("Upgrade Notes", 2)
        min_db = rng.choice(["PostgreSQL 13", "PostgreSQL 14", "PostgreSQL 15"])
        pdf.para(f"On-premises installations of version {version} require {min_db} or later. Back up the database "
                 f"before upgrading.")
        name = c.save(pdf, f"{PRODUCT} {version} Release Notes.pdf", ORG)
        c.ask(ORG, "Identity", c.pick([f"In which {PRODUCT} version was {new[0]} introduced?",
                                       f"Which release of {PRODUCT} added {new[0]}?"]),
              [(name, f"{new[0]} is now available to all plans")], version)
        c.ask(ORG, "Identity", f"Which issue was fixed in {PRODUCT} {version}?",
              [(name, f"Fixed: {fixed}.")], fixed)
        if rng.random() < 0.5:
            c.ask(ORG, "Identity", f"Which database version does an on-premises {PRODUCT} {version} need?",
                  [(name, f"On-premises installations of version {version} require {min_db} or later.")], min_db)
    # -- SLA ---------------------------------------------------------------------------------------------------------------
    sts = Style(family="Times", body=10.5, sizes=(17, 13, 11), footer=f"{VENDOR} \u2013 Service Level Agreement",
                page_label="Page {n}")
    pdf = DevPdf(sts, title="Service Level Agreement")
    pdf.add_page()
    pdf.doc_title(f"{VENDOR} Service Level Agreement for {PRODUCT} Cloud")
    uptime = rng.choice(["99.9%", "99.95%"])
    window = rng.choice(["Sunday 02:00-04:00 UTC", "Saturday 22:00-Sunday 01:00 UTC"])
    claim_days = rng.choice([15, 30, 45])
    pdf.heading("1. Availability Commitment", 2)
    pdf.para(f"{VENDOR} will make {PRODUCT} Cloud available at least {uptime} of each calendar month, excluding "
             f"scheduled maintenance announced seven days in advance and carried out in the window {window}.")
    pdf.heading("2. Service Credits", 2)
    credits = [["Below " + uptime + " but at least 99.0%", "10%"], ["Below 99.0% but at least 95.0%", "25%"],
               ["Below 95.0%", "50%"]]
    pdf.ruled_table(TableSpec(header=[["Monthly availability", "Credit (share of the monthly fee)"]], rows=credits,
                              widths=[95.0, 65.0]))
    pdf.heading("3. How to Claim", 2)
    pdf.para(f"Customers must request a service credit within {claim_days} days of the end of the affected month "
             f"through the support portal. Credits are applied to the next invoice and are not paid out in cash.")
    name = c.save(pdf, f"{VENDOR} Service Level Agreement.pdf", ORG)
    c.ask(ORG, "Factual", f"What monthly availability does {VENDOR} commit to for {PRODUCT} Cloud?",
          [(name, f"available at least {uptime} of each calendar month")], uptime)
    c.ask(ORG, "Table", f"What service credit do I get if {PRODUCT} availability falls below 95%?",
          [(name, "Below 95.0% 50%")], "50%")
    c.ask(ORG, "Factual", c.pick([f"How long do I have to claim a service credit from {VENDOR}?",
                                  "What is the deadline for requesting an SLA service credit?"]),
          [(name, f"Customers must request a service credit within {claim_days} days of the end of the affected month")],
          f"{claim_days} days")
    c.ask(ORG, "Factual", f"When is scheduled maintenance of {PRODUCT} Cloud carried out?",
          [(name, f"carried out in the window {window}")], window)
    # -- price list: a currency column -------------------------------------------------------------------------------------
    stp = Style(family="Helvetica", body=10, sizes=(18, 13, 11), footer=f"{VENDOR} Price List 2024", page_label="{n}")
    pdf = DevPdf(stp, title="Price List 2024")
    pdf.add_page()
    pdf.doc_title(f"{PRODUCT} Price List 2024")
    pdf.para("Prices are per user per month, billed annually, excluding VAT. Monthly billing adds 15%.")
    prices = {p: rng.choice(v) for p, v in (("Starter", [9, 12]), ("Team", [19, 24]), ("Business", [39, 45]),
                                            ("Enterprise", [69, 79]))}
    storage = {p: rng.choice(v) for p, v in (("Starter", [5, 10]), ("Team", [50, 100]), ("Business", [250, 500]),
                                             ("Enterprise", [1000, 2000]))}
    rows = [[p, "\u20ac", f"{prices[p]:.2f}", f"{storage[p]} GB", "Email" if p in ("Starter", "Team") else "Phone and email"]
            for p in prices]
    pdf.ruled_table(TableSpec(header=[["Plan", "", "Price per user", "Storage", "Support"]], rows=rows,
                              widths=[35.0, 6.0, 32.0, 35.0, 52.0], aligns=["L", "R", "R", "L", "L"]))
    name = c.save(pdf, f"{PRODUCT} Price List 2024.pdf", ORG)
    for p in rng.sample(list(prices), 3):
        if rng.random() < 0.6:
            c.ask(ORG, "Numeric", f"How much does the {PRODUCT} {p} plan cost per user per month?",
                  [(name, f"{p} \u20ac {prices[p]:.2f}")], f"\u20ac{prices[p]:.2f}")
        else:
            c.ask(ORG, "Table", f"How much storage is included in the {p} plan?",
                  [(name, f"{p} {storage[p]} GB")], f"{storage[p]} GB")
