"""The study file: which run to show, the conditions, the tasks and the time limits.

A study file is JSON (or YAML when PyYAML is installed)::

    {"study": "rt-debugging",
     "run": "../runs/rt",
     "conditions": {"full": "full", "baseline": "baseline"},
     "assignment": {"method": "counterbalanced"},
     "task_time_limit_s": 600,
     "tasks": [
       {"id": "find-bug", "prompt": "Why is review 12 misclassified?", "open": [12],
        "answer": {"type": "text"}},
       {"id": "pick-state", "prompt": "Which state leads to 'rotten'?",
        "answer": {"type": "choice", "options": ["3", "7", "12"]}, "time_limit_s": 300}]}

Within-subject: ``"assignment": "latin"`` shows every participant every condition, one
block each, in the order of a Williams design (:mod:`stateseer.app.study.designs`: every
condition in every position, and after every other, equally often over any multiple of
the design's rows); ``"task_sets": [["t1", "t2"], ["t3", "t4"]]`` lists one set of task
ids per block, in position order, so that block ``p`` of every participant shows set
``p`` and nobody sees an instance twice. Tasks in no set keep their place: those before
every set's tasks in the file come first (instructions, consent), those after come last
(questionnaires, debriefing).

``model_sha256`` (optional) names the model the study's keys were made for (``stateseer
study-template`` writes it): the server refuses to start on a run with another model.

Participants join by their own link, ``/p/SECRET/`` (an unguessable secret per
participant, see :mod:`stateseer.app.study.identity`): ids listed in ``"participants": ["P01",
...]`` or pre-assigned in ``assignment.participants`` get a link when the server starts
(written to ``DB.links.csv``, readable by its owner only, and on the admin page); with
``allow_generated_ids`` (the default) ``/study/new`` hands out new links.

Relative run paths are read from the study file's folder. A study shows one run (start
one study server per run to compare models). Every problem is reported as a
one-line :class:`StudyError` that names the key and says what to write instead.

Views a condition may show (``full`` = all of them)::

    diagram, card, patterns, table, trace_text, trace_chart, input,
    attribution, nearest, compare, forcing

``baseline`` is DeepSeer's LIME-like control: ``table``, ``trace_text`` and ``attribution``.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stateseer.app.explorer.registry import REGISTRY
from stateseer.core.errors import StateseerError

__all__ = ["AGREE", "ANSWER_TYPES", "DECLINE", "ORDER_SEP", "PID_PATTERN", "PRESETS", "VIEWS",
           "Assignment", "Study", "StudyError", "Task", "check_pid", "load_study", "parse_study"]

VIEWS: tuple[str, ...] = tuple(REGISTRY.names())
"""The views a condition may show: the explorer registry's optional views, in page order."""
PRESETS: dict[str, tuple[str, ...]] = REGISTRY.presets()
"""Named view lists: ``full`` and those the views declare (``View.presets``)."""
ANSWER_TYPES = ("text", "choice", "instances", "states", "sus", "nasa_tlx", "likert",
                "consent", "debrief", "attention_check", "comprehension_check")
#: answer types with options to choose from (and, for the checks, a key they must have)
_CHOICES = ("choice", "attention_check", "comprehension_check")
#: the two answers of a consent task
AGREE, DECLINE = "I agree", "I do not agree"
METHODS = ("counterbalanced", "random", "fixed", "latin")
#: joins a within-subject participant's conditions in the order stored for them
ORDER_SEP = ">"
PID_PATTERN = re.compile(r"[A-Za-z0-9_-]{1,64}")
_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")
_TOP_KEYS = ("study", "title", "intro", "run", "conditions", "assignment",
             "task_time_limit_s", "allow_generated_ids", "participants", "tasks",
             "task_sets", "after_each_block", "model_sha256")
_TASK_KEYS = ("id", "prompt", "open", "split", "answer", "time_limit_s", "key")
_ANSWER_KEYS = ("type", "options", "max_chars", "items", "scale", "labels", "reverse")
_ASSIGN_KEYS = ("method", "seed", "condition", "participants")
MAX_PROMPT = 4000


class StudyError(StateseerError, ValueError):
    """A study file, participant id, answer or study database that cannot be used."""


