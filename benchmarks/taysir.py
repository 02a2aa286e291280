"""TAYSIR 2023 track 1: automata from nets nobody here trained, beside the winner's.

Usage::

    python benchmarks/taysir.py PATH [--nets 1.2 1.9] [--seconds 420] [--max-states 2000]
        [--tests-on auto|prefixes|words] [--mutants N]

``PATH`` is a local copy of the public repository ``emuskardin/taysir_competition_mbt``
(the competition winner's: the nets under ``models/1.N.taysir.model``, their validation
words under ``datasets/1.N.taysir.valid.words`` and the winner's automata under
``learned_models/model_1_N.dot``). Nothing is downloaded; a net whose files are absent
from the copy is listed with the reason. Where a net's ``.valid.words`` file is absent,
its words are read from the winner's cache of the net's outputs on them
(``datasets/1.N.taysir.validation.output_map.pickle``; :func:`words_file`); a net without
a published DFA (1.11) is scored beside the majority only.

Per net, as a user would:

1. The net is loaded from its own pickle and code and wrapped in a
   :class:`~stateseer.ClassifierAdapter` with its START and END symbols (the class is read
   after END): ``benchmarks/taysir_nets.py``, written to a factory module
   ``stateseer create`` imports.
2. The validation words are labelled by the net itself and split with seed ``--seed``:
   50 % train (the learner's data words), 20 % val (choosing among hypotheses), 30 % test
   (held out: every figure below). ``stateseer record`` and ``abstract --states 32``
   (the abstraction guides the counterexample search) run on that run.
3. ``extract-dfa --method active`` (KV, ``--seconds``, ``--max-states``, ``--tests-on``,
   ``--mutants``; the defaults are extract-dfa's).
4. Scored against the net: stateseer's DFA, the winner's DFA (read with AALpy's DOT
   reader) and always answering the majority class of the train words, on two sets:

   - ``error``: the held-out test words. The winner's learner tested its hypotheses on
     *all* validation words, so these are held out from stateseer only;
   - ``fresh_error``: ``--fresh`` random words that neither learner saw, each a copy of a
     test word's length with uniformly drawn symbols (seeded), labelled by the net.

The last line printed is one JSON object: ``nets`` (per net: ``ours`` and ``winner`` with
``n_states`` and ``error``, ``majority_error``, ``membership_queries``, ``seconds``
(extraction) and ``total_seconds`` (with record and abstract), ``budget_exhausted``,
``n_test_words``, ``fresh_error`` of both and of the majority, ``targets_met``),
``skipped`` (net: why), the commit and the settings.
"""

from __future__ import annotations

import argparse
import csv
import json
import pickle
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from taysir_nets import adapter, read_words  # noqa: E402

NETS = ["1.1", "1.2", "1.3", "1.4", "1.5", "1.6", "1.7", "1.8", "1.9", "1.10", "1.11"]
FACTORY = '''"""TAYSIR net {net} for stateseer create (written by benchmarks/taysir.py)."""
import sys

sys.path.insert(0, {here!r})
from taysir_nets import adapter, read_words  # noqa: E402

WORDS, START, END = read_words({words!r})


def build():
    return adapter({model!r}, START, END, check=WORDS[:100])
'''


def why_absent(repo: Path, net: str) -> str | None:
    """Why the net cannot be run from this copy, or None."""
    model = repo / "models" / f"{net}.taysir.model"
    if not (model / "data" / "model.pth").exists():
        return "model.pth absent from the stored snapshot"
    words = repo / "datasets" / f"{net}.taysir.valid.words"
    if not _has(words) and not _has(_output_map(repo, net)):
        return "validation words absent from the stored snapshot"
    return None


def _has(path: Path) -> bool:
    return path.exists() and path.stat().st_size > 0


def _output_map(repo: Path, net: str) -> Path:
    return repo / "datasets" / f"{net}.taysir.validation.output_map.pickle"


def _winner_path(repo: Path, net: str) -> Path:
    return repo / "learned_models" / f"model_{net.replace('.', '_')}.dot"


