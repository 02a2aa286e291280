"""``stateseer repair`` killed (SIGKILL) at ten moments spread over its work leaves no
half-written output, and a rerun with the same ``--out`` works (#53).

The moments are the stages ``--progress-json`` reports (each epoch of the training, the
recording, abstracting, diagnosing and comparing, each extra seed's model): the command
is killed as soon as the file names the stage, so every attempt dies at a different
point of the work. After each kill ``--out`` is either absent or a whole repaired run
(never a folder without ``repair.json``); the stray ``OUT.tmp`` is the next command's to
remove.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not sys.platform.startswith("linux"),
                                 reason="SIGKILL of a child process")]


@pytest.fixture(scope="module")
def diagnosed(tmp_path_factory) -> Path:
    from stateseer import TrainConfig, record_run, train_run
    from stateseer.app.workflows.diagnose import diagnose_run
    from stateseer.testing import sentiment_csv

    where = tmp_path_factory.mktemp("kills")
    data = sentiment_csv(where / "data.csv", shortcut="frankly")
    run = train_run(TrainConfig(dataset=f"csv:{data}", arch="gru", epochs=3, hidden=16,
                                embed=16), where / "run", progress=False)
    record_run(run)
    doc = diagnose_run(run.path)
    assert "counterfactual" in doc["findings"][0]["actions"]
    return run.path


def _repair(run: Path, out: Path, progress: Path, *extra: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "stateseer.app.cli", "repair", str(run), "--finding", "1",
         "--action", "counterfactual", "--out", str(out), "--seeds", "2", "--quiet",
         "--progress-json", str(progress), *extra],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "OMP_NUM_THREADS": "1"})


def _stage(progress: Path) -> tuple | None:
    try:
        d = json.loads(progress.read_text())
    except (OSError, ValueError):
        return None
    return d["stage"], d["done"]


def test_ten_kills_leave_nothing_half_written_and_a_rerun_works(diagnosed, tmp_path):
    out, progress = tmp_path / "new", tmp_path / "progress.json"
    seen: list[tuple] = []
    for _ in range(10):
        progress.unlink(missing_ok=True)
        proc = _repair(diagnosed, out, progress, "--force")  # a whole run is replaced
        killed_at = None
        while proc.poll() is None:
            st = _stage(progress)
            if st is not None and st not in seen:  # a moment not killed at before
                proc.send_signal(signal.SIGKILL)
                killed_at = st
                break
            time.sleep(0.01)
        proc.wait()
        if killed_at is None:  # finished before a new moment came: every moment is used
            break
        seen.append(killed_at)
        assert not out.exists() or (out / "repair.json").is_file(), \
            f"killed at {killed_at}: {out} is half-written"
    assert len(seen) >= 8, seen  # the kills are spread over the work
    assert {s for s, _ in seen} >= {"training", "recording", "diagnosing", "seeds"}
    progress.unlink(missing_ok=True)
    stray = (tmp_path / "new.tmp").exists()  # the last kill may land after the swap
    done = _repair(diagnosed, out, progress, "--force")
    stdout, stderr = done.communicate(timeout=600)
    assert done.returncode == 0, stderr
    assert ("removed" in stderr) == stray  # the last kill's stray OUT.tmp, said in one line
    doc = json.loads((out / "repair.json").read_text())
    assert doc["seeds"]["seeds"] == [0, 1000] and json.loads(stdout.splitlines()[-1])
    assert not (tmp_path / "new.tmp").exists()
    # and a finished run is replaced only with --force, whole
    again = _repair(diagnosed, out, progress)
    assert again.wait(timeout=120) == 2 and "--force" in again.stderr.read()
