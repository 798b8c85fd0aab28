"""Plot helpers every report section shares: deterministic files, error axes with a band for special outputs.

Each section draws its own figures (in its module) with these helpers; a
figure is written as ``<folder>/<stem>.png`` and ``<stem>.svg`` and the
drawing function returns the stem, or None when the data hold nothing to
draw.  Plots render tables, they never recompute scores.

Special outputs (NaN, inf, wrong sign, lost inf: errors of inf ulps) are not
drawn at a fake error value on the error axis: :func:`error_axis` places them
on a shaded band above the axis break, labelled ``special``, and
:func:`draw_curves` marks them there with an ``x`` instead of running a line
along the band.

No line hides another: :func:`draw_curves` draws curves with the same points
once, labelled ``a = b`` (:func:`merge_identical`), and gives every other
curve its own colour, marker and dash (:func:`curve_style`).
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

__all__ = ["save", "FLOOR", "CEILING_ULP", "special_level", "over_level", "clip_errors", "error_axis",
           "legend_outside", "curve_style", "merge_identical", "draw_curves", "curve_id"]

#: Lower clip of log ulp axes (a correctly rounded output scores <= 0.5 ulp).
FLOOR = 1e-3
#: Top of the finite part of an ulp axis: 2^24 ulp (every bit of an fp32 output wrong); larger finite errors
#: (an O(1) output where the exact value is subnormal scores up to 2^149 ulp) are drawn on a band of their own.
CEILING_ULP = 2.0 ** 24
_DPI = 90


def save(fig, folder: Path, stem: str) -> str:
    """Write ``fig`` as ``stem.png`` and ``stem.svg`` (deterministic metadata) and close it."""
    fig.savefig(Path(folder) / f"{stem}.png", dpi=_DPI, metadata={"Software": None})
    with matplotlib.rc_context({"svg.hashsalt": stem}):  # fixed element ids: the same figure, the same bytes
        fig.savefig(Path(folder) / f"{stem}.svg", metadata={"Date": None, "Creator": None})
    plt.close(fig)
    return stem


def special_level(*errors) -> float:
    """Where special outputs are drawn: two decades above the top of the finite axis (the decade holding
    the largest finite error, capped at :data:`CEILING_ULP`); finite errors past the cap are drawn on their
    own band one decade below (:func:`over_level`), so a few huge errors never squeeze the 0 to 1e3 ulp range
    into a strip."""
    finite = [np.asarray(e, dtype=np.float64) for e in errors]
    finite = [e[np.isfinite(e)] for e in finite]
    top = min(max((float(e.max()) for e in finite if e.size), default=1.0), CEILING_ULP)
    return 10.0 ** (np.ceil(np.log10(max(top, 1.0))) + 2)


def over_level(level: float) -> float:
    """Where finite errors over :data:`CEILING_ULP` are drawn on an axis whose special band is at ``level``."""
    return level / 10.0


def clip_errors(err, level: float | None = None) -> np.ndarray:
    """Errors for a log axis: finite ones clipped below at :data:`FLOOR`, those over :data:`CEILING_ULP` at
    :func:`over_level`, special ones (inf/NaN) at ``level``."""
    e = np.asarray(err, dtype=np.float64)
    level = special_level(e) if level is None else level
    shown = np.where(e > CEILING_ULP, over_level(level), np.clip(e, FLOOR, None))
    return np.where(np.isfinite(e), shown, level)


def error_axis(ax, level: float, label: str = "ulp error (log)") -> None:
    """A log error axis from :data:`FLOOR` to the decade of the largest finite error (at most
    :data:`CEILING_ULP`), then two shaded bands: finite errors over 2^24 ulp (tick ``> 2^24``) and special
    outputs (tick ``special``), a break line below each."""
    over = over_level(level)
    ax.set_yscale("log")
    ax.set_ylim(FLOOR, level * 10)
    ax.axhspan(level / 3, level * 10, color="0.92", zorder=0)
    ax.axhspan(over / 3, over * 3, color="0.96", zorder=0)
    ax.axhline(level / 3, color="0.5", lw=0.6, ls="--", zorder=1)
    ax.axhline(over / 3, color="0.5", lw=0.6, ls="--", zorder=1)
    top = int(round(np.log10(over))) - 1
    step = max(1, (top + 3) // 5)
    ticks = [10.0 ** k for k in range(-3, top + 1, step)]
    ax.set_yticks(ticks + [over, level], [f"1e{int(round(np.log10(t)))}" for t in ticks] + ["> 2^24", "special"])
    ax.minorticks_off()
    ax.set_ylabel(label, fontsize=7)


def legend_outside(ax, fontsize: int = 6, ncol: int = 1) -> None:
    """The axis' legend to the right of the plot, never over the data."""
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=fontsize, ncol=ncol, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0)


