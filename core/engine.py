"""Where heavy steps run: in this process (default) or on a Dask cluster.

Every heavy step of stateseer (recording, forcing, assignment, simulation, counting) is a
*map* of a per-shard function over the shards of a split, followed by a small *reduce*.
An :class:`Engine` runs that map:

=====================  ==============================================================
``None`` / ``""``      :class:`SerialEngine`: a plain loop in this process, no Dask
                       imported (the default)
``local``              a ``distributed.LocalCluster`` of one worker process per core
``local:N``            the same with ``N`` worker processes
``tcp://HOST:PORT``    an existing ``dask scheduler`` (workers: ``dask worker ADDR``)
=====================  ==============================================================

``STATESEER_CLUSTER`` sets the address used when none is given. Workers are processes
with one thread each (``threads_per_worker=1``): the per-shard functions are numpy and
torch code that is single-threaded by design, so one process per core is the unit.

Results do not depend on the engine: the per-shard functions are the same, the shard
layout depends only on the data, results come back in shard order and :meth:`~Engine.reduce`
always combines them in the same binary tree. A task whose worker dies (killed,
out of memory, a lost machine) is run again on another worker by the scheduler; a
per-shard function must therefore be idempotent (write only its own temporary output).
A map's shared arguments travel as a task too (never as scattered data, which the
scheduler could not recompute); should a step still lose what it needs (its futures come
back cancelled, a worker's connection breaks), it is run again while the scheduler
answers (up to ``LOST_WORKER_RETRIES`` times). Only a scheduler that
disappears ends the command, with a one-line :class:`ClusterError` that says so; commands
write to temporary names and swap results in only at the end, so the run stays the old
one.

This module is part of the torch-free :mod:`stateseer.core` layer (both
``rnn_models`` and ``abstraction`` use it); Dask is imported only when a cluster is
asked for. The torch side (a model loaded once per worker process) is
:mod:`stateseer.rnn_models.engine`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

from stateseer.core.errors import StateseerError
from stateseer.core.heap import array_heap

__all__ = ["ENV", "ClusterError", "DaskEngine", "Engine", "SerialEngine", "open_engine",
           "parse_address", "tree_reduce"]

ENV = "STATESEER_CLUSTER"
T = TypeVar("T")
USAGE = "use local, local:N or tcp://HOST:PORT"
LOST_WORKER_RETRIES = 2  # reruns of one step after a worker's loss cancelled its data


class ClusterError(StateseerError):
    """A cluster address that is wrong, or a scheduler that cannot be reached."""


def parse_address(address: str | None) -> tuple[str, Any]:
    """Kind and argument of a ``--cluster`` address.

    Parameters
    ----------
    address : str or None
        ``None``/``""`` (in-process), ``local``, ``local:N`` or ``tcp://HOST:PORT``.

    Returns
    -------
    (kind, arg) : tuple
        ``("inprocess", None)``, ``("local", n_workers or None)`` or ``("tcp", address)``.

    Raises
    ------
    ClusterError
        Anything else (one line naming the accepted forms).

    Examples
    --------
    >>> parse_address("local:2"), parse_address(None)
    (('local', 2), ('inprocess', None))
    """
    if address is None or not str(address).strip():
        return "inprocess", None
    a = str(address).strip()
    if a == "local":
        return "local", None
    if a.startswith("local:"):
        n = a[len("local:"):]
        if not n.isdigit() or int(n) < 1:
            raise ClusterError(f"--cluster {a!r}: N in local:N must be a positive number of "
                               f"worker processes (e.g. local:2)")
        return "local", int(n)
    if a.startswith("tcp://"):
        host, _, port = a[len("tcp://"):].rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ClusterError(f"--cluster {a!r} is not tcp://HOST:PORT (e.g. "
                               f"tcp://127.0.0.1:8786, the address `dask scheduler` prints)")
        return "tcp", a
    raise ClusterError(f"unknown --cluster {a!r}; {USAGE} (or set {ENV})")


def tree_reduce(combine: Callable[[T, T], T], items: Iterable[T]) -> T:
    """Combine ``items`` pairwise in a fixed binary tree: ``((0,1),(2,3)),...``.

    Level by level, neighbours are combined and an odd last item moves up unchanged; the
    tree depends only on the number of items, so a floating-point reduction gives the same
    bits whichever engine computed the items. ``items`` may be a generator: they are
    folded as they come (a binary counter of at most log2(n) partial results, combined
    from the right at the end, which is the same tree). One item is returned as it is.

    Raises
    ------
    ValueError
        ``items`` is empty.

    Examples
    --------
    >>> tree_reduce(lambda a, b: f"({a}{b})", "abcde")
    '(((ab)(cd))e)'
    """
    stack: list[tuple[int, T]] = []  # (size of the complete subtree, its value)
    for item in items:
        size, value = 1, item
        while stack and stack[-1][0] == size:
            value = combine(stack.pop()[1], value)
            size *= 2
        stack.append((size, value))
    if not stack:
        raise ValueError("nothing to reduce")
    value = stack.pop()[1]
    while stack:
        value = combine(stack.pop()[1], value)
    return value


class Engine:
    """Runs per-shard functions; see the module docstring.

    Subclasses implement :meth:`map` and :meth:`reduce`; both keep the order of ``items``.
    An engine is a context manager (:meth:`close` on exit).
    """

    address: str | None = None
    n_workers: int = 1
    threads_per_worker: int = 1
    is_cluster: bool = False

    def map(self, fn: Callable[..., T], items: Iterable[Any], **shared: Any) -> list[T]:
        """``[fn(x, **shared) for x in items]``, in order.

        ``shared`` keyword arguments are sent to each worker once, not once per item.
        """
        raise NotImplementedError

    def reduce(self, combine: Callable[[T, T], T], items: Sequence[T]) -> T:
        """:func:`tree_reduce` of ``items``."""
        return tree_reduce(combine, items)

    def map_reduce(self, fn: Callable[..., T], items: Iterable[Any],
                   combine: Callable[[T, T], T], **shared: Any) -> T:
        """``reduce(combine, map(fn, items))``, the reduce on the workers where possible."""
        return self.reduce(combine, self.map(fn, items, **shared))

    def close(self) -> None:
        """Release the cluster (nothing for the in-process engine)."""

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def describe(self) -> dict[str, Any]:
        """Where the work ran, for provenance (``info["engine"]``)."""
        return {"engine": "dask" if self.is_cluster else "inprocess",
                "address": self.address, "workers": self.n_workers}


class SerialEngine(Engine):
    """The in-process engine: a plain ordered loop (imports no Dask)."""

    def map(self, fn: Callable[..., T], items: Iterable[Any], **shared: Any) -> list[T]:
        with array_heap():
            return [fn(x, **shared) for x in items]

    def map_reduce(self, fn: Callable[..., T], items: Iterable[Any],
                   combine: Callable[[T, T], T], **shared: Any) -> T:
        """Streamed: at most log2(n) results are held at once (same tree)."""
        with array_heap():
            return tree_reduce(combine, (fn(x, **shared) for x in items))


class DaskEngine(Engine):
    """A ``distributed.Client`` on a local or remote Dask cluster.

    Parameters
    ----------
    address : str
        ``local``, ``local:N`` or ``tcp://HOST:PORT``.
    retries : int
        Extra attempts of a task that *raised* (a task whose worker died is rescheduled
        by the scheduler anyway, up to ``distributed.scheduler.allowed-failures``).
    timeout : float
        Seconds to wait for a remote scheduler to answer.
    """

    is_cluster = True

    def __init__(self, address: str, *, retries: int = 2, timeout: float = 10.0) -> None:
        kind, arg = parse_address(address)
        if kind == "inprocess":
            raise ClusterError(f"DaskEngine needs a cluster address; {USAGE}")
        self.address, self.retries = address, retries
        self._cluster = None
        try:
            from distributed import Client, LocalCluster
        except ImportError:  # pragma: no cover - a dependency of the package
            raise ClusterError("--cluster needs dask and distributed: pip install "
                               "'dask[distributed]'") from None
        self._quiet()  # after the import: importing distributed sets its loggers' levels
        if kind == "local":
            n = arg or os.cpu_count() or 1
            import logging

            self._cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                                         dashboard_address=None, silence_logs=logging.ERROR)
            self.client = Client(self._cluster)
        else:
            self.client = connect(arg, timeout)
        info = self.client.scheduler_info()
        workers = info.get("workers", {})
        self.n_workers = max(len(workers), 1)
        self.threads_per_worker = max((w.get("nthreads", 1) for w in workers.values()),
                                      default=1)

    @classmethod
    def from_client(cls, client: Any, retries: int = 2) -> DaskEngine:
        """An engine on an existing ``distributed.Client`` (not closed by :meth:`close`)."""
        self = cls.__new__(cls)
        self.client, self._cluster, self.retries = client, None, retries
        self.address = getattr(client.scheduler, "address", None)
        self._borrowed = True
        workers = client.scheduler_info().get("workers", {})
        self.n_workers = max(len(workers), 1)
        self.threads_per_worker = max((w.get("nthreads", 1) for w in workers.values()),
                                      default=1)
        return self

    def _quiet(self) -> None:
        """Dask's own client and comm loggers say nothing below CRITICAL while this engine
        is open (a lost scheduler is reported once, as a :class:`ClusterError`)."""
        import logging

        self._levels = {}
        for name in ("distributed.client", "distributed.comm", "distributed.core",
                     "distributed.batched"):
            log = logging.getLogger(name)
            self._levels[name] = log.level
            log.setLevel(logging.CRITICAL)

    def _lost(self, exc: BaseException) -> ClusterError:
        return ClusterError(
            f"the Dask scheduler at {self.address} went away mid-command "
            f"({type(exc).__name__}); the run directory was left as it was — restart the "
            f"scheduler and workers and rerun, or drop --cluster")

    def _scheduler_answers(self) -> bool:
        """Whether the scheduler still answers (a lost *worker* is not a lost cluster)."""
        try:
            self.client.sync(self.client.scheduler.identity, callback_timeout=10)
        except Exception:  # any failure to answer means it is gone
            return False
        return True

    def _call(self, fn: Callable[[], T]) -> T:
        """``fn()``, run again while the scheduler lives but a worker's loss still took
        data the step needs with it (its futures come back cancelled, a connection to a
        worker breaks); a lost scheduler is one :class:`ClusterError`.

        Rerunning is safe: per-shard functions are idempotent, and results are combined
        in a fixed order whichever attempt computed them.
        """
        from concurrent.futures import CancelledError

        from distributed.comm.core import CommClosedError

        for attempt in range(1 + LOST_WORKER_RETRIES):
            try:
                return fn()
            except (CommClosedError, CancelledError, OSError, TimeoutError) as exc:
                if not self._scheduler_answers():
                    raise self._lost(exc) from None
                if attempt == LOST_WORKER_RETRIES:
                    raise ClusterError(
                        f"workers of the Dask cluster at {self.address} were lost "
                        f"{attempt + 1} times in one step ({type(exc).__name__}) while the "
                        "scheduler still answers; the run directory was left as it was — "
                        "check the workers (memory, network) and rerun") from None
                self._wait_for_a_worker()
        raise AssertionError("unreachable")  # pragma: no cover

    def _wait_for_a_worker(self, timeout: float = 60.0) -> None:
        """Before a rerun: at least one worker (a lost machine's replacement may still be
        starting); none within ``timeout`` seconds is a :class:`ClusterError`."""
        try:
            self.client.wait_for_workers(1, timeout=timeout)
        except TimeoutError:
            raise ClusterError(f"the Dask cluster at {self.address} has no worker left (none "
                               f"joined within {timeout:.0f} s); start one with `dask worker "
                               f"{self.address}` and rerun") from None

    def _shared(self, shared: dict[str, Any]) -> Any:
        """The keyword arguments of a map as one object the workers fetch once each: a
        task that returns them (its Future), or the dict itself when it is small.

        A task, not scattered data: when the worker holding the result is lost (a lost
        machine), the scheduler computes it again from the task, whereas scattered data
        dies with it (its dependants come back cancelled), and a broadcast scatter whose
        copy went to a worker that just died waited forever on the scheduler.
        Not a dict of Futures: Dask turns such a dict into a task keyed by the argument's
        name, so two maps with more than one shared argument (two splits' patterns mined
        side by side) collided on the scheduler and never finished.
        """
        small = (str, int, float, bool, tuple, type(None))
        if all(isinstance(v, small) for v in shared.values()):
            return dict(shared)
        import dask

        with dask.config.set({"distributed.admin.large-graph-warning-threshold": "1GB"}):
            return self.client.submit(_identity, dict(shared), pure=False)

    def map(self, fn: Callable[..., T], items: Iterable[Any], **shared: Any) -> list[T]:
        items = list(items)
        if not items:
            return []

        def run() -> list[T]:
            futures = self.client.map(_apply, items, pure=False, retries=self.retries,
                                      fn=fn, shared_kwargs=self._shared(shared))
            return self.client.gather(futures)

        return self._call(run)

    def map_reduce(self, fn: Callable[..., T], items: Iterable[Any],
                   combine: Callable[[T, T], T], **shared: Any) -> T:
        items = list(items)
        if not items:
            raise ValueError("nothing to reduce")

        def run() -> T:
            level = self.client.map(_apply, items, pure=False, retries=self.retries,
                                    fn=fn, shared_kwargs=self._shared(shared))
            while len(level) > 1:  # the same tree as tree_reduce, on the workers
                nxt = [self.client.submit(combine, level[i], level[i + 1], pure=False,
                                          retries=self.retries)
                       for i in range(0, len(level) - 1, 2)]
                if len(level) % 2:
                    nxt.append(level[-1])
                level = nxt
            return level[0].result()

        return self._call(run)

    def close(self) -> None:
        if getattr(self, "_borrowed", False):
            return
        import logging

        try:
            self.client.close()
        finally:
            if self._cluster is not None:
                self._cluster.close()
            for name, level in getattr(self, "_levels", {}).items():
                logging.getLogger(name).setLevel(level)


def _identity(x: T) -> T:
    """A task's result that is its argument (a map's shared keyword arguments)."""
    return x


def _apply(item: Any, fn: Callable[..., T], shared_kwargs: dict[str, Any]) -> T:
    """``fn(item, **shared_kwargs)`` on a worker (the keywords travel as one dict, so
    none can clash with ``Client.map``'s own, such as ``batch_size`` or ``key``)."""
    with array_heap():
        return fn(item, **shared_kwargs)


def connect(address: str, timeout: float = 10.0) -> Any:
    """A ``distributed.Client`` on the scheduler at ``address``, or a one-line
    :class:`ClusterError` within ``timeout`` seconds (and as many again, 2 to 5, for the
    handshake):
    nothing listening, or something that is not a Dask scheduler (an HTTP server keeps
    the handshake waiting forever, so the connection is made in a thread that is left
    behind when it does not answer)."""
    import threading

    from distributed import Client

    out: dict[str, Any] = {}

    def run() -> None:
        try:
            out["client"] = Client(address, timeout=timeout)
        except BaseException as exc:
            out["error"] = exc

    hint = (f"start one with `dask scheduler` and workers with `dask worker {address}`, or "
            f"drop --cluster / unset {ENV} to run in this process")
    t = threading.Thread(target=run, name="stateseer-connect", daemon=True)
    t.start()
    wait = timeout + max(2.0, min(5.0, timeout))  # the handshake's grace: 5 s at the default
    t.join(wait)
    if t.is_alive():
        raise ClusterError(f"the server at {address} did not answer as a Dask scheduler within "
                           f"{wait:.0f} s (is it one?); {hint}")
    if "error" in out:
        raise ClusterError(f"no Dask scheduler answers at {address} "
                           f"({type(out['error']).__name__}); {hint}") from None
    return out["client"]


def check_cluster(cluster: str | None, timeout: float = 10.0) -> None:
    """Refuse an address that no Dask scheduler answers at, in one line, before a command
    starts its work (every command that takes ``--cluster`` calls it, so that one that
    would not use the cluster, e.g. an index already built, refuses the same address as
    the others). ``None``: ``$STATESEER_CLUSTER``; in-process and ``local`` pass."""
    if cluster is None:
        cluster = os.environ.get(ENV) or None
    kind, arg = parse_address(cluster)
    if kind == "tcp":
        connect(arg, timeout).close()


def open_engine(cluster: str | Engine | None = None) -> Engine:
    """The engine for ``cluster``: an :class:`Engine` as it is, an address (or, for
    ``None``, ``$STATESEER_CLUSTER``) opened, else the in-process engine.

    Use it as a context manager through :func:`engine_scope` when the caller owns it.
    """
    if isinstance(cluster, Engine):
        return cluster
    if cluster is None:
        cluster = os.environ.get(ENV) or None
    kind, _ = parse_address(cluster)
    if kind == "inprocess":
        return SerialEngine()
    return DaskEngine(str(cluster).strip())


@contextmanager
def engine_scope(cluster: str | Engine | None = None):
    """Context manager: :func:`open_engine`, closed at the end only if opened here."""
    engine = open_engine(cluster)
    try:
        yield engine
    finally:
        if engine is not cluster:
            engine.close()


__all__ += ["check_cluster", "connect", "engine_scope"]
