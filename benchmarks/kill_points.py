"""Crash safety of a run directory: SIGKILL at every write point of record, abstract, train.

Issue 14 (M2) asks that a kill at any point of ``stateseer record``, ``abstract`` and
``train --force`` leaves the run in its old state or its new one, both loadable. This
script checks it from outside the product code: a small launcher process imports
stateseer and runs every command once on a scratch run (warm-up), then for every trial
forks a child that monkeypatches the write primitives — ``open``/``io.open``/``os.open``
for writing (a point before and one just after the file is created or truncated),
``os.fsync``, ``os.replace``, ``os.rename`` (``Path.rename`` and ``Path.replace`` call
them), ``os.unlink``/``os.remove``/``os.rmdir`` (``shutil.rmtree`` and ``Path.unlink``
call them, one point per file removed), ``os.mkdir``, ``os.link``, ``os.chmod``,
``os.truncate``/``os.ftruncate`` and the atomic directory exchange of
:mod:`stateseer.core.atomic` — counts the calls that touch the trial's directory and
sends itself ``SIGKILL`` at the k-th, then runs ``stateseer.main`` with the command.
k = 1, 2, … until the command completes unkilled (that count is the command's write
points).

After every kill the run is checked in a fresh child:

- ``config.json``/``vocab.json``/``model.pt``: ``load_model`` (vocabulary hash in the
  config), the vocabulary loads;
- ``traces/``: ``Traces`` opens and validates every split, recorded from this ``model.pt``;
- ``abstraction/``: ``Abstraction.load`` works and its state arrays match the traces;
- ``metrics.json`` reads; the nearest-context index (a cache) loads or is absent;
- the state (model, traces, abstraction fingerprints) equals the old one or the new one;
- ``stateseer export RUN --format json`` and ``--format traces-csv`` end without a
  traceback (``STATESEER_TRACEBACK=1``: an error that is not the project's own raises);
- the command, run again without kills, succeeds and leaves the new state.

A trial failing any of these counts as a corrupt run. ``metrics.json``'s copy of the
abstraction figures lagging the abstraction (a kill between the two writes of
``abstract``) is reported apart as ``stale_summary``: it is a summary that the rerun
rewrites, the abstraction itself holds its figures.

The old state is a tiny Tomita-1 run (120 strings as CSV, GRU, seed 0) recorded in
float16 and abstracted into 3 states; the commands are ``record RUN`` (float32),
``abstract RUN --states 4`` and ``train ... --seed 1 --force``. ``--sample N`` checks
every point that touches a path a reader opens (not a temporary such as ``traces.tmp/``,
``.config.json.*.tmp`` or ``traces.old/``) and N other points spread evenly (the fast
test); the default checks every point.

Usage: ``python benchmarks/kill_points.py [--commands record,abstract,train] [--json OUT]``.
Last line: JSON with ``commands`` (per command ``write_points``, ``checked``, ``corrupt``,
``old``, ``new``, ``stale_summary``, ``seconds``), ``corrupt`` (total) and ``failures``.
Linux only (fork, ``/proc/self/fd``).
"""

from __future__ import annotations

import argparse
import builtins
import hashlib
import io
import json
import os
import re
import shutil
import signal
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from stateseer.testing import tomita1_csv

for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
os.environ["PYTHONDONTWRITEBYTECODE"] = "1"
sys.dont_write_bytecode = True

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

#: a path component naming a temporary (checked only by sample under --sample)
TEMPORARY = re.compile(r"(\.tmp|\.old)(\b|-|$)|^\..*\.tmp$")
TRAIN = ["train", "--dataset", "{data}", "--arch", "gru", "--epochs", "1", "--hidden", "4",
         "--embed", "4", "--quiet", "--tokenizer", "char"]
COMMANDS: dict[str, list[str]] = {
    "record": ["record", "{run}"],
    "abstract": ["abstract", "{run}", "--states", "4"],
    "train": [*TRAIN, "--seed", "1", "--out", "{run}", "--force"],
}
SETUP = [[*TRAIN, "--seed", "0", "--out", "{run}"], ["record", "{run}", "--dtype", "float16"],
         ["abstract", "{run}", "--states", "3"]]


# --- the injector (runs in the forked child) ---------------------------------------------

