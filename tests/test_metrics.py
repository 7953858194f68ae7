import pytest

from chunker.eval.metrics import (Evidence, RankedHit, aggregate, aggregate_by_type, content_words, doc_at_k,
                                  fact_at_budget, figures, hit_chars, mrr_at_k, num_at_budget, num_at_k, page_at_k,
                                  score_question,
                                  spent_text_by_doc)

EV = [Evidence("dir/Baggage.pdf", "Each passenger may carry 23 kg in Economy.")]


def h(src, text="x", p0=1, p1=1):
    return RankedHit(src, text, p0, p1)


def test_content_words_drop_stop_words_and_short_tokens():
    assert content_words("The 23 kg limit, a B-2 plan!") == {"23", "kg", "limit", "plan"}


def test_doc_and_mrr_on_rank_and_zero_hits():
    hits = [h("Other.pdf"), h("a/b/baggage.pdf")]
    assert doc_at_k(hits, EV, 5) == 1.0 and doc_at_k(hits, EV, 1) == 0.0
    assert mrr_at_k(hits, EV, 10) == 0.5
    assert doc_at_k([], EV) == 0.0 and mrr_at_k([], EV) == 0.0
    assert fact_at_budget([], EV) == 0.0


def test_ties_count_the_first_relevant_rank():
    hits = [h("Baggage.pdf", "same"), h("Baggage.pdf", "same")]
    assert mrr_at_k(hits, EV) == 1.0


def test_fact_budget_cuts_the_last_hit_and_matches_by_document():
    text = "Each passenger may carry 23 kg in Economy."
    full = fact_at_budget([h("Baggage.pdf", text)], EV, 2000)
    assert full == 1.0
    # The same words from another document do not count.
    assert fact_at_budget([h("Other.pdf", text)], EV, 2000) == 0.0
    # A budget spent by an earlier hit leaves nothing for the relevant one.
    assert fact_at_budget([h("Other.pdf", "z" * 2000), h("Baggage.pdf", text)], EV, 2000) == 0.0
    # A cut hit scores only the words within the budget: "passenger" survives, "economy" does not.
    part = fact_at_budget([h("Baggage.pdf", text)], EV, 18)
    assert 0.0 < part < 1.0
    assert spent_text_by_doc([h("A.pdf", "abcdef"), h("B.pdf", "ghij")], 8) == {"a.pdf": "abcdef", "b.pdf": "gh"}


def test_fact_averages_over_facts():
    ev = [Evidence("A.pdf", "alpha beta"), Evidence("B.pdf", "gamma delta")]
    assert fact_at_budget([h("A.pdf", "alpha beta"), h("B.pdf", "gamma")], ev) == pytest.approx(0.75)


def test_page_at_k_only_when_pages_named():
    assert page_at_k([h("Baggage.pdf")], EV) is None
    ev = [Evidence("Baggage.pdf", "", pages=[3])]
    assert page_at_k([h("Baggage.pdf", p0=2, p1=4)], ev) == 1.0
    assert page_at_k([h("Baggage.pdf", p0=5, p1=6)], ev) == 0.0


def test_aggregate_overall_and_by_type():
    s1 = score_question("1", "Factual", [h("Baggage.pdf", "23 kg")], EV)
    s2 = score_question("2", "Procedural", [], EV)
    agg = aggregate([s1, s2])
    assert agg["questions"] == 2 and agg["doc@5"] == 0.5 and agg["page@5"] is None
    assert set(aggregate_by_type([s1, s2])) == {"Factual", "Procedural"}
    assert aggregate([])["doc@5"] == 0.0


def test_figures_are_numbers_compared_by_value():
    assert figures("Total debt $ 49,046 $ 42,051") == {"49046", "42051"}
    assert figures("(1,234.50) rose 7.5% in 2022.") == {"1234.5", "7.5", "2022"}
    assert figures("ratio 2.50 vs 002.5, code 12,50") == {"2.5", "12", "50"}
    assert figures("no numbers here") == set()


def test_num_at_k_counts_answer_figures_in_top_hits_of_supporting_documents():
    ev = [Evidence("Q2.pdf", "Net sales were $16,425 and $18,765 for the quarter.")]
    # Answer figures come from the answer when given.
    hits = [h("Q2.pdf", "Net sales | $ | 16,425 | $ | 18,765"), h("Q1.pdf", "x")]
    assert num_at_k(hits, ev, 5, answer="16,425") == 1.0
    # Otherwise from the evidence: both figures.
    assert num_at_k([h("Q2.pdf", "Net sales: 16425")], ev, 5) == 0.5
    # The same figure in another document does not count (a different filing's 16,425 is not the answer).
    assert num_at_k([h("Q1.pdf", "16,425 and 18,765")], ev, 5) == 0.0
    # Only the top k hits are read.
    assert num_at_k([h("Other.pdf")] * 5 + [h("Q2.pdf", "16,425 18,765")], ev, 5) == 0.0
    # A question without figures does not count.
    assert num_at_k(hits, [Evidence("Q2.pdf", "The filing names the auditor.")], 5) is None


def test_num_at_budget_reads_only_what_the_reading_budget_spends():
    ev = [Evidence("Q2.pdf", "Net sales were $16,425.")]
    # The figure sits after 2,000 characters of the first hit: the budget is spent before it.
    long_hit = h("Q2.pdf", "x" * 2000 + " 16,425")
    assert num_at_k([long_hit], ev, 5) == 1.0 and num_at_budget([long_hit], ev, 2000) == 0.0
    # A short hit that carries it is read in full.
    assert num_at_budget([h("Q2.pdf", "Net sales | Three Months Ended: 16,425")], ev, 2000) == 1.0
    # Spent on another document's text, the budget finds nothing.
    assert num_at_budget([h("Q1.pdf", "y" * 2000), h("Q2.pdf", "16,425")], ev, 2000) == 0.0
    assert num_at_budget([h("Q2.pdf", "x")], [Evidence("Q2.pdf", "no figure here")], 2000) is None
    agg = aggregate([score_question("1", "N", [h("Q2.pdf", "16,425")], ev)])
    assert agg["num@2000"] == 1.0


def test_aggregate_reports_num_at_5_over_numeric_questions_and_hit_chars():
    ev = [Evidence("Q2.pdf", "Revenue was 120.")]
    s1 = score_question("1", "Numeric", [h("Q2.pdf", "Revenue 120")], ev)
    s2 = score_question("2", "Numeric", [h("Q2.pdf", "Revenue 99")], ev)
    s3 = score_question("3", "Factual", [h("Q2.pdf", "abcd")], [Evidence("Q2.pdf", "no figure")])
    agg = aggregate([s1, s2, s3])
    assert agg["num@5"] == 0.5 and agg["num_questions"] == 2
    assert hit_chars([h("A.pdf", "ab"), h("B.pdf", "abcd")]) == 3.0
    assert aggregate([s3])["num@5"] is None
