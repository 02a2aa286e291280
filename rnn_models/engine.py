"""The Dask engine, model side: ``--cluster`` addresses, and a model loaded once per worker.

The engine itself (address parsing, :class:`SerialEngine`, :class:`DaskEngine`,
:func:`tree_reduce`) is torch-free and lives in :mod:`stateseer.core.engine`, so that
``abstraction`` can map its per-shard functions with it; this module re-exports it and
adds :func:`worker_model`, the per-process model cache recording and forcing use on the
workers. Importing this module imports neither torch nor Dask.

Examples
--------
>>> with open_engine(None) as engine:          # no address, no $STATESEER_CLUSTER
...     engine.map(abs, [-1, 2, -3])
[1, 2, 3]
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from stateseer.core.engine import (
    ENV,
    ClusterError,
    DaskEngine,
    Engine,
    SerialEngine,
    engine_scope,
    open_engine,
    parse_address,
    tree_reduce,
)

__all__ = [
    "ENV",
    "ClusterError",
    "DaskEngine",
    "Engine",
    "SerialEngine",
    "dask_worker_threads",
    "engine_scope",
    "open_engine",
    "parse_address",
    "record_run",
    "tree_reduce",
    "worker_model",
]

_MODELS: dict[str, tuple[str, Any]] = {}


def dask_worker_threads() -> int | None:
    """Threads of the Dask worker this runs on, or ``None`` outside a worker.

    Never imports Dask: outside a cluster ``distributed`` is not loaded at all.
    """
    if "distributed" not in sys.modules:
        return None
    from distributed import get_worker

    try:
        return int(get_worker().state.nthreads)
    except (ValueError, AttributeError):  # not on a worker
        return None


def worker_model(run_path: str | Path, model_sha: str | None = None) -> Any:
    """The model of run ``run_path``, loaded once per process and kept.

    The cache is keyed by the run's resolved path and ``model_sha`` (the SHA-256 of its
    ``model.pt``), so a retrained model is loaded afresh. On a Dask worker, torch is set
    to the worker's thread count (``torch.set_num_threads(threads_per_worker)``) first.

    Parameters
    ----------
    run_path : str or Path
    model_sha : str, optional
        Provenance of the model the caller expects (``None``: whatever is there).
    """
    key = str(Path(run_path).resolve())
    cached = _MODELS.get(key)
    if cached is not None and cached[0] == (model_sha or ""):
        return cached[1]
    threads = dask_worker_threads()
    if threads:
        import torch

        torch.set_num_threads(threads)
    from stateseer.rnn_models.run import ModelRun

    model = ModelRun(run_path).load_model()
    _MODELS[key] = (model_sha or "", model)
    return model


def _with_threads(fn: Any, item: Any) -> Any:
    """``fn(item)`` with torch set to the worker's threads (once per process)."""
    threads = dask_worker_threads()
    if threads and not _THREADS_SET:
        import torch

        torch.set_num_threads(threads)
        _THREADS_SET.append(threads)
    return fn(item)


_THREADS_SET: list[int] = []


def cluster_map(engine: Engine) -> Any:
    """A ``map``-like callable that runs on ``engine`` (for ``record_run(map_fn=...)``),
    torch set to each worker's thread count."""
    from functools import partial

    def map_fn(fn: Any, items: Any) -> list[Any]:
        return engine.map(partial(_with_threads, fn), list(items))

    return map_fn


def record_run(run: Any, *, cluster: str | Engine | None = None, **kwargs: Any) -> Any:
    """:func:`stateseer.rnn_models.record.record_in_process` with its shards recorded on
    ``cluster``.

    Parameters
    ----------
    run : Run, str or Path
    cluster : str or Engine, optional
        ``local``, ``local:N``, ``tcp://HOST:PORT`` or an open engine (default:
        ``$STATESEER_CLUSTER``, else in this process).
    **kwargs
        As for :func:`stateseer.rnn_models.record.record_in_process` (``shard_size`` ...).
    """
    from stateseer.rnn_models.record import record_in_process as record

    with engine_scope(cluster) as engine:
        if not engine.is_cluster:
            return record(run, **kwargs)
        return record(run, map_fn=cluster_map(engine), **kwargs)
