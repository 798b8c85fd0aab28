"""``python -m precision.cli``: the command line (``python -m precision`` also catches Ctrl-C during start-up)."""

from precision.cli import main

raise SystemExit(main())
