"""The Dask path gives the in-process results bit for bit, survives a killed worker, and
reads old single-file runs; the explorer opens a sharded run.

Every test here shares one ``LocalCluster(n_workers=2, threads_per_worker=1,
processes=True)`` (the session's ``dask_client`` fixture in tests/conftest.py).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from stateseer.abstraction import sharded
from stateseer.abstraction.pipeline import Abstraction, abstract_run
from stateseer.core.traces import Traces
from stateseer.rnn_models.engine import DaskEngine, SerialEngine, record_run

SHARD = 150  # inputs per shard: several shards on the small fixtures


@pytest.fixture(scope="module")
def engine(dask_client):
    return DaskEngine.from_client(dask_client)


def _fresh(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("traces*", "abstraction*",
                                                            "index*"))
    return dst


def _fsm_doc(ab: Abstraction) -> dict:
    doc = ab.fsm.to_dict()
    doc["provenance"].pop("created", None)
    return doc


def _assert_same(a: Abstraction, b: Abstraction) -> None:
    """States, simulated paths, FSM JSON, patterns and metrics equal, bit for bit."""
    assert sorted(a.states) == sorted(b.states)
    for s in a.states:
        assert np.asarray(a.states[s]).tobytes() == np.asarray(b.states[s]).tobytes()
        assert np.asarray(a.simulated[s]).tobytes() == np.asarray(b.simulated[s]).tobytes()
        assert a.sim_predictions[s].tobytes() == b.sim_predictions[s].tobytes()
    assert json.dumps(_fsm_doc(a)) == json.dumps(_fsm_doc(b))
    assert json.dumps(a.patterns) == json.dumps(b.patterns)
    strip = lambda m: {k: v for k, v in m.items() if k != "seconds"}  # noqa: E731
    assert json.dumps(strip(a.metrics)) == json.dumps(strip(b.metrics))


@pytest.fixture(scope="module")
def text_pair(tmp_path_factory, text_run, engine):
    """The small text run recorded in process and on the cluster, several shards each."""
    root = tmp_path_factory.mktemp("distributed")
    a, b = _fresh(text_run, root / "inproc"), _fresh(text_run, root / "cluster")
    record_run(a, shard_size=SHARD)
    record_run(b, shard_size=SHARD, cluster=engine)
    return a, b


def test_text_run_recorded_and_abstracted_on_the_cluster_equals_in_process(text_pair,
                                                                            engine):
    a, b = text_pair
    ta, tb = Traces(a / "traces"), Traces(b / "traces")
    assert len(ta.shards("train")) > 2
    for split in ta.split_names:
        assert [(s.input_start, s.step_stop) for s in ta.shards(split)] == \
            [(s.input_start, s.step_stop) for s in tb.shards(split)]
        for k in ("hidden", "proba", "token_ids", "offsets", "final_proba"):
            assert np.asarray(getattr(ta[split], k)).tobytes() == \
                np.asarray(getattr(tb[split], k)).tobytes(), (split, k)
    _assert_same(abstract_run(a, n_states=10), abstract_run(b, n_states=10, cluster=engine))
    loaded = Abstraction.load(b / "abstraction")  # what the cluster run saved reads back
    assert loaded.fsm.n_states == 11


def test_forcing_and_index_on_the_cluster_equal_in_process(text_pair, engine):
    from stateseer.app.workflows.contexts import context_index
    from stateseer.app.workflows.forcing import measure_forcing
    from stateseer.rnn_models.run import ModelRun

    a, b = text_pair
    for run in (a, b):
        if not (run / "abstraction" / "meta.json").exists():
            abstract_run(run, n_states=10)
    fa = measure_forcing(a, save=False)
    fb = measure_forcing(b, save=False, cluster=engine)
    for f in (fa, fb):
        f["forcing"].pop("seconds")
    assert fa == fb and fa["forcing"]["per_state"]
    ia = context_index(ModelRun(a), Traces(a / "traces"))
    ib = context_index(ModelRun(b), Traces(b / "traces"), cluster=engine)
    for k in ("order_", "codes_", "list_ptr_", "centers_"):
        assert getattr(ia, k).tobytes() == getattr(ib, k).tobytes(), k


def test_tomita_run_on_the_cluster_equals_in_process(tmp_path, tomita_run, engine):
    run = _fresh(tomita_run, tmp_path / "t3")
    record_run(run, splits=["train", "val"], shard_size=SHARD)
    assert len(Traces(run / "traces").shards("train")) > 1
    kw = {"n_states": 5, "method": "gmm", "save": False}
    _assert_same(abstract_run(run, **kw), abstract_run(run, cluster=engine, **kw))


def _slow_assign(ref, **kw):
    time.sleep(0.4)
    return sharded.assign_shard(ref, **kw)


def _kill_a_busy_worker(client, job: threading.Thread) -> int:
    """SIGKILL the worker process holding the most of ``job``'s tasks once it holds any;
    returns how many tasks it held (they must be rerun elsewhere for ``job`` to finish)."""
    pids = client.run(os.getpid)  # worker address -> process id
    deadline = time.monotonic() + 120
    while job.is_alive() and time.monotonic() < deadline:
        busy = {w: len(keys) for w, keys in client.processing().items() if keys}
        if busy:
            worker = max(busy, key=busy.get)
            os.kill(pids[worker], signal.SIGKILL)
            return busy[worker]
        time.sleep(0.01)
    return 0


def test_a_worker_killed_mid_map_is_retried_with_the_same_result(text_pair, engine,
                                                                 dask_client):
    a, _ = text_pair
    traces = Traces(a / "traces")
    ab = abstract_run(a, n_states=10, save=False)
    refs = sharded.shard_refs(traces, "train")
    want = SerialEngine().map(_slow_assign, refs, abstractor=ab.abstractor, stats=(11, 10**5))
    out: dict = {}
    job = threading.Thread(target=lambda: out.update(r=engine.map(
        _slow_assign, refs, abstractor=ab.abstractor, stats=(11, 10**5))))
    job.start()
    assert _kill_a_busy_worker(dask_client, job) >= 1  # mid-map: its tasks run elsewhere
    job.join(180)
    assert not job.is_alive() and "r" in out
    for w, g in zip(want, out["r"], strict=True):
        assert w["states"].tobytes() == g["states"].tobytes()
        assert w["stats"].keys.tobytes() == g["stats"].keys.tobytes()
        assert w["stats"].sums.tobytes() == g["stats"].sums.tobytes()
    dask_client.wait_for_workers(2, timeout=120)  # the nanny restarts it for later tests


@pytest.mark.parametrize("command", ["record", "abstract"])
def test_a_worker_killed_mid_command_leaves_identical_results_and_no_partial_shard(
        command, text_pair, tmp_path, engine, dask_client):
    """SIGKILL of a busy worker during ``record`` or ``abstract`` on the cluster: Dask
    reruns its tasks, the run equals the in-process one and no temporary shard is left."""
    from stateseer.core.traces import TMP_MARK

    a, _ = text_pair
    run = _fresh(a, tmp_path / "killed")
    if command == "abstract":
        shutil.copytree(a / "traces", run / "traces")
    call = {"record": lambda: record_run(run, shard_size=SHARD, cluster=engine),
            "abstract": lambda: abstract_run(run, n_states=10, cluster=engine)}[command]
    out: dict = {}
    job = threading.Thread(target=lambda: out.update(r=call()))
    job.start()
    held = _kill_a_busy_worker(dask_client, job)
    job.join(300)
    assert held >= 1 and not job.is_alive() and "r" in out
    dask_client.wait_for_workers(2, timeout=120)
    assert not [p for p in run.rglob(f"*{TMP_MARK}*")] and not (run / "traces.tmp").exists()
    if command == "record":
        ta, tb = Traces(a / "traces"), Traces(run / "traces")
        for split in ta.split_names:
            for k in ("hidden", "proba", "token_ids", "offsets", "final_proba"):
                assert np.asarray(getattr(ta[split], k)).tobytes() == \
                    np.asarray(getattr(tb[split], k)).tobytes(), (split, k)
    else:
        _assert_same(abstract_run(a, n_states=10, save=False), out["r"])


@pytest.fixture
def tcp_cluster():
    """A ``dask scheduler`` and one single-thread ``dask worker``, started as separate
    processes as the README tells a user to; yields (address, scheduler process, client)."""
    from distributed import Client

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    address = f"tcp://127.0.0.1:{port}"
    dask = str(Path(sys.executable).with_name("dask"))
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    procs = [subprocess.Popen([dask, "scheduler", "--host", "127.0.0.1", "--port", str(port),
                               "--no-dashboard"], **quiet)]
    procs.append(subprocess.Popen([dask, "worker", address, "--nthreads", "1", "--nworkers",
                                   "1", "--no-dashboard"], **quiet))
    client = None
    try:
        client = Client(address, timeout=60)
        client.wait_for_workers(1, timeout=120)
        yield address, procs[0], client
    finally:
        if client is not None:
            client.close(timeout=5)
        for proc in procs:
            proc.kill()
            proc.wait(30)


def test_a_scheduler_lost_mid_command_is_one_line_and_the_run_stays_as_it_was(
        text_pair, tmp_path, tcp_cluster):
    address, scheduler, client = tcp_cluster
    run = tmp_path / "run"
    shutil.copytree(text_pair[0], run)
    if not (run / "abstraction" / "meta.json").exists():
        abstract_run(run, n_states=10)
    files = lambda: {p.relative_to(run): p.read_bytes()  # noqa: E731
                     for d in ("abstraction", "traces") for p in (run / d).rglob("*")
                     if p.is_file()}
    before, entries = files(), sorted(os.listdir(run))
    # the only worker thread is busy, so the command's first tasks wait on the scheduler
    blocker = client.submit(time.sleep, 120, pure=False)
    cli = [sys.executable, "-m", "stateseer.app.cli", "abstract", str(run), "--states", "6",
           "--no-index", "--no-forcing", "--cluster", address]
    proc = subprocess.Popen(cli, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            cwd=Path(__file__).resolve().parents[1])
    n_tasks = lambda: client.run_on_scheduler(  # noqa: E731
        lambda dask_scheduler: len(dask_scheduler.tasks))
    deadline = time.monotonic() + 120
    while n_tasks() < 2 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert proc.poll() is None, proc.communicate()[1]  # it is waiting on its tasks
    scheduler.kill()
    _, err = proc.communicate(timeout=180)
    del blocker
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert proc.returncode == 2 and len(lines) == 1, err
    assert lines[0].startswith("stateseer: error: the Dask scheduler at") and \
        "went away mid-command" in lines[0]
    assert files() == before  # nothing was swapped in, nothing half-written is left
    assert sorted(os.listdir(run)) == entries
    assert Abstraction.load(run / "abstraction").n_states == 10


def _as_legacy(run: Path) -> None:
    """Rewrite one-shard traces in the layout written before shards existed."""
    t = run / "traces"
    meta = json.loads((t / "meta.json").read_text())
    for split, entry in meta["splits"].items():
        shard = t / split / "shards" / "00000"
        for f in shard.iterdir():
            f.rename(t / split / f.name)
        shutil.rmtree(t / split / "shards")
        entry.pop("shards", None)
    meta.pop("shard_size", None)
    (t / "meta.json").write_text(json.dumps(meta))


def test_an_old_single_file_run_still_loads_and_abstracts(tmp_path, text_run, engine):
    run = _fresh(text_run, tmp_path / "old")
    record_run(run)
    before = abstract_run(run, n_states=8, save=False)
    _as_legacy(run)
    assert not list((run / "traces").rglob("shards"))
    traces = Traces(run / "traces")
    assert len(traces.shards("train")) == 1 and traces["train"].n_steps > 0
    _assert_same(before, abstract_run(run, n_states=8, cluster=engine))
    assert Abstraction.load(run / "abstraction").n_states == 8


def test_the_explorer_opens_a_sharded_run(text_pair):
    from stateseer.app.explorer.context import ExplorerContext
    from stateseer.app.explorer.views import diagram
    from stateseer.app.main import create_app

    a, _ = text_pair
    if not (a / "abstraction" / "meta.json").exists():
        abstract_run(a, n_states=10)
    assert len(Traces(a / "traces").shards("train")) > 1
    assert create_app(a) is not None
    ctx = ExplorerContext.load(a)
    states = np.asarray(ctx.data.abstraction.states["test"])
    s = int(np.bincount(states).argmax())
    sel0 = {"split": "test", "state": None, "row": None, "pattern": None}
    sel, url = diagram.tap(ctx, {"state": s}, sel0)
    assert sel["state"] == s and url == f"?split=test&state={s}"
    tr = ctx.data.traces["train"]
    assert tr.n_inputs == sum(x.n_inputs for x in Traces(a / "traces").shards("train"))
    assert len(ctx.data.abstraction.states["train"]) == tr.n_steps


def test_one_shard_runs_on_every_worker_in_pieces_with_identical_results(tmp_path, text_run,
                                                                         engine):
    """A default recording (one shard) on the two workers: assignment in chunk-aligned
    pieces and simulation in input pieces, run by both workers, with the in-process bits."""
    from distributed import get_task_stream

    from stateseer.abstraction.abstractors.kmeans import KMeansAbstractor

    run = _fresh(text_run, tmp_path / "one")
    record_run(run)
    assert len(Traces(run / "traces").shards("train")) == 1
    method = KMeansAbstractor(n_states=8, chunk_size=512, split_by_prediction=True)
    assert sharded.pieces_per_shard(engine, 1) == 4 * engine.n_workers
    before = abstract_run(run, method=method, save=False)
    with get_task_stream(client=engine.client) as ts:
        after = abstract_run(run, method=method, cluster=engine, save=False)
    _assert_same(before, after)
    workers = {t["worker"] for t in ts.data if str(t["key"]).startswith("('_apply")
               or str(t["key"]).startswith("_apply")}
    assert len(workers) == 2
    # the context index encodes a one-shard split in chunk-aligned pieces too
    from stateseer.abstraction.analysis.neighbors import ContextIndex

    refs = sharded.shard_refs(Traces(run / "traces"), "train")
    ia = ContextIndex(n_components=8, chunk_size=256).fit_shards(refs, SerialEngine())
    with get_task_stream(client=engine.client) as ts:
        ib = ContextIndex(n_components=8, chunk_size=256).fit_shards(refs, engine)
    for k in ("order_", "codes_", "list_ptr_", "centers_", "norms_"):
        assert getattr(ia, k).tobytes() == getattr(ib, k).tobytes(), k
    assert len([t for t in ts.data if "_apply" in str(t["key"])]) > len(refs)


@pytest.fixture
def http_port():
    """A port where an HTTP server (no Dask scheduler) listens."""
    import http.server

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    server.daemon_threads = True  # a handler waiting on a handshake does not hold it up
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def test_an_address_that_is_no_scheduler_is_refused_alike_by_every_command(
        explored_run, http_port, capsys, monkeypatch):
    from stateseer.app.cli.main import main
    from stateseer.core import engine as E

    real = E.connect
    monkeypatch.setattr(E, "connect", lambda address, timeout=10.0: real(address, 1.0))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]  # closed again: nothing listens
    for port, words in ((http_port, "did not answer as a Dask scheduler"),
                        (dead, "no Dask scheduler answers")):
        address = f"tcp://127.0.0.1:{port}"
        for cmd in (["abstract", str(explored_run), "--states", "4"],
                    ["record", str(explored_run)], ["index", str(explored_run)],
                    ["force", str(explored_run)]):
            assert main([*cmd, "--cluster", address]) == 2, cmd
            err = capsys.readouterr().err.strip()
            assert "\n" not in err and words in err and address in err, (cmd, err)


def test_a_map_whose_scattered_arguments_are_lost_is_run_again(text_pair, engine,
                                                               monkeypatch):
    """A worker lost before the map's scattered arguments were copied to the others takes
    them with it: their future comes back cancelled while the scheduler still answers. The
    map runs again (it used to end the command as if the cluster had gone away)."""
    a, _ = text_pair
    ab = abstract_run(a, n_states=10, save=False)
    refs = sharded.shard_refs(Traces(a / "traces"), "train")
    want = SerialEngine().map(_slow_assign, refs, abstractor=ab.abstractor, stats=(11, 10**5))
    real, lost = DaskEngine._shared, []

    def shared_then_lost(self, shared):
        fut = real(self, shared)
        if not lost:  # the first attempt's arguments vanish while its tasks run
            lost.append(fut)
            threading.Timer(0.6, engine.client.cancel, [fut]).start()
        return fut

    monkeypatch.setattr(DaskEngine, "_shared", shared_then_lost)
    got = engine.map(_slow_assign, refs, abstractor=ab.abstractor, stats=(11, 10**5))
    assert lost and lost[0].cancelled()
    for w, g in zip(want, got, strict=True):
        assert w["states"].tobytes() == g["states"].tobytes()


def _start_worker(address: str) -> subprocess.Popen:
    """``dask worker`` (nanny and worker) in its own process group, as on its own machine."""
    dask = str(Path(sys.executable).with_name("dask"))
    return subprocess.Popen([dask, "worker", address, "--nthreads", "1", "--nworkers", "1",
                             "--no-dashboard"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)


@pytest.fixture
def two_machines():
    """A ``dask scheduler`` and two ``dask worker`` process groups (one per "machine");
    yields (address, client, workers list: the test appends replacements)."""
    from distributed import Client

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    address = f"tcp://127.0.0.1:{port}"
    dask = str(Path(sys.executable).with_name("dask"))
    scheduler = subprocess.Popen([dask, "scheduler", "--host", "127.0.0.1", "--port", str(port),
                                  "--no-dashboard"], stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL, start_new_session=True)
    workers = [_start_worker(address), _start_worker(address)]
    client = None
    try:
        client = Client(address, timeout=60)
        client.wait_for_workers(2, timeout=120)
        yield address, client, workers
    finally:
        if client is not None:
            client.close(timeout=5)
        for proc in [scheduler, *workers]:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait(30)


def test_a_machine_lost_at_any_moment_of_record_and_abstract_changes_nothing(
        text_pair, tmp_path, two_machines):
    """One worker's whole process group (nanny and worker) SIGKILLed at 20 moments spread
    over ``record`` and ``abstract`` on a ``tcp://`` cluster of separate processes, a new
    worker started each time: every run finishes, identical to the in-process run."""
    address, client, workers = two_machines
    a, _ = text_pair
    want = abstract_run(a, n_states=10, save=False)
    moments = 10

    def command(kind: str, run: Path):
        if kind == "record":
            return lambda: record_run(run, shard_size=SHARD, cluster=address)
        return lambda: abstract_run(run, n_states=10, cluster=address, save=False)

    def fresh(kind: str, name: str) -> Path:
        run = _fresh(a, tmp_path / name)
        if kind == "abstract":
            shutil.copytree(a / "traces", run / "traces")
        return run

    lost = []
    for kind in ("record", "abstract"):
        command(kind, fresh(kind, f"{kind}-warm"))()  # workers import torch, load the model
        t0 = time.monotonic()
        command(kind, fresh(kind, f"{kind}-timed"))()  # how long the command takes
        took = time.monotonic() - t0
        for i in range(moments):
            client.wait_for_workers(2, timeout=120)
            pids = client.run(os.getpid)  # worker address -> process id
            run = fresh(kind, f"{kind}-{i}")
            out: dict = {}
            call = command(kind, run)
            job = threading.Thread(target=lambda c=call, o=out: o.update(r=c()))
            job.start()
            time.sleep(took * (i + 0.5) / moments)
            busy = [w for w, keys in client.processing().items() if keys and w in pids]
            victim = (busy or sorted(pids))[0]
            os.killpg(os.getpgid(pids[victim]), signal.SIGKILL)
            lost.append((kind, i, bool(busy), job.is_alive()))
            workers.append(_start_worker(address))
            job.join(300)
            assert not job.is_alive() and "r" in out, (kind, i)
            if kind == "record":
                for split in ("train", "val", "test"):
                    for k in ("hidden", "proba", "token_ids", "offsets"):
                        assert np.asarray(getattr(Traces(a / "traces")[split], k)).tobytes() \
                            == np.asarray(getattr(Traces(run / "traces")[split], k)).tobytes()
            else:
                _assert_same(want, out["r"])
    # the moments fell while the commands ran, most of them while a worker was busy
    assert sum(alive for *_, alive in lost) >= 16 and sum(b for _, _, b, _ in lost) >= 8, lost
