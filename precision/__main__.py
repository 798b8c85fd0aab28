"""The ``precision`` command's entry point (also ``python -m precision``).

Ctrl-C is caught from the first instruction on: the command line's modules
(numpy, pandas, mpmath, the machines: about 0.6 s of imports) load inside the same
``try`` that turns :class:`KeyboardInterrupt` into one line and exit status
130, so an interrupt during start-up prints no traceback either.
"""

from __future__ import annotations

import os
import sys

from precision.errors import INTERRUPTED


def console(argv=None) -> None:
    """Run :func:`precision.cli.main` and exit with its status (0, 1, 2 or 130).

    After Ctrl-C the process leaves at once (``os._exit``, output flushed):
    a worker pool's management thread can otherwise hold the interpreter's
    exit waiting on workers that were stopped mid-message.
    """
    try:
        from precision.cli import main
        code = main(argv)
    except KeyboardInterrupt:  # during the imports; main catches it once it runs
        print(INTERRUPTED, file=sys.stderr)
        code = 130
    if code == 130:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(130)
    sys.exit(code)


if __name__ == "__main__":  # pragma: no cover
    console()