def check_pid(pid: Any) -> str:
    """Return ``pid`` if it is a valid participant id, else raise :class:`StudyError`.

    Examples
    --------
    >>> check_pid("P01")
    'P01'
    """
    if not isinstance(pid, str) or not PID_PATTERN.fullmatch(pid):
        shown = repr(pid)[:40]
        raise StudyError(f"participant id {shown} is not valid; use 1 to 64 letters, digits, "
                         "'-' or '_' (for example P01)")
    return pid


@dataclass(frozen=True)
class Task:
    """One task: a prompt, instances to open, an answer type, an optional time limit and
    an optional answer key (``key``: the right options of a choice, the instance ids or
    states of an instances or states answer; graded on submission, never sent to the
    page)."""

    id: str
    prompt: str
    answer: str = "text"  # one of ANSWER_TYPES (instruments.py: questionnaires, pages)
    options: tuple[str, ...] = ()
    max_chars: int = 5000
    open: tuple[int, ...] = ()
    split: str | None = None
    time_limit_s: float | None = None
    key: tuple[Any, ...] = ()
    items: tuple[str, ...] = ()
    scale: int = 5
    labels: tuple[str, ...] = ()
    reverse: tuple[int, ...] = ()


@dataclass(frozen=True)
class Assignment:
    """How participants get a condition.

    ``counterbalanced``: the condition with the fewest participants so far (ties in the
    order of the study file); ``random``: drawn from ``seed`` and the participant id, so
    the same id always gets the same condition; ``fixed``: everyone gets ``condition``;
    ``latin``: every condition, in the order of the Williams design's row for the
    participant's arrival number (within-subject). ``participants`` pre-assigns ids under
    every method but ``latin``.
    """

    method: str = "counterbalanced"
    seed: int = 0
    condition: str | None = None
    participants: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Study:
    """A validated study file."""

    id: str
    run: Path
    conditions: Mapping[str, tuple[str, ...]]
    tasks: tuple[Task, ...]
    assignment: Assignment = field(default_factory=Assignment)
    title: str = ""
    intro: str = ""
    allow_generated_ids: bool = True
    source: Path | None = None
    participants: tuple[str, ...] = ()
    task_sets: tuple[tuple[str, ...], ...] = ()
    after_each_block: tuple[str, ...] = ()
    model_sha256: str | None = None

    @property
    def within(self) -> bool:
        """Whether every participant does every condition (``assignment: latin``)."""
        return self.assignment.method == "latin"

    def sequence(self, condition: str) -> list[tuple[Task, str]]:
        """A participant's tasks in the order shown, each with the condition it is shown
        in; ``condition`` is the one stored for them (for ``latin``, the conditions in
        order joined by :data:`ORDER_SEP`).

        Examples
        --------
        >>> s = parse_study({"study": "w", "run": "r", "assignment": "latin",
        ...                  "tasks": [{"id": "a", "prompt": "A"}, {"id": "b", "prompt": "B"},
        ...                            {"id": "end", "prompt": "How was it?"}],
        ...                  "task_sets": [["a"], ["b"]]})
        >>> [(t.id, c) for t, c in s.sequence("baseline>full")]
        [('a', 'baseline'), ('b', 'full'), ('end', 'full')]
        """
        if not self.within:
            return [(t, condition) for t in self.tasks]
        order = condition.split(ORDER_SEP)
        placed = {i for ts in self.task_sets for i in ts} | set(self.after_each_block)
        first = next(k for k, t in enumerate(self.tasks) if t.id in placed)
        before = [(t, order[0]) for t in self.tasks[:first] if t.id not in placed]
        after = [(t, order[-1]) for t in self.tasks[first:] if t.id not in placed]
        blocks = [(self.task(i), order[p]) for p, ts in enumerate(self.task_sets)
                  for i in (*ts, *(f"{r}.{p + 1}" for r in self.after_each_block))]
        return before + blocks + after

    @property
    def n_tasks(self) -> int:
        """Tasks each participant does (a questionnaire after each block counts each time)."""
        return len(self.sequence(ORDER_SEP.join(self.conditions)))

    def participant_ids(self) -> tuple[str, ...]:
        """Ids that get a link when the server starts (listed or pre-assigned)."""
        return tuple(dict.fromkeys([*self.participants, *self.assignment.participants]))

    def task(self, task_id: str) -> Task:
        """The task called ``task_id`` (KeyError if none); ``ID.P`` is task ``ID`` of
        ``after_each_block`` as shown after block ``P`` (1-based)."""
        for t in self.tasks:
            if t.id == task_id:
                return t
        base, _, block = task_id.rpartition(".")
        if base in self.after_each_block and block.isdigit() and \
                1 <= int(block) <= len(self.task_sets):
            return dataclasses.replace(self.task(base), id=task_id)
        raise KeyError(task_id)

    def digest(self) -> str:
        """A short hash of everything that shapes the data (conditions and tasks)."""
        import hashlib

        doc = {"conditions": {k: list(v) for k, v in self.conditions.items()},
               **({"task_sets": [list(ts) for ts in self.task_sets], "design": "latin",
                   "after_each_block": list(self.after_each_block)}
                  if self.within else {}),
               "tasks": [t.__dict__ | {"options": list(t.options), "open": list(t.open)}
                         for t in self.tasks]}
        return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:16]


