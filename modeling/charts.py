"""A run's learning curve as SVG drawn here (no image library: the run page's chart costs
milliseconds, where matplotlib cost the web process a second to import and ~0.2 s a
draw): training loss per step (left axis), validation CIDEr-D per check (right axis)."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from typing import Any

WIDTH, HEIGHT, LEFT, RIGHT, TOP, BOTTOM = 700, 320, 56, 56, 20, 40
LOSS, SCORE = "#3566a8", "#c0582b"


def _scale(values: Sequence[float], low: float, high: float) -> tuple[float, float]:
    lo, hi = min(values), max(values)
    span = (hi - lo) or 1.0
    return lo, (high - low) / span


def learning_curve_svg(learning_curve: Sequence[dict[str, Any]]) -> str:
    steps = [r for r in learning_curve if r.get("loss") is not None]
    checks = [r for r in learning_curve if r.get("score") is not None]
    width, height = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" '
        f'width="{WIDTH}" height="{HEIGHT}" font-family="sans-serif" font-size="12">',
        f'<rect width="{WIDTH}" height="{HEIGHT}" fill="#fff"/>',
        f'<line x1="{LEFT}" y1="{TOP + height}" x2="{LEFT + width}" y2="{TOP + height}" '
        'stroke="#888"/>',
        f'<text x="{LEFT + width / 2}" y="{HEIGHT - 8}" text-anchor="middle">step</text>',
    ]
    if not steps and not checks:
        parts.append(
            f'<text x="{WIDTH / 2}" y="{HEIGHT / 2}" text-anchor="middle">no steps yet</text>'
        )
        return "".join(parts) + "</svg>"
    all_steps = [float(r["step"]) for r in steps + checks]
    x0, xs = _scale([0.0, *all_steps], 0, width)

    def x(step: float) -> float:
        return LEFT + (float(step) - x0) * xs

    parts.append(
        f'<text x="{LEFT + width}" y="{TOP + height + 16}" text-anchor="end">'
        f"{int(max(all_steps))}</text>"
    )
    series = ((steps, "loss", LOSS, "left"), (checks, "score", SCORE, "right"))
    for rows, key, colour, side in series:
        if not rows:
            continue
        values = [float(r[key]) for r in rows]
        y0, ys = _scale(values, 0, height)
        points = " ".join(
            f"{x(r['step']):.1f},{TOP + height - (v - y0) * ys:.1f}"
            for r, v in zip(rows, values, strict=True)
        )
        label = "training loss" if key == "loss" else "validation CIDEr-D (greedy)"
        ax = LEFT if side == "left" else LEFT + width
        anchor = "start" if side == "left" else "end"
        parts += [
            f'<line x1="{ax}" y1="{TOP}" x2="{ax}" y2="{TOP + height}" stroke="{colour}"/>',
            f'<text x="{ax}" y="{TOP - 6}" text-anchor="{anchor}" fill="{colour}">'
            f"{escape(label)}: {max(values):.3f} max, {min(values):.3f} min</text>",
            f'<polyline fill="none" stroke="{colour}" stroke-width="1.5" points="{points}"/>',
        ]
        if key == "score":
            parts += [
                f'<circle cx="{p.split(",")[0]}" cy="{p.split(",")[1]}" r="3" fill="{colour}"/>'
                for p in points.split()
            ]
    return "".join(parts) + "</svg>"
