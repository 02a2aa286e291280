"""User-study mode: a study file, participants in conditions, tasks and a durable log.

``stateseer study STUDY_FILE`` serves the explorer with only the views of each
participant's condition, one task at a time, and logs every interaction to SQLite;
``stateseer study-export DB --out DIR`` turns the log into tables. Modules:
:mod:`~app.study.spec` (the study file), :mod:`~app.study.assign` (conditions),
:mod:`~app.study.store` (the log), :mod:`~app.study.identity` (participants known by
their link's secret), :mod:`~app.study.views` (what a participant sees),
:mod:`~app.study.guard` (the condition checked on every callback),
:mod:`~app.study.events` and :mod:`~app.study.server` (the app), :mod:`~app.study.routes`
(HTTP), :mod:`~app.study.admin` (admin page), :mod:`~app.study.export` (tables). The
simulated participants of the durability test and benchmark live in
``tests/study/harness.py``.
This package imports nothing heavy; Dash comes in with :mod:`~app.study.server`.
"""

from .spec import Study, StudyError, load_study

__all__ = ["Study", "StudyError", "load_study"]