def _fail(where: str, problem: str, fix: str) -> StudyError:
    return StudyError(f"study file: {where} {problem} — {fix}")


def _check_keys(obj: Mapping, known: tuple[str, ...], where: str) -> None:
    for key in obj:
        if key not in known:
            close = difflib.get_close_matches(str(key), known, n=1)
            hint = f"did you mean '{close[0]}'?" if close else f"known keys: {', '.join(known)}"
            raise _fail(where, f"has an unknown key {str(key)!r}", hint)


def _positive(value: Any, where: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise _fail(where, f"is {value!r}", "give a positive number of seconds")
    return float(value)


def _name(value: Any, where: str) -> str:
    if not isinstance(value, str) or not _NAME.fullmatch(value):
        raise _fail(where, f"is {value!r}",
                    "use 1 to 64 letters, digits, '.', '-' or '_'")
    return value


def _conditions(raw: Any) -> dict[str, tuple[str, ...]]:
    if raw is None:
        raw = ["full", "baseline"]
    if isinstance(raw, list):
        for name in raw:
            if name not in PRESETS:
                raise _fail("'conditions'", f"names {name!r}, which is not a preset",
                            "use a mapping such as {\"mine\": [\"table\", \"trace_text\"]} "
                            f"or one of {', '.join(PRESETS)}")
        raw = {name: name for name in raw}
    if not isinstance(raw, Mapping) or not raw:
        raise _fail("'conditions'", "is empty or not a mapping",
                    "write e.g. {\"full\": \"full\", \"baseline\": \"baseline\"}")
    out: dict[str, tuple[str, ...]] = {}
    for name, views in raw.items():
        where = f"conditions.{name}"
        _name(name, f"the condition name in '{where}'")
        if isinstance(views, str):
            if views not in PRESETS:
                raise _fail(f"'{where}'", f"is {views!r}",
                            f"use a preset ({', '.join(PRESETS)}) or a list of views")
            views = list(PRESETS[views])
        if not isinstance(views, list) or not views:
            raise _fail(f"'{where}'", "is not a non-empty list of views",
                        f"pick from {', '.join(VIEWS)}")
        for v in views:
            if v not in VIEWS:
                close = difflib.get_close_matches(str(v), VIEWS, n=1)
                hint = f"did you mean '{close[0]}'?" if close else \
                    f"views are: {', '.join(VIEWS)}"
                raise _fail(f"'{where}'", f"names an unknown view {v!r}", hint)
        if len(set(views)) != len(views):
            raise _fail(f"'{where}'", "lists a view twice", "list each view once")
        out[name] = tuple(v for v in VIEWS if v in views)
    return out


def _answer(raw: Any, where: str) -> dict[str, Any]:
    """The answer's fields of a :class:`Task` (``answer``, ``options``, ``max_chars`` and,
    for ``likert``, ``items``, ``scale``, ``labels``, ``reverse``)."""
    if raw is None:
        raw = {"type": "text"}
    if isinstance(raw, str):
        raw = {"type": raw}
    if not isinstance(raw, Mapping):
        raise _fail(f"'{where}'", "is not a mapping", "write e.g. {\"type\": \"text\"}")
    _check_keys(raw, _ANSWER_KEYS, f"'{where}'")
    kind = raw.get("type", "text")
    if kind not in ANSWER_TYPES:
        raise _fail(f"'{where}.type'", f"is {kind!r}", f"use one of {', '.join(ANSWER_TYPES)}")
    options = raw.get("options")
    if kind in _CHOICES:
        if not isinstance(options, list) or len(options) < 2 or \
                not all(isinstance(o, str) and o.strip() for o in options):
            raise _fail(f"'{where}.options'", "must list at least two non-empty strings",
                        "write e.g. \"options\": [\"yes\", \"no\"]")
        if len(set(options)) != len(options):
            raise _fail(f"'{where}.options'", "repeats an option", "list each option once")
    elif options is not None:
        raise _fail(f"'{where}.options'", f"is only for choice answers, not {kind!r}",
                    "remove it or set \"type\": \"choice\"")
    max_chars = raw.get("max_chars", 5000)
    if isinstance(max_chars, bool) or not isinstance(max_chars, int) or \
            not 1 <= max_chars <= 100_000:
        raise _fail(f"'{where}.max_chars'", f"is {max_chars!r}",
                    "give a whole number from 1 to 100000")
    out = {"answer": kind, "options": tuple(options or ()), "max_chars": max_chars}
    if kind == "consent":
        out["options"] = (AGREE, DECLINE)
    likert = {k: raw[k] for k in ("items", "scale", "labels", "reverse") if k in raw}
    if kind == "likert":
        out.update(_likert(raw, where))
    elif likert:
        raise _fail(f"'{where}.{next(iter(likert))}'", f"is only for likert answers, not "
                    f"{kind!r}", "remove it or set \"type\": \"likert\"")
    return out


def _likert(raw: Mapping, where: str) -> dict[str, Any]:
    items = raw.get("items")
    if not isinstance(items, list) or not items or \
            not all(isinstance(t, str) and t.strip() for t in items):
        raise _fail(f"'{where}.items'", "must list the statements to rate",
                    "write e.g. \"items\": [\"The diagram helped me.\"]")
    scale = raw.get("scale", 5)
    if isinstance(scale, bool) or not isinstance(scale, int) or not 2 <= scale <= 11:
        raise _fail(f"'{where}.scale'", f"is {scale!r}", "give the number of points, 2 to 11")
    labels = raw.get("labels", ["strongly disagree", "strongly agree"])
    if not isinstance(labels, list) or len(labels) != 2 or \
            not all(isinstance(t, str) for t in labels):
        raise _fail(f"'{where}.labels'", "must name the two ends of the scale",
                    "write e.g. \"labels\": [\"strongly disagree\", \"strongly agree\"]")
    reverse = raw.get("reverse", [])
    if not isinstance(reverse, list) or not all(
            isinstance(k, int) and not isinstance(k, bool) and 1 <= k <= len(items)
            for k in reverse):
        raise _fail(f"'{where}.reverse'", f"is {reverse!r}",
                    f"list item numbers from 1 to {len(items)} scored the other way round")
    return {"items": tuple(t.strip() for t in items), "scale": scale,
            "labels": tuple(labels), "reverse": tuple(sorted({k - 1 for k in reverse}))}


def _task(raw: Any, k: int, default_limit: float | None) -> Task:
    where = f"tasks[{k}]"
    if not isinstance(raw, Mapping):
        raise _fail(f"'{where}'", "is not a mapping",
                    "write e.g. {\"prompt\": \"...\", \"answer\": {\"type\": \"text\"}}")
    _check_keys(raw, _TASK_KEYS, f"'{where}'")
    task_id = _name(raw.get("id", f"t{k + 1}"), f"'{where}.id'")
    prompt = raw.get("prompt")
    if not isinstance(prompt, str) or not prompt.strip():
        raise _fail(f"'{where}.prompt'", "is missing or empty",
                    "give the text the participant reads")
    if len(prompt) > MAX_PROMPT:
        raise _fail(f"'{where}.prompt'", f"has {len(prompt)} characters",
                    f"shorten it to at most {MAX_PROMPT}")
    opened = raw.get("open", [])
    if isinstance(opened, int) and not isinstance(opened, bool):
        opened = [opened]
    if not isinstance(opened, list) or not all(
            isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in opened):
        raise _fail(f"'{where}.open'", f"is {opened!r}",
                    "list instance ids (the table's 'id' column), e.g. [12, 40]")
    split = raw.get("split")
    if split is not None and split not in ("train", "val", "test"):
        raise _fail(f"'{where}.split'", f"is {split!r}", "use train, val or test")
    answer = _answer(raw.get("answer"), f"{where}.answer")
    limit = _positive(raw.get("time_limit_s", default_limit), f"'{where}.time_limit_s'")
    key = _key(raw.get("key"), answer["answer"], answer["options"], f"'{where}.key'")
    if answer["answer"] in _CHOICES[1:] and not key:
        raise _fail(f"'{where}'", f"is an {answer['answer']} without a 'key'",
                    "add \"key\": the option a participant who read the question chooses")
    return Task(id=task_id, prompt=prompt.strip(), open=tuple(opened), split=split,
                time_limit_s=limit, key=key, **answer)


def _key(raw: Any, kind: str, options: tuple[str, ...], where: str) -> tuple[Any, ...]:
    """A task's answer key: the right options (choice), instance ids or states."""
    if raw is None:
        return ()
    if kind not in (*_CHOICES, "instances", "states"):
        raise _fail(where, f"is for choice, instances, states and check answers, not {kind!r}",
                    "remove it: open answers are coded by two coders after the study "
                    "(study-export writes coding.csv)")
    values = raw if isinstance(raw, list) else [raw]
    if not values:
        raise _fail(where, "is empty", "give the right answer, or remove the key")
    if kind in _CHOICES:
        bad = next((v for v in values if v not in options), None)
        if bad is not None:
            raise _fail(where, f"names {bad!r}, which is not an option",
                        f"use the options: {', '.join(options)}")
        return tuple(dict.fromkeys(values))
    if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in values):
        what = "instance ids (the table's id column)" if kind == "instances" else "state numbers"
        raise _fail(where, f"is {raw!r}", f"list {what}, e.g. [12, 40]")
    return tuple(dict.fromkeys(values))


