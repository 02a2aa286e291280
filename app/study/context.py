"""What the study's callbacks and routes share: :class:`StudyContext`.

Built once per study app (:func:`stateseer.app.study.server.create_study_app`) and passed
to every module that registers callbacks or routes; only the log is written to.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
from flask import current_app, has_request_context

from stateseer.app.study.assign import choose_condition
from stateseer.app.study.identity import request_secret
from stateseer.app.study.instruments import NO_EXPLORER
from stateseer.app.study.spec import DECLINE, Study, StudyError, Task
from stateseer.app.study.store import StudyLog

if TYPE_CHECKING:
    from stateseer.app.explorer.context import ExplorerContext
    from stateseer.app.workflows.runview import RunView

__all__ = ["EXTENSION", "Now", "StudyContext", "current"]

#: where a study app's Flask server keeps its context (``server.extensions[EXTENSION]``)
EXTENSION = "stateseer.study"


def current() -> StudyContext:
    """The context of the study app serving the current request (routes and hooks are
    module-level functions; the app was given its context at construction)."""
    return current_app.extensions[EXTENSION]


class Now(NamedTuple):
    """Where a participant stands: ``position`` and ``task`` of their first unsubmitted
    task (``task`` None once they are done or declined), the ``condition`` it is shown in
    (after the last task, the last block's), the ``views`` they see now (none during a
    questionnaire, a check, consent or debriefing, or once done), and whether they
    ``declined`` consent."""

    position: int
    task: Task | None
    condition: str
    views: tuple[str, ...]
    declined: bool


def _declined(progress: list[dict[str, Any]]) -> bool:
    """Whether a participant's progress rows hold a submitted consent that declines."""
    for r in progress:
        if r["submitted_at"] and r["answer"]:
            doc = json.loads(r["answer"])
            if doc.get("type") == "consent" and doc.get("value") == DECLINE:
                return True
    return False


@dataclass
class StudyContext:
    """Everything the study's callbacks and routes share (read-only but the log)."""

    study: Study
    ctx: ExplorerContext
    log: StudyLog
    admin_token: str | None = None
    _rows: dict[str, dict[int, int]] = field(default_factory=dict)

    @property
    def data(self) -> RunView:
        """The run (read-only): ``ctx.data``."""
        return self.ctx.data

    def split_of(self, task: Task) -> str:
        return task.split or self.data.default_split

    def rows_by_id(self, split: str) -> dict[int, int]:
        """Instance id (the table's ``id``) -> row index in ``split``."""
        if split not in self._rows:
            ids = np.asarray(self.data.traces[split].rows)
            self._rows[split] = {int(i): r for r, i in enumerate(ids.tolist())}
        return self._rows[split]

    def row_id(self, split: str, row: int) -> int | None:
        try:
            return int(self.data.traces[split].rows[row])
        except (KeyError, IndexError, TypeError, ValueError):
            return None

    def check_run(self) -> None:
        """Every task's split, instances and key exist in the run, and the run's model is
        the one the keys were made for (else StudyError)."""
        want, have = self.study.model_sha256, self.data.traces.meta.get("model_sha256")
        if want is not None and have != want:
            raise StudyError(f"study file: its keys were made for model {want[:12]}…, and "
                             f"the run's model is {str(have)[:12]}… — make the study "
                             "again for this run with `stateseer study-template RUN`, or "
                             "point 'run' at the model it was made for")
        for t in self.study.tasks:
            split = self.split_of(t)
            if split not in self.data.splits:
                raise StudyError(f"study file: task {t.id!r} uses split {split!r}, which the "
                                 f"run does not have — use one of {', '.join(self.data.splits)}")
            rows = self.rows_by_id(split)
            missing = [i for i in t.open if i not in rows]
            if missing:
                raise StudyError(f"study file: task {t.id!r} opens instance id {missing[0]}, "
                                 f"which is not in split {split!r} of the run — use ids from "
                                 "the table's id column")
            n = self.data.fsm.n_states
            bad = [k for k in t.key if (t.answer == "instances" and k not in rows)
                   or (t.answer == "states" and k >= n)]
            if bad:
                what = (f"instance id {bad[0]}, which is not in split {split!r}"
                        if t.answer == "instances" else f"state {bad[0]}; the run has {n}")
                raise StudyError(f"study file: the key of task {t.id!r} names {what} — "
                                 "fix the key")

    def participant(self) -> str | None:
        """The participant of the current request's link secret, or None."""
        return self.log.pid_of(request_secret()) if has_request_context() else None

    def sequence(self, pid: str) -> list[tuple[Task, str]] | None:
        """``pid``'s tasks in the order shown, each with its condition
        (:meth:`Study.sequence`); None before they joined."""
        cond = self.log.condition_of(pid)
        return None if cond is None else self.study.sequence(cond)

    def now(self, pid: str) -> Now | None:
        """Where ``pid`` stands (see :class:`Now`), from one read of their stored
        condition and one of their progress; None before they joined."""
        seq = self.sequence(pid)
        if seq is None:
            return None
        rows = self.log.progress(pid)
        declined = _declined(rows)
        done = {r["task"] for r in rows if r["submitted_at"]}
        k, task, cond = (len(seq), None, seq[-1][1]) if declined else next(
            ((k, t, c) for k, (t, c) in enumerate(seq) if t.id not in done),
            (len(seq), None, seq[-1][1]))
        views = () if task is None or task.answer in NO_EXPLORER else \
            self.study.conditions.get(cond, ())
        return Now(k, task, cond, views, declined)

    def condition(self, pid: str) -> str | None:
        """The condition ``pid`` works in now (within-subject: the current block's)."""
        now = self.now(pid)
        return None if now is None else now.condition

    def condition_views(self, pid: str) -> tuple[str, ...] | None:
        """The views ``pid`` sees now (None before they joined): their current block's
        condition's, none during a questionnaire, a check, consent or debriefing, or
        once they are done."""
        now = self.now(pid)
        return None if now is None else now.views

    def declined(self, pid: str) -> bool:
        """Whether ``pid`` declined consent (nothing more is asked of them)."""
        return _declined(self.log.progress(pid))

    def current_task(self, pid: str) -> tuple[int, Task] | None:
        """``(position, task)`` of the participant's first unsubmitted task in their own
        order, or None (all done, or not joined)."""
        now = self.now(pid)
        return None if now is None or now.task is None else (now.position, now.task)

    def join(self, pid: str) -> dict[str, Any]:
        names = list(self.study.conditions)
        return self.log.join(pid, lambda counts: choose_condition(
            self.study.assignment, names, pid, counts))

    def write(self, pid: str, events: list[tuple[str, dict[str, Any]]]) -> list[int]:
        return self.log.log_many(pid, events)
