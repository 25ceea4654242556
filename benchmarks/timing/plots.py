"""The timing figures' one plotting helper: headless matplotlib, modeled-vs-published scatter, speedup axes.

run.py (timing.png), mla.py (timing_all.png: every set plus MLA) and ours.py (ours.png) draw through here,
so the sets keep one marker each and every scatter the same ±15 % band.
"""
from __future__ import annotations

from pathlib import Path

# One marker and colour per published set (run.py's table names).
MARKS = {"MI300X RTNE (calibration)": ("o", "tab:blue"), "MI300X RTNA": ("s", "tab:orange"),
         "MI300X RTZ": ("^", "tab:green"), "MI355X (v3 model vs fastest published AITER)": ("D", "tab:red")}
BAND = 1.15  # the target: within 15 %


def pyplot():
    """matplotlib.pyplot on the Agg backend, or None (and a message) when matplotlib is not installed."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no figure")
        return None
    return plt


def fmha_series(tables: dict[str, list[dict]]) -> list[tuple]:
    """Scatter series of run.py's tables (published ms, modeled ms); the like-for-like MI355X v3 rows starred."""
    series = []
    for name, rows in tables.items():
        done = [r for r in rows if "model_ms" in r]
        mk, col = MARKS.get(name, ("x", "k"))
        series.append((name, [r["pub_ms"] for r in done], [r["model_ms"] for r in done], mk, col, 28))
        v3 = [r for r in done if r.get("fastest") == "v3"]
        if v3:
            series.append(("MI355X, the like-for-like (v3) row", [r["pub_ms"] for r in v3],
                           [r["model_ms"] for r in v3], "*", "k", 90))
    return series


def modeled_vs_published(path: Path, series: list[tuple], title: str, lo: float, hi: float) -> None:
    """Log-log scatter, one point a row: series = [(label, published, modeled, marker, colour, size)];
    the diagonal and the ±15 % band drawn from lo to hi (ms)."""
    plt = pyplot()
    if plt is None:
        return
    fig, ax = plt.subplots(figsize=(6.5, 6))
    for label, xs, ys, mk, col, size in series:
        ax.scatter(xs, ys, marker=mk, color=col, label=label, alpha=0.8, s=size)
    ax.plot([lo, hi], [lo, hi], "k-", lw=0.8)
    for f in (BAND, 1 / BAND):
        ax.plot([lo, hi], [lo * f, hi * f], "k:", lw=0.6)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("published AITER time on hardware (ms)")
    ax.set_ylabel("modeled time (ms)")
    ax.set_title(title)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def speedup_axes(*axes) -> None:
    """The modeled-speedup bar charts' common frame: parity line and axis label."""
    for ax in axes:
        ax.axhline(1.0, color="k", lw=0.8)
        ax.set_ylabel("modeled speedup (AITER / ours)")
