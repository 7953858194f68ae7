"""Lock files for the project's venvs: pip resolves, the lock records what it chose (version and file hash).

    python3 requirements/lock.py lock OUT.lock.txt [--keep [LOCK] [--free NAME ...]] [--exclude NAME[=WHY] ...] \\
        -- PIP_REQUIREMENTS...
    python3 requirements/lock.py sync VENV LOCK     # remove what the lock does not list (the project stays)
    python3 requirements/lock.py check VENV LOCK    # pip check, less what the lock leaves out on purpose
    python3 requirements/lock.py diff VENV LOCK     # what VENV has that differs from LOCK (make test-latest)

Why pip and not uv or poetry: the CPU build of torch 2.13.0 is a local wheel that only pip's configuration points
at; uv and poetry would resolve torch from the registry and pull a CUDA build of several GB. So ``lock`` runs
``pip install --dry-run --ignore-installed --report`` in a throwaway venv (the same resolver a plain ``pip install``
runs, nothing installed) and writes one ``name==version --hash=sha256:...`` line per package. Installing it with
``pip install --no-deps --require-hashes -r LOCK`` takes exactly those files: the torch line's hash is the local CPU
wheel's, so no other torch can slip in, whatever a package asks for.

The hashes are of the files pip chose here (Linux x86_64, CPython 3.11): the lock is for that platform.
Standard library only: it runs before any venv exists.
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import platform
import re
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path

EXCLUDED_PREFIX = "# excluded: "


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _sha256(url: str) -> str:
    """The hash of a file pip found without one in its index entry (a local wheel)."""
    h = hashlib.sha256()
    with urllib.request.urlopen(url) as f:  # file:// only in practice; pip reports index files with their hash
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def resolve(requirements: list[str], cwd: Path) -> dict:
    """What ``pip install REQUIREMENTS`` would install into an empty venv: pip's installation report."""
    with tempfile.TemporaryDirectory(prefix="lock-") as tmp:
        venv, report = Path(tmp) / "venv", Path(tmp) / "report.json"
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(venv / "bin" / "pip"), "install", "--dry-run", "--ignore-installed", "--quiet",
                        "--report", str(report), *requirements], check=True, cwd=cwd)
        return json.loads(report.read_text())


def lock_lines(items: list[dict], excluded: dict[str, str]) -> tuple[list[str], list[str]]:
    lines, left_out = [], []
    for item in sorted(items, key=lambda i: canonical(i["metadata"]["name"])):
        name, version = item["metadata"]["name"], item["metadata"]["version"]
        info = item["download_info"]
        if "dir_info" in info:  # the project itself (-e .): installed from the work tree, not locked
            continue
        if canonical(name) in excluded:
            left_out.append(f"{EXCLUDED_PREFIX}{canonical(name)}=={version}: {excluded[canonical(name)]}")
            continue
        digest = (info.get("archive_info") or {}).get("hashes", {}).get("sha256") or _sha256(info["url"])
        lines.append(f"{name}=={version} \\\n    --hash=sha256:{digest}")
    return lines, left_out


def _body(text: str) -> list[str]:
    """A lock's content less its header: the pins and what it leaves out (not the date it was made)."""
    return [ln for ln in text.splitlines() if ln.startswith(EXCLUDED_PREFIX) or not ln.startswith("#")]


def cmd_lock(args: argparse.Namespace) -> int:
    out = Path(args.out)
    excluded = {}
    for spec in args.exclude:
        name, _, why = spec.partition("=")
        excluded[canonical(name)] = why or "left out on purpose"
    requirements = list(args.requirements)
    kept = Path(args.keep) if args.keep else None
    with tempfile.TemporaryDirectory(prefix="lock-keep-") as tmp:
        if kept is not None and kept.is_file():
            # Adding a dependency should add it (and what it needs), not move every other pin to today's release;
            # a lock made beside another (the GPU one beside the main one) should hold the versions tested there.
            # The kept pins go in as constraints, less the names --free leaves to the resolver.
            pins, _ = read_lock(kept)
            free = {canonical(n) for n in args.free}
            constraints = Path(tmp) / "keep.txt"
            constraints.write_text("".join(f"{n}=={v}\n" for n, v in sorted(pins.items()) if n not in free))
            requirements += ["-c", str(constraints)]
        report = resolve(requirements, Path.cwd())
    lines, left_out = lock_lines(report["install"], excluded)
    body = left_out + "\n".join(lines).splitlines()
    if out.is_file() and _body(out.read_text()) == body:
        print(f"{out}: unchanged, {len(lines)} packages")  # not rewritten: no venv needs reinstalling
        return 0
    header = [
        f"# {out.name}: generated by `make lock` (requirements/lock.py); do not edit by hand.",
        f"# Resolved {dt.date.today().isoformat()} by pip {report.get('pip_version', '?')} for CPython "
        f"{platform.python_version()} on {sys.platform} {platform.machine()} from:",
        f"#   {' '.join(args.requirements)}"
        + (f"  (keeping the versions {kept.name} pins{', less ' + ', '.join(args.free) if args.free else ''})"
           if kept is not None else ""),
        "# Install: pip install --no-deps --require-hashes -r THIS_FILE, then the project with --no-deps.",
        *left_out,
    ]
    out.write_text("\n".join(header + lines) + "\n")
    print(f"{out}: {len(lines)} packages" + (f", {len(left_out)} left out" if left_out else ""))
    return 0


