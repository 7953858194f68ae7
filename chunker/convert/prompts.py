"""Versioned conversion prompts and the request builder.

Two output modes share one system prompt and one ending: ``markdown`` (the Markdown contract of
:mod:`chunker.contract`, with table rows written as self-contained sentences) and ``chunks`` (the continuation-flag chunk
format, rendered into the same contract by :mod:`chunker.convert.chunk_format`). Both end with a machine-readable
context trailer (:mod:`chunker.convert.trailer`) that carries the running summary to the next batch.

A prompt version is frozen once released: change the wording by adding a new version, because the version is stored
with every converted batch and re-conversion decisions depend on it.

Layout of one request (v2 on): the system prompt, then the fixed instructions (the task's rules and the ending, the
same for every batch of every document under one config), then the page images, then what is particular to this
batch (its page numbers, the context of the previous batch, a one-line reminder). Everything before the first image
is then the same token prefix for every request of a run, and vLLM's prefix cache keeps its KV instead of
recomputing ~1k tokens per request; a retry of the same batch also reuses its images' KV. v1 put the images first.
"""

from __future__ import annotations

from dataclasses import dataclass
from string import Template
from typing import Literal

from chunker.backends.base import GenerationRequest
from chunker.types import BatchContext

Mode = Literal["markdown", "chunks"]
PROMPT_VERSION = "v2"


@dataclass(frozen=True)
class PromptSet:
    """The texts of one prompt version. Templates take ``$pages`` (e.g. "7, 8, 9") and ``$summary_chars``."""

    system: str
    markdown: str
    chunks: str
    ending: str
    # v2 on: the text after the images (takes $pages); the task and ending then go before the images. Empty (v1):
    # everything goes after the images.
    after_images: str = ""


_SYSTEM_V1 = (
    "You turn images of document pages into text for a search index. You receive the pages in reading order. "
    "You copy what the pages say. You never invent content, and you never translate, summarise, correct or "
    "reorder the body text."
)

# Rules shared by both modes; kept in one place so the two modes cannot drift apart within a version.
_COMMON_V1 = """\
- Page numbers: the attached images are document pages $pages, in that order. Use these numbers, never the numbers printed on the pages.
- Text: copy every word exactly as printed, in its own language and script, whatever the language. Do not translate, correct, shorten or rephrase anything. Rejoin words split by a hyphen at a line end. Read multi-column layouts one column at a time.
- Leave out: running headers and footers, page numbers, watermarks, tables of contents, indexes, navigation menus and cookie or privacy banners.
- Lists and procedures: keep list items and numbered steps as Markdown list items, one per line, in their order and with their own numbers. A procedure stays whole, even across pages.
- Footnotes: keep them, placed after the paragraph that refers to them.
- Pictures: skip logos, icons, background art, decorative photos and screenshots that only repeat nearby text. For a picture that carries information (chart, diagram, map, flowchart, informative photo) write `![description](figure)` on its own line: what it shows, with every label and value you can read. For a flowchart or process diagram, describe the flow step by step, one step per line directly under that line, following the arrows and naming each branch.
- The section "Where the previous pages left off" is only there to orient you. Never copy it into your answer."""

_MARKDOWN_V1 = """\
Convert the attached pages into Markdown for a retrieval index.

Rules:
- Page markers: before the content of each page write one line `<!-- page N -->` with that page's number. Write it even for a page with nothing to keep.
$common
- Headings: mark each heading with # to ###### so that its level matches its rank in the whole document (document title #, chapters ##, sections ###, and so on). Keep the full heading text, numbering included. Carry on from the heading path given below; do not repeat headings that were already written unless the page prints them again as a new heading.
- Tables: never draw pipe tables. Write every table as a block: a line `<!-- table -->`, then one line per table row, then a line `<!-- /table -->`. Each row line is one complete sentence that pairs every column header with that row's value, for example `Plan: Basic; Monthly price: 10 EUR; Storage: 50 GB.`. One line per row, always: never fold several rows into one line with "or" or "and". When a cell spans several rows, repeat its value in each of them.
- A table that carries on from the previous pages (see "Open table" below) starts with `<!-- table continued -->` instead of `<!-- table -->`, and its rows use the same header names.
- FAQ: write each question as its own paragraph, followed directly by its answer.
- Write nothing but the Markdown and the closing context line."""

