"""``stateseer extract-dfa``: the deterministic automaton of a run, saved beside its
abstraction, optionally honouring strings whose answer the user knows (``--examples``).

Methods (``--method``):

``active``
    The run's model answers a learner's questions (KV or L*, AALpy):
    :func:`~stateseer.abstraction.automata.dfa.queried.extract_dfa_active`. Needs the
    model and two classes; the run's abstraction, when there is one, guides the search for
    counterexamples.
``refine``
    Refinement of the recorded training prefixes' hidden states, no model needed
    (:func:`~stateseer.abstraction.automata.dfa.extract_dfa`); imported runs use it.
``auto`` (default)
    ``active`` when the run has a model, two classes and an alphabet of at most
    :data:`ACTIVE_ALPHABET` symbols (a formal language: a learner asks about every symbol
    in every state), and no ``--examples`` or ``--merge-to`` is given; else ``refine``.
    The report's ``method`` says which ran.

Examples file: one example per line, ``STRING<TAB>LABEL``, where LABEL is one of the run's
class names (``accept`` / ``reject`` for the built-in grammars) and STRING is written as the
run's data is (characters for ``char`` runs such as ``0110``, space-separated symbols for
``space`` runs); an empty STRING (the line starts with the tab) is the empty input. Blank
lines and lines starting with ``#`` are skipped.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from stateseer.abstraction.automata.dfa.extract import extract_dfa, training_alphabet
from stateseer.abstraction.automata.dfa.extracted import ExtractedDFA
from stateseer.abstraction.pipeline import fresh_traces
from stateseer.core import layout
from stateseer.core.errors import StateseerError
from stateseer.core.rundir import RunDir
from stateseer.rnn_models.formal import GRAMMARS

__all__ = ["ACTIVE_ALPHABET", "METHODS", "ModelQuestions", "extract_run_dfa",
           "read_examples"]

METHODS = ("auto", "active", "refine")
#: the largest alphabet ``auto`` learns actively
ACTIVE_ALPHABET = 100

EXAMPLES_FORMAT = "STRING<TAB>LABEL"


def read_examples(path: str | Path, classes: list[str], alphabet: tuple[str, ...],
                  tokenizer: str) -> tuple[list[str], np.ndarray]:
    """Parse an examples file (format in the module docstring).

    Parameters
    ----------
    path : str or Path
    classes : list of str
        The run's class names; labels must be one of them.
    alphabet : tuple of str
        Symbols of the training split; every symbol of an example must be one of them.
    tokenizer : {'char', 'space'}

    Returns
    -------
    texts : list of str
        The example strings, shape (n_examples,).
    labels : ndarray of shape (n_examples,)
        Class index of each.

    Raises
    ------
    StateseerError
        Unreadable file, no examples, or a malformed line (one line naming it and the fix).
    """
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise StateseerError(f"--examples {path} cannot be read ({exc}); give a UTF-8 text "
                             f"file of {EXAMPLES_FORMAT} lines") from None
    index = {c: i for i, c in enumerate(classes)}
    symbols = set(alphabet)
    texts, labels = [], []
    for no, line in enumerate(lines, start=1):
        if not line.strip() or line.startswith("#"):
            continue
        where = f"--examples {path} line {no}"
        parts = line.split("\t")
        if len(parts) != 2:
            raise StateseerError(
                f"{where}: expected {EXAMPLES_FORMAT} (one tab), got {line[:40]!r}; separate "
                "the string and its label with a single tab")
        text, label = parts[0], parts[1].strip()
        if label not in index:
            raise StateseerError(
                f"{where}: label {label[:20]!r} is not a class of the run; use one of "
                f"{', '.join(classes)}")
        toks = list(text) if tokenizer == "char" else text.split()
        bad = [t for t in toks if t not in symbols]
        if bad:
            raise StateseerError(
                f"{where}: symbol {bad[0]!r} never occurs in the training data; use only "
                f"{', '.join(alphabet)}")
        texts.append(text)
        labels.append(index[label])
    if not texts:
        raise StateseerError(f"--examples {path} holds no examples; write {EXAMPLES_FORMAT} "
                             "lines")
    return texts, np.asarray(labels, dtype=np.int64)


def _trace_examples(run: RunDir, texts: list[str], tokenizer: str) -> Any:
    """The examples run through the run's model (hidden states, per-prefix predictions)."""
    from stateseer.rnn_models.loading import load_model
    from stateseer.rnn_models.record import record_texts
    from stateseer.rnn_models.tokenizers import Vocab

    vocab = Vocab.load(run.vocab_path)
    return record_texts(load_model(run), vocab, texts, tokenizer=tokenizer,
                        truncate=run.truncate)


