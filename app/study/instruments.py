"""Questionnaires, checks and the pages around a study: items, scoring, checking (pure).

Task types beyond the answers to a question about the model:

=======================  ==================================================================
``sus``                  the System Usability Scale (Brooke 1996): ten fixed items, 1-5
                         (strongly disagree .. strongly agree); score 0-100, 68 is average
                         (odd items count ``x - 1``, even items ``5 - x``, the sum × 2.5)
``nasa_tlx``             raw NASA-TLX (Hart 2006): six scales 0-100 in steps of 5, no
                         pairwise weights; the score is their mean (performance runs from
                         0 = perfect to 100 = failure, so higher is always worse)
``likert``               custom ``items`` on a ``scale`` of 2 to 11 points with end
                         ``labels``; ``reverse`` lists items scored the other way round;
                         the score is the items' mean, on the scale's own points
``consent``              the prompt is the consent text; "I agree" goes on, "I do not
                         agree" ends the study for the participant (nothing more is asked)
``debrief``              the prompt is the debriefing; the participant reads it and finishes
``attention_check``      a question whose ``key`` must be chosen; it tests the question
                         itself (e.g. "to show you read this, choose 'blue'"), following
                         Prolific's rules: no trick fonts, no memory recall, clear options
``comprehension_check``  a question about the instructions or the task, with its ``key``
=======================  ==================================================================

Checks are graded like any keyed choice (``correct``); a participant's failed checks are
counted in the exports. Questionnaires can follow each block of a within-subject design
(the study file's ``after_each_block``) or the end.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from stateseer.app.study.spec import AGREE, DECLINE, StudyError, Task

__all__ = ["AGREE", "CHECKS", "DECLINE", "NO_EXPLORER", "QUESTIONNAIRES", "SUS_ITEMS",
           "TLX_SCALES", "check_items", "items_of", "score"]

SUS_ITEMS = (
    "I think that I would like to use this system frequently.",
    "I found the system unnecessarily complex.",
    "I thought the system was easy to use.",
    "I think that I would need the support of a technical person to be able to use this "
    "system.",
    "I found the various functions in this system were well integrated.",
    "I thought there was too much inconsistency in this system.",
    "I would imagine that most people would learn to use this system very quickly.",
    "I found the system very cumbersome to use.",
    "I felt very confident using the system.",
    "I needed to learn a lot of things before I could get going with this system.")
#: (scale, question, low end, high end)
TLX_SCALES = (
    ("Mental demand", "How mentally demanding was the task?", "very low", "very high"),
    ("Physical demand", "How physically demanding was the task?", "very low", "very high"),
    ("Temporal demand", "How hurried or rushed was the pace of the task?", "very low",
     "very high"),
    ("Performance", "How successful were you in accomplishing what you were asked to do?",
     "perfect", "failure"),
    ("Effort", "How hard did you have to work to accomplish your level of performance?",
     "very low", "very high"),
    ("Frustration", "How insecure, discouraged, irritated, stressed and annoyed were you?",
     "very low", "very high"))
QUESTIONNAIRES = ("sus", "nasa_tlx", "likert")
CHECKS = ("attention_check", "comprehension_check")
#: task types shown without the explorer (nothing in them is about the model)
NO_EXPLORER = (*QUESTIONNAIRES, "consent", "debrief", *CHECKS)


def items_of(task: Task) -> list[dict[str, Any]]:
    """The rated items of a questionnaire task: ``{"text", "min", "max", "step", "low",
    "high"}`` each (empty for other tasks).

    Examples
    --------
    >>> t = Task(id="q", prompt="?", answer="sus")
    >>> len(items_of(t)), items_of(t)[0]["max"]
    (10, 5)
    """
    if task.answer == "sus":
        return [{"text": t, "min": 1, "max": 5, "step": 1, "low": "strongly disagree",
                 "high": "strongly agree"} for t in SUS_ITEMS]
    if task.answer == "nasa_tlx":
        return [{"text": f"{name}: {q}", "min": 0, "max": 100, "step": 5, "low": lo,
                 "high": hi} for name, q, lo, hi in TLX_SCALES]
    if task.answer == "likert":
        low, high = task.labels or ("strongly disagree", "strongly agree")
        return [{"text": t, "min": 1, "max": task.scale, "step": 1, "low": low,
                 "high": high} for t in task.items]
    return []


def check_items(task: Task, values: Sequence[Any] | None) -> dict[str, Any]:
    """A questionnaire's answer to store (every item rated, on its scale), or
    :class:`StudyError` with a one-line reason.

    Examples
    --------
    >>> check_items(Task(id="q", prompt="?", answer="likert", items=("a", "b")), [2, 5])
    {'type': 'likert', 'value': [2, 5]}
    """
    items = items_of(task)
    values = list(values or [])
    if len(values) != len(items) or any(v is None for v in values):
        missing = next((k for k in range(len(items))
                        if k >= len(values) or values[k] is None), len(items) - 1)
        raise StudyError(f"item {missing + 1} of {len(items)} is not rated — rate every "
                         "item, then submit")
    for k, (v, it) in enumerate(zip(values, items, strict=True)):
        ok = isinstance(v, int) and not isinstance(v, bool) and it["min"] <= v <= it["max"] \
            and (v - it["min"]) % it["step"] == 0
        if not ok:
            raise StudyError(f"item {k + 1} has {str(v)[:20]!r}, not a point of its scale "
                             f"({it['min']} to {it['max']}) — rate it again")
    return {"type": task.answer, "value": values}


def score(task: Task, answer: dict[str, Any]) -> float | None:
    """The questionnaire's score of an answer (None for other tasks or an invalid answer).

    Examples
    --------
    >>> score(Task(id="q", prompt="?", answer="sus"), {"value": [5, 1] * 5})
    100.0
    >>> score(Task(id="q", prompt="?", answer="sus"), {"value": [3] * 10})
    50.0
    >>> score(Task(id="q", prompt="?", answer="nasa_tlx"), {"value": [10, 0, 50, 20, 40, 30]})
    25.0
    >>> t = Task(id="q", prompt="?", answer="likert", items=("a", "b"), scale=7, reverse=(1,))
    >>> score(t, {"value": [6, 2]})
    6.0
    """
    values = answer.get("value")
    if task.answer not in QUESTIONNAIRES or not isinstance(values, list) or \
            len(values) != len(items_of(task)):
        return None
    if task.answer == "sus":
        return float(sum(v - 1 if k % 2 == 0 else 5 - v for k, v in enumerate(values)) * 2.5)
    if task.answer == "nasa_tlx":
        return round(sum(values) / len(values), 4)
    flipped = [task.scale + 1 - v if k in task.reverse else v for k, v in enumerate(values)]
    return round(sum(flipped) / len(flipped), 4)
