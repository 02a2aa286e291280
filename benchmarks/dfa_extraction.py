"""Exact DFA extraction on the Tomita grammars: time, states, exactness, budget curves.

What is measured, in one run on the CPU:

1. For each of ``tomita1`` … ``tomita7``: an LSTM trained with the project defaults
   (``TrainConfig(dataset=NAME, arch='lstm')``) is trained, or reused from ``--runs-dir``,
   and its train and test splits are recorded.
   :func:`stateseer.abstraction.automata.dfa.extract_dfa`
   (default
   parameters) then gives ``seconds`` (wall time of the whole call, evaluation included),
   ``n_states``, ``minimal_size_match`` (equal to the grammar's minimal DFA size) and
   ``grammar_agreement_le12`` (share of all strings of length <= 12 that the DFA classifies
   as the grammar does).
2. For ``tomita3`` and ``tomita6`` also an *imperfect* LSTM (``epochs=1``), extracted under
   budgets of 10, 20, 50, 100, 200 and 400 states (before minimisation): per budget
   ``seconds``, ``n_states_before_minimisation``, ``n_states``, ``budget_exhausted`` and
   ``agreement_le12`` / ``agreement`` / ``prefix_agreement`` with the RNN's own recorded
   predictions on the test split.
3. Baseline, same run: the DeepSeer-style abstraction without refinement — k-means with
   ``k`` states split by predicted class, majority transitions, minimised
   (``extract_dfa(traces, initial_states=k, max_states=k)``) — for k = 10 and 40: its
   states and agreement beside the refined DFA's (``baseline`` per grammar).

4. **Against AALpy's L*** (``lstar_comparison``), on the same 1-epoch LSTMs of
   ``tomita3``, ``tomita6`` and ``tomita7`` (seed 0). Both sides get the same
   *equivalence-oracle budget* of B sampled strings (``--oracle-budgets``), each a random
   word over {0, 1} of length uniform in 1-20:

   - L*: ``run_Lstar(alphabet, sul, RandomWordEqOracle(alphabet, sul, num_walks=B,
     min_walk_len=1, max_walk_len=20, reset_after_cex=False), 'dfa')``: at most B random
     words *in total* over all equivalence queries (``reset_after_cex=False``), each
     checked prefix by prefix; when they are spent, L* returns its hypothesis. Membership
     queries are not limited (L* needs them; their number is reported). The SUL is the
     RNN itself, stepped symbol by symbol (an exact float64 numpy copy of the LSTM, about
     50x faster than a torch call per symbol, so L* is not slowed by the harness;
     checked against the recorded predictions). Python's ``random`` is seeded with 0.
     A run is stopped after ``--lstar-timeout`` seconds and reported as ``> T s`` with
     the last hypothesis it had proposed.
   - Ours: the same number B of random words (same length distribution, numpy seed 0)
     run through the RNN once (``record_texts``: hidden states and predictions), added to
     the training prefixes (``extract_dfa(..., extra=[(sample, 1)])``), under state caps
     ``--state-caps`` (``states=``; refinement budget ``max_states=min(600,
     max(--refine-states, 2 * cap))``, ``time_limit=6``). Ours also
     reads the recorded training traces (4,047 strings), which L* never sees; L*
     in turn asks as many membership queries as it likes. ``seconds`` includes tracing
     the B words.

   Reported per grammar and budget: states, agreement with the RNN on all 8,191 strings
   of length <= 12, seconds; ``dominates``: every L* point (states, agreement) has one of
   ours with no more states and no less agreement (``ours_front`` / ``lstar_front`` are
   the Pareto fronts over all budgets).

5. **Active extraction** (``active`` per grammar in ``tomita``): the same trained LSTMs,
   ``extract-dfa --method active`` (the run's model answers a KV learner): states, exact
   and minimal, seconds, membership queries.

6. **Noisy labels against passive learners** (``noisy``; ``--noisy`` grammars, ``--noise``
   rates): the training labels of a grammar's data set are flipped at rate p (seeded), an
   LSTM is trained on them (``csv:`` data, char tokens, same defaults), and its DFA is
   extracted both ways (``refine`` and ``active``). AALpy's passive learners RPNI
   (``run_RPNI``, GSM) and EDSM (``run_EDSM``) get the same noisy training strings and
   labels (sink-state completion). Per learner: states and agreement with the *grammar*
   on every string up to length 12 (beside the flipped labels' own agreement).

Earlier figures from the issue (2,903 states in 235 s on Tomita 3, 1,004 in 87 s on
Tomita 6) stay under ``aalpy_reported``.

The last line of output is one JSON object with keys ``tomita`` (per grammar),
``budget_curve`` (per imperfect grammar, a list over budgets), ``max_seconds`` (slowest
extraction of all), ``all_exact`` (every perfect-RNN DFA exact and minimal) and
``lstar_comparison`` (per grammar: ``budgets``, ``ours_front``, ``lstar_front``,
``dominates``), ``lstar_all_dominated``, ``ours_max_seconds``, ``all_exact_active`` and
``noisy`` (per grammar and rate: ``refine``, ``active``, ``rpni``, ``edsm``, each with
``n_states`` and ``grammar_agreement_le12``).

Run: ``python benchmarks/dfa_extraction.py [--runs-dir /tmp/stateseer-dfa-bench] [--arch lstm]``
(quick smoke: ``--grammars tomita1 --imperfect --lstar tomita7 --oracle-budgets 100``).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from stateseer.abstraction.automata.dfa import ExtractedDFA, extract_dfa
from stateseer.abstraction.automata.dfa.active import to_dfa
from stateseer.core.traces import Traces
from stateseer.rnn_models.formal import GRAMMARS, all_strings

GRAMMAR_NAMES = [f"tomita{i}" for i in range(1, 8)]
IMPERFECT = ["tomita3", "tomita6", "tomita7"]
ORACLE_BUDGETS = [200, 2000]
STATE_CAPS = [5, 10, 20, 40, 80, 160, 400]
MAX_REFINE = 600
BUDGETS = [10, 20, 50, 100, 200, 400]
BASELINE_K = [10, 40]
AALPY_REPORTED = {
    "perfect_seconds": [0.04, 0.26],
    "tomita3_imperfect": {"n_states": 2903, "seconds": 235},
    "tomita6_imperfect": {"n_states": 1004, "seconds": 87},
}


def get_traces(runs_dir: Path, name: str, arch: str, epochs: int | None,
               threads: int) -> Traces:
    """Train and record a run (or reuse one with the same data set, arch and epochs)."""
    out = runs_dir / (f"{name}-{arch}" if epochs is None else f"{name}-{arch}-ep{epochs}")
    meta, config = out / "traces" / "meta.json", out / "config.json"
    if meta.exists() and config.exists():
        cfg = json.loads(config.read_text())["config"]
        if (cfg["dataset"], cfg["arch"], cfg["epochs"]) == (name, arch, epochs):
            return Traces(out / "traces")
    import torch

    from stateseer.rnn_models.engine import record_run
    from stateseer.rnn_models.train import TrainConfig, train_run

    torch.set_num_threads(threads)
    t0 = time.perf_counter()
    train_run(TrainConfig(dataset=name, arch=arch, epochs=epochs), out, progress=False,
              force=True)
    traces = record_run(out, splits=("train", "test"))
    print(f"  trained and recorded {out.name} in {time.perf_counter() - t0:.1f} s", flush=True)
    return traces


def noisy_run(runs_dir: Path, name: str, arch: str, rate: float, seed: int = 0
              ) -> tuple[Path, list[tuple[str, bool]]]:
    """A run trained on the grammar's data with training labels flipped at ``rate`` (or
    reused), and the noisy training strings with their labels."""
    import csv

    from stateseer.rnn_models.datasets import load_dataset

    ds = load_dataset(name)
    train = np.asarray(ds.splits["train"])
    labels = np.asarray(ds.labels).copy()
    rng = np.random.default_rng(seed)
    flip = train[rng.random(len(train)) < rate]
    labels[flip] = 1 - labels[flip]
    out = runs_dir / f"{name}-{arch}-noise{rate:g}"
    data = runs_dir / f"{name}-noise{rate:g}.csv"
    split = np.empty(len(labels), dtype=object)
    for k, idx in ds.splits.items():
        split[np.asarray(idx)] = k
    with open(data, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["text", "label", "split"])
        for t, y, sp in zip(ds.texts, labels.tolist(), split.tolist(), strict=True):
            w.writerow([t, ds.classes[y], sp])
    accept = ds.classes.index("accept")
    pairs = [(ds.texts[i], bool(labels[i] == accept)) for i in train.tolist()]
    if not (out / "traces" / "meta.json").exists():
        from stateseer.rnn_models.engine import record_run
        from stateseer.rnn_models.train import TrainConfig, train_run

        train_run(TrainConfig(dataset=f"csv:{data}", arch=arch, tokenizer="char"), out,
                  progress=False, force=True)
        record_run(out)
    return out, pairs


def compare_noisy(runs_dir: Path, name: str, arch: str, rate: float) -> dict[str, Any]:
    """States and grammar agreement: our two methods on an LSTM trained on noisy labels,
    RPNI and EDSM on the same noisy strings."""
    from aalpy.learning_algs import run_EDSM, run_RPNI

    from stateseer.app.workflows.dfa import extract_run_dfa

    run, pairs = noisy_run(runs_dir, name, arch, rate)
    grammar = GRAMMARS[name]
    strings = all_strings(grammar.dfa.alphabet, 12)
    want = grammar.dfa.accepts(strings)
    given = dict(pairs)
    row: dict[str, Any] = {"flipped_share": round(float(np.mean(
        [given[t] != bool(grammar.dfa.accepts([t])[0]) for t in given])), 4)}
    for method in ("refine", "active"):
        t0 = time.perf_counter()
        dfa = extract_run_dfa(run, method=method, seconds=120)
        row[method] = {"n_states": dfa.n_states, "seconds": round(time.perf_counter() - t0, 2),
                       "grammar_agreement_le12": float((dfa.accepts(strings) == want).mean())}
    data = [(tuple(t), y) for t, y in given.items()]
    for label, learner in (("rpni", run_RPNI), ("edsm", run_EDSM)):
        t0 = time.perf_counter()
        aut = learner(data, "dfa", input_completeness="sink_state", print_info=False)
        dfa = to_dfa(aut, grammar.dfa.alphabet)
        row[label] = {"n_states": dfa.n_states, "seconds": round(time.perf_counter() - t0, 2),
                      "grammar_agreement_le12": float((dfa.accepts(strings) == want).mean())}
    return row


def grammar_agreement(dfa: ExtractedDFA, name: str, max_len: int = 12) -> float:
    """Share of all strings of length <= max_len that ``dfa`` classifies as the grammar."""
    grammar = GRAMMARS[name]
    strings = all_strings(grammar.dfa.alphabet, max_len)
    return float((dfa.accepts(strings) == grammar.dfa.accepts(strings)).mean())


def timed(traces: Traces, name: str, **kw: Any) -> tuple[ExtractedDFA, float]:
    """Extraction with the grammar check inside (as ``stateseer extract-dfa`` runs it)."""
    t0 = time.perf_counter()
    dfa = extract_dfa(traces, grammar=GRAMMARS[name], **kw)
    return dfa, time.perf_counter() - t0


# ---------------------------------------------------------------------------------------------
# L* (AALpy) against ours, same equivalence-oracle budget
# ---------------------------------------------------------------------------------------------


class _NumpyLSTM:
    """The run's LSTM stack and head as float64 numpy (one symbol at a time, no torch call).

    Parameters
    ----------
    model : stateseer.rnn_models.models.RNNClassifier
        Built-in LSTM (``model.rnns`` of single-layer ``nn.LSTM``, ``model.head`` linear).
    """

    def __init__(self, model: Any) -> None:
        self.emb = model.embedding.weight.detach().double().numpy()
        self.layers = []
        for rnn in model.rnns:
            w_ih = rnn.weight_ih_l0.detach().double().numpy()
            w_hh = rnn.weight_hh_l0.detach().double().numpy()
            b = (rnn.bias_ih_l0 + rnn.bias_hh_l0).detach().double().numpy()
            self.layers.append((w_ih, w_hh, b))
        self.hidden = self.layers[0][1].shape[1]
        self.head_w = model.head.weight.detach().double().numpy()
        self.head_b = model.head.bias.detach().double().numpy()

    def initial(self) -> list[tuple[np.ndarray, np.ndarray]]:
        z = np.zeros(self.hidden)
        return [(z, z)] * len(self.layers)

    def step(self, state: list, token: int) -> list:
        x, out = self.emb[token], []
        for (w_ih, w_hh, b), (h, c) in zip(self.layers, state, strict=True):
            g = w_ih @ x + w_hh @ h + b
            i, f, gg, o = np.split(g, 4)
            c = _sigmoid(f) * c + _sigmoid(i) * np.tanh(gg)
            h = _sigmoid(o) * np.tanh(c)
            out.append((h, c))
            x = h
        return out

    def predict(self, state: list) -> int:
        return int(np.argmax(self.head_w @ state[-1][0] + self.head_b))


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def _lstar_sul(net: _NumpyLSTM, token_of: dict[str, int], accept: int) -> Any:
    """An AALpy SUL whose output after each symbol is whether the RNN accepts the prefix."""
    from aalpy.base import SUL

    class RNNSUL(SUL):
        def pre(self) -> None:
            self.state = net.initial()

        def post(self) -> None:
            pass

        def step(self, letter: str | None) -> bool:
            if letter is not None:  # None: the empty word's query
                self.state = net.step(self.state, token_of[letter])
            return net.predict(self.state) == accept

    return RNNSUL()


class _Timeout(Exception):
    pass


def run_lstar(net: _NumpyLSTM, token_of: dict[str, int], accept: int, budget: int,
              timeout: int, seed: int = 0) -> tuple[Any, dict[str, Any]]:
    """AALpy's L* with a RandomWordEqOracle of ``budget`` words in total, stopped after
    ``timeout`` seconds (then the last hypothesis it proposed is returned)."""
    import random
    import signal

    from aalpy.learning_algs import run_Lstar
    from aalpy.oracles import RandomWordEqOracle

    class Oracle(RandomWordEqOracle):
        last = None

        def find_cex(self, hypothesis: Any) -> Any:
            Oracle.last = hypothesis
            return super().find_cex(hypothesis)

    alphabet = sorted(token_of)
    random.seed(seed)
    sul = _lstar_sul(net, token_of, accept)
    oracle = Oracle(alphabet, sul, num_walks=budget, min_walk_len=1, max_walk_len=20,
                    reset_after_cex=False)

    def stop(*_: Any) -> None:
        raise _Timeout

    previous = signal.signal(signal.SIGALRM, stop)
    signal.alarm(timeout)
    t0 = time.perf_counter()
    finished = True
    try:
        hyp = run_Lstar(alphabet, sul, oracle, "dfa", print_level=0)
    except _Timeout:
        hyp, finished = Oracle.last, False
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    info = {"seconds": round(time.perf_counter() - t0, 2), "finished": finished,
            "membership_queries": int(sul.num_queries),
            "eq_oracle_words": int(oracle.num_walks_done)}
    return hyp, info


def _front(points: list[tuple[int, float]]) -> list[tuple[int, float]]:
    """Pareto front of (states, agreement): fewer states and more agreement are better."""
    out: list[tuple[int, float]] = []
    for n, a in sorted(points, key=lambda p: (p[0], -p[1])):
        if not out or a > out[-1][1]:
            out.append((n, a))
    return out


def _dominated(p: tuple[int, float], front: list[tuple[int, float]]) -> bool:
    return any(n <= p[0] and a >= p[1] for n, a in front)


def compare_lstar(runs_dir: Path, name: str, arch: str, budgets: list[int], caps: list[int],
                  refine_states: int, timeout: int) -> dict[str, Any]:
    """Ours and L* on the 1-epoch RNN of ``name`` under each equivalence-oracle budget."""
    import torch

    from stateseer.rnn_models.loading import load_model
    from stateseer.rnn_models.record import record_texts
    from stateseer.rnn_models.run import ModelRun

    traces = get_traces(runs_dir, name, arch, 1, 1)
    run = ModelRun(traces.path.parent)
    model, vocab = load_model(run), run.vocab()
    torch.set_num_threads(1)
    accept = list(traces.classes).index("accept")
    alphabet = ["0", "1"]
    strings = all_strings(tuple(alphabet), 12)
    test = traces["test"]
    rnn_of = dict(zip(test.texts, test.predictions, strict=True))
    rnn = np.array([rnn_of[s] for s in strings])  # the RNN on all 8,191 strings <= 12
    net = _NumpyLSTM(model)
    token_of = {a: int(vocab.encode([a])[0]) for a in alphabet}
    check = np.array([_np_classify(net, token_of, s) for s in strings[:1023]])
    copy_agreement = float((check == rnn[:1023]).mean())

    def agree(cls: np.ndarray) -> float:
        return round(float((cls == rnn).mean()), 4)

    rows = []
    for budget in budgets:
        t0 = time.perf_counter()
        rng = np.random.default_rng(0)
        words = ["".join(rng.choice(alphabet, size=int(n))) for n in rng.integers(1, 21, budget)]
        sample = record_texts(model, vocab, words, tokenizer="char")
        t_sample = time.perf_counter() - t0
        ours = []
        for cap in caps:
            t1 = time.perf_counter()
            refine = min(MAX_REFINE, max(refine_states, 2 * cap))
            dfa = extract_dfa(traces, max_states=refine, states=cap,
                              extra=[(sample, 1)], eval_split=None, time_limit=6.0)
            sec = time.perf_counter() - t1 + t_sample
            ours.append({"state_cap": cap, "refine_states": refine, "n_states": dfa.n_states,
                         "agreement_le12": agree(dfa.classify(strings)),
                         "seconds": round(sec, 2)})
        hyp, info = run_lstar(net, token_of, accept, budget, timeout)
        lstar = dict(info)
        if hyp is not None:
            table = to_dfa(hyp, alphabet)
            lstar["n_states"] = table.n_states
            lstar["agreement_le12"] = agree(np.where(table.accepts(strings), accept,
                                                     1 - accept))
        rows.append({"oracle_strings": budget, "ours": ours, "lstar": lstar})
    ours_front = _front([(o["n_states"], o["agreement_le12"]) for r in rows for o in r["ours"]])
    lstar_pts = [(r["lstar"]["n_states"], r["lstar"]["agreement_le12"]) for r in rows
                 if "n_states" in r["lstar"]]
    per_budget = [all(_dominated((r["lstar"]["n_states"], r["lstar"]["agreement_le12"]),
                                 _front([(o["n_states"], o["agreement_le12"])
                                         for o in r["ours"]]))
                      for _ in [0] if "n_states" in r["lstar"]) for r in rows]
    return {"rnn_test_accuracy": float((test.predictions == np.asarray(test.labels)).mean()),
            "numpy_copy_agreement": copy_agreement, "budgets": rows,
            "ours_front": ours_front, "lstar_front": _front(lstar_pts),
            "dominates": all(_dominated(p, ours_front) for p in lstar_pts),
            "dominates_per_budget": per_budget}


def _np_classify(net: _NumpyLSTM, token_of: dict[str, int], s: str) -> int:
    state = net.initial()
    for ch in s:
        state = net.step(state, token_of[ch])
    return net.predict(state)


def print_comparison(name: str, c: dict[str, Any], timeout: int) -> None:
    """The comparison table of one grammar."""
    print(f"\n{name}: ours vs AALpy L* (1-epoch LSTM, test accuracy "
          f"{c['rnn_test_accuracy']:.4f}); agreement with the RNN on all 8,191 strings <= 12")
    print(f"{'B':>5} {'method':>14} {'states':>6} {'agree<=12':>9} {'seconds':>9}  notes")
    for r in c["budgets"]:
        for o in r["ours"]:
            print(f"{r['oracle_strings']:5d} {'ours cap ' + str(o['state_cap']):>14} "
                  f"{o['n_states']:6d} {o['agreement_le12']:9.4f} {o['seconds']:9.2f}")
        L = r["lstar"]
        sec = f"{L['seconds']:.1f}" if L["finished"] else f"> {timeout}"
        n = L.get("n_states", "-")
        a = f"{L['agreement_le12']:.4f}" if "agreement_le12" in L else "-"
        print(f"{r['oracle_strings']:5d} {'L*':>14} {n!s:>6} {a:>9} {sec:>9}  "
              f"{L['membership_queries']} membership queries, {L['eq_oracle_words']} "
              "oracle words")
    print(f"  dominates (front over budgets): {c['dominates']}; per budget: "
          f"{c['dominates_per_budget']}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs-dir", type=Path, default=Path("/tmp/stateseer-dfa-bench"))
    ap.add_argument("--arch", default="lstm", choices=["lstm", "gru", "rnn"])
    ap.add_argument("--threads", type=int, default=1,
                    help="torch threads for training (small models train fastest on one)")
    ap.add_argument("--grammars", nargs="*", default=GRAMMAR_NAMES,
                    help="perfect-RNN grammars to measure (a quick smoke: --grammars tomita1)")
    ap.add_argument("--imperfect", nargs="*", default=IMPERFECT,
                    help="grammars of the imperfect-RNN budget curves (none: skip them)")
    ap.add_argument("--lstar", nargs="*", default=IMPERFECT,
                    help="grammars of the L* comparison (none: skip it)")
    ap.add_argument("--oracle-budgets", nargs="+", type=int, default=ORACLE_BUDGETS,
                    help="equivalence-oracle budgets B (sampled strings) of the L* comparison")
    ap.add_argument("--state-caps", nargs="+", type=int, default=STATE_CAPS,
                    help="our state caps (extract_dfa states=) per budget")
    ap.add_argument("--refine-states", type=int, default=100,
                    help="our refinement budget before shrinking (extract_dfa max_states=; "
                    "at least twice the cap)")
    ap.add_argument("--lstar-timeout", type=int, default=60, help="seconds per L* run")
    ap.add_argument("--noisy", nargs="*", default=["tomita3", "tomita5", "tomita6"],
                    help="grammars of the noisy-label comparison with RPNI/EDSM")
    ap.add_argument("--noise", nargs="+", type=float, default=[0.01, 0.02, 0.05],
                    help="label flip rates of the noisy-label comparison")
    args = ap.parse_args()
    args.runs_dir.mkdir(parents=True, exist_ok=True)

    tomita: dict[str, Any] = {}
    print(f"{'grammar':10} {'seconds':>8} {'states':>6} {'minimal':>7} {'exact<=12':>9} "
          f"{'rnn_agree':>9}   baseline k-means (k: states, agreement)")
    for name in args.grammars:
        traces = get_traces(args.runs_dir, name, args.arch, None, args.threads)
        dfa, seconds = timed(traces, name)
        r = dfa.report
        baseline = {}
        for k in BASELINE_K:
            b, b_s = timed(traces, name, initial_states=k, max_states=k)
            baseline[str(k)] = {"n_states": b.n_states, "seconds": round(b_s, 4),
                                "agreement": b.report["agreement"],
                                "grammar_agreement_le12": grammar_agreement(b, name)}
        from stateseer.app.workflows.dfa import extract_run_dfa

        t_act = time.perf_counter()
        act = extract_run_dfa(Path(traces.path).parent, method="active", seconds=120)
        active = {"n_states": act.n_states, "seconds": round(time.perf_counter() - t_act, 3),
                  "membership_queries": act.report["membership_queries"],
                  "minimal_size_match": act.n_states == GRAMMARS[name].dfa.n_states,
                  "grammar_agreement_le12": grammar_agreement(act, name)}
        tomita[name] = {
            "active": active,
            "seconds": round(seconds, 4), "n_states": dfa.n_states,
            "minimal_states": GRAMMARS[name].dfa.n_states,
            "minimal_size_match": dfa.n_states == GRAMMARS[name].dfa.n_states,
            "grammar_agreement_le12": grammar_agreement(dfa, name),
            "n_states_before_minimisation": r["n_states_before_minimisation"],
            "refinement_rounds": r["refinement_rounds"], "deterministic": r["deterministic"],
            "agreement": r["agreement"], "agreement_le12": r["agreement_le12"],
            "baseline": baseline,
        }
        t = tomita[name]
        base = "  ".join(f"k={k}: {v['n_states']}, {v['agreement']:.4f}"
                         for k, v in baseline.items())
        print(f"{name:10} {seconds:8.3f} {t['n_states']:6d} {t['minimal_size_match']!s:>7} "
              f"{t['grammar_agreement_le12']:9.4f} {r['agreement']:9.4f}   {base}   active: "
              f"{active['n_states']} states, exact {active['grammar_agreement_le12']:.4f}, "
              f"{active['seconds']:.2f} s", flush=True)

    budget_curve: dict[str, Any] = {}
    for name in args.imperfect:
        traces = get_traces(args.runs_dir, name, args.arch, 1, args.threads)
        test = traces["test"]
        rnn_acc = float((test.predictions == np.asarray(test.labels)).mean())
        print(f"\n{name}, imperfect {args.arch} (1 epoch, test accuracy {rnn_acc:.4f})")
        print(f"{'budget':>6} {'seconds':>8} {'before':>6} {'states':>6} {'exhausted':>9} "
              f"{'agree<=12':>9} {'agree':>7} {'prefix':>7} {'grammar<=12':>11}")
        rows = []
        for budget in BUDGETS:
            dfa, seconds = timed(traces, name, max_states=budget)
            r = dfa.report
            row = {"budget": budget, "seconds": round(seconds, 4),
                   "n_states_before_minimisation": r["n_states_before_minimisation"],
                   "n_states": dfa.n_states, "budget_exhausted": r["budget_exhausted"],
                   "agreement_le12": r["agreement_le12"], "agreement": r["agreement"],
                   "prefix_agreement": r["prefix_agreement"],
                   "grammar_agreement_le12": grammar_agreement(dfa, name)}
            rows.append(row)
            print(f"{budget:6d} {seconds:8.3f} {row['n_states_before_minimisation']:6d} "
                  f"{row['n_states']:6d} {row['budget_exhausted']!s:>9} "
                  f"{row['agreement_le12']:9.4f} {row['agreement']:7.4f} "
                  f"{row['prefix_agreement']:7.4f} {row['grammar_agreement_le12']:11.4f}",
                  flush=True)
        budget_curve[name] = {"rnn_test_accuracy": rnn_acc, "curve": rows}

    comparison: dict[str, Any] = {}
    for name in args.lstar:
        comparison[name] = compare_lstar(args.runs_dir, name, args.arch, args.oracle_budgets,
                                         args.state_caps, args.refine_states,
                                         args.lstar_timeout)
        print_comparison(name, comparison[name], args.lstar_timeout)

    noisy: dict[str, Any] = {}
    for name in args.noisy:
        for rate in args.noise:
            row = compare_noisy(args.runs_dir, name, args.arch, rate)
            noisy[f"{name}@{rate:g}"] = row
            print(f"{name} noise {rate:g}: " + "  ".join(
                f"{k} {v['n_states']} states, {v['grammar_agreement_le12']:.4f}"
                for k, v in row.items() if isinstance(v, dict)), flush=True)

    seconds_all = [t["seconds"] for t in tomita.values()] + [
        row["seconds"] for c in budget_curve.values() for row in c["curve"]]
    result = {
        "arch": args.arch,
        "tomita": tomita,
        "budget_curve": budget_curve,
        "max_seconds": max(seconds_all, default=None),
        "all_exact": all(t["minimal_size_match"] and t["grammar_agreement_le12"] == 1.0
                         for t in tomita.values()),
        "aalpy_reported": AALPY_REPORTED,
        "lstar_comparison": comparison,
        "lstar_all_dominated": all(c["dominates"] for c in comparison.values()),
        "all_exact_active": all(t["active"]["minimal_size_match"]
                                and t["active"]["grammar_agreement_le12"] == 1.0
                                for t in tomita.values()),
        "noisy": noisy,
        "ours_max_seconds": max((o["seconds"] for c in comparison.values()
                                 for r in c["budgets"] for o in r["ours"]), default=None),
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
