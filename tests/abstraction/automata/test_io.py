"""Damaged run files give one-line project errors naming the file and the fix (issue 14 M6)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from stateseer.abstraction.errors import AbstractionError
from stateseer.abstraction.pipeline import Abstraction, abstract_run
from stateseer.app.workflows.exports import export_run
from stateseer.core.errors import StateseerError, TraceError
from stateseer.core.rundir import RunDir
from stateseer.core.traces import Traces
from stateseer.rnn_models.engine import record_run
from tests.conftest import one_line


@pytest.fixture(scope="module")
def abs_run(tmp_path_factory, text_run) -> Path:
    run = tmp_path_factory.mktemp("loaders") / "small"
    shutil.copytree(text_run, run, ignore=shutil.ignore_patterns("traces*", "abstraction*"))
    record_run(run)
    abstract_run(run, n_states=6)
    return run


@pytest.fixture
def damaged(tmp_path, abs_run):
    """Copy the abstracted run, then write ``content`` into ``relpath`` (None: delete it)."""

    def _damage(relpath: str, content: bytes | None) -> Path:
        run = tmp_path / "run"
        shutil.copytree(abs_run, run)
        target = run / relpath
        if content is None:
            target.unlink()
        else:
            target.write_bytes(content)
        return run

    return _damage


def _npy(a: np.ndarray) -> bytes:
    import io

    buf = io.BytesIO()
    np.save(buf, a)
    return buf.getvalue()


GARBAGE = b"\xff\xfe\x00garbage"

ABSTRACTION_DAMAGE = [
    ("abstraction/meta.json", b"[1, 2]", "not a JSON object"),
    ("abstraction/meta.json", GARBAGE, "corrupt"),
    ("abstraction/patterns.json", None, "missing"),
    ("abstraction/patterns.json", GARBAGE, "corrupt"),
    ("abstraction/patterns.json", b"[]", "not a JSON object"),
    ("abstraction/abstractor.npz", None, "missing"),
    ("abstraction/abstractor.npz", GARBAGE, "corrupt"),
    ("abstraction/abstractor.npz", _npy(np.zeros(3)), "corrupt"),
    ("abstraction/test.states.npy", None, "missing"),
    ("abstraction/test.states.npy", GARBAGE, "corrupt"),
    ("abstraction/test.states.npy", _npy(np.full(5, 999, np.int32)), "outside"),
    ("abstraction/test.simulated.npy", _npy(np.zeros((2, 2), np.int32)), "1-d integer"),
    ("abstraction/fsm.json", None, "not found"),
]


@pytest.mark.parametrize(("relpath", "content", "words"), ABSTRACTION_DAMAGE)
def test_damaged_abstraction_files(damaged, relpath, content, words):
    run = damaged(relpath, content)
    with pytest.raises(AbstractionError, match=words) as e:
        Abstraction.load(run / "abstraction")
    msg = one_line(e.value)
    assert Path(relpath).name in msg and "stateseer abstract" in msg


TRACE_DAMAGE = [
    ("traces/meta.json", b"[]", "not a JSON object"),
    ("traces/surface.json", None, "missing"),
    ("traces/surface.json", GARBAGE, "corrupt"),
    ("traces/surface.json", b"{}", "not a JSON list"),
    ("traces/initial_hidden.npy", None, "missing"),
    ("traces/initial_hidden.npy", GARBAGE, "corrupt"),
    ("traces/initial_proba.npy", _npy(np.zeros(7, np.float32)), "classes"),
]


@pytest.mark.parametrize(("relpath", "content", "words"), TRACE_DAMAGE)
def test_damaged_trace_files(damaged, relpath, content, words):
    run = damaged(relpath, content)
    with pytest.raises(TraceError, match=words) as e:
        Traces(run / "traces")
    msg = one_line(e.value)
    assert Path(relpath).name in msg and "stateseer record" in msg


def _split_damage(split_dir: Path, name: str) -> None:
    """Write one inconsistent array into a recorded split."""
    a = np.load(split_dir / f"{name}.npy")
    if name == "labels":
        a = a.copy()
        a[0] = 9
    elif name == "token_ids":
        a = a.copy()
        a[0] = -3
    elif name == "surface_ids":
        a = a.copy()
        a[0] = 10**8
    elif name == "offsets":
        a = a.copy()
        a[1] = a[2] + 1
    elif name == "hidden":
        a = a.astype(np.int8)
    elif name == "proba":
        a = a.copy()
        a[3, 0] = np.nan
    np.save(split_dir / f"{name}.npy", a)


@pytest.mark.parametrize(("name", "words"), [
    ("labels", "outside"), ("token_ids", "outside"), ("surface_ids", "outside"),
    ("offsets", "corrupt|shape"), ("hidden", "not floats"), ("proba", "NaN")])
def test_inconsistent_split_arrays(tmp_path, abs_run, name, words):
    run = tmp_path / "run"
    shutil.copytree(abs_run, run)
    _split_damage(Traces(run / "traces").shards("test")[0].path, name)
    traces = Traces(run / "traces")
    with pytest.raises(TraceError, match=words) as e:
        traces["test"]
    assert "stateseer record" in one_line(e.value)
    traces["train"]  # the other splits still load


def test_token_ids_beyond_the_vocabulary(tmp_path, abs_run):
    run = tmp_path / "run"
    shutil.copytree(abs_run, run)
    d = Traces(run / "traces").shards("val")[0].path
    ids = np.load(d / "token_ids.npy")
    ids[0] = 10**6
    np.save(d / "token_ids.npy", ids)
    with pytest.raises(AbstractionError, match="vocabulary") as e:
        abstract_run(run, n_states=4, save=False)
    one_line(e.value)


@pytest.mark.parametrize("name", ["metrics.json", "config.json"])
def test_run_json_that_is_a_list(tmp_path, name):
    run = RunDir(tmp_path)
    (tmp_path / name).write_text("[1, 2]")
    with pytest.raises(StateseerError, match="not a JSON object") as e:
        run.update_metrics(x=1) if name == "metrics.json" else run.config
    one_line(e.value)


def test_graphml_export_refuses_nan_coordinates(tmp_path, abs_run):
    run = tmp_path / "run"
    shutil.copytree(abs_run, run)
    doc = json.loads((run / "abstraction" / "fsm.json").read_text())
    doc["states"][1]["coords"][0] = float("nan")
    (run / "abstraction" / "fsm.json").write_text(json.dumps(doc))
    with pytest.raises(AbstractionError, match="finite") as e:
        export_run(run, "graphml", tmp_path / "g.graphml")
    one_line(e.value)
    assert not (tmp_path / "g.graphml").exists()
