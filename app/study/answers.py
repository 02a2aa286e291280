"""Checking a participant's answer against its task (pure functions)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from stateseer.app.study.instruments import QUESTIONNAIRES, check_items
from stateseer.app.study.spec import AGREE, StudyError, Task

__all__ = ["add_selected", "check_answer", "grade", "parse_ids"]

_SEP = re.compile(r"[\s,;]+")


def parse_ids(text: str | None) -> list[int]:
    """Whole numbers from ``"12, 40 7"`` (duplicates dropped, order kept).

    Examples
    --------
    >>> parse_ids("12, 40 12;7")
    [12, 40, 7]
    >>> parse_ids("15, ²")
    Traceback (most recent call last):
    ...
    stateseer.app.study.spec.StudyError: '²' is not a whole number — list ids separated by ...
    """
    out: list[int] = []
    for part in _SEP.split((text or "").strip()):
        if not part:
            continue
        if not (part.isascii() and part.isdigit()) or len(part) > 12:  # not "²" or "٣"
            raise StudyError(f"{part[:20]!r} is not a whole number — list ids separated by "
                             "commas, e.g. 12, 40")
        if int(part) not in out:
            out.append(int(part))
    return out


def add_selected(text: str | None, value: int | None) -> str:
    """The ids box after "add the selected row/state" (unchanged if nothing is selected).

    Examples
    --------
    >>> add_selected("12", 40), add_selected("12, 40", 40), add_selected("", None)
    ('12, 40', '12, 40', '')
    """
    if value is None:
        return text or ""
    try:
        ids = parse_ids(text)
    except StudyError:
        return f"{text}, {value}" if text else str(value)
    if value not in ids:
        ids.append(int(value))
    return ", ".join(map(str, ids))


def check_answer(task: Task, *, text: str | None = None, choice: str | None = None,
                 ids: str | None = None, valid_id: Callable[[int], bool] | None = None,
                 n_states: int | None = None, items: list[Any] | None = None
                 ) -> dict[str, Any]:
    """The answer to store, or :class:`StudyError` with a one-line reason.

    Parameters
    ----------
    task : Task
    text, choice, ids : str or None
        What the widgets hold (only the one of the task's answer type is read).
    items : list, optional
        A questionnaire's ratings, one per item (:mod:`~stateseer.app.study.instruments`).
    valid_id : callable, optional
        Whether an instance id exists (for ``instances`` answers).
    n_states : int, optional
        Number of FSM states (for ``states`` answers).

    Examples
    --------
    >>> check_answer(Task(id="t", prompt="?", answer="choice", options=("a", "b")), choice="b")
    {'type': 'choice', 'value': 'b'}
    """
    if task.answer in QUESTIONNAIRES:
        return check_items(task, items)
    if task.answer == "debrief":  # read; a comment is optional
        return {"type": "debrief", "value": (text or "").strip()[:task.max_chars]}
    if task.answer == "consent":
        if choice not in task.options:
            raise StudyError(f"nothing is chosen — choose {AGREE!r} to take part, or the "
                             "other answer to stop here")
        return {"type": "consent", "value": choice}
    if task.answer == "text":
        value = (text or "").strip()
        if not value:
            raise StudyError("the answer is empty — type your answer, then submit")
        if len(value) > task.max_chars:
            raise StudyError(f"the answer has {len(value):,} characters; the limit is "
                             f"{task.max_chars:,} — shorten it")
        return {"type": "text", "value": value}
    if task.options:  # a choice, or an attention or comprehension check
        if choice not in task.options:
            raise StudyError("no option is chosen — pick one, then submit")
        return {"type": task.answer, "value": choice}
    values = parse_ids(ids)
    if not values:
        what = "instance ids" if task.answer == "instances" else "states"
        raise StudyError(f"no {what} given — select some (or type them), then submit")
    if task.answer == "instances" and valid_id is not None:
        bad = [v for v in values if not valid_id(v)]
        if bad:
            raise StudyError(f"instance id {bad[0]} does not exist in this split — check "
                             "the table's id column")
    if task.answer == "states" and n_states is not None:
        bad = [v for v in values if not 0 <= v < n_states]
        if bad:
            raise StudyError(f"state {bad[0]} does not exist; states are 0 to "
                             f"{n_states - 1} — check the number")
    return {"type": task.answer, "value": values}


def grade(task: Task, answer: dict[str, Any]) -> dict[str, Any] | None:
    """An answer against its task's key; None when the task has none.

    A choice is ``correct`` when it is one of the key's options; a list of instances or
    states gets ``precision`` (the share of the answer in the key), ``recall`` (the share
    of the key in the answer) and ``correct`` (the same set). An answer stored invalid at
    a time-out is wrong, with recall 0 and no precision.

    Examples
    --------
    >>> t = Task(id="t", prompt="?", answer="instances", key=(3, 5, 8, 9))
    >>> grade(t, {"type": "instances", "value": [3, 5, 7]})
    {'correct': False, 'precision': 0.6667, 'recall': 0.5}
    """
    if not task.key:
        return None
    value = answer.get("value")
    if task.options:
        return {"correct": value in task.key}
    if not isinstance(value, list) or not value:
        return {"correct": False, "precision": None, "recall": 0.0}
    given, key = set(value), set(task.key)
    hits = len(given & key)
    return {"correct": given == key, "precision": round(hits / len(given), 4),
            "recall": round(hits / len(key), 4)}