class _PlainUnpickler(pickle.Unpickler):
    """Reads pickles of plain containers only (dicts, tuples, lists, ints, bools): any
    class or function a pickle names is refused, so reading one runs no code."""

    def find_class(self, module: str, name: str):
        raise pickle.UnpicklingError(f"{module}.{name} is not a plain container")


def words_file(repo: Path, net: str, work: Path) -> Path:
    """The net's validation words as a ``*.valid.words`` file.

    Where the copy has no ``.valid.words`` file (1.8, 1.11), the winner's cache of the
    net's answers on the validation words (``*.validation.output_map.pickle``: each word,
    START and END included, to its outputs) holds the same words; on the nets that have
    both, its words are the file's, in the file's order. Its answers are not used: the
    words are labelled by the net here, as every other net's are.
    """
    path = repo / "datasets" / f"{net}.taysir.valid.words"
    if _has(path):
        return path
    with open(_output_map(repo, net), "rb") as f:
        words = list(_PlainUnpickler(f).load())
    symbols = {s for w in words for s in w}
    out = work / f"{net}.taysir.valid.words"
    out.write_text("\n".join([f"{len(words)} {len(symbols)}",
                              *(" ".join(map(str, (len(w), *w))) for w in words)]),
                   encoding="utf-8")
    return out


def _labels(ad, words: list[list[str]]) -> np.ndarray:
    """The net's class (1 accept) of each word, batched."""
    from stateseer.rnn_models.record import predict_ids

    index = {w: i for i, w in enumerate(ad.vocab)}
    seqs = [np.array([index[s] for s in w], np.int64) for w in words]
    return predict_ids(ad, seqs).argmax(1)


def _split(n: int, seed: int) -> np.ndarray:
    """train / val / test, 50 / 20 / 30 %, seeded."""
    order = np.random.default_rng(seed).permutation(n)
    names = np.empty(n, dtype=object)
    a, b = int(0.5 * n), int(0.7 * n)
    names[order[:a]], names[order[a:b]], names[order[b:]] = "train", "val", "test"
    return names


def winner_dfa(path: Path):
    """The winner's automaton as stateseer's DFA over string symbols."""
    from aalpy.utils import load_automaton_from_file

    from stateseer.abstraction.automata.dfa.active import to_dfa

    aut = load_automaton_from_file(str(path), "dfa")
    return to_dfa(aut, sorted({a for s in aut.states for a in s.transitions}, key=int))


def prepare(repo: Path, net: str, work: Path, seed: int, n_fresh: int
            ) -> tuple[Path, dict]:
    """The net's run (created, recorded, abstracted) and its test words and labels."""
    from stateseer.abstraction.pipeline import abstract_run
    from stateseer.rnn_models.engine import record_run
    from stateseer.rnn_models.run import create_model_run

    work.mkdir(parents=True, exist_ok=True)
    words_path = words_file(repo, net, work)
    words, start, end = read_words(words_path)
    model = repo / "models" / f"{net}.taysir.model"
    ad = adapter(model, start, end, check=words[:100])
    labels = _labels(ad, words)
    names = _split(len(words), seed)
    with open(work / "words.csv", "w", newline="", encoding="utf-8") as f:
        out = csv.writer(f)
        out.writerow(["text", "label", "split"])
        for w, y, s in zip(words, labels.tolist(), names.tolist(), strict=True):
            out.writerow([" ".join(w), ["reject", "accept"][y], s])
    factory = work / "net.py"
    factory.write_text(FACTORY.format(net=net, here=str(HERE), model=str(model),
                                      words=str(words_path)))
    run = work / "run"
    create_model_run(run, f"csv:{work / 'words.csv'}", f"{factory}:build", force=True,
                     max_tokens=10_000)
    record_run(run)
    abstract_run(run, n_states=32)
    test = names == "test"
    held = [w for w, t in zip(words, test, strict=True) if t]
    rng = np.random.default_rng(seed + 1)
    symbols = sorted({s for w in words for s in w}, key=int)
    fresh = [list(rng.choice(symbols, len(held[i]))) for i in
             rng.integers(0, len(held), n_fresh)]
    return run, {"words": held, "fresh": fresh, "fresh_labels": _labels(ad, fresh),
                 "labels": labels[test], "batched": type(ad.model).__name__,
                 "train_majority": int(np.bincount(labels[names == "train"],
                                                   minlength=2).argmax())}


