"""README.md as a user reads it (and QUALITY.md and BENCHMARKS.md, which open with where things stand): the first ingest command on the first screen, no dated run logs, every link there,
and every command in it accepted by the program it names, parsed with that program's own parser (nothing is run):
make targets by `make -n`, the jobs by their argparse parsers with the config they would load, `curl` against the
endpoint's routes and request model, `hf download` and `milvus-lite server` by their CLIs; and every Python snippet
compiles and imports names that exist."""

from __future__ import annotations

import argparse
import ast
import importlib
import json
import re
import shlex
import subprocess
from pathlib import Path
from typing import Any

import pytest

from chunker.config import load_config

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
TEXT = README.read_text(encoding="utf-8")


def blocks(text: str, language: str) -> list[tuple[int, str]]:
    """(first line number, body) of each fenced block of ``language``."""
    out, lines = [], text.splitlines()
    i = 0
    while i < len(lines):
        if lines[i].strip() == f"```{language}":
            start, body = i + 2, []
            i += 1
            while lines[i].strip() != "```":
                body.append(lines[i])
                i += 1
            out.append((start, "\n".join(body)))
        i += 1
    return out


def commands(text: str) -> list[tuple[int, list[str]]]:
    """(line, words) of every shell command in the bash blocks: continuations joined, comments dropped."""
    out = []
    for start, body in blocks(text, "bash"):
        buf, first = "", start
        for n, line in enumerate(body.splitlines(), start):
            if not buf:
                first = n
            buf += line.rstrip().rstrip("\\") + " "
            if line.rstrip().endswith("\\"):
                continue
            words = shlex.split(buf, comments=True)
            buf = ""
            for i, w in enumerate(words):  # the command ends where the shell's own syntax starts (> | &&)
                if w in {">", ">>", "|", "&&", "2>"}:
                    words = words[:i]
                    break
            if words:
                out.append((first, words))
    return out


COMMANDS = commands(TEXT)


class Parsed(Exception):
    def __init__(self, ns: argparse.Namespace, extra: list[str]) -> None:
        super().__init__("parsed")
        self.ns, self.extra = ns, extra


def parse_only(monkeypatch: pytest.MonkeyPatch, main: Any, argv: list[str], **kwargs: Any) -> argparse.Namespace:
    """What ``main(argv)`` parses, with the program's own parser, stopped before it does anything."""
    real = argparse.ArgumentParser.parse_known_args

    def stop(self: argparse.ArgumentParser, args: Any = None, namespace: Any = None) -> Any:
        ns, extra = real(self, args, namespace)
        raise Parsed(ns, extra)

    with monkeypatch.context() as m:
        m.setattr(argparse.ArgumentParser, "parse_known_args", stop)
        try:
            main(argv, **kwargs)
        except Parsed as done:
            assert done.extra == [], f"not options of {argv[:1]}: {done.extra}"
            return done.ns
    raise AssertionError(f"{argv} was not parsed")


def _module_main(module: str) -> Any:
    mod = importlib.import_module(module)
    if hasattr(mod, "__path__"):  # `python -m package` runs its __main__
        mod = importlib.import_module(f"{module}.__main__")
    return mod.main


def check_job(monkeypatch: pytest.MonkeyPatch, module: str, argv: list[str], prog: str) -> None:
    if "--print-config" in argv:  # answered before the rest is parsed: it prints and exits 0
        with pytest.raises(SystemExit) as exc:
            _module_main(module)(argv, prog=prog)
        assert exc.value.code == 0
        return
    kwargs = {"prog": prog} if module in {"jobs.ingest", "jobs.query", "jobs.evaluate", "jobs.rechunk",
                                          "jobs.benchmark", "serving.app"} else {}
    ns = parse_only(monkeypatch, _module_main(module), argv, **kwargs)
    if hasattr(ns, "overrides"):  # the config the command would run with loads
        load_config(REPO / ns.config if ns.config else None, ns.overrides)


def check_curl(words: list[str]) -> None:
    from serving.app import api
    from serving.schemas import QueryRequest

    url = next(w for w in words[1:] if "localhost" in w or "127.0.0.1" in w)
    path = "/" + url.split("/", 1)[1]
    methods = {r.path: r.methods for r in api.routes}
    data = words[words.index("-d") + 1] if "-d" in words else None
    assert path in methods and ("POST" if data else "GET") in methods[path], path
    if data:
        QueryRequest.model_validate(json.loads(data))


def check_hf(words: list[str]) -> None:
    import click
    from huggingface_hub.cli.hf import app

    cmd = app.get_command(click.Context(app), words[1])
    getattr(cmd, "materialize", lambda: cmd)().make_context("hf " + words[1], words[2:])


