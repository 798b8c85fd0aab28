"""The persistent cache of an operator's exact-value terms (SigmoidFocalLossGrad's focal terms A(x, gamma)),
keyed by exact input bits, and the result cache of the sweep's tasks.

Layout: one shard per (operator, oracle version, value of the operator's terms attribute), a ``.npz`` file
(no pickle) named ``terms-{operator}-v{ORACLE_VERSION}-g{value float32 bits:08x}.npz`` (``-g-`` for an
operator without a terms attribute; the operator's name and oracle version: two operators never share a
shard) holding

``x_bits`` (int64, sorted)
    The float64 bit patterns of the x values present.
``hi``, ``lo``, ``exp``, ``rel``
    The columns of the operator's ``TermTable`` (:class:`precision.operators.sigmoid_focal_loss_grad.terms.TermTable`)
    for those x.
``digest`` (uint8[32])
    SHA-256 of the other arrays' bytes: the integrity check.

Writes are atomic (a temporary file in the same folder, fsync, rename), and
merges take an exclusive ``fcntl`` lock on the shard's ``.lock`` file, so two
runs sharing a cache never lose each other's entries and a reader never sees
a half-written shard.  A shard that fails its integrity check (truncated,
altered) is reported once with a :class:`CacheIntegrityWarning`, removed, and
its terms recomputed.

The folder is ``--cache-dir``, else ``$PRECISION_CACHE_DIR``, else the user's
cache folder (``platformdirs.user_cache_dir("precision")``).
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import os
import warnings
import zipfile
from pathlib import Path

import numpy as np
import platformdirs
import safetensors.numpy

from precision.exact.terms import TermTable, absent_table
from precision.engine.operators import DEFAULT_OPERATOR, get_operator
from precision.io.files import atomic_open

__all__ = ["CacheIntegrityWarning", "TermCache", "ResultCache", "default_cache_dir", "atomic_write_npz",
           "read_checked_npz", "RESULTS_VERSION"]

#: What reading a truncated, altered or foreign .npz raises.
_UNREADABLE = (OSError, ValueError, zipfile.BadZipFile, EOFError, KeyError, safetensors.SafetensorError)


class CacheIntegrityWarning(UserWarning):
    """Issued when a cache or result file fails its integrity check and is recomputed."""


def default_cache_dir() -> Path:
    """``$PRECISION_CACHE_DIR`` if set, else the user's cache folder for precision."""
    env = os.environ.get("PRECISION_CACHE_DIR")
    return Path(env) if env else Path(platformdirs.user_cache_dir("precision"))


def _digest(arrays: dict) -> np.ndarray:
    h = hashlib.sha256()
    for key in sorted(arrays):
        if key == "digest":
            continue
        a = np.ascontiguousarray(arrays[key])
        h.update(key.encode())
        h.update(_dtype_name(a.dtype))
        h.update(a.data if a.size else b"")
    return np.frombuffer(h.digest(), dtype=np.uint8)


@functools.lru_cache(maxsize=None)
def _dtype_name(dtype: np.dtype) -> bytes:
    """``str(dtype)`` encoded (numpy builds that name anew on every call: a bundle digests hundreds)."""
    return str(dtype).encode()


