"""What text may stand in a table's column path or unit: header text only.

A figure is written with its row label and its column path (spanning header > column header > unit). Three
things that are not header text end up there when a reader takes the lines above a table for its header:

* a sentence piece: the lead-in's last line ("ended July 1, 2023 and June 25, 2022 is as follows (in millions):")
  set over the figure columns. It is the table's lead-in (a paragraph the planner puts before the rows), and the
  unit it names in parentheses is the table's unit;
* a line that names the unit inside a sentence ("Cash flows were as follows ($ in millions):"): the unit is the
  parenthetical, the sentence stays prose;
* units of several columns run together ("(in thousands) (in millions)"): stripped as one parenthetical, they read
  "in thousands) (in millions"; each group is its own unit.

Used by the text-layer converter when it reads headers, and by the contract's row writer, so the model's Markdown
and the text layer follow one rule.
"""

from __future__ import annotations

import re

# A table's unit ("In millions, except per share data", "$ million", "(000s)").
UNIT = re.compile(r"\b(?:thousands|millions?|billions?|mn|bn|000s?)\b|\bper\s+share\b", re.I)

# Words a unit line is made of; anything else beyond a couple of words makes it a sentence that names a unit.
_UNIT_WORDS = {
    "in", "of", "and", "or", "the", "except", "per", "share", "shares", "data", "amounts", "amount", "dollars",
    "dollar", "thousands", "thousand", "millions", "million", "billions", "billion", "mn", "bn", "000", "000s",
    "unaudited", "us", "u", "s", "usd", "eur", "gbp", "percentages", "percentage", "percent", "ratios", "where",
    "otherwise", "noted", "indicated", "stated", "unless", "number", "numbers", "store", "count", "employee",
    "figures", "expressed", "are", "all", "other", "items", "certain", "as", "rates", "ratio", "basis", "points",
}
_WORD = re.compile(r"[A-Za-z]+|\d+")
# Verbs and phrases that prose has and header labels do not.
_SENTENCE = re.compile(
    r"\b(?:is|are|was|were|has|have|had|consisted|consists|follows|following|includes|included|represents|"
    r"represented|shows|presents|summarized|summarizes|sets\s+forth|set\s+forth|we|our)\b", re.I)


def paren_groups(text: str) -> list[str] | None:
    """The contents of the top-level parenthetical groups when ``text`` is made of nothing else (blanks and a
    closing colon aside), else None: "(in thousands) (in millions)" -> ["in thousands", "in millions"]."""
    groups, depth, start = [], 0, -1
    rest = []
    for i, ch in enumerate(text):
        if ch == "(":
            if depth == 0:
                start = i + 1
            depth += 1
        elif ch == ")" and depth:
            depth -= 1
            if depth == 0:
                groups.append(text[start:i].strip())
        elif depth == 0:
            rest.append(ch)
    if depth or not groups or "".join(rest).strip(" :;,"):
        return None
    return groups


def unit_text(text: str) -> str:
    """A unit as written in a row: outer parentheses off only where they enclose it whole ("(In millions)" ->
    "In millions"; "(in thousands) (in millions)" -> "in thousands; in millions")."""
    t = text.strip()
    groups = paren_groups(t)
    return "; ".join(g for g in groups if g) if groups is not None else t.rstrip(":").strip()


def is_unit_line(text: str) -> bool:
    """A line that is only a unit ("(Dollars in millions, except per share data)", "In Millions", "$ in
    thousands"), not a sentence that names one."""
    t = text.strip()
    if not t or len(t) > 90 or not UNIT.search(t):
        return False
    words = [w.lower() for w in _WORD.findall(t)]
    return sum(1 for w in words if w not in _UNIT_WORDS) <= 1 and not _SENTENCE.search(t.replace("(", " "))


def split_unit(text: str) -> tuple[str, str]:
    """(sentence, unit) of a line that names its unit in a closing parenthetical ("Cash flows were as follows ($
    in millions):" -> ("Cash flows were as follows ($ in millions):", "$ in millions")); ("", unit) for a unit
    line; (text, "") when there is no unit."""
    t = text.strip()
    if is_unit_line(t):
        return "", unit_text(t)
    m = re.search(r"\(([^()]*)\)\s*:?\s*$", t)
    if m and UNIT.search(m.group(1)) and is_unit_line(m.group(1)):
        return t, m.group(1).strip()
    return t, ""


def is_sentence_piece(text: str) -> bool:
    """Prose, not a header label: a verb or pronoun of running text in a piece of some length, or a lead-in's end
    ("... as follows:"). Header labels ("Three Months Ended July 1, 2023", "Weighted-average exercise price of
    outstanding options") have neither."""
    t = text.strip()
    if len(t) < 12:
        return False
    if re.search(r"\b(?:as\s+follows|the\s+following)\b\W*$", t, re.I):
        return True
    if t.endswith(":") and len(t.split()) >= 5 and _SENTENCE.search(t):
        return True
    return len(t.split()) >= 5 and bool(_SENTENCE.search(t)) and t[:1].islower()