_COLORS = ("tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown", "tab:pink", "tab:olive",
           "tab:cyan", "0.35")
_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", ">", "*")
_DASHES = ("-", "--", "-.", ":", (0, (5, 1, 1, 1)), (0, (3, 1, 1, 1, 1, 1)))


def curve_style(i: int) -> dict:
    """Colour, marker and dash of the ``i``-th curve of a panel (all three differ between neighbours)."""
    return {"color": _COLORS[i % len(_COLORS)], "marker": _MARKERS[i % len(_MARKERS)],
            "ls": _DASHES[i % len(_DASHES)]}


def merge_identical(curves) -> list:
    """``(label, x, y)`` curves with the same points (NaN and inf included) merged into one, labelled
    ``a = b = c`` in first-seen order: a curve lying exactly under another is named, never hidden."""
    merged = []
    for label, x, y in curves:
        x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
        for k, (lab, mx, my) in enumerate(merged):
            if mx.shape == x.shape and np.array_equal(mx, x) and np.array_equal(my, y, equal_nan=True):
                merged[k] = (f"{lab} = {label}", mx, my)
                break
        else:
            merged.append((label, x, y))
    return merged


def curve_id(ax, label: str) -> str:
    """The SVG id of a curve: ``curve-<panel>-<label>`` (spaces as ``_``), so a test can read a plot's points."""
    return f"curve-{ax.get_subplotspec().num1 if ax.get_subplotspec() else 0}-{label.replace(' ', '_')}"


def draw_curves(ax, curves, level: float | None = None, lw: float = 0.9, ms: float = 3.5, marks: int = 14) -> list:
    """Draw ``(label, x, y)`` curves on ``ax``; returns the merged curves (:func:`merge_identical`).

    Each curve gets :func:`curve_style`; markers every ``len(x) / marks``
    points, staggered between curves, so overlapping stretches stay told
    apart.  With ``level`` (an error axis, :func:`error_axis`) errors are
    clipped at :data:`FLOOR`, and special points (inf or NaN errors) are
    ``x`` marks on the band at ``level`` (a row per curve) while the line breaks there.
    """
    merged = merge_identical(curves)
    for i, (label, x, y) in enumerate(merged):
        st = curve_style(i)
        every = max(1, len(x) // marks)
        if level is not None:
            special = ~np.isfinite(y)
            shown = np.where(special, np.nan, clip_errors(y, level))
            if special.any():  # each curve its own row inside the band, so no curve's marks cover another's
                row = level * 10.0 ** (0.25 * (i % 6) - 0.4)
                ax.plot(x[special], np.full(int(special.sum()), row), ls="none", marker="x", ms=ms + 1,
                        color=st["color"], zorder=3)
        else:
            shown = y
        ax.plot(x, shown, lw=lw, ls=st["ls"], color=st["color"], marker=st["marker"], ms=ms,
                markevery=(i % every, every), label=label, zorder=2, gid=curve_id(ax, label))
    return merged