def read_lock(path: Path) -> tuple[dict[str, str], set[str]]:
    """``{canonical name: version}`` of a lock, and the names it leaves out on purpose."""
    pins, excluded = {}, set()
    for line in path.read_text().splitlines():
        if line.startswith(EXCLUDED_PREFIX):
            excluded.add(canonical(line[len(EXCLUDED_PREFIX):].split("==", 1)[0]))
        elif m := re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s\\]+)", line):
            pins[canonical(m.group(1))] = m.group(2)
    return pins, excluded


def installed(venv: Path) -> dict[str, str]:
    """``{canonical name: version}`` of what the venv holds, less editable installs (the project)."""
    out = subprocess.run([str(venv / "bin" / "pip"), "list", "--format=json", "--exclude-editable"],
                         check=True, capture_output=True, text=True).stdout
    return {canonical(p["name"]): p["version"] for p in json.loads(out)}


def cmd_sync(args: argparse.Namespace) -> int:
    pins, _ = read_lock(Path(args.lock))
    extra = sorted(set(installed(Path(args.venv))) - set(pins) - {"pip"})
    if extra:
        print(f"removing what {args.lock} does not list: {', '.join(extra)}")
        subprocess.run([str(Path(args.venv) / "bin" / "pip"), "uninstall", "-q", "-y", *extra], check=True)
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    _, excluded = read_lock(Path(args.lock))
    res = subprocess.run([str(Path(args.venv) / "bin" / "pip"), "check"], capture_output=True, text=True)
    problems = [ln for ln in res.stdout.splitlines() if ln.strip() and not ln.startswith("No broken")
                and not any(re.search(rf"\b{re.escape(n)}\b", canonical(ln)) for n in excluded)]
    if problems:
        print(f"{args.venv} does not hold what its packages need: {args.lock} is stale (run `make lock`):")
        print("\n".join(f"  {p}" for p in problems))
        return 1
    return 0


def cmd_diff(args: argparse.Namespace) -> int:
    pins, _ = read_lock(Path(args.lock))
    have = installed(Path(args.venv))
    changed = [f"  {n}: {pins[n]} -> {have[n]}" for n in sorted(pins) if n in have and have[n] != pins[n]]
    added = [f"  {n}: new, {have[n]}" for n in sorted(set(have) - set(pins) - {"pip"})]
    gone = [f"  {n}: {pins[n]}, no longer installed" for n in sorted(set(pins) - set(have))]
    rows = changed + added + gone
    print(f"{args.venv} against {args.lock}: " + (f"{len(rows)} differences" if rows else "the same versions"))
    print("\n".join(rows))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("lock", help="resolve and write a lock file")
    p.add_argument("out")
    p.add_argument("--exclude", action="append", default=[], metavar="NAME[=WHY]",
                   help="leave a resolved package out of the lock (recorded in its header)")
    p.add_argument("--keep", nargs="?", const="", default=None, metavar="LOCK",
                   help="keep the versions LOCK (default: OUT itself) pins: add what is new, upgrade nothing")
    p.add_argument("--free", action="append", default=[], metavar="NAME",
                   help="with --keep: a package left to the resolver (one the new requirements pin otherwise)")
    p.add_argument("requirements", nargs="+", help="what pip install would be given (after --)")
    for name in ("sync", "check", "diff"):
        q = sub.add_parser(name)
        q.add_argument("venv")
        q.add_argument("lock")
    args = parser.parse_args(argv)
    if getattr(args, "keep", None) == "":
        args.keep = args.out
    return {"lock": cmd_lock, "sync": cmd_sync, "check": cmd_check, "diff": cmd_diff}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
