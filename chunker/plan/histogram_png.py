"""A bar chart as a PNG, written with the standard library only (zlib + struct).

The chunk-health report draws its size histogram on every run; a plotting library would be a dependency of the
ingest for one picture. Bars, a base line, each bar's count above it and its bin's lower edge below it, in a 3x5
pixel digit font scaled up: enough to read the shape of a corpus at a glance.
"""

from __future__ import annotations

import struct
import zlib

# 3x5 glyphs, rows top down, bits left to right.
_FONT = {
    "0": ("111", "101", "101", "101", "111"), "1": ("010", "110", "010", "010", "111"),
    "2": ("111", "001", "111", "100", "111"), "3": ("111", "001", "111", "001", "111"),
    "4": ("101", "101", "111", "001", "001"), "5": ("111", "100", "111", "001", "111"),
    "6": ("111", "100", "111", "101", "111"), "7": ("111", "001", "010", "010", "010"),
    "8": ("111", "101", "111", "101", "111"), "9": ("111", "101", "111", "001", "111"),
    "+": ("000", "010", "111", "010", "000"), "-": ("000", "000", "111", "000", "000"),
    "k": ("100", "101", "110", "101", "101"), " ": ("000", "000", "000", "000", "000"),
}
_WHITE, _INK, _BAR, _MARK = (255, 255, 255), (40, 40, 40), (70, 110, 170), (200, 70, 60)


class _Canvas:
    def __init__(self, w: int, h: int) -> None:
        self.w, self.h = w, h
        self.px = [bytearray(_WHITE * w) for _ in range(h)]

    def rect(self, x0: int, y0: int, x1: int, y1: int, rgb: tuple[int, int, int]) -> None:
        for y in range(max(0, y0), min(self.h, y1)):
            row = self.px[y]
            for x in range(max(0, x0), min(self.w, x1)):
                row[3 * x:3 * x + 3] = bytes(rgb)

    def text(self, x: int, y: int, s: str, scale: int = 2) -> None:
        for ch in s:
            for r, bits in enumerate(_FONT.get(ch, _FONT[" "])):
                for c, b in enumerate(bits):
                    if b == "1":
                        self.rect(x + c * scale, y + r * scale, x + (c + 1) * scale, y + (r + 1) * scale, _INK)
            x += 4 * scale

    def png(self) -> bytes:
        raw = b"".join(b"\x00" + bytes(row) for row in self.px)

        def chunk(tag: bytes, data: bytes) -> bytes:
            return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)

        head = struct.pack(">IIBBBBB", self.w, self.h, 8, 2, 0, 0, 0)
        return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", head) + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b"")


def _short(n: int) -> str:
    return f"{n // 1000}k" if n >= 1000 and n % 1000 == 0 else str(n)


def bar_chart_png(edges: list[int], counts: list[int], mark_below: int | None = None) -> bytes:
    """Bars for ``counts`` over bins starting at ``edges`` (the last bin open); bins whose upper edge is at most
    ``mark_below`` are drawn in a warning colour (the fragments)."""
    bar_w, gap, left, top, base_h = 40, 12, 16, 24, 160
    w = left * 2 + len(counts) * (bar_w + gap)
    h = top + base_h + 40
    cv = _Canvas(w, h)
    peak = max(counts, default=0) or 1
    base = top + base_h
    for i, n in enumerate(counts):
        x = left + i * (bar_w + gap)
        bh = round(base_h * n / peak)
        upper = edges[i + 1] if i + 1 < len(edges) else None
        colour = _MARK if mark_below is not None and upper is not None and upper <= mark_below else _BAR
        cv.rect(x, base - bh, x + bar_w, base, colour)
        cv.text(x, base - bh - 14, str(n))
        cv.text(x, base + 8, _short(edges[i]) + ("+" if upper is None else ""))
    cv.rect(left - 4, base, w - left + 4, base + 2, _INK)
    return cv.png()
