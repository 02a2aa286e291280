"""Durability and throughput of the study log: simulated participants, then SIGKILL.

Starts a real study server (``stateseer study`` in a subprocess, 127.0.0.1, a free port;
the harness is :mod:`stateseer.testing`) on a run, registers 20 simulated participants
(one thread each, keep-alive HTTP, each with its own link secret), each POSTing 1,000
events to ``/study/event``; once ``--kill-at`` of all events are acknowledged (default
0.8: mid-stream) the server is killed with SIGKILL. Then the database is opened: every
acknowledged event must be in it, unchanged, and ``PRAGMA integrity_check`` must say
``ok``.

Also, in the same run and without HTTP: the study log written from as many threads
(group commit, ``synchronous=FULL``) beside the naive way (a lock and one FULL commit per
event), to show what group commit buys; over HTTP the threaded development server, not
the log, sets the pace.

Last line: JSON with ``n_participants``, ``n_events_planned``, ``n_events_acked``,
``n_events_in_db``, ``lost``, ``events_per_s``, ``integrity`` and the baseline figures.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def find_run(run: str | None) -> Path:
    """The run to show: ``--run``, else runs/rt, else a small Tomita 3 run built now."""
    if run:
        return Path(run)
    rt = ROOT / "runs" / "rt"
    if (rt / "abstraction" / "meta.json").exists():
        return rt
    out = ROOT / "runs" / "study-bench"
    if not (out / "abstraction" / "meta.json").exists():
        from stateseer.abstraction.pipeline import abstract_run
        from stateseer.rnn_models.engine import record_run
        from stateseer.rnn_models.train import TrainConfig, train_run

        train_run(TrainConfig(dataset="tomita3", arch="lstm"), out, force=True,
                  progress=False)
        record_run(out)
        abstract_run(out, n_states=8)
    return out


def in_process(folder: Path, n_threads: int, n_events: int) -> tuple[float, float]:
    """Events/s written from ``n_threads`` threads without HTTP, synchronous=FULL both:
    the study log (group commit) and the naive way (a lock, one commit per event)."""
    import sqlite3

    from stateseer.app.study.store import StudyLog

    log = StudyLog(folder / "inproc.sqlite", study="inproc")
    for p in range(n_threads):
        log.join(f"g{p}", lambda counts: ("full", "fixed"))
    db = folder / "naive.sqlite"
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("CREATE TABLE events(id INTEGER PRIMARY KEY, pid TEXT, ts TEXT, kind TEXT,"
                 " payload TEXT)")
    conn.close()
    lock = threading.Lock()

    def grouped(p: int) -> None:
        for k in range(n_events):
            log.log(f"g{p}", "click", {"seq": k})

    def naive(p: int) -> None:
        c = sqlite3.connect(db, timeout=60, check_same_thread=False)
        c.execute("PRAGMA synchronous=FULL")
        for k in range(n_events):
            with lock, c:
                c.execute("INSERT INTO events(pid, ts, kind, payload) VALUES (?, ?, ?, ?)",
                          (f"n{p}", time.time(), "click", json.dumps({"seq": k})))
        c.close()

    rates = []
    for fn in (grouped, naive):
        threads = [threading.Thread(target=fn, args=(p,)) for p in range(n_threads)]
        t0 = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        rates.append(n_threads * n_events / (time.perf_counter() - t0))
    log.close()
    return rates[0], rates[1]


def main() -> None:
    from stateseer.testing import StudyServer, audit, simulate

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--participants", type=int, default=20)
    ap.add_argument("--events", type=int, default=1000, help="events per participant")
    ap.add_argument("--kill-at", type=float, default=0.8,
                    help="SIGKILL once this share of all events is acknowledged "
                    "(1.0: right after the last)")
    ap.add_argument("--run", help="run directory to serve (default runs/rt)")
    args = ap.parse_args()

    run = find_run(args.run)
    with tempfile.TemporaryDirectory(prefix="study-bench-") as tmp:
        folder = Path(tmp)
        study = folder / "study.json"
        study.write_text(json.dumps({"study": "bench", "run": str(run.resolve()),
                                     "tasks": [{"prompt": "Explore."}]}))
        db = folder / "log.sqlite"
        t0 = time.perf_counter()
        with StudyServer(study, db, log_path=folder / "server.log") as server:
            start_s = time.perf_counter() - t0
            kill_at = args.kill_at if args.kill_at < 1 else None
            ack, wall = simulate(server.port, args.participants, args.events,
                                 kill_at=kill_at, kill=server.kill)
            code = server.proc.returncode
        report = audit(db, ack)
        span = (ack.last_ack or 0) - (ack.first_ack or 0)
        grouped, naive = in_process(folder, args.participants, max(50, args.events // 4))
    result = {
        "n_participants": args.participants,
        "n_events_planned": args.participants * args.events,
        "n_events_sent": ack.sent,
        **report,
        "http_errors": ack.errors,
        "server_exit": code,
        "killed_after_s": round(wall, 2),
        "events_per_s": round(len(ack.acked) / span, 1) if span > 0 else None,
        "server_start_s": round(start_s, 2),
        "synchronous": "FULL",
        "log_in_process_events_per_s": round(grouped, 1),
        "baseline_commit_per_event_in_process_events_per_s": round(naive, 1),
        "run": str(run),
    }
    print(f"acknowledged {report['n_events_acked']:,} of {ack.sent:,} sent events before "
          f"SIGKILL; {report['lost']} lost; integrity {report['integrity']}")
    print(json.dumps(result))
    if report["lost"] or report["integrity"] != "ok":
        sys.exit(1)


if __name__ == "__main__":
    main()