class Injector:
    """Counts write primitives that touch ``root`` and kills the process at the k-th.

    Parameters
    ----------
    root : str
        Absolute directory; calls on paths outside it are not counted.
    kill_at : int
        1-based index of the point to die at (0: never; count only).
    """

    def __init__(self, root: str, kill_at: int) -> None:
        self.root = os.path.realpath(root)
        self.kill_at = kill_at
        self.n = 0
        self.log: list[tuple[str, str]] = []
        self.lock = threading.RLock()
        self.active = True

    def _resolve(self, path: Any, dir_fd: int | None = None) -> str | None:
        try:
            if isinstance(path, int):
                return os.readlink(f"/proc/self/fd/{path}")
            if hasattr(path, "fileno") and not isinstance(path, (str, bytes, os.PathLike)):
                return os.readlink(f"/proc/self/fd/{path.fileno()}")
            p = os.fsdecode(os.fspath(path))
        except (OSError, TypeError, ValueError, io.UnsupportedOperation):
            return None
        if dir_fd is not None and not os.path.isabs(p):
            try:
                p = os.path.join(os.readlink(f"/proc/self/fd/{dir_fd}"), p)
            except OSError:
                return None
        return os.path.abspath(p)

    def hit(self, kind: str, *paths: Any, dir_fd: int | None = None) -> None:
        """One write point (if a path lies under ``root``): count it, die if it is the k-th."""
        if not self.active:
            return
        with self.lock:
            self.active = False  # readlink & co. below are not write points
            try:
                resolved = [self._resolve(p, dir_fd) for p in paths]
                hits = [p for p in resolved if p and (p == self.root
                                                      or p.startswith(self.root + os.sep))]
                if not hits:
                    return
                self.n += 1
                self.log.append((kind, *(os.path.relpath(h, self.root) for h in hits)))
                if self.n == self.kill_at:
                    os.kill(os.getpid(), signal.SIGKILL)
            finally:
                self.active = True

    def install(self) -> None:
        """Monkeypatch the write primitives (process-wide, in this child only)."""
        inj = self

        def writes(mode: str) -> bool:
            return any(c in mode for c in "wax+")

        def patch(mod: Any, name: str, make: Callable[[Callable], Callable]) -> None:
            setattr(mod, name, make(getattr(mod, name)))

        def open_(orig: Callable) -> Callable:
            def f(file: Any, mode: str = "r", *a: Any, **k: Any) -> Any:
                w = isinstance(mode, str) and writes(mode)
                if w:
                    inj.hit("open", file)
                fh = orig(file, mode, *a, **k)
                if w:
                    inj.hit("opened", file)
                return fh
            return f

        flags_w = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND

        def os_open(orig: Callable) -> Callable:
            def f(path: Any, flags: int, *a: Any, dir_fd: int | None = None, **k: Any) -> int:
                w = bool(flags & flags_w)
                if w:
                    inj.hit("open", path, dir_fd=dir_fd)
                fd = orig(path, flags, *a, dir_fd=dir_fd, **k)
                if w:
                    inj.hit("opened", path, dir_fd=dir_fd)
                return fd
            return f

        def one_path(kind: str) -> Callable[[Callable], Callable]:
            def make(orig: Callable) -> Callable:
                def f(path: Any, *a: Any, dir_fd: int | None = None, **k: Any) -> Any:
                    inj.hit(kind, path, dir_fd=dir_fd)
                    if dir_fd is not None:
                        k["dir_fd"] = dir_fd
                    return orig(path, *a, **k)
                return f
            return make

        def two_paths(kind: str) -> Callable[[Callable], Callable]:
            def make(orig: Callable) -> Callable:
                def f(src: Any, dst: Any, *a: Any, **k: Any) -> Any:
                    inj.hit(kind, src, dst, dir_fd=k.get("src_dir_fd"))
                    return orig(src, dst, *a, **k)
                return f
            return make

        def fd_only(kind: str) -> Callable[[Callable], Callable]:
            def make(orig: Callable) -> Callable:
                def f(fd: Any, *a: Any, **k: Any) -> Any:
                    inj.hit(kind, fd)
                    return orig(fd, *a, **k)
                return f
            return make

        patch(builtins, "open", open_)
        patch(io, "open", open_)
        patch(os, "open", os_open)
        for name in ("unlink", "remove", "rmdir", "mkdir", "chmod", "truncate"):
            patch(os, name, one_path(name))
        for name in ("rename", "replace", "link", "symlink"):
            patch(os, name, two_paths(name))
        for name in ("fsync", "fdatasync", "ftruncate"):
            patch(os, name, fd_only(name))
        from stateseer.core import atomic

        if hasattr(atomic, "_exchange"):
            patch(atomic, "_exchange", two_paths("exchange"))