class ModelQuestions:
    """The run's model asked about words of symbols (the active learner's oracle).

    Parameters
    ----------
    run : RunDir
    accept : int
        The class that counts as accepted.
    """

    def __init__(self, run: RunDir, accept: int) -> None:
        from stateseer.rnn_models.loading import load_model
        from stateseer.rnn_models.tokenizers import Vocab

        self.model, self.vocab = load_model(run), Vocab.load(run.vocab_path)
        self.accept, self.truncate = accept, run.truncate

    def _ids(self, words: list[list[str]]) -> list[np.ndarray]:
        cut = self.truncate
        return [np.asarray(self.vocab.encode(w[:cut] if cut else w), np.int64) for w in words]

    def every_prefix(self, words: list[list[str]]) -> list[np.ndarray]:
        """Accepted or not after every prefix of each word, the empty prefix first."""
        import torch

        from stateseer.rnn_models.record import _traced

        seqs = self._ids(words)
        with torch.no_grad():
            empty = int(self.model.initial()[1].argmax()) == self.accept
        _, proba, _ = _traced(self.model, seqs)
        step = proba.argmax(1) == self.accept
        ends = np.cumsum([len(q) for q in seqs])
        out = []
        for w, part in zip(words, np.split(step, ends[:-1]), strict=True):
            row = np.r_[empty, part]
            out.append(np.r_[row, np.repeat(row[-1], len(w) + 1 - len(row))])
        return out

    def final(self, words: list[list[str]]) -> np.ndarray:
        """Accepted or not, each whole word: bool of shape (n_words,)."""
        from stateseer.rnn_models.record import predict_ids

        return predict_ids(self.model, self._ids(words)).argmax(1) == self.accept


def _method(run: RunDir, traces: Any, method: str, examples: Any, states: Any) -> str:
    """The method that runs: ``auto`` resolved, an impossible ``active`` refused."""
    if method not in METHODS:
        raise StateseerError(f"unknown method {method!r}; use one of {', '.join(METHODS)}")
    from stateseer.rnn_models.loading import model_kind

    has_model = model_kind(run) in ("builtin", "factory")
    two = len(traces.classes) == 2
    if method == "auto":
        small = len(training_alphabet(traces)) <= ACTIVE_ALPHABET if two else False
        return "active" if has_model and two and small and examples is None \
            and states is None else "refine"
    if method == "active":
        if not has_model:
            raise StateseerError("--method active needs the run's model, and this run has "
                                 "none at hand (imported traces, or a model object passed "
                                 "in-process); use --method refine")
        if examples is not None or states is not None:
            raise StateseerError("--examples and --merge-to belong to --method refine; drop "
                                 "them or use --method refine")
    return method


def _abstract_states(run: RunDir) -> np.ndarray | None:
    """The abstract state of every training step, when the run has an abstraction."""
    from stateseer.abstraction.pipeline import Abstraction

    try:
        return Abstraction.load(run.abstraction_dir).states.get("train")
    except StateseerError:
        return None