@pytest.mark.parametrize(("line", "words"), COMMANDS, ids=[f"line{n}" for n, _ in COMMANDS])
def test_every_command_parses(line: int, words: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    from jobs.cli import COMMANDS as CLI

    head = words[0]
    if head == "make":
        res = subprocess.run(["make", "--no-print-directory", "-n", *words[1:]], cwd=REPO, capture_output=True,
                             text=True, timeout=120)
        assert res.returncode == 0, res.stderr
    elif head == ".":
        assert re.fullmatch(r"\.venv(-gpu)?/bin/activate", words[1]), words
        make = (REPO / "Makefile").read_text()
        assert ("VENV ?= " + words[1].split("/")[0]) in make or ("GPU_VENV ?= " + words[1].split("/")[0]) in make
    elif head == "vision-chunker":
        check_job(monkeypatch, CLI[words[1]][0], words[2:], f"vision-chunker {words[1]}")
    elif words[:2] == ["python", "-m"]:
        check_job(monkeypatch, words[2], words[3:], f"python -m {words[2]}")
    elif head == "curl":
        check_curl(words)
    elif head == "hf":
        check_hf(words)
    elif head == "milvus-lite":
        from milvus_lite.cmdline import main as lite_main

        assert parse_only(monkeypatch, lite_main, words[1:]).port
    else:
        pytest.fail(f"README line {line}: {head!r} is a command this test does not know how to check")


def test_the_commands_cover_what_a_user_types_first() -> None:
    seen = {" ".join(w[:2]) for _, w in COMMANDS}
    assert {"make demo", "make test", "vision-chunker ingest", "vision-chunker query", "vision-chunker serve",
            "make gpu-venv", "hf download", "curl -s"} <= seen, seen
    assert any(w[:3] == ["python", "-m", "jobs.gpu_check"] for _, w in COMMANDS)
    gpu = [n for n, w in COMMANDS if w[:3] == ["python", "-m", "jobs.ingest"] and "--config" in w]
    check = [n for n, w in COMMANDS if w[:3] == ["python", "-m", "jobs.gpu_check"]]
    assert gpu and check and check[0] < gpu[0], "the GPU quickstart runs jobs.gpu_check first"


def test_first_screen_and_no_run_diaries() -> None:
    lines = TEXT.splitlines()
    first_ingest = next(i for i, ln in enumerate(lines, 1) if re.search(r"(vision-chunker |jobs\.)ingest --input", ln))
    assert first_ingest <= 60, first_ingest
    assert "TORCH_INDEX" in "\n".join(lines[:60]) and "download.pytorch.org/whl/cpu" in TEXT
    # Dated logs of runs belong to the history, not the user's page.
    assert not re.search(r"\b20\d\d-\d\d-\d\d\b", TEXT) and "load average" not in TEXT


def test_every_link_resolves() -> None:
    for target in re.findall(r"\]\(([^)#]+)\)", TEXT):
        if "://" not in target:
            assert (REPO / target).exists(), target


@pytest.mark.parametrize(("line", "code"), blocks(TEXT, "python"), ids=lambda v: str(v)[:12])
def test_python_snippets_compile_and_import_what_exists(line: int, code: str) -> None:
    tree = ast.parse(code, filename=f"README.md:{line}")
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            module = importlib.import_module(node.module or "")
            for alias in node.names:
                assert hasattr(module, alias.name), f"{node.module}.{alias.name}"


@pytest.mark.parametrize("name", ["QUALITY.md", "BENCHMARKS.md"])
def test_quality_and_benchmarks_open_with_where_things_stand_and_their_commands_parse(
        name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    path = REPO / name
    text = path.read_text(encoding="utf-8")
    assert path.stat().st_size < 40_000, f"{name} is {path.stat().st_size} bytes: condense its history"
    lines = text.splitlines()
    first = next(i for i, ln in enumerate(lines) if ln.startswith("## "))
    assert lines[first] == "## Where things stand", lines[first]
    table = [ln for ln in lines[first:first + 25] if ln.startswith("| ")]
    assert len(table) >= 4 and "command" in table[0], "a table of where things stand, with the command of each row"
    assert "## History" in lines, "a History section new work appends to"
    # The commands: bash blocks, and the table's command column.
    found = [w for _, w in commands(text)]
    for row in table[2:]:
        found += [shlex.split(c) for c in re.findall(r"`([^`]*python -m [^`]*)`", row.rsplit("|", 2)[-2])]
    assert found
    for words in found:
        if words[:2] == ["python", "-m"]:
            check_job(monkeypatch, words[2], words[3:], f"python -m {words[2]}")
