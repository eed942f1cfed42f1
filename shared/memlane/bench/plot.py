"""A tiny dependency-free line chart → PNG writer (zlib + struct), so plots need no matplotlib.

Enough for benchmark figures: axes with ticks, several series, a legend, a title; text in a
5×7 bitmap font (upper-case letters, digits and a little punctuation).
"""

from __future__ import annotations

import math
import struct
import zlib
from pathlib import Path
from typing import Sequence

Color = tuple[int, int, int]
PALETTE: list[Color] = [(31, 119, 180), (214, 39, 40), (44, 160, 44), (255, 127, 14), (148, 103, 189)]
MARKER_COLOR: Color = (150, 150, 150)  # event marks (dashed vertical lines): quieter than any series
MARGINS = (110, 30, 60, 80)  # left, right, top, bottom: the plot area's distance from the edges

_FONT = {  # 5 columns × 7 rows, '#' = ink
    "A": [" ### ", "#   #", "#   #", "#####", "#   #", "#   #", "#   #"],
    "B": ["#### ", "#   #", "#   #", "#### ", "#   #", "#   #", "#### "],
    "C": [" ### ", "#   #", "#    ", "#    ", "#    ", "#   #", " ### "],
    "D": ["#### ", "#   #", "#   #", "#   #", "#   #", "#   #", "#### "],
    "E": ["#####", "#    ", "#    ", "#### ", "#    ", "#    ", "#####"],
    "F": ["#####", "#    ", "#    ", "#### ", "#    ", "#    ", "#    "],
    "G": [" ### ", "#   #", "#    ", "# ###", "#   #", "#   #", " ####"],
    "H": ["#   #", "#   #", "#   #", "#####", "#   #", "#   #", "#   #"],
    "I": [" ### ", "  #  ", "  #  ", "  #  ", "  #  ", "  #  ", " ### "],
    "J": ["  ###", "   # ", "   # ", "   # ", "   # ", "#  # ", " ##  "],
    "K": ["#   #", "#  # ", "# #  ", "##   ", "# #  ", "#  # ", "#   #"],
    "L": ["#    ", "#    ", "#    ", "#    ", "#    ", "#    ", "#####"],
    "M": ["#   #", "## ##", "# # #", "# # #", "#   #", "#   #", "#   #"],
    "N": ["#   #", "##  #", "# # #", "#  ##", "#   #", "#   #", "#   #"],
    "O": [" ### ", "#   #", "#   #", "#   #", "#   #", "#   #", " ### "],
    "P": ["#### ", "#   #", "#   #", "#### ", "#    ", "#    ", "#    "],
    "Q": [" ### ", "#   #", "#   #", "#   #", "# # #", "#  # ", " ## #"],
    "R": ["#### ", "#   #", "#   #", "#### ", "# #  ", "#  # ", "#   #"],
    "S": [" ####", "#    ", "#    ", " ### ", "    #", "    #", "#### "],
    "T": ["#####", "  #  ", "  #  ", "  #  ", "  #  ", "  #  ", "  #  "],
    "U": ["#   #", "#   #", "#   #", "#   #", "#   #", "#   #", " ### "],
    "V": ["#   #", "#   #", "#   #", "#   #", "#   #", " # # ", "  #  "],
    "W": ["#   #", "#   #", "#   #", "# # #", "# # #", "# # #", " # # "],
    "X": ["#   #", "#   #", " # # ", "  #  ", " # # ", "#   #", "#   #"],
    "Y": ["#   #", "#   #", " # # ", "  #  ", "  #  ", "  #  ", "  #  "],
    "Z": ["#####", "    #", "   # ", "  #  ", " #   ", "#    ", "#####"],
    "0": [" ### ", "#   #", "#  ##", "# # #", "##  #", "#   #", " ### "],
    "1": ["  #  ", " ##  ", "  #  ", "  #  ", "  #  ", "  #  ", " ### "],
    "2": [" ### ", "#   #", "    #", "   # ", "  #  ", " #   ", "#####"],
    "3": ["#####", "   # ", "  #  ", "   # ", "    #", "#   #", " ### "],
    "4": ["   # ", "  ## ", " # # ", "#  # ", "#####", "   # ", "   # "],
    "5": ["#####", "#    ", "#### ", "    #", "    #", "#   #", " ### "],
    "6": ["  ## ", " #   ", "#    ", "#### ", "#   #", "#   #", " ### "],
    "7": ["#####", "    #", "   # ", "  #  ", " #   ", " #   ", " #   "],
    "8": [" ### ", "#   #", "#   #", " ### ", "#   #", "#   #", " ### "],
    "9": [" ### ", "#   #", "#   #", " ####", "    #", "   # ", " ##  "],
    ".": ["     ", "     ", "     ", "     ", "     ", " ##  ", " ##  "],
    ",": ["     ", "     ", "     ", "     ", " ##  ", "  #  ", " #   "],
    ":": ["     ", " ##  ", " ##  ", "     ", " ##  ", " ##  ", "     "],
    "-": ["     ", "     ", "     ", "#####", "     ", "     ", "     "],
    "+": ["     ", "  #  ", "  #  ", "#####", "  #  ", "  #  ", "     "],
    "/": ["    #", "    #", "   # ", "  #  ", " #   ", "#    ", "#    "],
    "(": ["   # ", "  #  ", " #   ", " #   ", " #   ", "  #  ", "   # "],
    ")": [" #   ", "  #  ", "   # ", "   # ", "   # ", "  #  ", " #   "],
    "%": ["##   ", "##  #", "   # ", "  #  ", " #   ", "#  ##", "   ##"],
    "=": ["     ", "     ", "#####", "     ", "#####", "     ", "     "],
    "@": [" ### ", "#   #", "# ###", "# # #", "# ###", "#    ", " ####"],
    "'": ["  #  ", "  #  ", " #   ", "     ", "     ", "     ", "     "],
    "x": ["     ", "     ", "#   #", " # # ", "  #  ", " # # ", "#   #"],
    " ": ["     "] * 7,
}


