"""A DeepSeer replication study for a run: ``stateseer study-template RUN --out FILE``.

DeepSeer's evaluation (CHI 2023) had participants explain misclassified reviews with the
state-abstraction tool and with a LIME-like baseline. :func:`deepseer_study` writes that
design as a study file for any recorded run of two or more classes:

- consent, then an attention check;
- within subject (``assignment: latin``): the full explorer and the ``baseline``
  condition (instance table, token-coloured trace text, attribution), one block each, in
  a Williams order;
- per block, ``per_block`` misclassified test inputs, each with an *understanding* task
  (a choice with a key: at which word does the model's running prediction turn to the
  wrong class for good? The options are that word and three other words of the input)
  and a *root-cause* task (an open answer, coded by two coders from ``coding.csv``);
- SUS and raw NASA-TLX after each block, a debriefing at the end.

The inputs are chosen from the run's own intermediate predictions: misclassified test
inputs of 6 to 25 tokens whose running prediction becomes the final (wrong) class once,
at a word of four letters or more (not at the first or last token) and then stays, the
most confident first. The file names the model (``model_sha256``): the keys are facts
about that model, and the study server refuses another. The
key is therefore a fact about the model, and both conditions show it (the full explorer in
the trace's prediction chart, the baseline in the colours of the trace text).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from stateseer.app.study.spec import StudyError

__all__ = ["deepseer_study", "flip_inputs"]


def flip_inputs(tr: Any, *, min_len: int = 6, max_len: int = 25) -> list[dict[str, Any]]:
    """Misclassified inputs whose running prediction turns to the final class once, at a
    word: ``{"row", "id", "tokens", "at"}`` each (``at``: the index of that word), the most
    confident final prediction first.

    Parameters
    ----------
    tr : split traces
        With ``labels``, ``predictions``, ``final_proba``, per-step ``proba`` and
        ``steps(i)``, ``tokens(i)``, ``rows``.
    """
    labels, pred = np.asarray(tr.labels), np.asarray(tr.predictions)
    conf = np.asarray(tr.final_proba).max(1)
    out = []
    for i in np.flatnonzero((labels != pred) & (labels >= 0)).tolist():
        toks = tr.tokens(i)
        if not min_len <= len(toks) <= max_len:
            continue
        running = np.asarray(tr.proba[tr.steps(i)]).argmax(1)
        turned = np.flatnonzero(running == pred[i])
        if not len(turned) or turned[0] == 0 or turned[0] >= len(toks) - 1:
            continue
        k = int(turned[0])
        if not (running[k:] == pred[i]).all() or not toks[k].isalpha() or len(toks[k]) < 4:
            continue  # a word, not "the" or "and": what the model turned at is content
        out.append({"row": i, "id": int(tr.rows[i]), "tokens": list(toks), "at": k,
                    "confidence": float(conf[i])})
    return sorted(out, key=lambda x: -x["confidence"])


def _options(item: dict[str, Any], rng: np.random.Generator) -> list[str]:
    word = item["tokens"][item["at"]]
    others = sorted({t for t in item["tokens"] if t.isalpha() and t != word and len(t) > 3})
    if len(others) < 3:
        return []
    picks = [str(w) for w in rng.choice(others, 3, replace=False)]
    return sorted([word, *picks], key=item["tokens"].index)  # in reading order


def deepseer_study(run: str | Path, *, per_block: int = 2, seed: int = 0,
                   study_id: str = "deepseer-replication") -> dict[str, Any]:
    """The study file (a dict, see the module notes) for ``run``.

    Raises
    ------
    StudyError
        The run has too few misclassified test inputs that turn once (one line).
    """
    from stateseer.app.workflows.runview import RunView

    rv = RunView(run)
    tr = rv.traces["test"]
    classes = list(rv.traces.classes)
    rng = np.random.default_rng(seed)
    picked = []
    for item in flip_inputs(tr):
        options = _options(item, rng)
        if options:
            picked.append((item, options))
        if len(picked) == 2 * per_block:
            break
    if len(picked) < 2 * per_block:
        raise StudyError(f"the run has {len(picked)} misclassified test inputs whose "
                         f"prediction turns once at a word, and the study needs "
                         f"{2 * per_block} — pass a smaller --per-block")
    tasks: list[dict[str, Any]] = [
        {"id": "consent", "answer": "consent", "prompt":
         "This study compares two tools that explain how a text classifier reads. You "
         "will explain some of its mistakes and rate each tool. It takes about 40 "
         "minutes; your answers are stored under a code, not your name, and you may stop "
         "at any time."},
        {"id": "attention", "key": "blue",
         "answer": {"type": "attention_check", "options": ["red", "green", "blue"]},
         "prompt": "To show that you read the instructions, choose 'blue'."}]
    sets: list[list[str]] = [[], []]
    for n, (item, options) in enumerate(picked):
        pred = classes[int(tr.predictions[item["row"]])]
        true = classes[int(tr.labels[item["row"]])]
        sets[n // per_block] += [f"understand-{n + 1}", f"cause-{n + 1}"]
        tasks += [
            {"id": f"understand-{n + 1}", "open": [item["id"]], "key": item["tokens"][
                item["at"]], "answer": {"type": "choice", "options": options},
             "prompt": f"Input #{item['id']} is labelled {true!r} but the model says "
                       f"{pred!r}. While reading it, at which word does the model's "
                       f"prediction turn to {pred!r} and stay there?"},
            {"id": f"cause-{n + 1}", "open": [item["id"]], "answer": "text",
             "prompt": f"Why does the model call input #{item['id']} {pred!r}? Say in one "
                       "or two sentences what in the input, or in what the model learnt, "
                       "causes the mistake."}]
    tasks += [{"id": "sus", "prompt": "About the tool you just used", "answer": "sus"},
              {"id": "tlx", "prompt": "About the tasks you just did", "answer": "nasa_tlx"},
              {"id": "debrief", "answer": "debrief", "prompt":
               "Thank you. The study compared the state-machine explorer with a "
               "LIME-like view (token colours and attributions) on the same mistakes; "
               "the order of the two tools was balanced across participants. Comments "
               "are welcome below."}]
    return {"study": study_id, "title": "Explaining a classifier's mistakes",
            "run": str(run), "model_sha256": rv.traces.meta.get("model_sha256"),
            "conditions": {"full": "full", "baseline": "baseline"},
            "assignment": "latin", "task_time_limit_s": 600, "tasks": tasks,
            "task_sets": sets, "after_each_block": ["sus", "tlx"]}
