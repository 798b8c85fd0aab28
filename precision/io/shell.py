"""Command lines as a POSIX shell reads them: every command the package prints (in a report, a hint, the
README's examples) is quoted here, so it runs as printed when pasted into bash or zsh (``kernel[G5=2^-6]`` is
a glob in both: zsh refuses an unmatched one, ``no matches found``)."""

from __future__ import annotations

import shlex

__all__ = ["shell_join"]


def shell_join(words) -> str:
    """The words as one command line, each quoted where a POSIX shell (bash, zsh, dash) would read it otherwise.

    Examples
    --------
    >>> shell_join(["precision", "explain", "kernel[G5=2^-6]", "--pred", "-0x1.4p+0"])
    "precision explain 'kernel[G5=2^-6]' --pred -0x1.4p+0"
    >>> shell_join(["precision", "report", "quick", "--runs", "my runs"])
    "precision report quick --runs 'my runs'"
    """
    return " ".join(shlex.quote(str(w)) for w in words)