def run_net(repo: Path, net: str, work: Path, args: argparse.Namespace) -> dict:
    from stateseer.app.workflows.dfa import extract_run_dfa

    t0 = time.perf_counter()
    run, held = prepare(repo, net, work / net, args.seed, args.fresh)
    t1 = time.perf_counter()
    dfa = extract_run_dfa(run, method="active", max_states=args.max_states,
                          seconds=args.seconds, random_state=args.seed,
                          tests_on=args.tests_on, mutants=args.mutants)
    words, labels = held["words"], held["labels"]
    ours = dfa.classify(words) == dfa.accept_class
    win_path = _winner_path(repo, net)
    win = winner_dfa(win_path) if win_path.exists() else None
    r = dfa.report
    row = {
        "ours": {"n_states": dfa.n_states,
                 "error": round(float((ours != labels.astype(bool)).mean()), 5)},
        "winner": None if win is None else {
            "n_states": win.n_states,
            "error": round(float((win.accepts(words) != labels.astype(bool)).mean()), 5)},
        "majority_error": round(float((labels != held["train_majority"]).mean()), 5),
        "n_test_words": len(words), "membership_queries": r.get("membership_queries"),
        "rounds": r.get("rounds"), "budget_exhausted": r.get("budget_exhausted"),
        "counterexamples": r.get("counterexamples"), "chosen_round": r.get("chosen_round"),
        "seconds": r.get("seconds"), "total_seconds": round(time.perf_counter() - t0, 1),
        "prepare_seconds": round(t1 - t0, 1), "net_wrapper": held["batched"],
    }
    fresh, f_labels = held["fresh"], held["fresh_labels"].astype(bool)
    row["fresh_error"] = {
        "ours": round(float(((dfa.classify(fresh) == dfa.accept_class) != f_labels).mean()), 5),
        "winner": None if win is None else round(float((win.accepts(fresh) != f_labels).mean()),
                                                 5),
        "majority": round(float((f_labels != bool(held["train_majority"])).mean()), 5),
        "n_words": len(fresh)}
    row["targets_met"] = {"ten_minutes": row["total_seconds"] <= 600}
    if win is not None:  # without the winner's DFA (1.11) there is nothing to compare with
        row["targets_met"].update(
            error=row["ours"]["error"] <= row["winner"]["error"] + 0.002,
            states=row["ours"]["n_states"] <= row["winner"]["n_states"])
    return row


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("path", type=Path, help="local copy of emuskardin/taysir_competition_mbt")
    p.add_argument("--nets", nargs="+", default=NETS, help="track-1 nets (default: all)")
    p.add_argument("--seconds", type=float, default=420.0, help="learner's time budget")
    p.add_argument("--max-states", type=int, default=8000, help="learner's state budget")
    p.add_argument("--fresh", type=int, default=3000, help="random words neither saw")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--tests-on", choices=("auto", "prefixes", "words"), default="auto",
                   help="what the learner's equivalence tests compare")
    p.add_argument("--mutants", type=int, default=0,
                   help="words near the training words that join the validation words "
                   "for choosing among the learner's hypotheses")
    p.add_argument("--work", type=Path, default=Path("/tmp/stateseer-taysir"),
                   help="where the runs are written")
    p.add_argument("--out", type=Path, help="also write the JSON here")
    args = p.parse_args()
    import torch

    torch.set_num_threads(2)
    commit = subprocess.run(["git", "-C", str(HERE), "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    nets, skipped = {}, {}
    for net in args.nets:
        why = why_absent(args.path, net)
        if why is None:
            try:
                nets[net] = run_net(args.path, net, args.work, args)
                print(json.dumps({net: nets[net]}), flush=True)
                continue
            except Exception as exc:  # a net that does not load is listed, not fatal
                why = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
        skipped[net] = why
        print(json.dumps({net: {"skipped": why}}), flush=True)
    out = {"benchmark": "taysir-track1", "commit": commit, "seed": args.seed,
           "seconds_budget": args.seconds, "max_states": args.max_states,
           "tests_on": args.tests_on, "mutants": args.mutants,
           "nets": nets, "skipped": skipped}
    if args.out:
        args.out.write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
