"""Files written whole or not at all: a temporary sibling, then a rename over the target.

Every file the package writes goes through :func:`atomic_open`, so a crash or
Ctrl-C leaves the previous file (or none), never a torn one, and every file
gets the mode an ordinary ``open()`` would give it (0666 less the umask; a
bare :func:`tempfile.mkstemp` file would stay 0600).  :func:`probe_writable`
is the check an output path gets before any work: it really creates (and
removes) a file there, which no permission bit test can stand in for
(read-only mounts, ``/proc``, immutable folders, root).
"""

from __future__ import annotations

import contextlib
import os
import signal
import tempfile
from pathlib import Path

__all__ = ["atomic_open", "file_mode", "probe_writable", "remove_pending"]


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


#: The umask of this process, read once at import (reading it means setting it; worker threads may be writing).
UMASK = _umask()


def file_mode() -> int:
    """The mode of a new file, as ``open()`` makes it: 0o666 less the umask."""
    return 0o666 & ~UMASK


@contextlib.contextmanager
def atomic_open(path, mode: str = "w", durable: bool = False):
    """Open a temporary sibling of ``path`` for writing; on a clean exit it replaces ``path``.

    ``mode`` is ``"w"`` (text) or ``"wb"``; ``durable`` syncs the data to disk
    before the rename.  On an exception the temporary file is removed and
    ``path`` is left as it was.
    """
    path = Path(path)
    # the file is created and registered with SIGTERM (a worker stopped by the parent's Ctrl-C: it waits until
    # remove_pending knows the file) and SIGINT (Ctrl-C in this process) held back, and they are let through
    # only inside the block that removes it: no signal finds the file created but not yet removable
    tmp = None
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})
    try:
        try:
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
            _PENDING.add(tmp)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        os.fchmod(fd, file_mode())
        with os.fdopen(fd, mode) as fh:
            yield fh
            if durable:
                fh.flush()
                os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        if tmp is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
        raise
    finally:
        _PENDING.discard(tmp)


#: The temporary files :func:`atomic_open` has open in this process.
_PENDING: set = set()


def remove_pending() -> None:
    """Remove the temporary files being written in this process: for a process about to end without
    unwinding (a worker's SIGTERM handler), so that it leaves no ``*.tmp`` behind."""
    for tmp in list(_PENDING):
        with contextlib.suppress(OSError):
            os.unlink(tmp)


def probe_writable(folder) -> None:
    """Create and remove an empty file in ``folder``; raises OSError when that is impossible."""
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".precision-probe-")
    os.close(fd)
    os.unlink(tmp)
