"""What the command-line tests share: running ``precision`` in this process or as a subprocess, and a
snapshot of a folder to compare before and after a command."""

import os
import subprocess
import sys
from pathlib import Path

from precision.cli import main

ROOT = Path(__file__).resolve().parents[1]
#: The environment of a subprocess: this checkout's package first.
ENV = dict(os.environ, PYTHONPATH=str(ROOT))


def run(capsys, *argv):
    """``precision ARGV`` in this process: (exit status, stdout, stderr)."""
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def precision(*argv, cwd, timeout=120, env=ENV):
    """``python -m precision ARGV`` (the console script's entry point) from this checkout: (exit status, stdout,
    stderr)."""
    proc = subprocess.run([sys.executable, "-m", "precision", *argv], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)
    return proc.returncode, proc.stdout, proc.stderr


def tree(folder: Path) -> list:
    """Every path under folder (relative), with file contents, to compare before and after."""
    return sorted((str(p.relative_to(folder)), p.read_bytes() if p.is_file() else None)
                  for p in folder.rglob("*"))
