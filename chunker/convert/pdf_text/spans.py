"""How a spanning header label reaches the columns under it (chunker.convert.pdf_text.colheads reads the labels).

A label over fewer columns than its level below is a group's header. It heads the columns whose own labels it sits
over, or the run of columns it is centred over ("2022" set narrow over five columns; a date or period header may sit
further off centre); group headers set flush with one edge of their groups head the columns up to (or from) their
own."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Label:
    """One header label (its lines joined) and where it sits."""

    text: str
    x0: float
    x1: float
    top: float
    bottom: float
    size: float

    def overlap(self, other: "Label") -> float:
        return max(0.0, min(self.x1, other.x1) - max(self.x0, other.x0))


def edge_groups(level: list[Label], under: list[Label | None]) -> list[Label | None] | None:
    """The columns each of a level's group labels heads, where the labels are set flush with one edge of their
    groups: "2021" right-aligned over the last of its three columns, "2020" over the last of the next three (each
    label then heads the columns from the one after the previous group up to its own). None where the level has
    one label, a label sits over no single column label, or the labels are not all flush with the same edge: then
    they are centred, and each column takes the one it is best centred under."""
    if len(level) < 2:
        return None
    direct: list[tuple[int, Label, Label]] = []
    for lab in sorted(level, key=lambda lab: lab.x0):
        ks = [k for k, u in enumerate(under) if u is not None and _sits_over(lab, [u])]
        if len(ks) != 1 or (under[ks[0]].x1 - under[ks[0]].x0) - (lab.x1 - lab.x0) < lab.size:
            return None  # over no label, over two, or as wide as its label: which edge it keeps cannot be read
        direct.append((ks[0], lab, under[ks[0]]))
    right = all(abs(lab.x1 - u.x1) <= 0.5 * lab.size for _, lab, u in direct)
    left = all(abs(lab.x0 - u.x0) <= 0.5 * lab.size for _, lab, u in direct)
    if right == left or len({k for k, _, _ in direct}) < len(direct):
        return None
    owner: list[Label | None] = [None] * len(under)
    for i, (k, lab, _) in enumerate(direct):
        first = direct[i - 1][0] + 1 if right and i else (0 if right else k)
        last = k if right else (direct[i + 1][0] - 1 if i + 1 < len(direct) else len(under) - 1)
        for j in range(first, last + 1):
            owner[j] = lab
    return owner


def group_columns(level: list[Label], under: list[Label | None], extents: list[tuple[float, float]], spacing: float,
                  period: list[bool]) -> list[Label | None]:
    """The spanning label each column takes from one level of group headers (None: no header of this level).

    A column with no label of its own yet (``under``) takes the label nearest its figures (``extents``), less than
    ``spacing`` away: its own label, set a line higher than its neighbours'. The labelled columns are split into
    runs, in order, none shared: a label heads the columns whose labels it sits over, or the run of them it is
    centred over (on their labels, their figures or both). Of all splits, the one that places the most labels wins,
    then the one heading the most columns, then the best centred. Labels flush with one edge of their groups are
    read by ``edge_groups``; a label inside one column's label that names no date or period (``period``) is that
    label's first line ("Rigid" over "Packaging"), never centred over more."""
    flush = edge_groups(level, under)
    if flush is not None:
        return flush
    owner: list[Label | None] = [None] * len(under)
    own: set[int] = set()  # labels taken as a column's own label
    for k, u in enumerate(under):
        if u is None:
            near = [(max(0.0, extents[k][0] - lab.x1, lab.x0 - extents[k][1]),
                     abs((lab.x0 + lab.x1 - extents[k][0] - extents[k][1]) / 2), i) for i, lab in enumerate(level)]
            gap, _, i = min(near)
            if gap < spacing:
                owner[k] = level[i]
                own.add(i)
    cols = [k for k, u in enumerate(under) if u is not None]
    labelled, figs = [under[k] for k in cols], [extents[k] for k in cols]
    # A column's own label heads no group, unless it names a period ("2022" over an unlabelled column and its
    # labelled neighbours) or sits over a labelled column too ("Increase/(Decrease)" over "2021 vs. 2020" and "%").
    labs = sorted((i for i in range(len(level)) if i not in own or period[i] or _sits_over(level[i], labelled)),
                  key=lambda i: level[i].x0)
    runs = [_options(level[i], labelled, figs, period[i], False) for i in labs]
    if any(max((b - a for a, b in r), default=0) > 0 for i, r in zip(labs, runs) if not _inside(level[i], labelled)):
        # Another label of the level heads a group: so does one set inside a column's label ("Total" over
        # "Estimated Fair Value" beside "Less than 12 months" over three columns).
        runs = [_options(level[i], labelled, figs, period[i], True) for i in labs]
    # best[(j, start)]: (labels placed, columns headed, -offset, runs) for labels j.. over labelled columns start..
    memo: dict[tuple[int, int], tuple[int, int, float, list[tuple[int, int] | None]]] = {}

    def best(j: int, start: int) -> tuple[int, int, float, list[tuple[int, int] | None]]:
        if j == len(labs):
            return (0, 0, 0.0, [])
        if (j, start) not in memo:
            skip = best(j + 1, start)
            top = (*skip[:3], [None, *skip[3]])
            for (a, b), off in runs[j].items():
                if a >= start:
                    rest = best(j + 1, b + 1)
                    cand = (rest[0] + 1, rest[1] + b - a + 1, rest[2] - off, [(a, b), *rest[3]])
                    if cand[:3] > top[:3]:
                        top = cand
            memo[(j, start)] = top
        return memo[(j, start)]

    for i, run in zip(labs, best(0, 0)[3]):
        if run is not None:
            for c in range(run[0], run[1] + 1):
                owner[cols[c]] = level[i]
    return owner


