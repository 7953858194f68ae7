"""The command lines a user types: the console script, --help of every command and subcommand, --print-config, the
sample generators' arguments, and the exit codes (README.md, "Exit codes")."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from chunker.cli import ExitCode, ingest_exit_code
from chunker.config import Config, load_config
from jobs.cli import COMMANDS
from jobs.cli import main as cli_main

REPO = Path(__file__).resolve().parents[1]


def _help(main, argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 0, argv
    return capsys.readouterr().out


def test_the_console_script_is_installed_and_lists_every_command() -> None:
    script = Path(sys.executable).with_name("vision-chunker")  # what pip made of [project.scripts]
    res = subprocess.run([str(script), "--help"], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    for name in ("ingest", "query", "evaluate", "rechunk", "benchmark", "serve"):
        assert f"\n  {name} " in res.stdout, name
    assert set(COMMANDS) == {"ingest", "query", "evaluate", "rechunk", "benchmark", "serve", "health", "compare"}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_each_command_names_itself_as_typed(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    import importlib

    text = _help(cli_main, [command, "--help"], capsys)
    assert text.startswith(f"usage: vision-chunker {command} "), text[:200]
    module = importlib.import_module(COMMANDS[command][0])
    text = _help(module.main, ["--help"], capsys)
    assert text.startswith(f"usage: python -m {COMMANDS[command][0]} "), text[:200]
    assert ".py" not in text.splitlines()[0]


def test_benchmark_help_lists_every_subcommand_and_each_has_its_own_help(capsys: pytest.CaptureFixture[str]) -> None:
    from jobs.benchmark import OWN_COMMANDS, SUBCOMMANDS
    from jobs.benchmark import main as bench_main

    text = _help(bench_main, ["--help"], capsys)
    for name in [*OWN_COMMANDS, *SUBCOMMANDS]:
        assert f"\n  {name} " in text, name
    for name in SUBCOMMANDS:  # dispatched to their module's own parser, which names the command as typed
        assert _help(bench_main, [name, "--help"], capsys).startswith(f"usage: python -m jobs.benchmark {name} ")


@pytest.mark.parametrize("module", ["chunker.eval.samples", "chunker.eval.hostile", "chunker.eval.devset"])
def test_sample_generators_print_help_and_write_nothing(module: str, tmp_path: Path) -> None:
    res = subprocess.run([sys.executable, "-m", module, "--help"], cwd=tmp_path, capture_output=True, text=True,
                         timeout=120, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert res.returncode == 0 and res.stdout.startswith(f"usage: python -m {module} "), res.stdout + res.stderr
    assert list(tmp_path.iterdir()) == []  # no folder named --help
    res = subprocess.run([sys.executable, "-m", module], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(REPO)})
    assert res.returncode == ExitCode.USAGE and "OUT_DIR" in res.stderr


def test_print_config_prints_the_effective_config_and_needs_nothing_else(capsys: pytest.CaptureFixture[str]) -> None:
    from jobs.ingest import main as ingest_main

    # --input is required for a run, not for looking at the config; the override and every default are in it.
    text = _help(ingest_main, ["--config", "configs/local.yaml", "--set", "milvus.uri=/tmp/elsewhere.db",
                               "--set", "intake.password=hunter2", "--print-config"], capsys)
    printed = yaml.safe_load(text)
    assert printed["milvus"]["uri"] == "/tmp/elsewhere.db" and "hunter2" not in text
    printed["intake"]["password"] = "hunter2"
    expected = load_config("configs/local.yaml", ["milvus.uri=/tmp/elsewhere.db", "intake.password=hunter2"])
    assert Config.model_validate(printed) == expected  # the whole config, read back the same
    with pytest.raises(SystemExit) as exc:  # a wrong override is still an error naming the field
        ingest_main(["--set", "milvus.nope=1", "--print-config"])
    assert exc.value.code == ExitCode.USAGE and "milvus.nope" in capsys.readouterr().err


def test_an_ingest_that_indexed_nothing_is_not_a_success() -> None:
    assert ingest_exit_code(documents=3, ok=0, partial=0, skipped=0) == ExitCode.NOTHING_INDEXED
    assert ingest_exit_code(documents=3, ok=0, partial=1, skipped=0) == ExitCode.OK  # indexed, with fallbacks
    assert ingest_exit_code(documents=3, ok=0, partial=0, skipped=3) == ExitCode.OK  # done before: nothing to do
    assert ingest_exit_code(documents=0, ok=0, partial=0, skipped=0) == ExitCode.OK
    # README.md, "Exit codes", documents exactly these numbers.
    readme = (REPO / "README.md").read_text().split("## Exit codes", 1)[1].split("\n## ", 1)[0]
    documented = [int(line.split("|")[1]) for line in readme.splitlines() if line.startswith("| ") and
                  line.split("|")[1].strip().isdigit()]
    assert documented == [int(c) for c in ExitCode]


@pytest.mark.ray
@pytest.mark.slow
def test_ingest_of_only_broken_files_exits_nothing_indexed(ray_local, tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    from jobs.ingest import main as ingest_main

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "truncated.pdf").write_bytes(b"%PDF-1.7\n1 0 obj\n<<")
    (docs / "not-a-pdf.pdf").write_bytes(b"plain text, not a PDF")
    code = ingest_main(["--input", str(docs), "--output", str(tmp_path / "run"),
                        "--set", f"milvus.uri={tmp_path / 'm.db'}"])
    out = capsys.readouterr()
    assert code == ExitCode.NOTHING_INDEXED, out.out + out.err
    assert "failed: 2" in out.out and "none of the 2 documents was indexed" in out.err
