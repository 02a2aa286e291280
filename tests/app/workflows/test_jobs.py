"""The job runner the explorer starts long work with: progress read from the command's
file, one job at a time, a failure's reason, and a cancel that leaves no process behind."""

from __future__ import annotations

import json
import sys
import time

import psutil
import pytest

from stateseer.app.workflows.jobs import JobRunner, repair_command
from stateseer.core.errors import StateseerError
from tests.conftest import one_line

# a command that reports progress, starts a grandchild, and sleeps
WORKER = """
import json, subprocess, sys, time
sub = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
print(sub.pid, file=sys.stderr, flush=True)
json.dump({"stage": "training", "done": 2, "total": 6}, open(sys.argv[1], "w"))
time.sleep(60)
"""


def _wait(pred, timeout=20.0):
    end = time.time() + timeout
    while time.time() < end:
        if pred():
            return True
        time.sleep(0.05)
    return False


def test_a_job_reports_progress_and_its_cancel_kills_the_whole_group(tmp_path):
    jobs = JobRunner(tmp_path)
    assert jobs.status() == {"state": "idle"}
    job = jobs.start("repair", [sys.executable, "-c", WORKER, "{progress}"],
                     info={"finding": 1})
    assert _wait(lambda: jobs.status()["stage"] == "training")
    st = jobs.status()
    assert st["state"] == "running" and (st["done"], st["total"]) == (2, 6)
    assert st["info"] == {"finding": 1} and st["pid"] == job.pid
    assert _wait(lambda: job.log_path.read_text().strip() != "")
    grandchild = int(job.log_path.read_text().split()[0])
    assert psutil.pid_exists(grandchild)
    with pytest.raises(StateseerError, match="still running") as e:
        jobs.start("repair", [sys.executable, "-c", "pass"])
    one_line(e.value)
    assert jobs.cancel()["state"] == "cancelled"
    assert not psutil.pid_exists(job.pid)
    assert _wait(lambda: not psutil.pid_exists(grandchild) or
                 psutil.Process(grandchild).status() == psutil.STATUS_ZOMBIE)


def test_a_failed_job_says_why_and_a_finished_one_lets_the_next_start(tmp_path):
    jobs = JobRunner(tmp_path)
    jobs.start("repair", [sys.executable, "-c",
                          "import sys; sys.exit('stateseer: there is no finding 9')"])
    assert _wait(lambda: jobs.status()["state"] != "running")
    st = jobs.status()
    assert st["state"] == "failed" and st["message"] == "stateseer: there is no finding 9"
    jobs.start("repair", [sys.executable, "-c", "pass"])
    assert _wait(lambda: jobs.status()["state"] == "done")


def test_the_repair_command_is_the_command_line_with_a_progress_file(tmp_path):
    argv = repair_command(tmp_path / "run", 2, "drop", tmp_path / "new")
    assert argv[:3] == [sys.executable, "-m", "stateseer"] and "--quiet" in argv
    assert argv[argv.index("--progress-json") + 1] == "{progress}"
    assert json.loads(json.dumps(argv)) == argv
    assert "--control" not in argv
    from stateseer.app.cli.main import build_parser

    ticked = repair_command(tmp_path / "run", 2, "drop", tmp_path / "new", control=True)
    args = build_parser().parse_args(ticked[3:])  # the CLI takes what the job runs
    assert args.control and args.action == "drop" and args.finding == 2 and args.seeds == 1
    over = repair_command(tmp_path / "run", 2, "drop", tmp_path / "new", seeds=3)
    args = build_parser().parse_args(over[3:])
    assert args.seeds == 3 and not args.control


def test_a_temporary_runner_removes_its_folder_unless_its_job_still_runs():
    import gc
    import shutil

    idle = JobRunner.temporary()
    folder = idle.work_dir
    assert folder.is_dir() and folder.name.startswith("stateseer-jobs-")
    del idle
    gc.collect()
    assert not folder.exists()  # each server used to leave one behind in /tmp

    busy = JobRunner.temporary()
    folder = busy.work_dir
    busy.start("sleep", [sys.executable, "-c", "import time; time.sleep(30)"])
    job = busy.job
    del busy
    gc.collect()
    try:
        assert folder.is_dir()  # the running job's log and progress file stay
    finally:
        job.process.kill()
        job.process.wait()
        shutil.rmtree(folder, ignore_errors=True)