# --- forked children -----------------------------------------------------------------------

def _fork(fn: Callable[[], int], log: Path | None = None) -> tuple[int | None, int | None]:
    """Run ``fn`` in a forked child; (exit code, None) or (None, killing signal)."""
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 99
        try:
            if log is not None:
                fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
                os.dup2(fd, 1)
                os.dup2(fd, 2)
            code = int(fn() or 0)
        except BaseException:
            traceback.print_exc()
        finally:
            try:
                sys.stdout.flush()
                sys.stderr.flush()
            finally:
                os._exit(code)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        return None, os.WTERMSIG(status)
    return os.WEXITSTATUS(status), None


def _cli(argv: Sequence[str]) -> int:
    from stateseer.app.cli.main import main

    return main(list(argv))


def _argv(template: Sequence[str], run: Path) -> list[str]:
    data = f"csv:{run.parent.parent / 'tomita1.csv'}"
    return [a.replace("{run}", str(run)).replace("{data}", data) for a in template]


def run_command(argv: Sequence[str], root: Path, kill_at: int, log: Path,
                events: Path | None = None) -> tuple[int | None, int | None]:
    """The command in a child whose write points are counted; killed at ``kill_at``."""
    def child() -> int:
        inj = Injector(str(root), kill_at)
        inj.install()
        code = _cli(argv)
        inj.active = False
        if events is not None:
            events.write_text(json.dumps(inj.log))
        return code
    return _fork(child, log)


# --- checking a run ----------------------------------------------------------------------

def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


def _fingerprint_model(run: Path) -> str:
    import torch

    from stateseer.rnn_models.loading import load_model
    from stateseer.rnn_models.run import ModelRun

    if not (run / "config.json").exists():
        return "absent"
    load_model(run)  # refuses a vocab.json the config's sha256 does not name
    vocab = ModelRun(run).vocab()
    state = torch.load(run / "model.pt", weights_only=True, map_location="cpu")
    h = hashlib.sha256(json.dumps(list(vocab.tokens)).encode())
    for k in sorted(state):
        h.update(k.encode())
        h.update(state[k].detach().cpu().numpy().tobytes())
    return h.hexdigest()[:16]


def _fingerprint_traces(run: Path) -> tuple[str, Any]:
    from stateseer.core.rundir import sha256_file
    from stateseer.core.traces import Traces

    if not (run / "traces").exists():
        return "absent", None
    tr = Traces(run / "traces")
    for s in tr.split_names:
        tr[s]  # opens and validates every array of the split
    want = tr.meta.get("model_sha256")
    if want is not None and (run / "model.pt").exists() and want != sha256_file(
            run / "model.pt"):
        raise RuntimeError("traces recorded from another model.pt than the run's")
    meta = {k: v for k, v in tr.meta.items() if k not in ("created", "splits")}
    sizes = {s: (v["n_inputs"], v["n_steps"]) for s, v in tr.meta["splits"].items()}
    return _sha(json.dumps([meta, sizes], sort_keys=True).encode()), tr


def _fingerprint_abstraction(run: Path, traces: Any) -> tuple[str, Any]:
    from stateseer.abstraction.pipeline import Abstraction

    if not (run / "abstraction").exists():
        return "absent", None
    ab = Abstraction.load(run / "abstraction")
    h = hashlib.sha256(str(ab.fsm.n_states).encode())
    for s in sorted(ab.states):
        if traces is None:
            raise RuntimeError("an abstraction without traces")
        if len(ab.states[s]) != traces[s].n_steps:
            raise RuntimeError(f"abstraction split {s} has {len(ab.states[s])} states for "
                               f"{traces[s].n_steps} trace steps")
        if traces[s].n_inputs:
            ab.paths(s, traces[s].n_inputs - 1, traces)
        h.update(ab.states[s].tobytes())
    return h.hexdigest()[:16], ab


