"""The learning-curve chart as inline SVG (no JavaScript, no image library): validation
score against captions used, one polyline per series."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from typing import Any

COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#17becf")
WIDTH, HEIGHT, PAD = 640, 320, 48


def curve_svg(series: Sequence[dict[str, Any]]) -> str:
    points = [p for s in series for p in s["points"]]
    if not points:
        return ""
    x_max = max(p["captions"] for p in points) or 1
    y_max = max(p["value"] for p in points) or 1.0
    y_min = min(0.0, min(p["value"] for p in points))

    def x(v: float) -> float:
        return PAD + (WIDTH - 2 * PAD) * v / x_max

    def y(v: float) -> float:
        return HEIGHT - PAD - (HEIGHT - 2 * PAD) * (v - y_min) / ((y_max - y_min) or 1.0)

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
        f'aria-label="Validation score against captions" class="curve">',
        f'<line x1="{PAD}" y1="{HEIGHT - PAD}" x2="{WIDTH - PAD}" y2="{HEIGHT - PAD}" '
        'stroke="#888"/>',
        f'<line x1="{PAD}" y1="{PAD}" x2="{PAD}" y2="{HEIGHT - PAD}" stroke="#888"/>',
        f'<text x="{WIDTH / 2}" y="{HEIGHT - 10}" text-anchor="middle" font-size="12">'
        "captions</text>",
        f'<text x="{PAD}" y="{PAD - 12}" font-size="12">{y_max:.3f}</text>',
        f'<text x="{WIDTH - PAD}" y="{HEIGHT - PAD + 16}" text-anchor="end" font-size="12">'
        f"{x_max}</text>",
    ]
    for i, s in enumerate(series):
        colour = COLOURS[i % len(COLOURS)]
        coords = " ".join(f"{x(p['captions']):.1f},{y(p['value']):.1f}" for p in s["points"])
        name = escape(f"{s['label'] or s['source']}: {s['strategy']}")
        parts.append(
            f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="{coords}">'
            f"<title>{name}</title></polyline>"
        )
        parts.append(
            f'<text x="{PAD + 8}" y="{PAD + 14 * i}" font-size="11" fill="{colour}">{name}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def flags_svg(points: Sequence[dict[str, Any]]) -> str:
    """The flags' precision and recall against reviewers' decisions over time: `points`
    are {"at": datetime, "precision": float | None, "recall": float | None}, oldest first.
    Empty without two points (one refit is a table row, not a line)."""
    if len(points) < 2:
        return ""
    start, end = points[0]["at"], points[-1]["at"]
    span = (end - start).total_seconds() or 1.0

    def x(at: Any) -> float:
        return PAD + (WIDTH - 2 * PAD) * (at - start).total_seconds() / span

    def y(v: float) -> float:
        return HEIGHT - PAD - (HEIGHT - 2 * PAD) * v

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
        "aria-label=\"Flags' precision and recall against reviewers' decisions over time\" "
        'class="curve" data-testid="flags-chart">',
        f'<line x1="{PAD}" y1="{HEIGHT - PAD}" x2="{WIDTH - PAD}" y2="{HEIGHT - PAD}" '
        'stroke="#888"/>',
        f'<line x1="{PAD}" y1="{PAD}" x2="{PAD}" y2="{HEIGHT - PAD}" stroke="#888"/>',
        f'<text x="{PAD}" y="{PAD - 12}" font-size="12">1.0</text>',
        f'<text x="{PAD}" y="{HEIGHT - 10}" font-size="12">{escape(f"{start:%Y-%m-%d %H:%M}")}'
        "</text>",
        f'<text x="{WIDTH - PAD}" y="{HEIGHT - 10}" text-anchor="end" font-size="12">'
        f"{escape(f'{end:%Y-%m-%d %H:%M}')}</text>",
    ]
    for i, key in enumerate(("precision", "recall")):
        colour = COLOURS[i]
        coords = " ".join(f"{x(p['at']):.1f},{y(p[key]):.1f}" for p in points if p[key] is not None)
        parts.append(
            f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="{coords}">'
            f"<title>{key}</title></polyline>"
        )
        parts.append(
            f'<text x="{WIDTH - PAD - 80}" y="{PAD + 14 * i}" font-size="11" '
            f'fill="{colour}">{key}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)
