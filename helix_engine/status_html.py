"""`helix status --view trend --format html`: one self-contained page of speedup charts.

As upstream: an "Operator Speedup Trends" page, a 5-column grid of cards, each with
"max X · start Y" (red when the max is below 1) above a 440×230 SVG line chart of the geomean
speedup per round, with dashed lines at 1.00x and at the max. No scripts, no external assets.
"""

from __future__ import annotations

import html

from helix_engine.sanitize import clean
from helix_engine.status import OperatorStatus, _trend_rows

W, H = 440, 230
LEFT, RIGHT, TOP, BOTTOM = 46, 12, 24, 30


def _chart(points: list[tuple[int, float]]) -> str:
    xs = [n for n, _ in points]
    ys = [v for _, v in points]
    lo, hi = min([*ys, 1.0]), max([*ys, 1.0])
    if hi == lo:
        hi += 1.0
    pad = (hi - lo) * 0.08
    lo, hi = lo - pad, hi + pad
    x0, x1 = min(xs), max(xs)
    if x1 == x0:
        x1 += 1

    def px(n: float) -> float:
        return LEFT + (n - x0) / (x1 - x0) * (W - LEFT - RIGHT)

    def py(v: float) -> float:
        return TOP + (hi - v) / (hi - lo) * (H - TOP - BOTTOM)

    parts = [f'<svg viewBox="0 0 {W} {H}" width="100%" role="img">']
    for i in range(5):
        v = lo + i / 4 * (hi - lo)
        parts.append(f'<line x1="{LEFT}" x2="{W - RIGHT}" y1="{py(v):.1f}" y2="{py(v):.1f}" stroke="#eee"/>'
                     f'<text x="{LEFT - 4}" y="{py(v) + 3:.1f}" font-size="9" text-anchor="end" '
                     f'fill="#888">{v:.2f}</text>')
    best = max(ys)
    parts.append(f'<line x1="{LEFT}" x2="{W - RIGHT}" y1="{py(1.0):.1f}" y2="{py(1.0):.1f}" stroke="#c0c" '
                 'stroke-dasharray="4 3" opacity="0.6"/>')
    parts.append(f'<line x1="{LEFT}" x2="{W - RIGHT}" y1="{py(best):.1f}" y2="{py(best):.1f}" '
                 'stroke="#2077b4" stroke-dasharray="4 3" opacity="0.7"/>'
                 f'<text x="{W - RIGHT}" y="{py(best) - 3:.1f}" font-size="9" text-anchor="end" '
                 f'fill="#2077b4">max {best:.2f}x</text>')
    step = max(1, (x1 - x0) // 6)
    for n in range(x0, x1 + 1, step):
        parts.append(f'<text x="{px(n):.1f}" y="{H - 10}" font-size="9" text-anchor="middle" fill="#888">{n}</text>')
    if len(points) > 1:
        line = " ".join(f"{px(n):.1f},{py(v):.1f}" for n, v in points)
        parts.append(f'<polyline points="{line}" fill="none" stroke="#1b9e4b" stroke-width="1.8"/>')
    for n, v in points:
        parts.append(f'<circle cx="{px(n):.1f}" cy="{py(v):.1f}" r="2" fill="#1b9e4b">'
                     f"<title>round-{n}: {v:.3f}x</title></circle>")
    parts.append("</svg>")
    return "".join(parts)


def render_trend_html(items: list[OperatorStatus]) -> str:
    rows, _ = _trend_rows(items)
    cards = []
    for item in rows:
        speedups = item.round_speedups()
        if not speedups:
            continue
        points = sorted((int(k.split("-")[1]), v) for k, v in speedups.items())
        best, start = max(v for _, v in points), points[0][1]
        color = "#d62728" if best < 1.0 else "#2077b4"
        cards.append(f'<div class="card"><div class="title">{html.escape(clean(item.name))}</div>'
                     f'<div class="sub"><span style="color:{color}">max {best:.2f}x</span> · start {start:.2f}x'
                     f"</div>{_chart(points)}</div>")
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Operator Speedup Trends</title>
<style>
body {{ font-family: sans-serif; margin: 20px; color: #222; background: #fafafa; }}
.grid {{ display: grid; grid-template-columns: repeat(5, 1fr); gap: 14px; }}
.card {{ background: #fff; border: 1px solid #e5e5e5; border-radius: 8px; padding: 10px 12px; }}
.title {{ font-weight: 600; font-size: 13px; }} .sub {{ font-size: 11px; color: #666; }}
</style></head>
<body><h1>Operator Speedup Trends</h1>
<p>{len(cards)} operators · dashed lines: 1.00x and the best round</p>
<div class="grid">
{"".join(cards)}
</div></body></html>
"""
