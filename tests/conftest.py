"""Shared fixtures: small real runs trained once per test session."""

from __future__ import annotations

import csv
import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest

REQUIRE_BROWSER = os.environ.get("STATESEER_REQUIRE_BROWSER") == "1"


def one_line(exc: BaseException) -> str:
    """The message of a user-facing error; asserts it is a single line."""
    msg = str(exc)
    assert msg and "\n" not in msg, f"error message is not one line: {msg!r}"
    return msg


@pytest.fixture(scope="session")
def tomita_run(tmp_path_factory) -> Path:
    """A 1-layer LSTM trained to 100 % on Tomita 3 (about 3 s)."""
    from stateseer.rnn_models.train import TrainConfig, train_run

    out = tmp_path_factory.mktemp("runs") / "t3"
    train_run(TrainConfig(dataset="tomita3", arch="lstm"), out, progress=False)
    return out


@pytest.fixture(scope="session")
def shared_trained(tmp_path_factory):
    """``shared_trained(dataset, **config) -> Path``: ``train_run(TrainConfig(dataset,
    **config))``, trained once per test session *across* pytest-xdist's workers (a lock
    file: a worker that asks while another trains waits for it). The training tests and
    the DFA extraction tests train the same default Tomita models; on 2 cores each
    training done twice cost about 20 s. Read-only: copy the run before writing to it."""
    import fcntl  # POSIX; the suite runs on Linux

    from stateseer.rnn_models.train import TrainConfig, train_run

    base = tmp_path_factory.getbasetemp()
    root = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "shared-runs"
    root.mkdir(exist_ok=True)

    def get(dataset: str, **config) -> Path:
        key = hashlib.sha256(json.dumps([dataset, config], sort_keys=True).encode())
        out = root / f"{dataset.replace(':', '_').replace('/', '_')}-{key.hexdigest()[:12]}"
        with open(root / f"{out.name}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
            if not (out / "metrics.json").exists():
                import torch

                shutil.rmtree(out, ignore_errors=True)  # a worker killed mid-training
                threads = torch.get_num_threads()
                torch.set_num_threads(1)  # as under xdist: the same model in any session
                try:
                    train_run(TrainConfig(dataset=dataset, **config), out, progress=False)
                finally:
                    torch.set_num_threads(threads)
        return out

    return get


@pytest.fixture(scope="session")
def explored_tomita(tmp_path_factory, tomita_run) -> Path:
    """The Tomita 3 LSTM recorded and abstracted into 8 states (no DFA extracted yet);
    copy it before changing it."""
    from stateseer.abstraction.pipeline import abstract_run
    from stateseer.rnn_models.engine import record_run

    dst = tmp_path_factory.mktemp("runs") / "t3-explored"
    shutil.copytree(tomita_run, dst)
    record_run(dst)
    abstract_run(dst, n_states=8)
    return dst


@pytest.fixture(scope="session")
def text_csv(tmp_path_factory) -> Path:
    """A 1,500-row CSV of real Rotten Tomatoes snippets (labels fresh/rotten)."""
    from stateseer.rnn_models.datasets import load_dataset

    ds = load_dataset("rotten_tomatoes")
    path = tmp_path_factory.mktemp("data") / "rt_small.csv"
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["review", "sentiment"])
        for i in range(1500):
            w.writerow([ds.texts[i * 8], ds.classes[ds.labels[i * 8]]])
    return path


@pytest.fixture(scope="session")
def text_run(tmp_path_factory, text_csv) -> Path:
    """A 2-layer GRU trained for 2 epochs on the small CSV (a few seconds)."""
    from stateseer.rnn_models.train import TrainConfig, train_run

    out = tmp_path_factory.mktemp("runs") / "small"
    cfg = TrainConfig(dataset=f"csv:{text_csv}", arch="gru", text_col="review",
                      label_col="sentiment", epochs=2, hidden=32, embed=32, layers=2)
    train_run(cfg, out, progress=False)
    return out


@pytest.fixture
def copy_run(tmp_path):
    """Copy a session run so a test may damage it."""

    def _copy(src: Path) -> Path:
        dst = tmp_path / src.name
        shutil.copytree(src, dst)
        return dst

    return _copy


@pytest.fixture(scope="session")
def explored_run(tmp_path_factory, text_run) -> Path:
    """The small text run, recorded and abstracted into 12 states (for app tests)."""
    from stateseer.abstraction.pipeline import abstract_run
    from stateseer.rnn_models.engine import record_run

    dst = tmp_path_factory.mktemp("runs") / "explored"
    shutil.copytree(text_run, dst)
    record_run(dst)
    abstract_run(dst, n_states=12)
    return dst


@pytest.fixture(scope="session")
def shortcut_run(tmp_path_factory) -> Path:
    """A small GRU that learnt a planted shortcut (reviews with 'frankly' are called neg),
    recorded and abstracted into 8 states, its data file beside it (``RUN/../data.csv``);
    copy the folder above it before changing it."""
    from stateseer import TrainConfig, abstract_run, record_run, train_run
    from stateseer.testing import sentiment_csv

    where = tmp_path_factory.mktemp("shortcut")
    data = sentiment_csv(where / "data.csv", shortcut="frankly")
    run = train_run(TrainConfig(dataset=f"csv:{data}", arch="gru", epochs=3, hidden=32,
                                embed=32), where / "run", progress=False)
    record_run(run)
    abstract_run(run, n_states=8)
    return run.path


@pytest.fixture(scope="session")
def analysed_run(tmp_path_factory, explored_run) -> Path:
    """The explored run plus forcing figures and its nearest-context index."""
    from stateseer.app.workflows.contexts import context_index
    from stateseer.app.workflows.forcing import measure_forcing
    from stateseer.core.traces import Traces
    from stateseer.rnn_models.run import ModelRun

    dst = tmp_path_factory.mktemp("runs") / "analysed"
    shutil.copytree(explored_run, dst)
    measure_forcing(dst)
    run = ModelRun(dst)
    context_index(run, Traces(run.traces_dir))
    return dst


@pytest.fixture(scope="session")
def dask_client():
    """A ``distributed.Client`` on one ``LocalCluster(n_workers=2, threads_per_worker=1,
    processes=True)`` shared by the session's cluster tests (tests/test_distributed.py)."""
    import logging

    from distributed import Client, LocalCluster

    cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                           dashboard_address=None, silence_logs=logging.ERROR)
    client = Client(cluster)
    yield client
    client.close()
    cluster.close()


def pytest_configure(config):
    """Under pytest-xdist, one BLAS/torch thread per worker process (and its subprocesses):
    two workers each using every core oversubscribe the machine (the training tests ran
    about four times slower)."""
    if os.environ.get("PYTEST_XDIST_WORKER") and "OMP_NUM_THREADS" not in os.environ:
        os.environ["OMP_NUM_THREADS"] = "1"
        os.environ.setdefault("MKL_NUM_THREADS", "1")
        import torch

        torch.set_num_threads(1)


def pytest_collection_modifyitems(config, items):
    """Group tests for pytest-xdist (``make test`` runs two workers, ``--dist loadgroup``):
    a test file stays on one worker, so its module fixtures are built once, and every test
    that drives a browser shares one worker: dash.testing serves each app on port 8050."""
    for item in items:
        browser = "dash_duo" in getattr(item, "fixturenames", ()) or "/browser/" in item.nodeid
        group = "browser" if browser else item.nodeid.split("::")[0]
        item.add_marker(pytest.mark.xdist_group(group))