def _snapshot(run: Path) -> dict[str, Any]:
    """Fingerprints of the run's parts and what failed to load (in the checking child)."""
    from stateseer.core.rundir import RunDir

    out: dict[str, Any] = {"problems": []}
    traces = ab = None

    def part(name: str, get: Callable[[], Any]) -> Any:
        try:
            return get()
        except Exception as exc:  # every failure is a finding
            out["problems"].append(f"{name}: {type(exc).__name__}: "
                                   f"{' '.join(str(exc).split())[:200]}")
            return "unloadable", None

    out["model"] = part("model", lambda: (_fingerprint_model(run), None))[0]
    out["traces"], traces = part("traces", lambda: _fingerprint_traces(run))
    out["abstraction"], ab = part("abstraction",
                                  lambda: _fingerprint_abstraction(run, traces))
    try:
        metrics = RunDir(run).metrics() if (run / "config.json").exists() else {}
        summary = metrics.get("abstraction") or {}
        out["stale_summary"] = bool(ab is not None and summary.get("n_states")
                                    != ab.metrics.get("n_states"))
    except Exception as exc:
        out["problems"].append(f"metrics.json: {type(exc).__name__}: {exc}")
    if traces is not None and "train" in traces:
        try:
            from stateseer.app.workflows.contexts import context_index
            from stateseer.rnn_models.run import ModelRun

            context_index(ModelRun(run), traces, build=False)
        except Exception as exc:
            out["problems"].append(f"index: {type(exc).__name__}: {exc}")
    return out


def _commands_without_traceback(run: Path, scratch: Path) -> list[str]:
    """Run read-only commands on the run; the problems (tracebacks, crashes) they show."""
    problems = []
    for fmt in ("json", "traces-csv"):
        out = scratch / f"export.{fmt}"
        out.unlink(missing_ok=True)
        log = scratch / f"export-{fmt}.log"
        log.unlink(missing_ok=True)
        os.environ["STATESEER_TRACEBACK"] = "1"
        try:
            code, sig = _fork(lambda fmt=fmt, out=out: _cli(
                ["export", str(run), "--format", fmt, "--out", str(out)]), log)
        finally:
            os.environ.pop("STATESEER_TRACEBACK", None)
        text = log.read_text(errors="replace") if log.exists() else ""
        if sig is not None or code not in (0, 2) or "Traceback" in text:
            problems.append(f"export --format {fmt}: exit {code} signal {sig}: "
                            f"{text.strip().splitlines()[-1:] if text.strip() else ''}")
    return problems


def check(run: Path, scratch: Path) -> dict[str, Any]:
    """Snapshot of the run and the read-only commands, computed in a child."""
    result = scratch / "snapshot.json"
    result.unlink(missing_ok=True)

    def child() -> int:
        snap = _snapshot(run)
        snap["problems"] += _commands_without_traceback(run, scratch)
        result.write_text(json.dumps(snap))
        return 0
    code, sig = _fork(child, scratch / "check.log")
    if not result.exists():
        return {"problems": [f"the check itself failed (exit {code}, signal {sig}); see "
                             f"{scratch / 'check.log'}"]}
    return json.loads(result.read_text())


def _state(snap: dict[str, Any]) -> tuple:
    return tuple(snap.get(k) for k in ("model", "traces", "abstraction"))


# --- one command ---------------------------------------------------------------------------

def _visible(path: str) -> bool:
    """Whether ``path`` (relative to the trial) is one a reader opens: no component of it
    is a temporary (``traces.tmp``, ``.x.json.abc.tmp``, ``traces.old`` ...)."""
    return not any(TEMPORARY.search(part) for part in Path(path).parts)


def _points_to_check(events: list, sample: int | None) -> list[int]:
    """Every point (``sample`` None), or every point that touches a path a reader opens
    plus ``sample`` others spread evenly."""
    n = len(events)
    if sample is None:
        return list(range(1, n + 1))
    picked = {i + 1 for i, (_, *paths) in enumerate(events) if any(map(_visible, paths))}
    others = [i + 1 for i in range(n) if i + 1 not in picked]
    if sample > 0 and others:
        step = len(others) / min(sample, len(others))
        picked |= {others[int(j * step)] for j in range(min(sample, len(others)))}
    return sorted(picked)