class Canvas:
    def __init__(self, width: int, height: int, background: Color = (255, 255, 255)):
        self.width, self.height = width, height
        self.pixels = bytearray(bytes(background) * (width * height))

    def dot(self, x: int, y: int, color: Color) -> None:
        if 0 <= x < self.width and 0 <= y < self.height:
            i = (y * self.width + x) * 3
            self.pixels[i:i + 3] = bytes(color)

    def rect(self, x0: int, y0: int, x1: int, y1: int, color: Color) -> None:
        for y in range(max(0, min(y0, y1)), min(self.height, max(y0, y1) + 1)):
            for x in range(max(0, min(x0, x1)), min(self.width, max(x0, x1) + 1)):
                self.dot(x, y, color)

    def line(self, x0: int, y0: int, x1: int, y1: int, color: Color, width: int = 1) -> None:
        dx, dy = abs(x1 - x0), -abs(y1 - y0)
        sx, sy = (1 if x0 < x1 else -1), (1 if y0 < y1 else -1)
        err = dx + dy
        half = width // 2
        while True:
            self.rect(x0 - half, y0 - half, x0 - half + width - 1, y0 - half + width - 1, color)
            if x0 == x1 and y0 == y1:
                return
            e2 = 2 * err
            if e2 >= dy:
                err += dy
                x0 += sx
            if e2 <= dx:
                err += dx
                y0 += sy

    def text(self, x: int, y: int, s: str, color: Color = (0, 0, 0), scale: int = 2) -> int:
        """Draw `s` with its top-left at (x, y); returns the x after it."""
        for ch in s:
            glyph = _FONT.get(ch) or _FONT.get(ch.upper()) or _FONT[" "]
            for row, bits in enumerate(glyph):
                for col, bit in enumerate(bits):
                    if bit == "#":
                        self.rect(x + col * scale, y + row * scale, x + col * scale + scale - 1,
                                  y + row * scale + scale - 1, color)
            x += 6 * scale
        return x

    @staticmethod
    def text_width(s: str, scale: int = 2) -> int:
        return len(s) * 6 * scale

    def png(self) -> bytes:
        raw = b"".join(b"\x00" + bytes(self.pixels[y * self.width * 3:(y + 1) * self.width * 3])
                       for y in range(self.height))

        def chunk(kind: bytes, data: bytes) -> bytes:
            return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

        header = struct.pack(">IIBBBBB", self.width, self.height, 8, 2, 0, 0, 0)  # 8-bit RGB
        return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw, 9)) + \
            chunk(b"IEND", b"")


def _nice_step(span: float, ticks: int = 5) -> float:
    raw = span / max(ticks, 1)
    magnitude = 10 ** math.floor(math.log10(raw)) if raw > 0 else 1
    for m in (1, 2, 2.5, 5, 10):
        if raw <= m * magnitude:
            return m * magnitude
    return 10 * magnitude


