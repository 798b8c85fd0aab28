"""Plot helpers every report section shares: deterministic files, error axes with a band for special outputs.

Each section draws its own figures (in its module) with these helpers; a
figure is written as ``<folder>/<stem>.png`` and ``<stem>.svg`` and the
drawing function returns the stem, or None when the data hold nothing to
draw.  Plots render tables, they never recompute scores.

Special outputs (NaN, inf, wrong sign, lost inf: errors of inf ulps) are not
drawn at a fake error value on the error axis: :func:`error_axis` places them
on a shaded band above the axis break, labelled ``special``.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

__all__ = ["save", "FLOOR", "special_level", "clip_errors", "error_axis", "legend_outside"]

#: Lower clip of log ulp axes (a correctly rounded output scores <= 0.5 ulp).
FLOOR = 1e-3
_DPI = 90


def save(fig, folder: Path, stem: str) -> str:
    """Write ``fig`` as ``stem.png`` and ``stem.svg`` (deterministic metadata) and close it."""
    fig.savefig(Path(folder) / f"{stem}.png", dpi=_DPI, metadata={"Software": None})
    with matplotlib.rc_context({"svg.hashsalt": stem}):  # fixed element ids: the same figure, the same bytes
        fig.savefig(Path(folder) / f"{stem}.svg", metadata={"Date": None, "Creator": None})
    plt.close(fig)
    return stem


def special_level(*errors) -> float:
    """Where special outputs are drawn: two decades above the largest finite error of the figure."""
    finite = [np.asarray(e, dtype=np.float64) for e in errors]
    finite = [e[np.isfinite(e)] for e in finite]
    top = max((float(e.max()) for e in finite if e.size), default=1.0)
    return 10.0 ** (np.ceil(np.log10(max(top, 1.0))) + 2)


def clip_errors(err, level: float | None = None) -> np.ndarray:
    """Errors for a log axis: finite ones clipped below at :data:`FLOOR`, special ones (inf/NaN) at ``level``."""
    e = np.asarray(err, dtype=np.float64)
    level = special_level(e) if level is None else level
    return np.where(np.isfinite(e), np.clip(e, FLOOR, None), level)


def error_axis(ax, level: float, label: str = "ulp error (log)") -> None:
    """A log error axis up to the special band at ``level`` (shaded, tick ``special``, a break line below)."""
    ax.set_yscale("log")
    ax.set_ylim(FLOOR, level * 10)
    ax.axhspan(level / 3, level * 10, color="0.92", zorder=0)
    ax.axhline(level / 3, color="0.5", lw=0.6, ls="--", zorder=1)
    ticks = [t for t in 10.0 ** np.arange(-3, np.log10(level) - 1, max(1, int(np.log10(level) + 3) // 5))]
    ax.set_yticks(ticks + [level], [f"1e{int(np.log10(t))}" for t in ticks] + ["special"])
    ax.minorticks_off()
    ax.set_ylabel(label, fontsize=7)


def legend_outside(ax, fontsize: int = 6, ncol: int = 1) -> None:
    """The axis' legend to the right of the plot, never over the data."""
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=fontsize, ncol=ncol, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0)