def _assignment(raw: Any, conditions: Mapping[str, Any]) -> Assignment:
    if raw is None:
        raw = {}
    if isinstance(raw, str):
        raw = {"method": raw}
    if not isinstance(raw, Mapping):
        raise _fail("'assignment'", "is not a mapping",
                    "write e.g. {\"method\": \"random\", \"seed\": 1}")
    _check_keys(raw, _ASSIGN_KEYS, "'assignment'")
    method = raw.get("method", "counterbalanced")
    if method not in METHODS:
        raise _fail("'assignment.method'", f"is {method!r}", f"use one of {', '.join(METHODS)}")
    seed = raw.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise _fail("'assignment.seed'", f"is {seed!r}", "give a whole number")
    cond = raw.get("condition")
    if method == "fixed" and cond is None:
        cond = next(iter(conditions)) if len(conditions) == 1 else None
        if cond is None:
            raise _fail("'assignment'", "uses method 'fixed' without a 'condition'",
                        f"add \"condition\": one of {', '.join(conditions)}")
    fixed = raw.get("participants", {})
    if method == "latin" and fixed:
        raise _fail("'assignment.participants'", "pre-assigns conditions, which a latin "
                    "design gives by arrival", "remove it, and list the ids under "
                    "'participants' to give them links")
    if cond is not None and cond not in conditions:
        raise _fail("'assignment.condition'", f"is {cond!r}",
                    f"use one of the conditions: {', '.join(conditions)}")
    if not isinstance(fixed, Mapping):
        raise _fail("'assignment.participants'", "is not a mapping",
                    "write e.g. {\"P01\": \"baseline\"}")
    for pid, c in fixed.items():
        try:
            check_pid(pid)
        except StudyError as exc:
            raise _fail("'assignment.participants'", f"has a bad id: {exc}",
                        "fix the id") from None
        if c not in conditions:
            raise _fail(f"'assignment.participants.{pid}'", f"is {c!r}",
                        f"use one of the conditions: {', '.join(conditions)}")
    return Assignment(method=method, seed=seed, condition=cond, participants=dict(fixed))


