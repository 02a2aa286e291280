"""User-study mode: a study file, participants in conditions, tasks and a durable log.

``stateseer study STUDY_FILE`` serves the explorer with only the views of each
participant's condition, one task at a time, and logs every interaction to SQLite;
``stateseer study-export DB --out DIR`` turns the log into tables. Modules (under
``stateseer.app.study``):

=============  ================================================================
``spec``       the study file
``assign``     conditions
``store``      the log
``identity``   participants, known by their link's secret
``context``    :class:`StudyContext`, what the callbacks and routes share
``views``      what a participant sees
``guard``      the condition, checked on every callback
``events``     the interaction log's callbacks
``server``     the app
``routes``     HTTP
``admin``      the admin page
``export``     tables
=============  ================================================================

Simulated participants for load tests live in :mod:`stateseer.testing`. This package
imports nothing heavy; Dash comes in with ``server``.
"""

from stateseer.app.study.spec import Study, StudyError, load_study

__all__ = ["Study", "StudyError", "load_study"]
