"""Query filters turned into Milvus boolean expressions without ever splicing user text into them.

:func:`build_filter` returns a *template* (``doc_id == {doc_id} and page_end >= {page_min}``) plus the values, the
form Milvus filter templating (``filter_params``) takes. A Milvus server receives both as is. Milvus Lite 3.2 does
not parse templates (measured: ``unexpected character '{'``), so :func:`render_filter` substitutes the values as
escaped literals; values are validated first, so rendering only ever sees safe strings and real ints.

``LIKE`` takes a string literal only (on servers too), so the source prefix is the one value written into the
template itself: wildcards, quotes and backslashes are escaped or refused before it gets there.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from chunker.errors import ChunkerError

MAX_PREFIX_CHARS = 512
_DOC_ID_RE = re.compile(r"^[A-Za-z0-9_-]{1,128}$")
_PLACEHOLDER_RE = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


class FilterError(ChunkerError, ValueError):
    """A filter value is unsafe or malformed; the message names the field."""


class QueryFilters(BaseModel):
    """Restrictions a caller may put on a search. Every field is optional; all given ones must hold."""

    model_config = ConfigDict(extra="forbid")

    doc_id: str | None = Field(None, description="Only chunks of this document (content hash: letters, digits, - and _).")
    source_prefix: str | None = Field(
        None, max_length=MAX_PREFIX_CHARS, description="Only chunks whose source path starts with this text."
    )
    modality: Literal["text", "table", "figure"] | None = Field(None, description="Only chunks of this modality.")
    page_min: int | None = Field(None, ge=1, le=10_000_000, description="Only chunks ending on or after this page.")
    page_max: int | None = Field(None, ge=1, le=10_000_000, description="Only chunks starting on or before this page.")

    @field_validator("doc_id")
    @classmethod
    def _doc_id_charset(cls, v: str | None) -> str | None:
        if v is not None and not _DOC_ID_RE.match(v):
            raise ValueError("doc_id must be 1-128 characters of letters, digits, '-' or '_'")
        return v

    @field_validator("source_prefix")
    @classmethod
    def _prefix_charset(cls, v: str | None) -> str | None:
        if v is None:
            return v
        if not v:
            raise ValueError("source_prefix must not be empty (omit it instead)")
        # Backslashes: Lite's two LIKE evaluators disagree on escaping them (one matches, one never does), and
        # sources are stored with '/' separators, so a backslash can only be a mistake or an attack.
        if "\\" in v:
            raise ValueError("source_prefix must not contain backslashes (sources use '/')")
        if any(ord(c) < 32 or ord(c) == 127 for c in v):
            raise ValueError("source_prefix must not contain control characters")
        return v

    @model_validator(mode="after")
    def _page_range(self) -> "QueryFilters":
        if self.page_min is not None and self.page_max is not None and self.page_min > self.page_max:
            raise ValueError(f"page_min ({self.page_min}) must not exceed page_max ({self.page_max})")
        return self

    def is_empty(self) -> bool:
        return all(v is None for v in self.model_dump().values())


def escape_like(prefix: str) -> str:
    """Escape LIKE wildcards so the prefix matches itself only (``%`` and ``_`` become literals)."""
    return prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def string_literal(value: str) -> str:
    """A double-quoted Milvus string literal that reads back as exactly ``value``."""
    out = value.replace("\\", "\\\\").replace('"', '\\"')
    out = out.replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")
    if any(ord(c) < 32 or ord(c) == 127 for c in out):
        raise FilterError("string values must not contain control characters")
    return f'"{out}"'


def build_filter(f: QueryFilters | None) -> tuple[str, dict[str, Any]]:
    """Expression template and its parameters; ``("", {})`` when nothing is filtered."""
    if f is None:
        return "", {}
    parts: list[str] = []
    params: dict[str, Any] = {}
    if f.doc_id is not None:
        parts.append("doc_id == {doc_id}")
        params["doc_id"] = f.doc_id
    if f.modality is not None:
        parts.append("modality == {modality}")
        params["modality"] = f.modality
    # A chunk overlaps [page_min, page_max] when it ends after the start and starts before the end.
    if f.page_min is not None:
        parts.append("page_end >= {page_min}")
        params["page_min"] = int(f.page_min)
    if f.page_max is not None:
        parts.append("page_start <= {page_max}")
        params["page_max"] = int(f.page_max)
    if f.source_prefix is not None:
        parts.append(f"source like {string_literal(escape_like(f.source_prefix) + '%')}")
    return " and ".join(parts), params


def _literal(name: str, value: Any) -> str:
    # bool is an int subclass: refuse it rather than render True as 1.
    if isinstance(value, bool):
        raise FilterError(f"filter parameter {name!r}: booleans are not supported")
    if isinstance(value, int):
        return str(int(value))
    if isinstance(value, str):
        return string_literal(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_literal(name, v) for v in value) + "]"
    raise FilterError(f"filter parameter {name!r} has unsupported type {type(value).__name__}")


def render_filter(expr: str, params: dict[str, Any]) -> str:
    """Substitute ``{name}`` placeholders with escaped literals, for servers without filter templating.

    Only placeholders are touched; each must have a parameter and each parameter must be used, so a template
    and its values can never drift apart silently.
    """
    if not params:
        return expr
    used: set[str] = set()

    def sub(m: re.Match[str]) -> str:
        name = m.group(1)
        if name not in params:
            raise FilterError(f"filter placeholder {{{name}}} has no parameter")
        used.add(name)
        return _literal(name, params[name])

    # String literals in the template (the LIKE pattern) may contain braces: leave quoted spans alone.
    pieces = re.split(r'("(?:[^"\\]|\\.)*")', expr)
    out = "".join(p if p.startswith('"') else _PLACEHOLDER_RE.sub(sub, p) for p in pieces)
    unused = set(params) - used
    if unused:
        raise FilterError(f"filter parameters not used by the expression: {sorted(unused)}")
    return out


def filter_kwargs(expr: str, params: dict[str, Any] | None, lite: bool) -> dict[str, Any]:
    """Keyword arguments carrying a filter to a pymilvus call: templated on servers, rendered to literals on Lite."""
    if not expr:
        return {}
    if params and not lite:
        return {"filter": expr, "filter_params": dict(params)}
    return {"filter": render_filter(expr, params or {})}