def _after_each_block(raw: Any, assignment: Assignment, tasks: tuple[Task, ...]
                      ) -> tuple[str, ...]:
    """Tasks shown again after every block of a within-subject design."""
    if raw is None:
        return ()
    if assignment.method != "latin":
        raise _fail("'after_each_block'", "is for a within-subject design (assignment "
                    "'latin')", "a between-subjects study has one block: list the "
                    "questionnaire last in 'tasks'")
    ids = [t.id for t in tasks]
    if not isinstance(raw, list) or not raw or not all(i in ids for i in raw):
        raise _fail("'after_each_block'", f"is {raw!r}",
                    f"list ids of tasks to repeat after each block, from: {', '.join(ids)}")
    if len(set(raw)) != len(raw):
        raise _fail("'after_each_block'", "lists a task twice", "list each task once")
    clash = next((i for i in ids for r in raw if i.startswith(f"{r}.")), None)
    if clash is not None:
        raise _fail(f"task {clash!r}", "has the id a repeated task gets after a block",
                    "rename it (repeated tasks are called ID.1, ID.2, ...)")
    return tuple(raw)


def _task_sets(raw: Any, assignment: Assignment, conditions: Mapping[str, Any],
               tasks: tuple[Task, ...], repeated: tuple[str, ...] = ()
               ) -> tuple[tuple[str, ...], ...]:
    """The blocks of a within-subject study (see the module notes)."""
    if assignment.method != "latin":
        if raw is not None:
            raise _fail("'task_sets'", f"is only for a within-subject design, not method "
                        f"{assignment.method!r}", "remove it or set \"assignment\": \"latin\"")
        return ()
    n = len(conditions)
    if not isinstance(raw, list) or len(raw) != n or not all(
            isinstance(ts, list) and ts for ts in raw):
        raise _fail("'task_sets'", "must list one non-empty list of task ids per condition "
                    f"({n}) for assignment 'latin'", "write e.g. \"task_sets\": "
                    "[[\"t1\", \"t2\"], [\"t3\", \"t4\"]] (block p of every participant "
                    "shows set p)")
    ids = [t.id for t in tasks]
    listed = [i for ts in raw for i in ts]
    unknown = next((i for i in listed if i not in ids), None)
    if unknown is not None:
        raise _fail("'task_sets'", f"names {unknown!r}, which is no task id",
                    f"use the tasks' ids: {', '.join(ids)}")
    twice = next((i for i in listed if listed.count(i) > 1), None)
    if twice is not None:
        raise _fail("'task_sets'", f"lists {twice!r} twice", "put each task in one set")
    both = next((i for i in listed if i in repeated), None)
    if both is not None:
        raise _fail("'task_sets'", f"lists {both!r}, which after_each_block repeats",
                    "leave it out of the sets")
    where = [k for k, i in enumerate(ids) if i in listed]
    loose = next((ids[k] for k in range(where[0], where[-1])
                  if ids[k] not in listed and ids[k] not in repeated), None)
    if loose is not None:
        raise _fail(f"task {loose!r}", "is in no task set but between tasks that are",
                    "put it in a set, or move it before or after all the sets' tasks in "
                    "'tasks'")
    return tuple(tuple(ts) for ts in raw)