_CHUNKS_V1 = """\
Split the content of the attached pages into self-contained chunks for a retrieval index.

Chunk format. Every chunk starts with a flag line and a heading path, followed by the chunk's text, and chunks are separated by a blank line:
[CONTINUES]False[/CONTINUES][HEAD]Document title > Major section > Topic[/HEAD]
text of the chunk

- Flag: True when the chunk carries on the chunk before it (the rest of a paragraph cut by a page break, more steps of the same procedure, more items of the same list), including the last chunk of the previous pages shown below. False when it starts new content. Partial when you cannot tell.
- For a table-row chunk the flag is True only when its cells hold the remainder of a row that was cut off; a complete row is False even when the table goes on.
- Heading path: always three levels separated by " > ": the document or product title, the major section, the specific topic. When the page shows no heading for a level, reuse the one above it. Write every heading in full, never abbreviated.

Rules:
- Page markers: write a line `<!-- page N -->` before the first chunk of each page, or inside a chunk where a page break falls.
$common
- Never split a numbered procedure or a list over several chunks. Steps continuing from the previous pages get the flag True.
- Tables: every table row is a chunk of its own, written as a small pipe table: the header row, the `| --- |` separator row, then that one row. If a table carries on from the previous pages (see "Open table" below), use its header names.
- FAQ: one question with its answer per chunk.
- Avoid chunks of one or two lines: join them to the neighbouring chunk under the same heading (table rows and FAQ pairs excepted).
- Do not repeat the last chunk of the previous pages; start with the new content.
- Write nothing but the chunks and the closing context line."""

_ENDING_V1 = """\
Finish with exactly one line in this form, and write nothing after it:
<context>{"summary": "...", "heading_path": ["...", "..."], "open_table": "..."}</context>
- summary: at most $summary_chars characters saying what the document is and what it has covered up to the last attached page; update the previous summary rather than starting over.
- heading_path: the headings in force at the end of the last attached page, from the top level down.
- open_table: when the last page ends inside a table that may go on, its column headers joined by " | "; otherwise "".
The line must be valid JSON between the two tags."""

# v2: the v1 rules, reworded only where they pointed at the page numbers or the context "below": both now come
# after the images, so that the instructions before them are the same text for every request.
_COMMON_V2 = _COMMON_V1.replace(
    "- Page numbers: the attached images are document pages $pages, in that order. Use these numbers, never the "
    "numbers printed on the pages.",
    "- Page numbers: the line right after the images says which document pages they are, in order. Use those "
    "numbers, never the numbers printed on the pages.",
)
_MARKDOWN_V2 = (_MARKDOWN_V1
                .replace("Carry on from the heading path given below;", "Carry on from the heading path given after the pages;")
                .replace('(see "Open table" below)', '(see "Open table" after the pages)'))
_CHUNKS_V2 = (_CHUNKS_V1
              .replace("the last chunk of the previous pages shown below", "the last chunk of the previous pages shown after the pages")
              .replace('(see "Open table" below)', '(see "Open table" after the pages)'))
_AFTER_IMAGES_V2 = "The attached images are document pages $pages, in that order."
_REMINDER_V2 = "Now write your answer for these pages, following the rules above, and end with the <context> line."

