"""A document through the vision-language converter with the real VllmBackend, in-process (no Ray)."""

from __future__ import annotations

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


def test_a_sample_pdf_converts_and_every_noisy_page_falls_back_visibly(vllm_backend, run, tiny_vlm, tmp_path):
    from chunker.config import config_hash, load_config
    from chunker.convert.factory import make_converter
    from chunker.eval.samples import SAMPLE_FACTS, generate_samples
    from chunker.run.local import process_document_async

    generate_samples(tmp_path / "samples")
    pdf = tmp_path / "samples" / SAMPLE_FACTS.manual.file
    cfg = load_config(REPO_ROOT / "configs" / "local.yaml", [
        "converter.backend=vllm", f"converter.model.path={tiny_vlm}", "converter.model.device=cpu",
        "converter.model.dtype=float32", "converter.model.max_output_tokens=48", "render.max_side_px=448",
        "converter.retry_temperatures=[0.1]",  # one attempt per batch, then one per page: 5 requests a batch
    ])
    converter = make_converter(cfg, config_hash(cfg), backend=vllm_backend)  # the session's engine, not a second one
    # The same lifecycle the Ray stages run (chunker.run): intake, convert, plan, the verdict.
    result = run(process_document_async(pdf, cfg, converter=converter), timeout=600)
    batches = result.batches

    assert result.document.num_pages == SAMPLE_FACTS.manual.num_pages == 8
    assert [(b.page_start, b.page_end) for b in batches] == [(1, 4), (5, 8)]
    for b in batches:
        # The engine really answered (image-expanded prompts, tokens paid), the noise was refused, and the
        # text layer stands in, flagged page by page.
        assert b.model == "tiny-qwen2.5-vl" and b.input_tokens > 4 * 200 and b.output_tokens > 0
        assert b.attempts == 5 and b.fallback and b.fallback_pages == list(range(b.page_start, b.page_end + 1))
        assert "text-layer fallback used" in b.error
        assert b.finish_reason == "fallback" and not b.lost_pages
    assert result.document.status == "partial"
    assert [p.code for p in result.document.problems] == ["fallback_share"]
    assert result.chunks, "the fallback text is still planned into chunks"
    # Nothing lost: every page the text layer has something for (the page-2 table of contents is dropped on purpose
    # by pdf-text, here as in a pdf-text run) lies inside some chunk's page span.
    from chunker.convert.pdf_text.converter import PdfTextConverter

    text_layer = PdfTextConverter(cfg.converter)
    expected = {p for p in range(1, 9) if text_layer.markdown_for_pages(str(pdf), [p]).split("-->", 1)[1].strip()}
    pages = {p for c in result.chunks for p in range(c.page_start, c.page_end + 1)}
    assert len(expected) >= 7 and expected <= pages, ("nothing lost", sorted(expected - pages))
