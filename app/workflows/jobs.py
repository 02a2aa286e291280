"""Long work started from the explorer, run as a separate process that shows its progress
and can be cancelled.

A :class:`JobRunner` starts a ``python -m stateseer ...`` command in its own process group
(the same code as the command line), reads the progress the command keeps in a JSON file
(``--progress-json``), and cancels it by killing the whole group, so that nothing the job
started (data loaders, BLAS threads) outlives it. One job runs at a time per runner: a
second start is refused in one line while the first runs. The page stays usable: it only
polls :meth:`JobRunner.status`.

Examples
--------
>>> import sys, tempfile
>>> jobs = JobRunner(tempfile.mkdtemp())
>>> job = jobs.start("sleep", [sys.executable, "-c", "import time; time.sleep(30)"])
>>> jobs.status()["state"]
'running'
>>> jobs.cancel()["state"]
'cancelled'
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stateseer.core.errors import StateseerError

__all__ = ["Job", "JobRunner", "dfa_command", "force_command", "repair_command",
           "sweep_command"]


@dataclass
class Job:
    """One started command.

    Attributes
    ----------
    kind : str
        What it does (``repair``); shown on the page.
    argv : list of str
    process : subprocess.Popen
    progress_path, log_path : Path
        The progress JSON the command keeps, and its stderr.
    info : dict
        What the page needs when it ends (e.g. the new run's path).
    """

    kind: str
    argv: list[str]
    process: subprocess.Popen
    progress_path: Path
    log_path: Path
    info: dict[str, Any] = field(default_factory=dict)
    started: float = field(default_factory=time.time)
    cancelled: bool = False

    @property
    def pid(self) -> int:
        return self.process.pid


class JobRunner:
    """Runs one job at a time in a separate process group.

    Parameters
    ----------
    work_dir : str or Path
        Where each job's progress file and log are kept.
    """

    def __init__(self, work_dir: str | Path) -> None:
        self.work_dir = Path(work_dir)
        self.job: Job | None = None
        self._lock = threading.Lock()
        self._process: list[subprocess.Popen | None] = [None]  # seen by the clean-up

    @classmethod
    def temporary(cls, prefix: str = "stateseer-jobs-") -> JobRunner:
        """A runner in a new temporary folder, removed when the runner is collected or
        the process exits, unless a job started there still runs (its log and progress
        file stay with it)."""
        import tempfile
        import weakref

        runner = cls(tempfile.mkdtemp(prefix=prefix))
        weakref.finalize(runner, _remove_unless_running, runner.work_dir, runner._process)
        return runner

    def start(self, kind: str, argv: Sequence[str], *,
              info: dict[str, Any] | None = None) -> Job:
        """Start ``argv`` (its progress file is appended as ``--progress-json FILE`` when
        the command takes one: pass ``{progress}`` in ``argv`` where it goes).

        Raises
        ------
        StateseerError
            A job is still running (one line).
        """
        with self._lock:
            if self.job is not None and self.job.process.poll() is None:
                raise StateseerError(f"a {self.job.kind} is still running; wait for it or "
                                     "cancel it first")
            self.work_dir.mkdir(parents=True, exist_ok=True)
            stamp = f"{kind}-{time.time_ns()}"
            progress = self.work_dir / f"{stamp}.progress.json"
            log = self.work_dir / f"{stamp}.log"
            argv = [a.replace("{progress}", str(progress)) for a in argv]
            env = {**os.environ, "PYTHONUNBUFFERED": "1"}
            with log.open("wb") as fh:
                proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=fh,
                                        stdin=subprocess.DEVNULL, start_new_session=True,
                                        env=env)
            self.job = Job(kind, list(argv), proc, progress, log, dict(info or {}))
            self._process[0] = proc
            return self.job

    def status(self) -> dict[str, Any]:
        """``state`` (``idle``, ``running``, ``done``, ``failed``, ``cancelled``), the
        progress (``stage``, ``done``, ``total``), ``message`` (the last line the command
        wrote, for a failure), ``seconds`` and the job's ``info``."""
        job = self.job
        if job is None:
            return {"state": "idle"}
        rc = job.process.poll()
        state = ("running" if rc is None else "cancelled" if job.cancelled
                 else "done" if rc == 0 else "failed")
        out = {"state": state, "kind": job.kind, "pid": job.pid, "info": job.info,
               "seconds": round(time.time() - job.started, 1), **_read_progress(job)}
        if state == "failed":
            out["message"] = _last_line(job.log_path) or f"exited with status {rc}"
        return out

    def cancel(self) -> dict[str, Any]:
        """Kill the running job's process group (SIGTERM, then SIGKILL after 5 s) and wait
        for it; nothing happens when no job runs."""
        job = self.job
        if job is not None and job.process.poll() is None:
            job.cancelled = True
            _kill_group(job.process)
        return self.status()


def _remove_unless_running(work_dir: Path, process: list[subprocess.Popen | None]) -> None:
    if process[0] is None or process[0].poll() is not None:
        shutil.rmtree(work_dir, ignore_errors=True)


def _kill_group(proc: subprocess.Popen) -> None:
    for sig, wait in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def _read_progress(job: Job) -> dict[str, Any]:
    try:
        doc = json.loads(job.progress_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {"stage": "starting", "done": 0, "total": 1}
    if not isinstance(doc, dict):
        return {"stage": "starting", "done": 0, "total": 1}
    return {"stage": str(doc.get("stage", "")), "done": int(doc.get("done", 0)),
            "total": max(1, int(doc.get("total", 1)))}


def _last_line(path: Path, limit: int = 4096) -> str:
    try:
        with path.open("rb") as fh:
            fh.seek(max(0, path.stat().st_size - limit))
            lines = fh.read().decode(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return lines[-1].strip() if lines else ""


def repair_command(run: str | Path, finding: int, action: str, out: str | Path, *,
                   control: bool = False, seeds: int = 1) -> list[str]:
    """The ``stateseer repair`` command line a job runs (this Python, ``-m stateseer``;
    ``control``: with ``--control``; ``seeds`` > 1: with ``--seeds``)."""
    return [sys.executable, "-m", "stateseer", "repair", str(run), "--finding", str(finding),
            "--action", action, "--out", str(out), *(["--control"] if control else []),
            *(["--seeds", str(seeds)] if seeds > 1 else []),
            "--quiet", "--progress-json", "{progress}"]


def sweep_command(run: str | Path) -> list[str]:
    """The ``stateseer sweep`` command line a job runs (the default candidates, forcing
    included, into ``RUN/sweep``)."""
    return [sys.executable, "-m", "stateseer", "sweep", str(run), "--progress-json",
            "{progress}"]


def force_command(run: str | Path) -> list[str]:
    """The ``stateseer force`` command line a job runs (per-state forcing agreement on the
    test split, into ``RUN/metrics.json``)."""
    return [sys.executable, "-m", "stateseer", "force", str(run)]


def dfa_command(run: str | Path) -> list[str]:
    """The ``stateseer extract-dfa`` command line a job runs (the exact automaton, into
    ``RUN/abstraction/dfa.json``)."""
    return [sys.executable, "-m", "stateseer", "extract-dfa", str(run)]