def _label(v: float) -> str:
    return f"{v:,.0f}" if abs(v) >= 10 or v == int(v) else f"{v:.2f}".rstrip("0").rstrip(".")


def line_chart(series: Sequence[tuple[str, Sequence[float], Sequence[float]]], *, title: str, x_label: str,
               y_label: str, width: int = 960, height: int = 540, y_min: float | None = 0.0,
               y_max: float | None = None, markers: Sequence[float] = (), marker_label: str = "") -> bytes:
    """PNG bytes of a line chart. `series` is (name, xs, ys) per line; `markers`: x values marked by a dashed
    vertical line (events such as a summary refresh), named `marker_label` in the legend."""
    return chart_canvas(series, title=title, x_label=x_label, y_label=y_label, width=width, height=height,
                        y_min=y_min, y_max=y_max, markers=markers, marker_label=marker_label).png()


def chart_canvas(series: Sequence[tuple[str, Sequence[float], Sequence[float]]], *, title: str, x_label: str,
                 y_label: str, width: int = 960, height: int = 540, y_min: float | None = 0.0,
                 y_max: float | None = None, markers: Sequence[float] = (), marker_label: str = "") -> Canvas:
    """The chart drawn on a canvas (line_chart's work, before PNG encoding)."""
    c = Canvas(width, height)
    left, right, top, bottom = MARGINS
    xs = [x for _, sx, _ in series for x in sx]
    ys = [y for _, _, sy in series for y in sy]
    x0, x1 = min(xs), max(xs)
    lo = min(ys) if y_min is None else y_min
    hi = max(ys) if y_max is None else y_max
    step = _nice_step(hi - lo or 1)
    hi = math.ceil(hi / step) * step
    lo = math.floor(lo / step) * step
    pw, ph = width - left - right, height - top - bottom

    def px(x: float) -> int:
        return left + int(round((x - x0) / ((x1 - x0) or 1) * pw))

    def py(y: float) -> int:
        return top + ph - int(round((y - lo) / ((hi - lo) or 1) * ph))

    grey, dark = (225, 225, 225), (60, 60, 60)
    v = lo
    while v <= hi + 1e-9:
        c.line(left, py(v), left + pw, py(v), grey)
        label = _label(v)
        c.text(left - 10 - Canvas.text_width(label), py(v) - 7, label, dark)
        v += step
    xstep = _nice_step(x1 - x0 or 1, 8)
    v = math.ceil(x0 / xstep) * xstep
    while v <= x1 + 1e-9:
        c.line(px(v), top + ph, px(v), top + ph + 6, dark)
        label = _label(v)
        c.text(px(v) - Canvas.text_width(label) // 2, top + ph + 12, label, dark)
        v += xstep
    for m in markers:  # under the series, so the lines stay readable where they cross
        for y in range(top, top + ph, 8):
            c.line(px(m), y, px(m), min(y + 4, top + ph), MARKER_COLOR, 2)
    c.line(left, top, left, top + ph, dark, 2)
    c.line(left, top + ph, left + pw, top + ph, dark, 2)
    for i, (_, sx, sy) in enumerate(series):
        color = PALETTE[i % len(PALETTE)]
        points = [(px(a), py(b)) for a, b in zip(sx, sy)]
        for (ax, ay), (bx, by) in zip(points, points[1:]):
            c.line(ax, ay, bx, by, color, 3)
    c.text(left, 18, title, (0, 0, 0), 3)
    c.text(left + pw // 2 - Canvas.text_width(x_label) // 2, height - 34, x_label, dark)
    c.text(10, top - 24, y_label, dark)
    lx, ly = left + 20, top + 10
    for i, (name, _, _) in enumerate(series):
        color = PALETTE[i % len(PALETTE)]
        c.rect(lx, ly + i * 24 + 6, lx + 24, ly + i * 24 + 9, color)
        c.text(lx + 32, ly + i * 24, name, dark)
    if markers and marker_label:
        y = ly + len(series) * 24 + 7
        for x in range(lx, lx + 24, 8):
            c.line(x, y, x + 4, y, MARKER_COLOR, 2)
        c.text(lx + 32, y - 7, marker_label, dark)
    return c


def save_line_chart(path: Path, *args: object, **kwargs: object) -> Path:
    Path(path).write_bytes(line_chart(*args, **kwargs))  # type: ignore[arg-type]
    return Path(path)
