"""Where chunks of work run: inline, a local process pool, or Dask distributed.

Every executor offers ``map_unordered(function, tasks)``, yielding
``(index, result)`` as tasks finish; callers order results themselves, so
the output never depends on the executor, the worker count or finishing
order.  ``warm(function, *args)`` queues a load that later work needs behind
the work handed out, for workers that fall idle (a local pool only).
Functions and tasks must be picklable (module-level functions, plain data):
they cross a process or network boundary, never a file.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import sys
import threading
from concurrent.futures import Future, ProcessPoolExecutor, as_completed

from precision.errors import ParameterError
from precision.io.files import remove_pending

__all__ = ["InlineExecutor", "LocalExecutor", "DaskExecutor", "make_executor", "fork_aside"]


class InlineExecutor:
    """Runs every task in this process, in order (workers = 1; tests, debugging)."""

    workers = 1

    def map_unordered(self, function, tasks):
        for i, task in enumerate(tasks):
            yield i, function(task)

    def warm(self, function, *args) -> None:
        """Nothing: this process loads what its work needs when the work runs."""

    def close(self):
        pass


def _worker_signals() -> None:
    """Worker initializer: Ctrl-C is the parent's to handle (one message, workers stopped by it); the parent's
    SIGTERM stops a worker at once, removing the file it was writing (no ``*.tmp`` left in a cache)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _stop_worker)


def _stop_worker(signum, frame) -> None:
    remove_pending()
    os._exit(128 + signum)


class LocalExecutor:
    """A pool of worker processes on this machine (default: one per core).

    Ctrl-C on a terminal reaches every process of the group; the workers
    ignore it, and the parent, whose ``KeyboardInterrupt`` unwinds through
    :meth:`close`, stops them at once instead of waiting for their tasks
    (their results are not needed: a rerun redoes the unfinished tasks).
    """

    def __init__(self, workers: int | None = None):
        self.workers = workers or os.cpu_count() or 1
        self._pool = ProcessPoolExecutor(max_workers=self.workers, initializer=_worker_signals,
                                         mp_context=multiprocessing.get_context("fork"))

    def map_unordered(self, function, tasks):
        futures = {self._pool.submit(function, task): i for i, task in enumerate(tasks)}
        try:
            for fut in as_completed(futures):
                yield futures[fut], fut.result()
        finally:
            for fut in futures:
                fut.cancel()

    def warm(self, function, *args) -> None:
        """Queue ``function(*args)`` once per worker behind the work already handed out (first in, first out):
        a worker that falls idle before the next work loads what that work needs (which the work would
        otherwise load at its start).  Best effort: a worker may take two and another none.  Nothing waits for
        it, and a failure is left to the next work, which meets it again."""
        for _ in range(self.workers):
            self._pool.submit(function, *args)  # (closing cancels those not begun)

    def close(self):
        if isinstance(sys.exc_info()[1], KeyboardInterrupt):  # called while Ctrl-C unwinds
            self._terminate_workers()
            # never wait on stopped workers: one stopped mid-message can leave the pool's reader waiting forever
            self._pool.shutdown(wait=False, cancel_futures=True)
            return
        self._pool.shutdown(wait=True, cancel_futures=True)

    def _terminate_workers(self) -> None:
        terminate = getattr(self._pool, "terminate_workers", None)  # Python >= 3.14
        if terminate is not None:
            terminate()
            return
        for process in list((self._pool._processes or {}).values()):  # the same, before 3.14
            process.terminate()


class DaskExecutor:
    """Dask distributed: a scheduler address (``tcp://host:port``) or ``local``.

    ``local`` starts a LocalCluster of processes on the loopback interface.
    """

    def __init__(self, scheduler: str, workers: int | None = None):
        try:
            from dask.distributed import Client, LocalCluster
        except ImportError:  # pragma: no cover - distributed is a dependency
            raise ParameterError("--scheduler needs dask[distributed]; pip install 'dask[distributed]'") from None
        self._cluster = None
        if scheduler == "local":
            self._cluster = LocalCluster(n_workers=workers or os.cpu_count() or 1, threads_per_worker=1,
                                         processes=True, host="127.0.0.1", dashboard_address=None)
            self._client = Client(self._cluster)
        else:
            if not scheduler.startswith(("tcp://", "tls://", "inproc://")):
                raise ParameterError(f"--scheduler={scheduler!r}; expected tcp://host:port or 'local'")
            try:
                self._client = Client(scheduler, timeout="10s")
            except OSError as exc:
                raise ParameterError(f"--scheduler={scheduler!r}: cannot connect ({exc})") from None
        self.workers = len(self._client.scheduler_info().get("workers", {})) or 1

    def map_unordered(self, function, tasks):
        from dask.distributed import as_completed as dask_as_completed
        futures = [self._client.submit(function, task, pure=False) for task in tasks]
        index = {fut.key: i for i, fut in enumerate(futures)}
        try:
            for fut in dask_as_completed(futures):
                yield index[fut.key], fut.result()
        finally:
            for fut in futures:
                fut.cancel()

    def warm(self, function, *args) -> None:
        """Nothing: a cluster's workers load what their work needs when it runs."""

    def close(self):
        # a scheduler or cluster already gone (closed connection, timeout) needs no closing
        with contextlib.suppress(OSError, RuntimeError):
            self._client.close()
        if self._cluster is not None:
            with contextlib.suppress(OSError, RuntimeError):
                self._cluster.close()


def fork_aside(function, *args) -> Future:
    """Run ``function(*args)`` in a process of its own, forked from this one now (the workers' signal handling);
    its future.  For a job that overlaps this process's own work on a machine with a core to spare: the
    function and its arguments are the child's by the fork (never pickled: it may read what this process
    holds), only its result or error comes back.  The caller forks while no other thread of its own imports
    or holds a lock (the child would wait on it for ever)."""
    context = multiprocessing.get_context("fork")
    receive, send = context.Pipe(duplex=False)
    child = context.Process(target=_run_aside, args=(send, function, args), name="aside", daemon=True)
    child.start()
    send.close()
    future: Future = Future()

    def collect():
        try:
            ok, value = receive.recv()
        except EOFError:  # (ended without a word: killed, or exited)
            ok, value = False, None
        child.join()
        if ok:
            future.set_result(value)
        else:
            future.set_exception(value or ChildProcessError(f"the process aside ended with status {child.exitcode}"))
    threading.Thread(target=collect, name="aside", daemon=True).start()
    return future


def _run_aside(send, function, args) -> None:
    """In the process aside: the call, and its result or error sent back."""
    _worker_signals()
    try:
        outcome = (True, function(*args))
    except BaseException as exc:  # (handed to the caller, who raises it)
        outcome = (False, exc)
    try:
        send.send(outcome)
    except Exception as exc:  # (a result or error that cannot be pickled: why, as text)
        send.send((False, RuntimeError(f"{outcome[1]!r} cannot be sent back from the process aside: {exc}")))


def make_executor(scheduler: str | None = None, workers: int | None = None):
    """The executor for ``--scheduler`` / ``--workers`` (None: a local pool of all cores)."""
    if workers is not None and workers < 1:
        raise ParameterError(f"--workers={workers}; expected a positive integer")
    if scheduler:
        return DaskExecutor(scheduler, workers)
    if workers == 1:
        return InlineExecutor()
    return LocalExecutor(workers)