PROMPTS: dict[str, PromptSet] = {
    "v1": PromptSet(
        system=_SYSTEM_V1,
        markdown=_MARKDOWN_V1.replace("$common", _COMMON_V1),
        chunks=_CHUNKS_V1.replace("$common", _COMMON_V1),
        ending=_ENDING_V1,
    ),
    "v2": PromptSet(
        system=_SYSTEM_V1,
        markdown=_MARKDOWN_V2.replace("$common", _COMMON_V2),
        chunks=_CHUNKS_V2.replace("$common", _COMMON_V2),
        ending=_ENDING_V1,
        after_images=_AFTER_IMAGES_V2,
    ),
}


def get_prompts(version: str) -> PromptSet:
    try:
        return PROMPTS[version]
    except KeyError:
        raise KeyError(f"unknown prompt version {version!r}; known: {', '.join(sorted(PROMPTS))}") from None


def _clip_tail(text: str, limit: int) -> str:
    """The last ``limit`` characters, starting at a line (or word) boundary so the model sees no half word."""
    text = text.strip()
    if limit <= 0:
        return ""
    if len(text) <= limit:
        return text
    cut = text[-limit:]
    nl = cut.find("\n")
    if 0 <= nl < limit // 2:
        return cut[nl + 1 :]
    sp = cut.find(" ")
    return cut[sp + 1 :] if 0 <= sp < 40 else cut


def clip_summary(text: str, limit: int) -> str:
    """Cap a summary at ``limit`` characters, cut at a word boundary."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text[:limit]
    sp = cut.rfind(" ")
    return (cut[:sp] if sp > limit // 2 else cut).rstrip(" ,;:")


def render_context(context: BatchContext, tail_chars: int, summary_chars: int) -> str:
    """The context block handed to the model: bounded, so a document's cost grows linearly with its pages."""
    summary = clip_summary(context.summary, summary_chars)
    tail = _clip_tail(context.tail, tail_chars)
    if not (summary or tail or context.heading_path or context.table_header):
        return "Where the previous pages left off: nothing; these are the first pages you see of this document."
    lines = ["Where the previous pages left off (orientation only, do not copy):"]
    if summary:
        lines.append(f"Summary so far: {summary}")
    if context.heading_path:
        lines.append("Heading path: " + " > ".join(context.heading_path))
    if tail:
        lines.append('Last text written:\n"""\n' + tail + '\n"""')
    if context.table_header:
        lines.append(f"Open table, column headers: {context.table_header}")
    return "\n".join(lines)


def build_request(
    pages: list[int],
    context: BatchContext,
    mode: Mode,
    version: str,
    images: list[bytes],
    sizes: list[tuple[int, int]],
    temperature: float,
    max_tokens: int,
    *,
    mime: str = "image/jpeg",
    tail_chars: int = 800,
    summary_chars: int = 600,
    request_id: str = "",
) -> GenerationRequest:
    """One generation request for a batch of ``pages`` (1-based, in order) with their rendered images."""
    if len(images) != len(pages):
        raise ValueError(f"{len(images)} images for {len(pages)} pages")
    if mode not in ("markdown", "chunks"):
        raise ValueError(f"unknown output mode {mode!r}; known: chunks, markdown")
    ps = get_prompts(version)
    values = {"pages": ", ".join(str(p) for p in pages), "summary_chars": str(summary_chars)}
    task = Template(ps.markdown if mode == "markdown" else ps.chunks).safe_substitute(values)
    ending = Template(ps.ending).safe_substitute(values)
    context_block = render_context(context, tail_chars, summary_chars)
    if ps.after_images:
        # Fixed text first (one shared, cached prefix), then the images, then this batch's particulars.
        instructions = task + "\n\n" + ending + "\n"
        user = "\n\n".join([Template(ps.after_images).safe_substitute(values), context_block, _REMINDER_V2])
    else:
        instructions, user = "", "\n\n".join([task, context_block, ending])
    return GenerationRequest(
        system=ps.system,
        instructions=instructions,
        user=user,
        images=list(images),
        image_mime=mime,
        image_sizes=list(sizes),
        temperature=temperature,
        max_tokens=max_tokens,
        request_id=request_id,
    )