def _options(lab: Label, under: list[Label], figures: list[tuple[float, float]], period: bool, inside: bool
             ) -> dict[tuple[int, int], float]:
    """The runs of labelled columns ``lab`` may head, each with how far off their centre it sits. A period header
    may sit further off centre (a lead-in such as "Years ended June 30," is often centred on the middle year's
    column, not on the years' run); a label inside one column's label is centred over more only where ``inside``."""
    mid = (lab.x0 + lab.x1) / 2
    n = len(under)
    options: dict[tuple[int, int], float] = {}
    over = _sits_over(lab, under)
    if over and over == list(range(over[0], over[-1] + 1)):
        options[(over[0], over[-1])] = abs((under[over[0]].x0 + under[over[-1]].x1) / 2 - mid)
    if not period and not inside and _inside(lab, under):
        return options
    for a in range(n):
        for b in range(a + 1, n):
            spans = [(under[a].x0, under[b].x1), (figures[a][0], figures[b][1]),
                     (min(under[a].x0, figures[a][0]), max(under[b].x1, figures[b][1]))]
            for x0, x1 in spans:
                off = abs((x0 + x1) / 2 - mid)
                within = x0 - 0.5 * lab.size <= lab.x0 and lab.x1 <= x1 + 0.5 * lab.size
                if within and off <= (0.1 if period else 0.05) * (x1 - x0) + 0.5 * lab.size:
                    options[(a, b)] = min(off, options.get((a, b), off))
    return options


def _inside(lab: Label, under: list[Label]) -> bool:
    """Whether ``lab`` sits inside one column's label, as the first line of a wrapped label does."""
    return any(u.x0 - 0.5 * lab.size <= lab.x0 and lab.x1 <= u.x1 + 0.5 * lab.size for u in under)


def _sits_over(lab: Label, under: list[Label]) -> list[int]:
    """The labels ``lab`` sits over: it covers half of the narrower of the two."""
    return [k for k, u in enumerate(under) if Label.overlap(lab, u) >= 0.5 * min(lab.x1 - lab.x0, u.x1 - u.x0)]
