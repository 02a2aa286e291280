"""What any choice among the active learner's hypotheses could reach on one TAYSIR net.

Analysis only, never a selection: ``extract-dfa --method active`` keeps every hypothesis
it proposes and chooses among them on the validation words (the smallest within epsilon
of the best). This script runs the same extraction as ``benchmarks/taysir.py`` and then
scores every fifth hypothesis (``--every N``: every N-th) and the chosen one on

- the validation words, whole (what the choice reads),
- every prefix of the validation words, against the net's class after each prefix,
- the held-out test words (what the table reports),
- the fresh random words,

so that a rule for choosing can be judged against the hypotheses that were there to be
chosen. The test words are read here only to describe; choosing on them would leak.

Usage::

    python benchmarks/taysir_frontier.py PATH --net 1.10 [--seconds 420] [--seed 0]
        [--tests-on auto|prefixes|words] [--out F]

With ``--sampled N`` the hypotheses are also scored on N words drawn from an order-3
Markov chain of the training words and on N mutants of them (one to three symbols
replaced; :func:`~stateseer.abstraction.automata.dfa.active.mutant_words`), both labelled
by the net.

Prints the correlation of each validation error with the test error over the hypotheses
of at least 200 states, and per state budget the best test error reachable; ``--out``
keeps the rows (round, states, validation word error, validation prefix error, test
error, fresh error).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import taysir as T  # noqa: E402


def big_of(r: np.ndarray) -> np.ndarray:
    """The rows of hypotheses of at least 200 states."""
    return r[:, 1] >= 200


def markov_words(words: list, n: int, order: int, rng: np.random.Generator) -> list:
    """``n`` words drawn from an order-``order`` Markov chain of ``words`` (their
    transitions only, the end of a word as a symbol)."""
    nxt: dict = {}
    for w in words:
        ctx = ("^",) * order
        for s in (*w, "$"):
            nxt.setdefault(ctx, []).append(s)
            ctx = (*ctx[1:], s)
    out = []
    while len(out) < n:
        ctx, w = ("^",) * order, []
        while True:
            opts = nxt[ctx]
            s = opts[rng.integers(len(opts))]
            if s == "$":
                break
            w.append(s)
            ctx = (*ctx[1:], s)
        out.append(tuple(w))
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("path", type=Path, help="local copy of emuskardin/taysir_competition_mbt")
    p.add_argument("--net", default="1.10")
    p.add_argument("--seconds", type=float, default=420.0)
    p.add_argument("--work", type=Path, default=Path("/tmp/stateseer-taysir-frontier"))
    p.add_argument("--out", type=Path)
    p.add_argument("--seed", type=int, default=0, help="the words' split and the learner's")
    p.add_argument("--tests-on", default="auto", choices=["auto", "prefixes", "words"])
    p.add_argument("--every", type=int, default=5, help="score every N-th hypothesis")
    p.add_argument("--sampled", type=int, default=0,
                   help="also score on this many words drawn from an order-3 Markov chain "
                        "of the train words, and as many one-to-three-symbol mutants of them")
    args = p.parse_args()
    import torch

    import stateseer.abstraction.automata.dfa.active as active
    from stateseer.abstraction.automata.dfa.queried import split_words
    from stateseer.app.workflows.dfa import extract_run_dfa
    from stateseer.core.traces import Traces

    torch.set_num_threads(2)
    kept: dict = {}
    make = active._oracle

    def keep(*a, **k):  # the learner's oracle holds every hypothesis it was shown
        kept["oracle"], kept["alphabet"] = make(*a, **k), list(a[0])
        return kept["oracle"]

    active._oracle = keep
    run, held = T.prepare(args.path, args.net, args.work / args.net, args.seed, 3000)
    dfa = extract_run_dfa(run, method="active", max_states=8000, seconds=args.seconds,
                          random_state=args.seed, tests_on=args.tests_on)
    words, labels = held["words"], held["labels"].astype(bool)
    fresh, fresh_labels = held["fresh"], held["fresh_labels"].astype(bool)
    alphabet, oracle = kept["alphabet"], kept["oracle"]
    traces = Traces(Path(run) / "traces")
    accept = list(traces.classes).index("accept")
    st = traces["val"]
    val, ok = split_words(traces, "val", alphabet)
    step = np.asarray(st.proba).argmax(1) == accept
    offsets = np.asarray(st.offsets)
    truth = [step[offsets[i]:offsets[i] + len(w)] for i, w in enumerate(val) if ok[i]]
    ids, lengths = active._encode(alphabet, [w for w, k in zip(val, ok, strict=True) if k])
    chosen = dfa.report["chosen_round"] - 1
    extra = []
    if args.sampled:
        from taysir_nets import adapter, read_words
        _, start, end = read_words(T.words_file(args.path, args.net, args.work / args.net))
        ad = adapter(args.path / "models" / f"{args.net}.taysir.model", start, end)
        train, _ = split_words(traces, "train", alphabet)
        rng = np.random.default_rng(7)
        for drawn in (markov_words(train, args.sampled, 3, rng),
                      active.mutant_words(train, args.sampled, alphabet, rng)):
            extra.append((drawn, T._labels(ad, [list(w) for w in drawn]).astype(bool)))
    rows = []
    for i, (h, d) in enumerate(zip(oracle.history, oracle.kept, strict=True)):
        if i % args.every and i != chosen:
            continue
        got = d.prefix_labels(ids, lengths)
        bad = sum(int((got[b, 1:lengths[b] + 1] != truth[b]).sum()) for b in range(len(truth)))
        rows.append([i + 1, d.n_states, h.get("heldout_error"), bad / int(lengths.sum()),
                     float((d.accepts(words) != labels).mean()),
                     float((d.accepts(fresh) != fresh_labels).mean()),
                     *[float((d.accepts(x) != y).mean()) for x, y in extra]])
    r = np.array(rows, float)
    big = big_of(r)
    for c in range(6, r.shape[1]):
        print("column", c, "corr with test (>=200 states)",
              float(np.corrcoef(r[big, c], r[big, 4])[0, 1]))
    out = {"net": args.net, "seed": args.seed, "tests_on": args.tests_on,
           "chosen": rows[[x[0] for x in rows].index(chosen + 1)],
           "corr_word_val_test": float(np.corrcoef(r[big, 2], r[big, 4])[0, 1]),
           "corr_prefix_val_test": float(np.corrcoef(r[big, 3], r[big, 4])[0, 1]),
           "best_test_within": {}, "columns": ["round", "states", "val_word_error",
                                               "val_prefix_error", "test_error",
                                               "fresh_error", "markov_error",
                                               "mutant_error"]}
    for budget in (500, 1000, 1500, 2000, 4000):
        m = r[:, 1] <= budget
        if m.any():
            j = int(np.argmin(r[m, 4] + 1e-9 * r[m, 1]))
            out["best_test_within"][budget] = r[m][j].tolist()
    print(json.dumps(out))
    if args.out:
        args.out.write_text(json.dumps({**out, "rows": rows}) + "\n")


if __name__ == "__main__":
    main()