def extract_run_dfa(run: RunDir | str | Path, *, max_states: int = 200,
                    random_state: int = 0, examples: str | Path | None = None,
                    states: int | None = None, method: str = "auto",
                    seconds: float = 600.0, algorithm: str = "kv",
                    epsilon: float | None = None, tests_on: str = "auto",
                    mutants: int = 0) -> ExtractedDFA:
    """Extract the run's DFA, save ``abstraction/automata/dfa.json`` and record its report in
    ``metrics.json["abstraction"]["dfa"]``.

    When the run's data set is a built-in grammar, the report compares the automaton with
    the grammar (``grammar_agreement_le12``, ``minimal_size_match``). With ``examples``
    (a file, see the module docstring) the examples are run through the model and added to
    the training prefixes with a weight above the whole training set, so refinement treats
    them as counterexamples first; ``report["examples"]`` then says how many the DFA and
    the RNN itself classify as labelled. ``states`` caps the automaton's size
    (:func:`stateseer.abstraction.automata.dfa.extract_dfa`). ``method``, ``seconds``,
    ``algorithm``, ``epsilon``, ``tests_on`` and ``mutants``: see the module notes (all but
    ``method`` are the active learner's;
    :func:`~stateseer.abstraction.automata.dfa.queried.extract_dfa_active`).
    """
    run = run if isinstance(run, RunDir) else RunDir(run)
    traces = fresh_traces(run)
    grammar = GRAMMARS.get(str(traces.meta.get("dataset")))
    if _method(run, traces, method, examples, states) == "active":
        from stateseer.abstraction.automata.dfa.queried import (
            accept_class_of,
            extract_dfa_active,
        )

        ask = ModelQuestions(run, accept_class_of(traces.classes))
        dfa = extract_dfa_active(traces, ask.every_prefix, ask.final,
                                 abstract_states=_abstract_states(run), max_states=max_states,
                                 seconds=seconds, random_state=random_state,
                                 algorithm=algorithm, epsilon=epsilon, grammar=grammar,
                                 tests_on=tests_on, mutants=mutants)
        return _save(run, dfa)
    extra, checked = [], None
    if examples is not None:
        tokenizer = "char" if run.config.get("data", {}).get("tokenizer") == "char" else "space"
        texts, labels = read_examples(examples, list(traces.classes),
                                      training_alphabet(traces), tokenizer)
        traced = _trace_examples(run, texts, tokenizer)
        extra = [(traced, traces["train"].n_inputs + 1)]
        checked = (texts, labels, np.asarray(traced.final_proba).argmax(axis=1))
    dfa = extract_dfa(traces, max_states=max_states, random_state=random_state,
                      grammar=grammar, extra=extra, states=states)
    dfa.report["method"] = "refine"
    if checked is not None:
        dfa.report["examples"] = example_report(dfa, *checked)
    return _save(run, dfa)


def _save(run: RunDir, dfa: ExtractedDFA) -> ExtractedDFA:
    """Write the automaton and its report's scalars (and examples) into the run."""
    dfa.save(run.abstraction_dir / layout.DFA, overwrite=True)
    m = run.metrics().get("abstraction", {})
    m["dfa"] = {k: v for k, v in dfa.report.items() if not isinstance(v, (list, dict))}
    for key in ("examples", "counterexamples"):
        if key in dfa.report:
            m["dfa"][key] = dfa.report[key]
    run.update_metrics(abstraction=m)
    return dfa


def example_report(dfa: ExtractedDFA, texts: list[str], labels: np.ndarray,
                   rnn: np.ndarray) -> dict[str, Any]:
    """How many examples the DFA and the RNN classify as labelled.

    Parameters
    ----------
    dfa : ExtractedDFA
    texts : list of str
    labels, rnn : ndarray of shape (n_examples,)
        The user's class and the RNN's predicted class of each example.
    """
    got = dfa.classify(texts)
    wrong = [t for t, g, y in zip(texts, got, labels, strict=True) if g != y]
    return {"n": len(texts), "dfa_correct": int((got == labels).sum()),
            "rnn_correct": int((rnn == labels).sum()),
            "dfa_correct_where_rnn_correct": int(((got == labels) & (rnn == labels)).sum()),
            "dfa_wrong": wrong[:10]}
