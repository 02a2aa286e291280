"""Scale-out: abstraction of 1M, 4M and 16M recorded states in process and on a Dask cluster.

A real run is trained and recorded once (a GRU with 256 hidden units on Rotten Tomatoes,
float16 states); its training split, one shard of real recorded states, is then *tiled*:
the traces of size N hold ceil(N / m) shards that are hard links of that one shard (m
steps each), with a manifest, so N steps cost m steps of disk. (The page cache holds the
one file, so these figures measure compute and memory, not disk reads.)

For every size, in separate child processes:

* **in-process**: ``fit_abstraction`` (fit sample drawn per shard, k-means-40 on the
  margin features, chunked assignment of every step, FSM from tree-reduced transition
  counts, probabilistic simulation; states spilled to int32 memory maps, patterns not
  mined) with ``OMP_NUM_THREADS=1``: one core (one thread, placed by the system);
* **cluster**: the same call with ``cluster="tcp://..."`` on a scheduler and two
  single-threaded workers started as separate ``dask scheduler`` / ``dask worker``
  processes, each worker pinned to a core of its own (the scheduler and the driver run
  where the system puts them): two cores. The results are checked equal to the
  in-process ones.

Wall time, steps/s per core, and the peak RSS of the driver and of each worker (VmHWM,
reset between sizes) are reported. Last, in the same run, the whole in-process
``abstract_run`` on 1.05M x 256 states against DeepSeer's pipeline (PCA + GMM on every
state), both from ``benchmarks/abstraction_speed.py``.

Prints lines, then one JSON object: ``sizes``, ``inprocess_s``, ``cluster_s``,
``cluster_workers``, ``cores``, ``peak_rss_bytes`` (per size, the largest of driver and
workers), ``speedup_vs_deepseer``, and the details.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def build_base(run_dir: Path, epochs: int) -> Path:
    """Train and record the base run once (GRU 256, float16 traces)."""
    if (run_dir / "traces" / "meta.json").exists():
        return run_dir
    from stateseer.rnn_models.engine import record_run
    from stateseer.rnn_models.train import TrainConfig, train_run

    t0 = time.perf_counter()
    train_run(TrainConfig(dataset="rotten_tomatoes", arch="gru", embed=64, hidden=256,
                          epochs=epochs, seed=0), run_dir, force=True, progress=False)
    record_run(run_dir, dtype="float16")
    print(f"base run {run_dir}: trained and recorded in {time.perf_counter() - t0:.0f} s")
    return run_dir


def tile_run(base: Path, out: Path, n_steps: int) -> int:
    """A run whose training split is ``ceil(n_steps / m)`` hard-linked copies of the base
    run's (one-shard) training split; returns its number of training steps."""
    meta = json.loads((base / "traces" / "meta.json").read_text())
    train = meta["splits"]["train"]
    shards = train.get("shards") or [{"input_start": 0, "input_stop": train["n_inputs"],
                                      "step_start": 0, "step_stop": train["n_steps"]}]
    if len(shards) != 1:
        raise SystemExit("the base run's training split must be one shard")
    m_in, m_st = train["n_inputs"], train["n_steps"]
    k = -(-n_steps // m_st)
    if (out / "traces" / "meta.json").exists():
        have = json.loads((out / "traces" / "meta.json").read_text())
        if have["splits"]["train"]["n_steps"] == k * m_st:
            return k * m_st
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    for f in ("config.json", "vocab.json", "model.pt", "metrics.json"):
        if (base / f).exists():
            shutil.copy2(base / f, out / f)
    t = out / "traces"
    t.mkdir()
    for f in (base / "traces").iterdir():
        if f.is_file() and f.name != "meta.json":
            os.link(f, t / f.name)
    for split in meta["splits"]:
        if split != "train":
            shutil.copytree(base / "traces" / split, t / split, copy_function=os.link)
    src = base / "traces" / "train" / "shards" / "00000"
    if not src.is_dir():
        src = base / "traces" / "train"
    for i in range(k):
        d = t / "train" / "shards" / f"{i:05d}"
        d.mkdir(parents=True)
        for f in src.iterdir():
            if f.is_file():
                os.link(f, d / f.name)
    train = {**train, "n_inputs": k * m_in, "n_steps": k * m_st,
             "shards": [{"input_start": i * m_in, "input_stop": (i + 1) * m_in,
                         "step_start": i * m_st, "step_stop": (i + 1) * m_st}
                        for i in range(k)]}
    meta = {**meta, "shard_size": m_in, "splits": {**meta["splits"], "train": train}}
    (t / "meta.json").write_text(json.dumps(meta, indent=1))
    return k * m_st


# -- children ---------------------------------------------------------------------------------
def _vm_hwm(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0


def _reset_hwm() -> int:
    """Reset this process's peak RSS (Linux ``clear_refs`` 5); its pid."""
    try:
        Path(f"/proc/{os.getpid()}/clear_refs").write_text("5")
    except OSError:
        pass
    return os.getpid()


def child(kind: str, run_dir: str, address: str | None) -> dict:
    import numpy as np

    from stateseer.abstraction.pipeline import fit_abstraction
    from stateseer.core.engine import DaskEngine, SerialEngine
    from stateseer.core.rundir import RunDir
    from stateseer.core.traces import Traces

    run = RunDir(run_dir)
    traces = Traces(run.traces_dir)
    alphabet = run.vocab_tokens()
    from stateseer.abstraction.kernels import warm_up

    engine = SerialEngine() if kind == "inprocess" else DaskEngine(address)
    pids = {}
    warm_up()  # both sides start with numba's compiled loop loaded (0.1 s per process)
    if kind == "cluster":  # workers warm (imports, compiled loop) and their peak RSS reset
        engine.client.run(lambda: __import__("stateseer.abstraction.pipeline"))
        engine.client.run(warm_up)
        # the scheduler unpickles each graph, so it imports the functions' modules (1 s,
        # once per scheduler): a start-up cost, paid here as the workers' imports are
        engine.client.run_on_scheduler(lambda: __import__("stateseer.abstraction.pipeline"))
        pids = engine.client.run(_reset_hwm)
    with tempfile.TemporaryDirectory(dir=run_dir) as tmp:
        t0 = time.perf_counter()
        ab = fit_abstraction(traces, alphabet, n_states=40, splits=("train",), cluster=engine,
                             out_dir=tmp)
        seconds = time.perf_counter() - t0
        # the peak of the run itself: the digest below reads every state of the split
        # (a 16M-step path is 64 MB of int32), which the pipeline never holds at once
        driver_peak = _vm_hwm(os.getpid())
        digest = {"fsm": ab.fsm.to_dict()["transitions"][:50],
                  "n_transitions": int(ab.fsm.n_transitions),
                  "visits": ab.fsm.visits.tolist(),
                  "states_sum": int(np.asarray(ab.states["train"], np.int64).sum()),
                  "sim_sum": int(np.asarray(ab.simulated["train"], np.int64).sum()),
                  "pred_sum": int(ab.sim_predictions["train"].sum())}
        del ab
    workers = [_vm_hwm_remote(engine, pids)] if kind == "cluster" else []
    if kind == "cluster":
        engine.close()
    return {"seconds": seconds, "n_steps": int(traces.meta["splits"]["train"]["n_steps"]),
            "driver_peak_rss": driver_peak,  # (ru_maxrss survives fork + exec)
            "worker_peak_rss": workers[0] if workers else [], "digest": digest}


def _vm_hwm_remote(engine, pids: dict) -> list[int]:
    return [_vm_hwm(pid) for pid in pids.values()]


def run_child(kind: str, run_dir: Path, address: str | None = None) -> dict:
    env = dict(os.environ)
    env.update(OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    cmd = [sys.executable, __file__, "--child", kind, "--run", str(run_dir)]
    if address:
        cmd += ["--address", address]
    out = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if out.returncode:
        raise SystemExit(f"{kind} child failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


# -- the cluster --------------------------------------------------------------------------------
class Cluster:
    """``dask scheduler`` and two ``dask worker`` processes (one thread each), each worker
    process pinned to a core of its own."""

    def __init__(self, workdir: Path, n_workers: int = 2) -> None:
        self.file = workdir / "scheduler.json"
        self.file.unlink(missing_ok=True)
        env = dict(os.environ)
        env.update(OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1",
                   PYTHONPATH=str(ROOT))
        bin_dir = Path(sys.executable).parent
        dask = str(bin_dir / "dask") if (bin_dir / "dask").exists() else "dask"
        quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL, "env": env}
        self.procs = [subprocess.Popen([dask, "scheduler", "--scheduler-file",
                                        str(self.file), "--no-dashboard", "--port", "0"],
                                       **quiet)]
        deadline = time.monotonic() + 120
        while not self.file.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(0.5)
        self.address = json.loads(self.file.read_text())["address"]
        for _ in range(n_workers):
            self.procs.append(subprocess.Popen(
                [dask, "worker", self.address, "--nthreads", "1", "--nworkers", "1",
                 "--memory-limit", "0", "--no-dashboard"], **quiet))
        from distributed import Client

        with Client(self.address, timeout=60) as c:
            c.wait_for_workers(n_workers, timeout=300)
            self.pinned = self.pin(c)

    @staticmethod
    def pin(client) -> list[int]:
        """Each worker process on a core of its own (what ``taskset -c K dask worker`` or a
        batch system's CPU binding does): left free, the two workers, the scheduler and
        the driver migrated between the two cores and the cluster lost 2-5 % per core.
        Returns the cores, in worker order (empty where affinity cannot be set)."""
        if not hasattr(os, "sched_setaffinity"):
            return []
        cores = sorted(os.sched_getaffinity(0))
        pids = list(client.run(os.getpid).values())
        for i, pid in enumerate(pids):
            os.sched_setaffinity(pid, {cores[i % len(cores)]})
        return [cores[i % len(cores)] for i in range(len(pids))]

    def close(self) -> None:
        for p in reversed(self.procs):
            p.terminate()
        for p in self.procs:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()


def _speedup(run_dir: Path) -> dict:
    """abstraction_speed.py's two children on ``run_dir`` (its code, imported)."""
    spec = importlib.util.spec_from_file_location("abstraction_speed",
                                                  ROOT / "benchmarks" / "abstraction_speed.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    ours, base = mod.run_child("stateseer", run_dir), mod.run_child("deepseer", run_dir)
    return {"n_points": json.loads((run_dir / "traces" / "meta.json").read_text())
            ["splits"]["train"]["n_steps"], "stateseer_s": round(ours["seconds"], 3),
            "deepseer_s": round(base["seconds"], 3),
            "speedup": round(base["seconds"] / ours["seconds"], 1),
            "stateseer_label_fidelity": ours["label_fidelity"],
            "deepseer_label_fidelity": base["label_fidelity"],
            "stateseer_peak_rss": ours["peak_rss"]}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="1000000,4000000,16000000",
                   help="training steps to abstract, comma-separated")
    p.add_argument("--quick", action="store_true",
                   help="smoke run: 200k and 400k steps, no DeepSeer comparison")
    p.add_argument("--work", type=Path, default=ROOT / "runs" / "bench-scale-out")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--speedup-steps", type=int, default=1_050_000)
    p.add_argument("--child", choices=("inprocess", "cluster"), help=argparse.SUPPRESS)
    p.add_argument("--run", help=argparse.SUPPRESS)
    p.add_argument("--address", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.run, args.address)))
        return
    sizes = [200_000, 400_000] if args.quick else [int(float(s)) for s in args.sizes.split(",")]
    args.work.mkdir(parents=True, exist_ok=True)
    base = build_base(args.work / "base", args.epochs)
    rows = []
    cluster = Cluster(args.work)
    try:
        for n in sizes:
            run_dir = args.work / f"tiled-{n}"
            n_steps = tile_run(base, run_dir, n)
            a = run_child("inprocess", run_dir)
            b = run_child("cluster", run_dir, cluster.address)
            same = a["digest"] == b["digest"]
            rows.append({"size": n_steps, "inprocess": a, "cluster": b, "same": same})
            print(f"{n_steps:>11,} steps: in-process {a['seconds']:.1f} s "
                  f"({n_steps / a['seconds'] / 1e6:.2f} M steps/s/core), cluster "
                  f"{b['seconds']:.1f} s ({n_steps / b['seconds'] / 2 / 1e6:.2f} M steps/s/core), "
                  f"peak RSS driver {a['driver_peak_rss'] / 2**20:.0f} / "
                  f"{b['driver_peak_rss'] / 2**20:.0f} MiB, workers "
                  f"{[round(w / 2**20) for w in b['worker_peak_rss']]} MiB, same: {same}")
    finally:
        cluster.close()
    speed = None
    if not args.quick:
        run_dir = args.work / "tiled-speedup"
        tile_run(base, run_dir, args.speedup_steps)
        speed = _speedup(run_dir)
        print(f"abstract_run on {speed['n_points']:,} x 256: stateseer {speed['stateseer_s']} s, "
              f"DeepSeer pipeline {speed['deepseer_s']} s: {speed['speedup']}x")
    per_core_in = [r["size"] / r["inprocess"]["seconds"] for r in rows]
    per_core_cl = [r["size"] / r["cluster"]["seconds"] / 2 for r in rows]
    peak = [max([r["inprocess"]["driver_peak_rss"], r["cluster"]["driver_peak_rss"],
                 *r["cluster"]["worker_peak_rss"]]) for r in rows]
    result = {
        "sizes": [r["size"] for r in rows],
        "inprocess_s": [round(r["inprocess"]["seconds"], 2) for r in rows],
        "cluster_s": [round(r["cluster"]["seconds"], 2) for r in rows],
        "cluster_workers": 2, "cores": os.cpu_count(), "worker_cores": cluster.pinned,
        "peak_rss_bytes": peak,
        "speedup_vs_deepseer": speed["speedup"] if speed else None,
        "inprocess_steps_per_s_per_core": [round(x) for x in per_core_in],
        "cluster_steps_per_s_per_core": [round(x) for x in per_core_cl],
        "cluster_per_core_vs_inprocess": [round(c / i, 3)
                                          for c, i in zip(per_core_cl, per_core_in, strict=True)],
        "driver_peak_rss_bytes": {"inprocess": [r["inprocess"]["driver_peak_rss"] for r in rows],
                                  "cluster": [r["cluster"]["driver_peak_rss"] for r in rows]},
        "worker_peak_rss_bytes": [r["cluster"]["worker_peak_rss"] for r in rows],
        "rss_16m_over_1m": round(peak[-1] / peak[0], 3) if len(peak) > 1 else None,
        "identical_results": all(r["same"] for r in rows),
        "deepseer": speed, "state_dim": 256, "dtype": "float16",
        "note": "states tiled from one real recorded shard (hard links); patterns not mined; "
                "each worker pinned to a core of its own",
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
