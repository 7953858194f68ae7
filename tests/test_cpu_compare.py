"""``python -m jobs.benchmark cpu-compare``: CPU per page of the CPU stages, an earlier commit against this checkout.

Runs the real thing: a git worktree of the revision, a fresh interpreter per tree and round, the real converter on
a generated PDF. What is asserted is that both trees were measured on the same pages and that each stage's time is
there, never a speed (figures belong in BENCHMARKS.md).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from jobs.bench import cpu_compare

REPO_ROOT = Path(__file__).resolve().parents[1]


def _in_git() -> bool:
    return subprocess.run(["git", "-C", str(REPO_ROOT), "rev-parse", "HEAD"], capture_output=True).returncode == 0


needs_git = pytest.mark.skipif(not _in_git(), reason="cpu-compare checks the earlier revision out with git")


@needs_git
def test_both_trees_are_measured_on_the_same_pages_and_the_worktree_goes(samples_dir: Path) -> None:
    pdf = str(sorted(samples_dir.glob("*.pdf"))[-1])
    before = subprocess.run(["git", "-C", str(REPO_ROOT), "worktree", "list"], capture_output=True, text=True).stdout

    result = cpu_compare.compare("HEAD", [pdf], rounds=1)

    runs = result["runs"]
    assert list(runs) == ["HEAD", "this checkout"] and all(len(r) == 1 for r in runs.values())
    pages = {r[0]["pages"] for r in runs.values()}
    assert len(pages) == 1 and pages.pop() >= 1
    for tree in runs.values():
        ms = tree[0]["ms_per_page"]
        assert set(ms) == set(cpu_compare.STAGES)
        # Rendering and the text-layer conversion always do work; nothing is negative.
        assert ms["render_encode"] > 0 and ms["convert_pdf_text"] > 0 and min(ms.values()) >= 0
    table = cpu_compare.report(result)
    assert "| HEAD |" in table and "| this checkout |" in table and "Change per page: vlm path" in table
    after = subprocess.run(["git", "-C", str(REPO_ROOT), "worktree", "list"], capture_output=True, text=True).stdout
    assert after == before, "the temporary worktree was left registered"


@needs_git
def test_a_revision_git_does_not_know_is_refused_by_name(samples_dir: Path) -> None:
    pdf = str(sorted(samples_dir.glob("*.pdf"))[-1])
    with pytest.raises(SystemExit, match="cannot check out 'no-such-revision-x'"):
        cpu_compare.compare("no-such-revision-x", [pdf], rounds=1)


def test_a_corpus_glob_that_matches_nothing_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cpu_compare.main(["--before", "HEAD", "--corpus", str(tmp_path / "*.pdf")]) == 2
    assert "no file matches" in capsys.readouterr().err
