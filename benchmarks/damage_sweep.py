"""Every damaged run file against every command: one line each, never a traceback.

The fuzz tests in ``tests/app/test_cli.py`` draw 25 cases of (file, damage, command) each
run; this script tries all of them. A small real run is built (a 2-layer GRU trained on
1,500 Rotten Tomatoes snippets, recorded, abstracted into 12 states, forcing figures and
the nearest-context index written), then for every file of the run directory that a
command reads, every damage (deleted, emptied, 64 bytes of garbage, a JSON list, a JSON
object of the wrong shape, cut to a third) and every command (``force``, ``index``,
``export`` as JSON, traces CSV and GraphML, ``abstract``, ``sweep``, ``compare``,
``record``), a fresh copy is damaged and the command run through ``stateseer.app.cli.main``.

A case is *bad* when the output holds a traceback, the exit status is neither 0 nor 2, an
error is not exactly one ``stateseer: error:`` line, or the line is the CLI's catch-all
("stopped on unexpected input": a loader that did not wrap its own failure).

Prints one line per bad case, then one JSON object with ``cases``, ``bad``, ``ok_exit``
(commands that succeeded: the damaged file was rebuilt or not needed), ``error_exit``
and ``seconds``. Baseline: none is needed — the figure is a count that must be 0.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import io
import itertools
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

FILES = ["config.json", "metrics.json", "vocab.json", "model.pt", "traces/meta.json",
         "traces/surface.json", "traces/initial_hidden.npy", "traces/initial_proba.npy",
         "traces/test/shards/00000/hidden.npy", "traces/test/shards/00000/texts.json",
         "traces/test/shards/00000/proba.npy", "traces/test/shards/00000/offsets.npy",
         "traces/test/shards/00000/token_ids.npy", "traces/test/shards/00000/labels.npy",
         "traces/train/shards/00000/hidden.npy", "traces/train/shards/00000/token_ids.npy",
         "abstraction/meta.json", "abstraction/fsm.json", "abstraction/patterns.json",
         "abstraction/abstractor.npz", "abstraction/test.states.npy",
         "abstraction/train.states.npy", "abstraction/centroids.npy",
         "index/train.contexts.json", "index/train.contexts.npz"]
DAMAGES = ("delete", "empty", "garbage", "json-list", "json-dict", "truncate")
COMMANDS = [["force"], ["index"], ["export", "--format", "json", "--out", "{d}/fsm.json"],
            ["export", "--format", "traces-csv", "--out", "{d}/t.csv"],
            ["export", "--format", "graphml", "--out", "{d}/g.graphml"],
            ["abstract", "--states", "4", "--no-index"],
            ["sweep", "--candidates", "3", "--out", "{d}/sw"],
            ["compare", "{src}", "--out", "{d}/c.json"], ["record"]]


def build(root: Path) -> Path:
    """The small analysed run (the test suite's ``analysed_run``, built the same way)."""
    from stateseer.abstraction.pipeline import abstract_run
    from stateseer.app.workflows.contexts import context_index
    from stateseer.app.workflows.forcing import measure_forcing
    from stateseer.core.traces import Traces
    from stateseer.rnn_models.datasets import load_dataset
    from stateseer.rnn_models.engine import record_run
    from stateseer.rnn_models.run import ModelRun
    from stateseer.rnn_models.train import TrainConfig, train_run

    ds = load_dataset("rotten_tomatoes")
    data = root / "rt_small.csv"
    with data.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["review", "sentiment"])
        for i in range(1500):
            w.writerow([ds.texts[i * 8], ds.classes[ds.labels[i * 8]]])
    run = root / "analysed"
    train_run(TrainConfig(dataset=f"csv:{data}", arch="gru", text_col="review",
                          label_col="sentiment", epochs=2, hidden=32, embed=32, layers=2),
              run, progress=False)
    record_run(run)
    abstract_run(run, n_states=12)
    measure_forcing(run)
    context_index(ModelRun(run), Traces(run / "traces"))
    return run


def damage(path: Path, how: str) -> None:
    data = path.read_bytes()
    if how == "delete":
        path.unlink()
    elif how == "empty":
        path.write_bytes(b"")
    elif how == "garbage":
        path.write_bytes(bytes((i * 37 + 11) % 256 for i in range(64)))
    elif how == "json-list":
        path.write_text("[1, 2, 3]")
    elif how == "json-dict":
        path.write_text('{"a": 1}')
    else:
        path.write_bytes(data[: max(1, len(data) // 3)])


def verdict(rc: object, err: str) -> str | None:
    """Why a case is bad, or None."""
    lines = [ln for ln in err.splitlines() if ln.startswith("stateseer: error")]
    if "Traceback" in err:
        return "traceback"
    if rc not in (0, 2):
        return f"exit status {rc}"
    if rc == 2 and len(lines) != 1:
        return f"{len(lines)} error lines"
    if any("unexpected input" in ln for ln in lines):
        return "the CLI's catch-all"
    return None


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--commands", default=",".join(sorted({c[0] for c in COMMANDS})),
                   help="commands to try, separated by commas (default: all)")
    args = p.parse_args()
    chosen = set(args.commands.split(","))
    from stateseer.app.cli.main import main as cli

    os.environ.pop("STATESEER_TRACEBACK", None)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="damage-sweep-") as tmp:
        root = Path(tmp)
        src = build(root)
        files = [f for f in FILES if (src / f).exists()]
        counts = {"cases": 0, "bad": 0, "ok_exit": 0, "error_exit": 0}
        for f, how, cmd in itertools.product(files, DAMAGES, COMMANDS):
            if cmd[0] not in chosen:
                continue
            work = root / "work"
            shutil.rmtree(work, ignore_errors=True)
            work.mkdir()
            run = work / "run"
            shutil.copytree(src, run)
            damage(run / f, how)
            argv = [cmd[0], str(run), *[a.replace("{d}", str(work)).replace("{src}", str(src))
                                        for a in cmd[1:]]]
            err = io.StringIO()
            with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
                try:
                    rc: object = cli(argv)
                except BaseException as exc:  # counted as a bad case, not hidden
                    rc = f"raised {type(exc).__name__}"
            counts["cases"] += 1
            counts["ok_exit" if rc == 0 else "error_exit"] += 1
            why = verdict(rc, err.getvalue())
            if why:
                counts["bad"] += 1
                first = (err.getvalue().strip().splitlines() or [""])[-1][:200]
                print(f"BAD {f} {how} {cmd[0]}: {why}: {first}", flush=True)
    print(json.dumps({**counts, "files": len(files), "damages": len(DAMAGES),
                      "commands": sorted(chosen), "seconds": round(time.perf_counter() - t0, 1)}))


if __name__ == "__main__":
    main()