def parse_study(doc: Any, base: str | Path = ".", *, source: Path | None = None) -> Study:
    """Validate a study document (already parsed from JSON/YAML) into a :class:`Study`.

    Parameters
    ----------
    doc : mapping
        The parsed study file.
    base : str or Path
        Folder that a relative ``run`` path is read from (the study file's folder).

    Examples
    --------
    >>> s = parse_study({"study": "s1", "run": "runs/rt",
    ...                  "tasks": [{"prompt": "Find a misclassified review."}]})
    >>> list(s.conditions), s.tasks[0].id, s.assignment.method
    (['full', 'baseline'], 't1', 'counterbalanced')
    """
    if not isinstance(doc, Mapping):
        raise StudyError("study file: the top level is not a mapping — write an object "
                         "with keys 'study', 'run' and 'tasks'")
    _check_keys(doc, _TOP_KEYS, "the top level")
    if "study" not in doc:
        raise _fail("the top level", "has no 'study' id", "add e.g. \"study\": \"pilot-1\"")
    study_id = _name(doc["study"], "'study'")
    run = doc.get("run")
    if not isinstance(run, str) or not run.strip():
        raise _fail("'run'", "is missing or not a path",
                    "give the run directory to show, e.g. \"run\": \"runs/rt\"")
    conditions = _conditions(doc.get("conditions"))
    default_limit = _positive(doc.get("task_time_limit_s"), "'task_time_limit_s'")
    tasks_raw = doc.get("tasks")
    if not isinstance(tasks_raw, list) or not tasks_raw:
        raise _fail("'tasks'", "is missing or empty",
                    "list at least one task with a 'prompt'")
    tasks = tuple(_task(t, k, default_limit) for k, t in enumerate(tasks_raw))
    ids = [t.id for t in tasks]
    dup = next((i for i in ids if ids.count(i) > 1), None)
    if dup is not None:
        raise _fail("'tasks'", f"use the id {dup!r} twice", "give every task its own id")
    allow = doc.get("allow_generated_ids", True)
    if not isinstance(allow, bool):
        raise _fail("'allow_generated_ids'", f"is {allow!r}", "write true or false")
    for key in ("title", "intro"):
        if not isinstance(doc.get(key, ""), str):
            raise _fail(f"'{key}'", "is not text", "write a string")
    listed = doc.get("participants", [])
    if not isinstance(listed, list):
        raise _fail("'participants'", "is not a list", "write e.g. [\"P01\", \"P02\"]")
    for pid in listed:
        try:
            check_pid(pid)
        except StudyError as exc:
            raise _fail("'participants'", f"has a bad id: {exc}", "fix the id") from None
    run_path = Path(run).expanduser()
    if not run_path.is_absolute():
        run_path = Path(base) / run_path
    sha = doc.get("model_sha256")
    if sha is not None and not (isinstance(sha, str) and re.fullmatch(r"[0-9a-f]{64}", sha)):
        raise _fail("'model_sha256'", f"is {str(sha)[:20]!r}", "give the 64 hex digits of "
                    "the model the keys were made for, or remove it")
    assignment = _assignment(doc.get("assignment"), conditions)
    repeated = _after_each_block(doc.get("after_each_block"), assignment, tasks)
    return Study(id=study_id, run=run_path, conditions=conditions, tasks=tasks,
                 assignment=assignment, title=doc.get("title", ""),
                 intro=doc.get("intro", ""), allow_generated_ids=allow, source=source,
                 participants=tuple(dict.fromkeys(listed)),
                 task_sets=_task_sets(doc.get("task_sets"), assignment, conditions, tasks,
                                      repeated),
                 after_each_block=repeated, model_sha256=sha)


def _read(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise StudyError(f"study file {path} not found — check the path") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise StudyError(f"study file {path} cannot be read ({exc}) — "
                         "pass a UTF-8 JSON or YAML file") from None
    if path.suffix.lower() in (".yaml", ".yml"):
        try:
            import yaml
        except ImportError:
            raise StudyError(f"study file {path} is YAML but PyYAML is not installed — "
                             "pip install pyyaml, or write the study as JSON") from None
        try:
            return yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise StudyError(f"study file {path} is not valid YAML ({exc}) — "
                             "fix the syntax") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise StudyError(f"study file {path} is not valid JSON (line {exc.lineno}, column "
                         f"{exc.colno}: {exc.msg}) — fix the syntax") from None


def load_study(path: str | Path, *, run: str | Path | None = None) -> Study:
    """Read and validate a study file; ``run`` overrides the file's run directory."""
    path = Path(path)
    doc = _read(path)
    if run is not None and isinstance(doc, dict):
        doc = {**doc, "run": str(Path(run).resolve())}
    return parse_study(doc, base=path.parent, source=path)
