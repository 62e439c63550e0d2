"""Charts drawn on the server as SVG text: no script, no network, nothing to load.

Every label goes through :func:`html.escape`, so a memory's content or a benchmark's name
can never become markup. The inspector draws the forgetting curve, per-signal bars and a
graph neighbourhood with these; ``benchmarks/report.py`` draws its line charts.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from html import escape

PALETTE = ("#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#4b5563", "#ca8a04")
FONT = 'font-family="system-ui, sans-serif" font-size="11"'


@dataclass(frozen=True, slots=True)
class Series:
    """One line of a chart: ``points`` are ``(x, y)``; ``dashed`` for baselines."""

    name: str
    points: Sequence[tuple[float, float]]
    dashed: bool = False
    color: str | None = None


@dataclass(frozen=True, slots=True)
class Marker:
    """A vertical mark at ``x`` with a label (a review, the next review, now)."""

    x: float
    label: str
    color: str = "#4b5563"


@dataclass(slots=True)
class _Frame:
    """Maps data to pixels inside a plot area (linear or log10 axes)."""

    width: int
    height: int
    x_range: tuple[float, float]
    y_range: tuple[float, float]
    log_x: bool = False
    log_y: bool = False
    left: int = 58
    right: int = 16
    top: int = 14
    bottom: int = 36
    parts: list[str] = field(default_factory=list)

    def _t(self, v: float, lo: float, hi: float, log: bool) -> float:
        if log:
            v, lo, hi = (math.log10(max(x, 1e-12)) for x in (v, lo, hi))
        return 0.5 if hi == lo else (v - lo) / (hi - lo)

    def x(self, v: float) -> float:
        span = self.width - self.left - self.right
        return self.left + span * self._t(v, *self.x_range, self.log_x)

    def y(self, v: float) -> float:
        span = self.height - self.top - self.bottom
        return self.top + span * (1.0 - self._t(v, *self.y_range, self.log_y))


def _fmt(v: float) -> str:
    if v == 0:
        return "0"
    for size, suffix in ((1e6, "M"), (1e3, "k")):
        if abs(v) >= size:
            return f"{v / size:.3g}{suffix}"
    if abs(v) < 0.01:
        return f"{v:.2g}"
    return f"{v:.3g}"


def _short(text: str, most: int) -> str:
    return text if len(text) <= most else text[: most - 1] + "…"


def _ticks(lo: float, hi: float, log: bool) -> list[float]:
    if log:
        first, last = math.floor(math.log10(max(lo, 1e-12))), math.ceil(math.log10(max(hi, 1e-12)))
        steps = (1,) if last - first > 3 else (1, 2, 5)
        found = [m * 10.0**e for e in range(first, last + 1) for m in steps]
        return [t for t in found if lo <= t <= hi] or [lo, hi]
    if hi == lo:
        return [lo]
    step = 10 ** math.floor(math.log10((hi - lo) / 4))
    for mult in (1, 2, 5, 10):
        if (hi - lo) / (step * mult) <= 6:
            step *= mult
            break
    start = math.ceil(lo / step) * step
    return [start + i * step for i in range(int((hi - start) / step + 1e-9) + 1)]


def _open_svg(width: int, height: int, title: str) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" '
        f'width="{width}" height="{height}" role="img" aria-label="{escape(title)}">'
        f"<title>{escape(title)}</title>"
    )


def line_chart(
    series: Sequence[Series],
    *,
    title: str,
    x_label: str,
    y_label: str,
    log_x: bool = False,
    log_y: bool = False,
    markers: Sequence[Marker] = (),
    hlines: Sequence[tuple[float, str]] = (),
    y_range: tuple[float, float] | None = None,
    width: int = 640,
    height: int = 320,
) -> str:
    """Lines with points, axes, ticks, a legend, vertical markers and horizontal lines."""
    xs = [p[0] for s in series for p in s.points] + [m.x for m in markers]
    ys = [p[1] for s in series for p in s.points] + [h[0] for h in hlines]
    if not xs:
        xs, ys = [0.0, 1.0], [0.0, 1.0]
    if log_y:
        ys = [y for y in ys if y > 0] or [1.0]
    lo_y, hi_y = y_range if y_range else (min(ys), max(ys))
    if y_range is None and log_y:
        lo_y, hi_y = lo_y / 1.6, hi_y * 1.6
    elif y_range is None:
        lo_y = min(lo_y, 0.0)
        hi_y = hi_y * 1.05 if hi_y > 0 else 1.0
    lo_x, hi_x = min(xs), max(xs)
    if log_x and lo_x > 0:
        lo_x, hi_x = lo_x / 1.3, hi_x * 1.3
    legend_rows = len(series) if len(series) > 1 else 0
    f = _Frame(width, height, (lo_x, hi_x), (lo_y, hi_y), log_x, log_y, top=14 + 14 * legend_rows)
    out = [_open_svg(width, height, title), f'<g {FONT} fill="#374151">']
    plot_bottom, plot_right = height - f.bottom, width - f.right
    for t in _ticks(lo_y, hi_y, log_y):
        y = f.y(t)
        out.append(
            f'<line x1="{f.left}" x2="{plot_right}" y1="{y:.1f}" y2="{y:.1f}" stroke="#e5e7eb"/>'
            f'<text x="{f.left - 4}" y="{y + 4:.1f}" text-anchor="end">{_fmt(t)}</text>'
        )
    for t in _ticks(f.x_range[0], f.x_range[1], log_x):
        x = f.x(t)
        out.append(
            f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{f.top}" y2="{plot_bottom}" stroke="#f3f4f6"/>'
            f'<text x="{x:.1f}" y="{plot_bottom + 14}" text-anchor="middle">{_fmt(t)}</text>'
        )
    out.append(
        f'<rect x="{f.left}" y="{f.top}" width="{plot_right - f.left}" '
        f'height="{plot_bottom - f.top}" fill="none" stroke="#9ca3af"/>'
        f'<text x="{(f.left + plot_right) / 2:.0f}" y="{height - 4}" text-anchor="middle">'
        f"{escape(x_label)}</text>"
        f'<text transform="translate(12 {(f.top + plot_bottom) / 2:.0f}) rotate(-90)" '
        f'text-anchor="middle">{escape(y_label)}</text>'
    )
    for value, label in hlines:
        y = f.y(value)
        out.append(
            f'<line class="hline" x1="{f.left}" x2="{plot_right}" y1="{y:.1f}" y2="{y:.1f}" '
            f'stroke="#dc2626" stroke-dasharray="4 3"/>'
            f'<text x="{plot_right - 4}" y="{y - 4:.1f}" text-anchor="end" fill="#dc2626">'
            f"{escape(label)}</text>"
        )
    for n, m in enumerate(markers):
        x = f.x(m.x)
        y = f.top + 12 + 14 * n
        anchor, dx = ("end", -3) if x > plot_right - 80 else ("start", 3)
        out.append(
            f'<line class="marker" x1="{x:.1f}" x2="{x:.1f}" y1="{f.top}" y2="{plot_bottom}" '
            f'stroke="{m.color}" stroke-dasharray="2 2"/>'
            f'<text x="{x + dx:.1f}" y="{y}" fill="{m.color}" text-anchor="{anchor}">'
            f"{escape(m.label)}</text>"
        )
    for i, s in enumerate(series):
        color = s.color or PALETTE[i % len(PALETTE)]
        pts = [(f.x(x), f.y(y)) for x, y in s.points if not (log_y and y <= 0)]
        if not pts:
            continue
        path = " ".join(f"{x:.1f},{y:.1f}" for x, y in pts)
        dash = ' stroke-dasharray="6 4"' if s.dashed else ""
        out.append(
            f'<polyline class="series" data-name="{escape(s.name)}" points="{path}" '
            f'fill="none" stroke="{color}" stroke-width="2"{dash}/>'
        )
        if len(pts) <= 40:
            out += [f'<circle cx="{x:.1f}" cy="{y:.1f}" r="2.5" fill="{color}"/>' for x, y in pts]
    legend_x = f.left + 8
    for i, s in enumerate(series if legend_rows else ()):
        color = s.color or PALETTE[i % len(PALETTE)]
        y = 12 + 14 * i
        dash = ' stroke-dasharray="6 4"' if s.dashed else ""
        out.append(
            f'<line x1="{legend_x}" x2="{legend_x + 18}" y1="{y - 4}" y2="{y - 4}" '
            f'stroke="{color}" stroke-width="2"{dash}/>'
            f'<text x="{legend_x + 22}" y="{y}">{escape(s.name)}</text>'
        )
    out.append("</g></svg>")
    return "".join(out)


def grid(parts: Sequence[str], *, width: int, height: int, columns: int, title: str) -> str:
    """Several charts (each an ``<svg>`` of ``width`` x ``height``) in one picture."""
    rows = -(-len(parts) // columns)
    out = [_open_svg(width * columns, height * rows, title)]
    for n, part in enumerate(parts):
        x, y = (n % columns) * width, (n // columns) * height
        out.append(part.replace("<svg ", f'<svg x="{x}" y="{y}" ', 1))
    out.append("</svg>")
    return "".join(out)


def bars(
    items: Sequence[tuple[str, float]],
    *,
    title: str,
    width: int = 640,
    unit: str = "",
    colors: Sequence[str] = PALETTE,
    signed: bool = True,
) -> str:
    """Horizontal bars, one per ``(label, value)``, scaled to the largest absolute value
    (negative values drawn red, left of the axis); bar ``i`` takes ``colors[i % len]``."""
    row, label_w = 18, 290
    height = row * max(len(items), 1) + 8
    top = max((abs(v) for _, v in items), default=0.0) or 1.0
    has_negative = any(v < 0 for _, v in items)
    span = width - label_w - 70
    zero = label_w + (span / 2 if has_negative else 0)
    scale = (span / 2 if has_negative else span) / top
    out = [_open_svg(width, height, title), f'<g {FONT} fill="#374151">']
    for i, (label, value) in enumerate(items):
        y = 4 + i * row
        w = abs(value) * scale
        x = zero - w if value < 0 else zero
        color = "#dc2626" if value < 0 else colors[i % len(colors)]
        shown = f"{value:+.4f}" if signed else f"{value:.3f}"
        out.append(
            f'<text x="{label_w - 6}" y="{y + 12}" text-anchor="end">{escape(_short(label, 48))}'
            "</text>"
            f'<rect class="bar" x="{x:.1f}" y="{y + 2}" width="{max(w, 0.5):.1f}" '
            f'height="{row - 6}" fill="{color}"><title>{escape(label)}: {value:.4f}</title></rect>'
            f'<text x="{x + w + 4 if value >= 0 else zero + 4:.1f}" y="{y + 12}">'
            f"{shown}{escape(unit)}</text>"
        )
    out.append("</g></svg>")
    return "".join(out)


def neighbourhood(
    center: str,
    nodes: Sequence[tuple[str, str, int, str]],
    *,
    title: str,
    size: int = 520,
    more: int = 0,
) -> str:
    """A radial drawing: ``center`` in the middle, each ``(label, href, depth, edge
    label)`` on the ring of its depth, linked to the page at ``href``. ``more`` says how
    many were left out of the drawing (the table lists them all)."""
    c = size / 2
    rings: dict[int, list[tuple[str, str, int, str]]] = {}
    for node in nodes:
        rings.setdefault(node[2], []).append(node)
    depth_max = max(rings, default=1)
    out = [_open_svg(size, size, title), f'<g {FONT} fill="#111827">']
    labels = []
    for depth, ring in sorted(rings.items()):
        radius = (c - 60) * depth / depth_max
        for i, (label, href, _, edge) in enumerate(ring):
            angle = 2 * math.pi * i / len(ring) + depth * 0.3
            x, y = c + radius * math.cos(angle), c + radius * math.sin(angle)
            out.append(
                f'<line x1="{c:.1f}" y1="{c:.1f}" x2="{x:.1f}" y2="{y:.1f}" stroke="#cbd5e1">'
                f"<title>{escape(edge)}</title></line>"
            )
            anchor = "start" if math.cos(angle) >= 0 else "end"
            dx = 7 if anchor == "start" else -7
            short = _short(label, 22)
            labels.append(
                f'<a href="{escape(href)}"><circle class="node" cx="{x:.1f}" cy="{y:.1f}" r="5" '
                f'fill="{PALETTE[depth % len(PALETTE)]}"><title>{escape(label)} ({escape(edge)})'
                f'</title></circle><text x="{x + dx:.1f}" y="{y + 4:.1f}" '
                f'text-anchor="{anchor}">{escape(short)}</text></a>'
            )
    out += labels
    out.append(
        f'<circle cx="{c}" cy="{c}" r="9" fill="#111827"/>'
        f'<text x="{c}" y="{c - 14}" text-anchor="middle" font-weight="bold">{escape(center)}'
        "</text>"
    )
    if more:
        out.append(f'<text x="8" y="{size - 8}">and {more} more (listed below)</text>')
    out.append("</g></svg>")
    return "".join(out)
