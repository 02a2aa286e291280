"""How long each export of a 40-state Rotten Tomatoes run takes, beside ``abstract`` on the
same run in the same process (ratios, since machines are noisy).

Reuses (or builds: the default LSTM of ``stateseer demo``, trained, recorded and
abstracted into 40 states) ``--run``. Then, for every format of
:data:`stateseer.abstraction.automata.export.EXPORT_FORMATS` and for ``html``:

* ``cli_s``: ``stateseer export RUN --format F`` as a user runs it (a new process: the
  import of what the format needs is part of the cost), the median of ``--repeats``;
* ``inprocess_s``: :func:`stateseer.export_run` in this process, warm (what the explorer's
  download buttons pay), the median of ``--repeats``;
* ``ratio_to_abstract``: ``cli_s`` over ``abstract_s``, the in-process
  ``abstract_run(RUN, n_states=40)`` (no forcing, no index) measured in the same run.

Issue 53's target: every automaton export in at most 5 s on an idle machine
(``max_automaton_cli_s``).

Prints one line per format, then one JSON object with ``n_states``, ``abstract_s``,
``formats`` (objects with ``format``, ``cli_s``, ``inprocess_s``, ``ratio_to_abstract``),
``max_automaton_cli_s`` and ``target_met``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET_S = 5.0


def ensure_run(run: Path, n_states: int) -> None:
    """The demo's run, prepared as ``stateseer demo`` would (reused when it is there)."""
    from stateseer.app.workflows.prepare import prepare_run

    prepare_run(run, n_states=n_states, log=lambda line: print(f"  {line}"))


def timed_cli(args: list[str], repeats: int) -> float:
    runs = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "stateseer.app.cli", *args], check=True,
                       capture_output=True)
        runs.append(time.perf_counter() - t0)
    return statistics.median(runs)


def timed(fn, repeats: int) -> float:
    runs = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - t0)
    return statistics.median(runs)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--run", default=str(ROOT / "runs" / "rt"))
    p.add_argument("--states", type=int, default=40)
    p.add_argument("--repeats", type=int, default=3)
    a = p.parse_args()
    run = Path(a.run)
    ensure_run(run, a.states)

    import stateseer
    from stateseer.abstraction.automata.export import EXPORT_FORMATS
    from stateseer.abstraction.pipeline import abstract_run

    abstract_s = timed(lambda: abstract_run(run, n_states=a.states, save=False), 1)
    n_states = stateseer.FSM.load(run / "abstraction" / "fsm.json").n_states
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for fmt in [*EXPORT_FORMATS, "html"]:
            spec = EXPORT_FORMATS.get(fmt)
            ext = spec.suffix if spec is not None else ".html"
            out = Path(tmp) / f"fsm{ext}"
            cli_s = timed_cli(["export", str(run), "--format", fmt, "--out", str(out),
                               "--force"], a.repeats)
            inproc_s = timed(lambda f=fmt, o=out: stateseer.export_run(
                run, f, o, overwrite=True), a.repeats)
            kind = spec.kind if spec is not None else "page"
            rows.append({"format": fmt, "kind": kind, "cli_s": round(cli_s, 3),
                         "inprocess_s": round(inproc_s, 3),
                         "ratio_to_abstract": round(cli_s / abstract_s, 3)})
            print(f"{fmt:>11}: {cli_s:6.2f} s as a command, {inproc_s:6.3f} s in process "
                  f"({cli_s / abstract_s:.2f}x abstract)")
    automaton = [r["cli_s"] for r in rows if r["kind"] in ("automaton", "graph")]
    out = {"run": str(run), "n_states": n_states, "abstract_s": round(abstract_s, 3),
           "formats": rows, "max_automaton_cli_s": max(automaton),
           "target_s": TARGET_S, "target_met": max(automaton) <= TARGET_S}
    print(f"abstract: {abstract_s:.2f} s; slowest automaton export {max(automaton):.2f} s "
          f"(target {TARGET_S:.0f} s)")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