def _encode(arrays: dict) -> dict:
    """Safetensors holds numbers only: a unicode array travels as its UCS-4 code units (``name#text``)."""
    out = {}
    for key, a in arrays.items():
        a = np.require(a, requirements="C")  # (ascontiguousarray would make a 0-d array 1-d)
        if a.dtype.kind == "U":
            width = max(a.dtype.itemsize // 4, 1)
            a = np.ascontiguousarray(a.astype(f"<U{width}")).view(np.uint32).reshape(a.shape + (width,))
            key = f"{key}#text"
        out[key] = a
    return out


def _decode(arrays: dict) -> dict:
    out = {}
    for key, a in arrays.items():
        if key.endswith("#text"):
            width = a.shape[-1]
            key, a = key[:-5], np.ascontiguousarray(a).view(f"<U{width}").reshape(a.shape[:-1])
        out[key] = a
    return out


def atomic_write_npz(path: Path, arrays: dict, durable: bool = True) -> None:
    """Write arrays plus their SHA-256 ``digest`` to ``path`` atomically.

    The format follows the suffix: ``.npz`` (numpy's, for the run's tables
    and the oracle's shards) or ``.safetensors`` (a few hundred times quicker
    for the many small files of task results and chunks; unicode arrays
    stored as their code units).  ``durable`` syncs the file to disk before
    the rename (the oracle's shards, run tables); a result that is cheap to
    recompute skips it (a crash can then lose it, never corrupt it
    unnoticed: the digest catches a torn file).
    """
    path = Path(path)
    arrays = dict(arrays)
    arrays["digest"] = _digest(arrays)
    with atomic_open(path, "wb", durable=durable) as fh:
        if path.suffix == ".safetensors":
            fh.write(safetensors.numpy.save(_encode(arrays)))
        else:
            np.savez(fh, **arrays)


def read_checked_npz(path: Path) -> dict | None:
    """Arrays of a file written by :func:`atomic_write_npz`, or None if missing or corrupt.

    A corrupt file (unreadable, truncated, digest mismatch) is removed with one
    :class:`CacheIntegrityWarning`.
    """
    path = Path(path)
    try:
        if path.suffix == ".safetensors":
            arrays = _decode(safetensors.numpy.load(path.read_bytes()))
        else:
            with np.load(path, allow_pickle=False) as data:
                arrays = {k: data[k] for k in data.files}
    except FileNotFoundError:
        return None
    except _UNREADABLE as exc:
        return _corrupt(path, exc)
    if "digest" not in arrays or not np.array_equal(arrays["digest"], _digest(arrays)):
        return _corrupt(path, "digest mismatch")
    return arrays


def _corrupt(path: Path, why) -> None:
    warnings.warn(f"{path}: failed its integrity check ({why}); recomputing it", CacheIntegrityWarning, stacklevel=3)
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    return None


class TermCache:
    """An operator's exact-value terms on disk, one shard per value of its terms attribute (see the module
    docstring).

    Parameters
    ----------
    folder : path or None
        The cache folder; None disables the cache (every lookup misses, stores
        are dropped).
    create : bool
        Create the folder now (default True); False leaves a missing folder
        missing (``precision cache info|clear``: an absent cache is empty).
    operator : str
        Whose focal terms (:func:`precision.engine.operators.get_operator`): its
        ``TermTable`` and ``ORACLE_VERSION``.
    """

    def __init__(self, folder, create: bool = True, operator: str = DEFAULT_OPERATOR):
        self.operator = operator
        self.folder = Path(folder) if folder is not None else None
        if self.folder is not None and create:
            self.folder.mkdir(parents=True, exist_ok=True)

    @property
    def enabled(self) -> bool:
        return self.folder is not None

    def _shard(self, term: float | None) -> Path:
        value = "-" if term is None else f"{int(np.float32(term).view(np.uint32)):08x}"
        return self.folder / f"terms-{self.operator}-v{get_operator(self.operator).ORACLE_VERSION}-g{value}.npz"

    @contextlib.contextmanager
    def _locked(self, term: float | None):
        lock_path = self._shard(term).with_suffix(".lock")
        with open(lock_path, "a+") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def lookup(self, term: float | None, x: np.ndarray):
        """(found mask, TermTable of the found rows in x's order) for one value of the terms attribute."""
        x = np.asarray(x, dtype=np.float64)
        found = np.zeros(x.size, dtype=bool)
        table, empty = TermTable, absent_table(0)
        if not self.enabled:
            return found, empty
        arrays = read_checked_npz(self._shard(term))
        if arrays is None:
            return found, empty
        keys = arrays["x_bits"]
        want = x.view(np.int64)
        pos = np.clip(np.searchsorted(keys, want), 0, max(len(keys) - 1, 0))
        found = (len(keys) > 0) & (keys[pos] == want) if len(keys) else found
        rows = pos[found]
        return found, table.from_arrays(arrays, rows)

    def store(self, term: float | None, x: np.ndarray, table) -> None:
        """Merge new terms into the shard of ``term``, a value of the terms attribute (locked, atomic)."""
        if not self.enabled or len(table) == 0:
            return
        x = np.asarray(x, dtype=np.float64)
        with self._locked(term):
            path = self._shard(term)
            current = read_checked_npz(path)
            keys = x.view(np.int64)
            cols = table.as_arrays()
            if current is not None:
                keys = np.concatenate([current["x_bits"], keys])
                cols = {c: np.concatenate([current[c], v]) for c, v in cols.items()}
            keys, first = np.unique(keys, return_index=True)
            arrays = {"x_bits": keys, **{c: v[first] for c, v in cols.items()}}
            atomic_write_npz(path, arrays)

    def info(self) -> dict:
        """Folder, shard count, entry count and bytes on disk."""
        if not self.enabled:
            return {"folder": None, "shards": 0, "entries": 0, "bytes": 0}
        shards = sorted(self.folder.glob("terms-*.npz"))
        entries = 0
        for path in shards:
            with contextlib.suppress(*_UNREADABLE), np.load(path, allow_pickle=False) as data:
                entries += int(data["x_bits"].size)  # an unreadable shard counts no entries
        return {"folder": str(self.folder), "shards": len(shards), "entries": entries,
                "bytes": sum(p.stat().st_size for p in shards)}

    def clear(self) -> int:
        """Remove every shard and lock file; returns the number of shards removed."""
        if not self.enabled:
            return 0
        n = 0
        for path in list(self.folder.glob("terms-*.npz")) + list(self.folder.glob("terms-*.lock")):
            n += path.suffix == ".npz"
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
        return n


#: Version of the stored task results' layout (:mod:`precision.engine.task`); part of every key.
#: 4: one bundle file per task holding every piece (was one file per piece); 5: histograms stored as int32;
#: 6: a bundle stores each distinct array once (:meth:`ResultCache.put_bundle`); 7: its alias table as lines
#: of tab-separated names (was JSON); 8: each piece holds its holes' extents (``extent``, ``extent_count``); 9:
#: the acceptance standards judge special positions (``acc_special_match``, ``acc_special_mismatch``) and the
#: comparisons count class changes among garbage pairs (``changed_garbage_*``); 10: msprobe's standards' counts,
#: sums and maxima (``ms_*``, ``msprobe_max_*``).
RESULTS_VERSION = 10

#: Separates a piece's key from its array's name inside a bundle.
_PIECE_SEP = "/"
#: A bundle's entry naming, for each array stored once but held by several pieces, the entry holding it: a line
#: ``<entry>\t<entry holding it>`` each, UTF-8 (names hold no tab and no newline).
_ALIASES = "aliases#tsv"
#: Arrays up to this many bytes are matched by content too (equal column names, counts of no change); larger
#: ones by identity (the pieces of variants whose outputs are equal share their arrays).
_ALIAS_BY_CONTENT_BYTES = 1 << 16


class ResultCache:
    """Scored task results on disk, content-addressed (``results-v<N>/<k[:2]>/<k>.safetensors``).

    Two kinds of entries, each a dict of arrays written by
    :func:`atomic_write_npz` (so two runs writing the same key at once both
    leave a whole file, and a corrupt file is reported once with a
    :class:`CacheIntegrityWarning` and recomputed):

    * a **result** under a key (:meth:`get`, :meth:`put`), e.g. a threshold
      search;
    * a **bundle**: the pieces of one task (:mod:`precision.engine.task`), each a
      dict of arrays under its own piece key, in one file under the task's
      key (:meth:`get_bundle`, :meth:`put_bundle`).  A run reads a task's
      pieces in one read and writes them in one write; an edit to one
      variant rewrites that task's file with the new pieces added.

    A key is a SHA-256 of what determines the entry (the task's inputs, the
    oracle version, the digest of the code: :mod:`precision.engine.task`).

    Parameters
    ----------
    folder : path or None
        The cache folder (the oracle cache's); None disables the cache.
    create : bool
        Create the folder now (default True).
    """

    def __init__(self, folder, create: bool = True):
        self.root = Path(folder) if folder is not None else None
        self.folder = self.root / f"results-v{RESULTS_VERSION}" if self.root is not None else None
        if self.folder is not None and create:
            self.folder.mkdir(parents=True, exist_ok=True)

    @property
    def enabled(self) -> bool:
        return self.folder is not None

    def _path(self, key: str) -> Path:
        return self.folder / key[:2] / f"{key}.safetensors"

    def get(self, key: str) -> dict | None:
        """The arrays stored under ``key``, or None (absent, corrupt, or the cache disabled)."""
        if not self.enabled:
            return None
        return read_checked_npz(self._path(key))

    def put(self, key: str, arrays: dict) -> None:
        """Store arrays under ``key`` (atomic; a no-op when disabled)."""
        if not self.enabled:
            return
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_npz(path, arrays, durable=False)

    def get_bundle(self, key: str) -> dict:
        """{piece key: arrays} of the bundle under ``key`` (empty: absent, corrupt, or the cache disabled); an
        array stored once for several pieces is one object in each (so a rewrite stores it once again)."""
        arrays = self.get(key) or {}
        if _ALIASES in arrays:
            for line in arrays.pop(_ALIASES).tobytes().decode().split("\n"):
                name, _, source = line.partition("\t")
                arrays[name] = arrays[source]
        pieces: dict = {}
        for name, a in arrays.items():
            if name != "digest":
                piece, _, column = name.partition(_PIECE_SEP)
                pieces.setdefault(piece, {})[column] = a
        return pieces

    def put_bundle(self, key: str, pieces: dict) -> None:
        """Store {piece key: arrays} as one bundle under ``key`` (replacing it; atomic), each distinct array once:
        an array held by several pieces (the same object, or equal and small) is stored under the first entry
        holding it (in name order) and named in the bundle's alias table (the pieces of variants with equal outputs share their
        histograms and points: about 70 % of a bundle's bytes on ``fp16_exhaustive``)."""
        stored, aliases, by_id, by_content, held = {}, [], {}, {}, []
        for piece in sorted(pieces):  # (in name order: which entry stores an array does not depend on dict order)
            arrays = pieces[piece]
            for name in sorted(arrays):
                entry = f"{piece}{_PIECE_SEP}{name}"
                a = np.asarray(arrays[name])
                held.append(a)  # (an id is an array's only while the array lives)
                source, content = by_id.get(id(a)), None
                if source is None and a.nbytes <= _ALIAS_BY_CONTENT_BYTES:
                    content = (a.dtype.str, a.shape, a.tobytes())
                    source = by_content.get(content)
                if source is not None:
                    aliases.append(f"{entry}\t{source}")
                    continue
                stored[entry], by_id[id(a)] = a, entry
                if content is not None:
                    by_content[content] = entry
        if aliases:
            stored[_ALIASES] = np.frombuffer("\n".join(aliases).encode(), dtype=np.uint8)
        self.put(key, stored)

    def _files(self) -> list:
        if self.root is None or not self.root.is_dir():
            return []
        return sorted(p for p in self.root.glob("results-v*/*/*") if p.suffix in (".npz", ".safetensors"))

    def info(self) -> dict:
        """Folder, result count and bytes on disk (every layout version)."""
        files = self._files()
        return {"folder": None if self.root is None else str(self.root), "results": len(files),
                "bytes": sum(p.stat().st_size for p in files)}

    def clear(self) -> int:
        """Remove every stored result; returns how many."""
        files = self._files()
        for path in files:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
        for folder in sorted(self.root.glob("results-v*/*"), reverse=True) if self.root is not None else []:
            with contextlib.suppress(OSError):
                folder.rmdir()
        return len(files)
