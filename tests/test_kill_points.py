"""Crash safety of run directories (issue 14, M2).

A reduced run of ``benchmarks/kill_points.py`` on a 120-string Tomita-1 run: SIGKILL at
every write point of ``record``, ``abstract`` and ``train --force`` that touches a path a
reader opens, and at one other point of each, then the run must load in its old or its
new state, commands on it must not crash and a rerun must succeed. The directory swap it
relies on (:func:`stateseer.core.atomic.swap_dir`) is tested directly too.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="the kill-point launcher forks and reads /proc")


def _tree(path: Path) -> dict[str, str]:
    return {str(p.relative_to(path)): p.read_text() for p in sorted(path.rglob("*"))
            if p.is_file()}


def test_swap_dir_exchanges_a_directory_whole(tmp_path):
    from stateseer.core.atomic import swap_dir

    target, new = tmp_path / "traces", tmp_path / "traces.tmp"
    (target / "a").mkdir(parents=True)
    (target / "meta.json").write_text("old")
    (target / "a" / "x.npy").write_text("old x")
    new.mkdir()
    (new / "meta.json").write_text("new")
    assert swap_dir(new, target) == target
    assert sorted(p.name for p in tmp_path.iterdir()) == ["traces"]
    assert _tree(target) == {"meta.json": "new"}
    new.mkdir()
    (new / "meta.json").write_text("newer")
    target.rename(tmp_path / "gone")  # no target yet: a plain rename
    swap_dir(new, target)
    assert _tree(target) == {"meta.json": "newer"}


def test_swap_dir_replaces_a_link_not_what_it_points_to(tmp_path):
    from stateseer.core.atomic import swap_dir

    real, link, new = tmp_path / "real", tmp_path / "traces", tmp_path / "traces.tmp"
    real.mkdir()
    (real / "meta.json").write_text("old")
    link.symlink_to(real, target_is_directory=True)
    new.mkdir()
    (new / "meta.json").write_text("new")
    swap_dir(new, link)
    assert not link.is_symlink() and _tree(link) == {"meta.json": "new"}
    assert _tree(real) == {"meta.json": "old"} and not new.exists()


def test_swap_dir_without_an_atomic_exchange_renames_aside(tmp_path, monkeypatch):
    from stateseer.core import atomic

    monkeypatch.setattr(atomic, "_exchange", lambda a, b: False)  # e.g. not Linux
    target, new = tmp_path / "abstraction", tmp_path / "abstraction.tmp"
    target.mkdir()
    (target / "meta.json").write_text("old")
    (tmp_path / "abstraction.old").mkdir()  # left by an earlier crash
    new.mkdir()
    (new / "meta.json").write_text("new")
    atomic.swap_dir(new, target)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["abstraction"]
    assert _tree(target) == {"meta.json": "new"}


def _tiny_config(tmp_path: Path) -> dict:
    """TrainConfig keywords of a one-epoch GRU on the kill-point script's Tomita-1 CSV."""
    from stateseer.testing import tomita1_csv

    data = f"csv:{tomita1_csv(tmp_path / 'tomita1.csv')}"
    return dict(dataset=data, arch="gru", epochs=1, embed=4, hidden=3, tokenizer="char")


@linux_only
def test_train_force_swaps_the_run_in_and_keeps_the_users_files(tmp_path):
    from stateseer.rnn_models.loading import load_model
    from stateseer.rnn_models.train import TrainConfig, train_run

    cfg = _tiny_config(tmp_path)
    run = train_run(TrainConfig(**cfg, seed=0), tmp_path / "run", progress=False)
    (run.path / "notes.txt").write_text("mine")
    (run.path / "exports").mkdir()
    (run.path / "exports" / "fsm.dot").write_text("digraph {}")
    for derived in ("traces", "abstraction", "index"):
        (run.path / derived).mkdir()
        (run.path / derived / "meta.json").write_text("{}")
    old_model = run.model_path.read_bytes()
    link = tmp_path / "link"
    link.symlink_to(run.path, target_is_directory=True)
    train_run(TrainConfig(**cfg, seed=1), link, force=True, progress=False)
    assert link.is_symlink() and link.resolve() == run.path.resolve()  # written through it
    names = sorted(p.name for p in run.path.iterdir())
    assert names == ["config.json", "exports", "metrics.json", "model.pt", "notes.txt",
                     "vocab.json"]  # the old model's traces, abstraction and index are gone
    assert (run.path / "notes.txt").read_text() == "mine"
    assert (run.path / "exports" / "fsm.dot").read_text() == "digraph {}"
    assert run.model_path.read_bytes() != old_model
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link", "run", "tomita1.csv"]
    load_model(run.path)


@linux_only
def test_train_force_into_the_working_directory_keeps_it(tmp_path, monkeypatch):
    """`--out .` from inside the run: the directory a shell sits in is not swapped away."""
    from stateseer.rnn_models.loading import load_model
    from stateseer.rnn_models.train import TrainConfig, train_run

    cfg = _tiny_config(tmp_path)
    run = tmp_path / "run"
    run.mkdir()
    monkeypatch.chdir(run)
    inode = run.stat().st_ino
    train_run(TrainConfig(**cfg, seed=0), ".", progress=False)
    (run / "notes.txt").write_text("mine")
    (run / "traces").mkdir()
    train_run(TrainConfig(**cfg, seed=1), ".", force=True, progress=False)
    assert run.stat().st_ino == inode and Path.cwd() == run.resolve()
    assert sorted(p.name for p in run.iterdir()) == ["config.json", "metrics.json",
                                                    "model.pt", "notes.txt", "vocab.json"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run", "tomita1.csv"]
    load_model(".")


@pytest.fixture(scope="module")
def kill_points_result(tmp_path_factory):
    """One reduced run of the benchmark for the three commands (one warm-up)."""
    if not sys.platform.startswith("linux"):
        pytest.skip("the kill-point launcher forks and reads /proc")
    d = tmp_path_factory.mktemp("kill-points")
    out = d / "kill_points.json"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "kill_points.py"), "--sample", "1",
         "--quiet", "--json", str(out)],
        capture_output=True, text=True, env=env, cwd=d, timeout=1800)
    assert out.exists(), proc.stderr[-3000:]
    result = json.loads(out.read_text())
    assert json.loads(proc.stdout.splitlines()[-1])["corrupt"] == result["corrupt"]
    return {r["command"].split()[0]: r for r in result["commands"]}


def _check(r: dict) -> None:
    assert r["write_points"] >= 10  # every file, rename, fsync ... is a point
    assert r["checked"] >= 3 and r["old"] >= 1 and r["new"] >= 1, r
    assert r["corrupt"] == 0, [f["problems"] for f in r["failures"]]


@linux_only
@pytest.mark.parametrize("command", ["abstract", "train"])
def test_a_kill_at_a_write_point_leaves_the_old_or_the_new_run(kill_points_result, command):
    _check(kill_points_result[command])


@linux_only
def test_a_kill_during_record_leaves_the_old_or_the_new_traces(kill_points_result):
    _check(kill_points_result["record"])