def kill_command(name: str, template: Path, work: Path, *, sample: int | None = None,
                 rerun: bool = True, verbose: bool = True) -> dict[str, Any]:
    """Kill ``name`` at each of its write points and check the run after each kill."""
    trial, scratch = work / "trial", work / "scratch"
    scratch.mkdir(parents=True, exist_ok=True)
    run = trial / "run"
    argv = _argv(COMMANDS[name], run)
    t0 = time.perf_counter()

    def fresh() -> None:
        if trial.exists():
            shutil.rmtree(trial)
        shutil.copytree(template, trial, symlinks=True)

    fresh()
    old = check(run, scratch)
    events_path = scratch / "events.json"
    code, sig = run_command(argv, trial, 0, scratch / "command.log", events_path)
    if code != 0:
        raise SystemExit(f"{name} failed without kills (exit {code}, signal {sig}); see "
                         f"{scratch / 'command.log'}")
    events = json.loads(events_path.read_text())
    new = check(run, scratch)
    for label, snap in (("old", old), ("new", new)):
        if snap["problems"]:
            raise SystemExit(f"{name}: the {label} state itself has problems: "
                             f"{snap['problems']}")
    points = _points_to_check(events, sample)
    rows, failures = [], []
    for k in points:
        fresh()
        code, sig = run_command(argv, trial, k, scratch / "command.log")
        row: dict[str, Any] = {"point": k, "event": events[k - 1] if k <= len(events) else None}
        if sig != signal.SIGKILL:
            row.update(outcome="completed", exit=code)  # fewer points than counted
            rows.append(row)
            continue
        snap = check(run, scratch)
        state = _state(snap)
        row["state"] = ("old" if state == _state(old) else
                        "new" if state == _state(new) else "other")
        problems = list(snap["problems"])
        if row["state"] == "other":
            parts = dict(zip(("model", "traces", "abstraction"), state, strict=True))
            problems.append(f"neither the old nor the new state: {parts}")
        row["stale_summary"] = bool(snap.get("stale_summary"))
        if rerun:
            code, sig = run_command(argv, trial, 0, scratch / "rerun.log")
            again = check(run, scratch) if code == 0 else {"problems": []}
            if code != 0:
                problems.append(f"rerun failed: exit {code} signal {sig}")
            elif again["problems"] or _state(again) != _state(new):
                problems.append(f"rerun left {again['problems'] or _state(again)}")
        row["corrupt"] = bool(problems)
        row["problems"] = problems
        rows.append(row)
        if problems:
            failures.append({"command": name, **row})
        if verbose:
            print(f"{name} point {k}/{len(events)} {row['event']}: {row['state']}"
                  f"{' CORRUPT ' + '; '.join(problems) if problems else ''}", flush=True)
    killed = [r for r in rows if "state" in r]
    return {"command": " ".join(COMMANDS[name]).replace("{run}", "RUN"),
            "write_points": len(events), "checked": len(killed),
            "corrupt": sum(r["corrupt"] for r in killed),
            "old": sum(r["state"] == "old" for r in killed),
            "new": sum(r["state"] == "new" for r in killed),
            "stale_summary": sum(r["stale_summary"] for r in killed),
            "rerun": rerun, "seconds": round(time.perf_counter() - t0, 1),
            "kinds": _kinds(events), "failures": failures, "points": rows}


def _kinds(events: list) -> dict[str, int]:
    out: dict[str, int] = {}
    for kind, *_ in events:
        out[kind] = out.get(kind, 0) + 1
    return out


