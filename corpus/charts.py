"""The statistics pages' two charts as inline SVG, drawn from a statistics record's numbers
when the page renders (milliseconds; no image library, no file): the caption-length
histogram and clips per AudioSet label. The PNGs of corpus.stats stay for download."""

from __future__ import annotations

from html import escape
from typing import Any

from corpus.stats import TOP_LABELS

WIDTH = 640
BAR = "#0969da"


def _svg(height: int, label: str, body: list[str]) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" viewBox="0 0 {WIDTH} {height}" '
        f'role="img" aria-label="{escape(label)}" font-family="sans-serif" font-size="11">'
        f'<rect width="{WIDTH}" height="{height}" fill="#fff"/>' + "".join(body) + "</svg>"
    )


def length_svg(data: dict[str, Any]) -> str:
    """Captions per length in words, one bar per length from the shortest to the longest."""
    histogram = {int(k): int(v) for k, v in data.get("length_histogram", {}).items()}
    mean = float(data.get("all", {}).get("words_per_caption_mean", 0) or 0)
    label = f"Histogram of words per caption (mean {mean:.2f})"
    height, left, bottom, top = 240, 44, 34, 24
    body = [f'<text x="{WIDTH / 2}" y="14" text-anchor="middle">{escape(label)}</text>']
    if not histogram:
        return _svg(height, label, [*body, '<text x="50%" y="50%">no captions</text>'])
    lengths = list(range(min(histogram), max(histogram) + 1))
    peak = max(histogram.values()) or 1
    step = (WIDTH - left - 10) / len(lengths)
    plot = height - bottom - top
    for i, n in enumerate(lengths):
        count = histogram.get(n, 0)
        h = plot * count / peak
        x = left + i * step
        body.append(
            f'<rect x="{x + 1:.1f}" y="{top + plot - h:.1f}" width="{max(step - 2, 1):.1f}" '
            f'height="{h:.1f}" fill="{BAR}"><title>{n} words: {count} captions</title></rect>'
        )
        if len(lengths) <= 40 or i % 5 == 0:
            body.append(
                f'<text x="{x + step / 2:.1f}" y="{height - bottom + 14}" '
                f'text-anchor="middle">{n}</text>'
            )
    body += [
        f'<text x="{left - 6}" y="{top + 4}" text-anchor="end">{peak}</text>',
        f'<text x="{left - 6}" y="{top + plot}" text-anchor="end">0</text>',
        f'<text x="{WIDTH / 2}" y="{height - 4}" text-anchor="middle">words per caption</text>',
    ]
    return _svg(height, label, body)


def labels_svg(data: dict[str, Any]) -> str:
    """Clips per AudioSet label, the TOP_LABELS most frequent, one bar a row."""
    rows = data.get("labels", [])[:TOP_LABELS]
    label = f"Bar chart: clips per AudioSet label (top {TOP_LABELS})"
    if not rows:
        return _svg(60, label, ['<text x="10" y="34">no clip has AudioSet labels</text>'])
    row_h, top, name_w = 18, 24, 200
    height = top + row_h * len(rows) + 10
    peak = max(int(r["clips"]) for r in rows) or 1
    width = WIDTH - name_w - 60
    body = [f'<text x="{WIDTH / 2}" y="14" text-anchor="middle">{escape(label)}</text>']
    for i, row in enumerate(rows):
        y = top + i * row_h
        w = width * int(row["clips"]) / peak
        name = escape(str(row["name"]))
        body += [
            f'<text x="{name_w - 6}" y="{y + 12}" text-anchor="end">{name}</text>',
            f'<rect x="{name_w}" y="{y + 2}" width="{w:.1f}" height="{row_h - 5}" fill="{BAR}"/>',
            f'<text x="{name_w + w + 4:.1f}" y="{y + 12}">{int(row["clips"])}</text>',
        ]
    return _svg(height, label, body)
