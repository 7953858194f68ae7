"""``python -m chunker.eval.devset OUT_DIR [--seed N] [--orgs a,b]``: write the development set."""

from __future__ import annotations

import argparse
from collections import Counter

from chunker.eval.devset import ORGS, generate_devset


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m chunker.eval.devset", description=__doc__)
    p.add_argument("out_dir", metavar="OUT_DIR", help="folder to write pdf/ and queries.jsonl into")
    p.add_argument("--seed", type=int, default=0, help="the set is a pure function of the seed (default 0)")
    p.add_argument("--orgs", default=",".join(ORGS), help=f"comma list of organisations (default: {','.join(ORGS)})")
    args = p.parse_args(argv)
    orgs = tuple(o.strip() for o in args.orgs.split(",") if o.strip())
    unknown = [o for o in orgs if o not in ORGS]
    if unknown:
        p.error(f"unknown organisation(s) {unknown}; known: {', '.join(ORGS)}")
    ds = generate_devset(args.out_dir, args.seed, orgs)
    types = Counter(q.type for q in ds.questions)
    print(f"{ds.documents} documents, {ds.pages} pages, {len(ds.questions)} questions "
          f"({', '.join(f'{t} {n}' for t, n in sorted(types.items()))}) -> {ds.pdf_dir}, {ds.queries}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