def _warm_up(work: Path) -> None:
    """Run every command once in this process, on a run elsewhere (``work/warm``), so that
    the forked children find their modules imported and initialised: a child then spends
    its time in the command, not in first-call set-up (about 3 s of a 3.1 s ``train``).

    Torch, OpenMP and BLAS are held to one thread, so no thread pool exists when the
    launcher forks; caches keyed by a run's path cannot leak into a trial (another path).
    """
    import contextlib

    import torch

    torch.set_num_threads(1)
    warm = work / "warm"
    warm.mkdir(parents=True)
    tomita1_csv(warm / "tomita1.csv")
    run = warm / "trial" / "run"
    sink = io.StringIO()
    with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
        for template in (*SETUP, *COMMANDS.values()):
            _cli(_argv(template, run))
        _snapshot(run)
        _commands_without_traceback(run, warm)
    shutil.rmtree(warm)


def build_template(work: Path) -> Path:
    """The old state: a tiny Tomita run recorded in float16 and abstracted into 3 states."""
    trial = work / "trial"
    trial.mkdir(parents=True, exist_ok=True)
    tomita1_csv(work / "tomita1.csv")
    run = trial / "run"
    for template in SETUP:
        code, sig = _fork(lambda t=template: _cli(_argv(t, run)), work / "setup.log")
        if code != 0:
            raise SystemExit(f"setup {template[0]} failed (exit {code}, signal {sig}); see "
                             f"{work / 'setup.log'}")
    template_dir = work / "template"
    shutil.move(str(trial), str(template_dir))
    return template_dir


def kill_points(commands: Sequence[str] = tuple(COMMANDS), *, sample: int | None = None,
                rerun: bool = True, work: Path | None = None,
                verbose: bool = True) -> dict[str, Any]:
    """Run the whole check; the figures as one JSON-able dict."""
    own = work is None
    # a RAM file system where there is one: a kill does not depend on fsync (the page cache
    # survives the process), and fsync on a busy disk would dominate the wall time
    shm = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
    work = Path(tempfile.mkdtemp(prefix="kill-points-", dir=shm)) if own else Path(work)
    try:
        t0 = time.perf_counter()
        _warm_up(work)
        template = build_template(work)
        results = [kill_command(c, template, work, sample=sample, rerun=rerun,
                                verbose=verbose) for c in commands]
        return {"commands": [{k: v for k, v in r.items() if k != "points"} for r in results],
                "points": {r["command"]: r["points"] for r in results},
                "corrupt": sum(r["corrupt"] for r in results),
                "failures": [f for r in results for f in r["failures"]],
                "sample": sample, "seconds": round(time.perf_counter() - t0, 1)}
    finally:
        if own:
            shutil.rmtree(work, ignore_errors=True)


def _table(result: dict[str, Any]) -> str:
    lines = [f"{'command':<58} {'points':>6} {'checked':>7} {'old':>4} {'new':>4} "
             f"{'stale':>5} {'corrupt':>7}"]
    for r in result["commands"]:
        lines.append(f"{r['command'][:58]:<58} {r['write_points']:>6} {r['checked']:>7} "
                     f"{r['old']:>4} {r['new']:>4} {r['stale_summary']:>5} {r['corrupt']:>7}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--commands", default=",".join(COMMANDS),
                    help="comma-separated subset of record,abstract,train")
    ap.add_argument("--sample", type=int, default=None,
                    help="check the points that touch what a reader opens and N others "
                    "(default: every point)")
    ap.add_argument("--no-rerun", action="store_true",
                    help="skip rerunning the command after each kill")
    ap.add_argument("--json", metavar="OUT", help="also write the full result here")
    ap.add_argument("--quiet", action="store_true", help="no line per kill point")
    args = ap.parse_args(argv)
    commands = [c.strip() for c in args.commands.split(",") if c.strip()]
    bad = [c for c in commands if c not in COMMANDS]
    if bad:
        ap.error(f"unknown command(s) {', '.join(bad)}; choose from {', '.join(COMMANDS)}")
    result = kill_points(commands, sample=args.sample, rerun=not args.no_rerun,
                         verbose=not args.quiet)
    print(_table(result))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    summary = {"commands": result["commands"], "corrupt": result["corrupt"],
               "sample": result["sample"], "seconds": result["seconds"]}
    for c in summary["commands"]:
        c.pop("failures", None)
    summary["failures"] = [{k: f[k] for k in ("command", "point", "event", "problems")}
                           for f in result["failures"]][:20]
    print(json.dumps(summary))
    return 1 if result["corrupt"] else 0


if __name__ == "__main__":
    sys.exit(main())
