"""The configuration reference (docs/config.md), written from the config model itself: every field's dotted key,
type, default and description, and whether it shapes content (a new value re-converts or re-plans: hashed into every
row) or only how the run goes. Nothing in it is typed by hand, so it cannot drift from the code:
tests/test_config_reference.py fails when the checked-in file is not what this writes.

    python -m chunker.config.reference docs/config.md    # write it again after changing a field
"""

from __future__ import annotations

import argparse
import json
import types
import typing
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from chunker.config.fields import SECRET_FIELDS, field_class
from chunker.config.model import Config

HEADER = """# Configuration reference

Generated from the config model (`chunker/config/`) by `python -m chunker.config.reference docs/config.md`; do not
edit by hand. Every job reads one YAML file (`--config`, default `configs/local.yaml`) and any number of
`--set dotted.key=value` overrides; `--print-config` prints the result. Unknown keys and bad values fail, naming the
field.

**shapes** says what a new value does to a finished run: *content* fields are hashed into every row (`config_hash`),
so a new value converts or plans the documents again; *runtime* fields change only how fast, where or whether the
work runs, and keep the done ledger; a *secret* is neither hashed nor written to a run summary (nor printed).
"""


def _type_name(annotation: Any) -> str:
    origin = typing.get_origin(annotation)
    if origin is typing.Literal:
        return " \\| ".join(json.dumps(a) for a in typing.get_args(annotation))
    if origin in (typing.Union, types.UnionType):
        return " \\| ".join(_type_name(a) for a in typing.get_args(annotation))
    if origin is not None:
        inner = ", ".join(_type_name(a) for a in typing.get_args(annotation))
        return f"{getattr(origin, '__name__', str(origin))}[{inner}]"
    if annotation is type(None):
        return "null"
    return getattr(annotation, "__name__", str(annotation))


def _default(path: str, f: FieldInfo) -> str:
    if path in SECRET_FIELDS:
        return "(unset)"
    value = f.default_factory() if f.default_factory is not None else f.default  # type: ignore[call-arg]
    if value is PydanticUndefined:
        return "(required)"
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json")
    elif isinstance(value, list):
        value = [v.model_dump(mode="json") if isinstance(v, BaseModel) else v for v in value]
    return f"`{json.dumps(value, ensure_ascii=False)}`"


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _sections(model: type[BaseModel], prefix: str) -> list[tuple[str, str, list[tuple[str, FieldInfo]]]]:
    """(dotted section, its description, its leaf fields) for ``model`` and every section below it, in order."""
    leaves: list[tuple[str, FieldInfo]] = []
    below: list[tuple[str, str, list[tuple[str, FieldInfo]]]] = []
    for name, f in model.model_fields.items():
        ann = f.annotation
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            sub = f"{prefix}{name}"
            found = _sections(ann, f"{sub}.")
            found[0] = (sub, f.description or "", found[0][2])
            below += found
        else:
            leaves.append((f"{prefix}{name}", f))
    return [("", "", leaves)] + below


def reference_markdown() -> str:
    out = [HEADER]
    sections = [s for s in _sections(Config, "") if s[0]]
    out.append("Sections: " + ", ".join(f"[`{name}`](#{name.replace('.', '')})" for name, _, _ in sections) + ".\n")
    for name, description, leaves in sections:
        if not leaves:
            continue
        out += [f"## {name}", "", _cell(description), "", "| key | type | default | shapes | what it does |",
                "| --- | --- | --- | --- | --- |"]
        for path, f in leaves:
            out.append(f"| `{path}` | {_type_name(f.annotation)} | {_default(path, f)} | {field_class(path)} | "
                       f"{_cell(f.description or '')} |")
        out.append("")
    return "\n".join(out).rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m chunker.config.reference",
                                description="Write the configuration reference from the config model.")
    p.add_argument("out", metavar="OUT", help="the Markdown file to write (docs/config.md)")
    args = p.parse_args(argv)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(reference_markdown(), encoding="utf-8")
    print(args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
