"""The study's interaction log: one SQLite database, written by one thread, group-committed.

Tables::

    meta(key, value)                        format, version, study id, study digest
    links(secret, pid, created_at)          each participant's link secret (see below)
    participants(pid, condition, method, ordinal, joined_at)
    tasks(pid, task, position, started_at, submitted_at, answer, seconds, timed_out,
          condition)
    events(id, pid, condition, task, ts, kind, payload, source)

A participant's ``condition`` is the one they were given; in a within-subject design it is
their order of conditions (``full>baseline``), and each task row and event holds the
condition of its own block (``tasks.condition``; NULL in databases written before it,
whose tasks all have the participant's condition).

Durability. The database is in WAL mode with ``synchronous=FULL``: a transaction's WAL
frames are written *and fsync'ed* before ``COMMIT`` returns. A write call of this module
returns (and so the server acknowledges an event) only after its transaction has
committed, so an acknowledged event survives a SIGKILL of the server (``NORMAL`` would
already do that, since the frames are in the OS page cache when the process dies) and
also an OS crash or power loss (which ``NORMAL`` may roll back). The cost of FULL, one
fsync per commit, is paid once per *batch*: a single writer thread takes every write
waiting in its queue, runs each in its own savepoint of one transaction, commits, and
only then wakes the callers (group commit). Readers use their own connections (WAL lets
them read while the writer writes). Timestamps are UTC, ISO 8601 with milliseconds.

Identity and limits. A participant is known by the unguessable secret of their study
link (:meth:`StudyLog.link`, 128 random bits); the database holds those secrets, so it is
created readable by its owner only (0600; SQLite gives its ``-wal`` and ``-shm`` files the
same mode). Every write is bounded: an event's payload at :data:`MAX_PAYLOAD_BYTES`, a
participant's events at ``max_events`` (default :data:`MAX_EVENTS_PER_PARTICIPANT`), the
number of participants at ``max_participants`` and the database at ``max_db_bytes``;
a write over a limit is refused with a one-line :class:`StudyLimitError`.
"""

from __future__ import annotations

import json
import os
import queue
import secrets
import sqlite3
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from stateseer.app.study.spec import StudyError

__all__ = ["FORMAT", "MAX_PAYLOAD_BYTES", "StudyLimitError", "StudyLog", "UnknownParticipant",
           "connect_log", "new_secret", "utc_now"]

FORMAT = "stateseer.study-log"
VERSION = "1"
MAX_BATCH = 1024
MAX_PAYLOAD_BYTES = 64 * 1024
MAX_ANSWER_BYTES = 1024 * 1024  # answers are bounded by their task's max_chars first
MAX_EVENTS_PER_PARTICIPANT = 100_000
MAX_PARTICIPANTS = 10_000
MAX_DB_BYTES = 2 * 1024**3

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS participants(
    pid TEXT PRIMARY KEY, condition TEXT NOT NULL, method TEXT NOT NULL,
    ordinal INTEGER NOT NULL, joined_at TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS tasks(
    pid TEXT NOT NULL, task TEXT NOT NULL, position INTEGER NOT NULL,
    started_at TEXT NOT NULL, submitted_at TEXT, answer TEXT, seconds REAL,
    timed_out INTEGER NOT NULL DEFAULT 0, condition TEXT, PRIMARY KEY (pid, task));
CREATE TABLE IF NOT EXISTS events(
    id INTEGER PRIMARY KEY AUTOINCREMENT, pid TEXT NOT NULL, condition TEXT NOT NULL,
    task TEXT, ts TEXT NOT NULL, kind TEXT NOT NULL, payload TEXT NOT NULL,
    source TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS events_by_pid ON events(pid, task);
CREATE TABLE IF NOT EXISTS links(
    secret TEXT PRIMARY KEY, pid TEXT NOT NULL UNIQUE, created_at TEXT NOT NULL);
"""

_CURRENT_TASK = ("SELECT task, condition FROM tasks WHERE pid = ? AND submitted_at IS NULL "
                 "ORDER BY position LIMIT 1")
_TASK_CONDITION = "SELECT condition FROM tasks WHERE pid = ? AND task = ?"


class UnknownParticipant(StudyError):
    """An event for a participant id that has not joined the study."""


class StudyLimitError(StudyError):
    """A write over one of the log's size limits (payload, events, participants, bytes)."""


def new_secret() -> str:
    """A fresh link secret: 128 random bits, URL-safe (22 characters)."""
    return secrets.token_urlsafe(16)


def _create_private(path: Path) -> None:
    """Create ``path`` empty with mode 0600 unless it exists (SQLite keeps the mode)."""
    try:
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
    except FileExistsError:
        pass


def utc_now() -> str:
    """The current UTC time as ``2025-01-31T12:00:00.123Z``."""
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _parse(ts: str) -> datetime:
    return datetime.fromisoformat(ts.replace("Z", "+00:00"))


def seconds_between(start: str, end: str) -> float:
    """Seconds from one :func:`utc_now` stamp to another."""
    return round((_parse(end) - _parse(start)).total_seconds(), 3)


def _payload_text(kind: str, payload: Any, limit: int = MAX_PAYLOAD_BYTES) -> str:
    """``payload`` as stored (JSON), or :class:`StudyLimitError` over ``limit`` bytes."""
    text = json.dumps(payload or {}, ensure_ascii=False, sort_keys=True)
    if len(text) > limit or len(text.encode("utf-8")) > limit:
        raise StudyLimitError(f"the {kind!r} payload has {len(text.encode('utf-8')):,} bytes; "
                              f"the limit is {limit // 1024} KiB — send less")
    return text


def connect_log(path: str | Path, *, check: bool = True) -> sqlite3.Connection:
    """A reading connection to an existing study log (``StudyError`` if it is not one)."""
    path = Path(path)
    if not path.is_file():
        raise StudyError(f"no study database at {path} — pass the --db that `stateseer "
                         "study` wrote (default: study-ID.sqlite in its working folder)")
    conn = sqlite3.connect(str(path), timeout=10, check_same_thread=False)
    conn.row_factory = sqlite3.Row
    if check:
        try:
            fmt = conn.execute("SELECT value FROM meta WHERE key = 'format'").fetchone()
        except sqlite3.DatabaseError as exc:
            conn.close()
            raise StudyError(f"{path} is not a stateseer study database ({exc}) — "
                             "pass the --db that `stateseer study` wrote") from None
        if not fmt or fmt[0] != FORMAT:
            conn.close()
            raise StudyError(f"{path} is not a stateseer study database — pass the --db "
                             "that `stateseer study` wrote")
    return conn


class StudyLog:
    """Thread-safe, durable writer (and small reader) of a study's database.

    Parameters
    ----------
    path : str or Path
        The SQLite file; created with its folder if missing.
    study : str
        The study id; an existing database of another study is refused.
    digest : str
        :meth:`Study.digest` of the study file, kept to warn when the file changed.
    synchronous : {"FULL", "NORMAL"}
        SQLite's ``synchronous`` setting (see the module notes).
    max_events, max_participants, max_db_bytes : int, optional
        Store-size caps (see the module notes).
    clock : callable, optional
        The time of every write, as :func:`utc_now` gives it (a simulation's own clock:
        ``benchmarks/study_analysis.py``).

    Examples
    --------
    >>> import tempfile, os
    >>> tmp = tempfile.TemporaryDirectory()
    >>> log = StudyLog(os.path.join(tmp.name, "s.sqlite"), study="demo")
    >>> log.join("P01", lambda counts: ("full", "fixed"))["condition"]
    'full'
    >>> log.log("P01", "state_clicked", {"state": 3}) > 0
    True
    >>> log.close(); tmp.cleanup()
    """

    def __init__(self, path: str | Path, *, study: str, digest: str = "",
                 synchronous: str = "FULL", max_events: int = MAX_EVENTS_PER_PARTICIPANT,
                 max_participants: int = MAX_PARTICIPANTS,
                 max_db_bytes: int = MAX_DB_BYTES, clock: Callable[[], str] = utc_now
                 ) -> None:
        if synchronous not in ("FULL", "NORMAL"):
            raise StudyError(f"synchronous={synchronous!r}; use FULL or NORMAL")
        self.path = Path(path)
        self.study = study
        self.digest_changed = False
        self.max_events = max_events
        self.max_participants = max_participants
        self.max_db_bytes = max_db_bytes
        self._clock = clock
        self._n_events: dict[str, int] = {}  # per participant; the writer thread's own
        self._sync = synchronous
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._local = threading.local()
        self._closed = False
        ready: Future = Future()
        self._thread = threading.Thread(target=self._writer, args=(digest, ready),
                                        name=f"study-log-{study}", daemon=True)
        self._thread.start()
        ready.result()  # raises the writer's start-up error, e.g. another study's database

    # -- the writer thread ---------------------------------------------------------------------
    def _open(self, digest: str) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        _create_private(self.path)
        conn = sqlite3.connect(str(self.path), timeout=30, isolation_level=None,
                               check_same_thread=False)
        try:
            mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
        except sqlite3.DatabaseError as exc:
            conn.close()
            raise StudyError(f"{self.path} is not a SQLite database ({exc}) — pass another "
                             "--db") from None
        if mode.lower() != "wal":
            conn.close()
            raise StudyError(f"{self.path}: SQLite refused WAL mode (got {mode}) — put the "
                             "database on a local disk")
        conn.execute(f"PRAGMA synchronous={self._sync}")
        conn.execute("PRAGMA busy_timeout=30000")
        conn.execute("BEGIN IMMEDIATE")
        for stmt in filter(str.strip, SCHEMA.split(";")):
            conn.execute(stmt)
        if "condition" not in {r[1] for r in conn.execute("PRAGMA table_info(tasks)")}:
            conn.execute("ALTER TABLE tasks ADD COLUMN condition TEXT")  # an older log
        meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
        if meta and meta.get("format") != FORMAT:
            conn.execute("ROLLBACK")
            conn.close()
            raise StudyError(f"{self.path} is not a stateseer study database — pass another "
                             "--db")
        if meta.get("study", self.study) != self.study:
            conn.execute("ROLLBACK")
            conn.close()
            raise StudyError(f"{self.path} holds study {meta['study']!r}, not "
                             f"{self.study!r} — pass another --db for this study")
        self.digest_changed = bool(meta.get("digest")) and meta.get("digest") != digest
        conn.executemany("INSERT OR IGNORE INTO meta(key, value) VALUES (?, ?)",
                         [("format", FORMAT), ("version", VERSION), ("study", self.study),
                          ("created_at", utc_now()), ("digest", digest)])
        conn.execute("COMMIT")
        return conn

    def _writer(self, digest: str, ready: Future) -> None:
        try:
            conn = self._open(digest)
        except BaseException as exc:  # handed to the constructor
            ready.set_exception(exc)
            return
        ready.set_result(None)
        stop = False
        while not stop:
            batch = [self._queue.get()]
            while len(batch) < MAX_BATCH:
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            if None in batch:
                stop = True
                batch = [b for b in batch if b is not None]
            if batch:
                self._commit(conn, batch)
        conn.close()

    @staticmethod
    def _commit(conn: sqlite3.Connection, batch: list) -> None:
        done: list[tuple[Future, Any, BaseException | None]] = []
        try:
            conn.execute("BEGIN IMMEDIATE")
            for fn, fut in batch:
                conn.execute("SAVEPOINT op")
                try:
                    result, error = fn(conn), None
                    conn.execute("RELEASE op")
                except Exception as exc:  # reported to that caller only
                    conn.execute("ROLLBACK TO op")
                    conn.execute("RELEASE op")
                    result, error = None, exc
                done.append((fut, result, error))
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            err = StudyError(f"the study database could not be written ({exc}) — check the "
                             "disk and restart the study server")
            for _, fut in batch:
                if not fut.done():
                    fut.set_exception(err)
            return
        for fut, result, error in done:  # only now, after COMMIT, do callers hear back
            if error is None:
                fut.set_result(result)
            else:
                fut.set_exception(error)

    def _call(self, fn: Callable[[sqlite3.Connection], Any], timeout: float = 60) -> Any:
        if self._closed or not self._thread.is_alive():
            raise StudyError("the study log is closed — restart the study server")
        fut: Future = Future()
        self._queue.put((fn, fut))
        return fut.result(timeout=timeout)

    # -- reading -------------------------------------------------------------------------------
    def reader(self) -> sqlite3.Connection:
        """This thread's read-only connection to the database."""
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(str(self.path), timeout=30, check_same_thread=False)
            conn.row_factory = sqlite3.Row
            conn.execute("PRAGMA query_only=1")
            self._local.conn = conn
        return conn

    def read(self, sql: str, params: Iterable[Any] = ()) -> list[sqlite3.Row]:
        """Rows of a read-only query, on this thread's own connection."""
        return self.reader().execute(sql, tuple(params)).fetchall()

    def condition_of(self, pid: str) -> str | None:
        """The stored condition of ``pid``, or None if it has not joined."""
        rows = self.read("SELECT condition FROM participants WHERE pid = ?", (pid,))
        return rows[0][0] if rows else None

    def pid_of(self, secret: str | None) -> str | None:
        """The participant whose link holds ``secret``, or None."""
        if not secret:
            return None
        rows = self.read("SELECT pid FROM links WHERE secret = ?", (secret,))
        return rows[0][0] if rows else None

    def secret_of(self, pid: str) -> str | None:
        """The secret of ``pid``'s link, or None."""
        rows = self.read("SELECT secret FROM links WHERE pid = ?", (pid,))
        return rows[0][0] if rows else None

    def links(self) -> list[dict[str, Any]]:
        """Every participant link: ``{"pid", "secret", "created_at", "condition"}``."""
        rows = self.read("SELECT l.pid, l.secret, l.created_at, p.condition FROM links l "
                         "LEFT JOIN participants p USING (pid) ORDER BY l.created_at, l.pid")
        return [dict(r) for r in rows]

    def progress(self, pid: str) -> list[dict[str, Any]]:
        """The participant's started tasks in order, with answers where submitted."""
        rows = self.read("SELECT * FROM tasks WHERE pid = ? ORDER BY position", (pid,))
        return [dict(r) for r in rows]

    # -- writing -------------------------------------------------------------------------------
    def link(self, pid: str | None = None, *, prefix: str = "anon") -> tuple[str, str]:
        """``(pid, secret)`` of a participant's link, made once (a fresh id if ``pid`` is
        None: ``PREFIX-`` and 8 hex digits). Refused past ``max_participants`` links."""
        def op(conn: sqlite3.Connection) -> tuple[str, str]:
            if pid is not None:
                row = conn.execute("SELECT secret FROM links WHERE pid = ?", (pid,)).fetchone()
                if row:
                    return pid, row[0]
            n = conn.execute("SELECT COUNT(*) FROM links").fetchone()[0]
            if n >= self.max_participants:
                raise StudyLimitError(f"the study has {n:,} participant links, its limit — "
                                      "start another study database (--db)")
            who = pid
            while who is None or conn.execute("SELECT 1 FROM links WHERE pid = ?",
                                              (who,)).fetchone():
                who = f"{prefix}-{secrets.token_hex(4)}"
            secret = new_secret()
            conn.execute("INSERT INTO links VALUES (?, ?, ?)", (secret, who, utc_now()))
            return who, secret

        return self._call(op)

    def join(self, pid: str, choose: Callable[[dict[str, int]], tuple[str, str]]) -> dict:
        """Register ``pid`` with the condition ``choose(counts)`` picks, once.

        Returns ``{"pid", "condition", "method", "new"}``; a participant who joined before
        gets the stored condition back (``new`` False).
        """
        def op(conn: sqlite3.Connection) -> dict:
            row = conn.execute("SELECT condition, method FROM participants WHERE pid = ?",
                               (pid,)).fetchone()
            if row:
                return {"pid": pid, "condition": row[0], "method": row[1], "new": False}
            counts = dict(conn.execute(
                "SELECT condition, COUNT(*) FROM participants GROUP BY condition").fetchall())
            condition, method = choose(counts)
            ordinal = sum(counts.values())
            now = self._clock()
            conn.execute("INSERT INTO participants VALUES (?, ?, ?, ?, ?)",
                         (pid, condition, method, ordinal, now))
            conn.execute("INSERT INTO events(pid, condition, task, ts, kind, payload, source) "
                         "VALUES (?, ?, NULL, ?, 'participant_joined', ?, 'server')",
                         (pid, condition, now, json.dumps({"method": method,
                                                           "ordinal": ordinal})))
            return {"pid": pid, "condition": condition, "method": method, "new": True}

        return self._call(op)

    def log_many(self, pid: str, events: list[tuple[str, dict[str, Any]]], *,
                 task: str | None = None, source: str = "ui") -> list[int]:
        """Store events of ``pid`` in one transaction; their ids once committed.

        ``task`` defaults to the participant's current (started, unsubmitted) task.
        Raises :class:`UnknownParticipant` for an id that has not joined.
        """
        rows = [(kind, _payload_text(kind, payload)) for kind, payload in events]

        def op(conn: sqlite3.Connection) -> list[int]:
            row = conn.execute("SELECT condition FROM participants WHERE pid = ?",
                               (pid,)).fetchone()
            if row is None:
                raise UnknownParticipant(f"participant {pid!r} has not joined this study — "
                                         "open the study page (or POST /study/join) first")
            self._check_room(conn, pid, len(rows))
            current, cond = task, None
            if current is None:
                hit = conn.execute(_CURRENT_TASK, (pid,)).fetchone()
                current, cond = (hit[0], hit[1]) if hit else (None, None)
            else:
                hit = conn.execute(_TASK_CONDITION, (pid, current)).fetchone()
                cond = hit[0] if hit else None
            cond = cond or row[0]  # the task's block, else the participant's condition
            now = self._clock()
            ids = []
            for kind, payload in rows:
                cur = conn.execute(
                    "INSERT INTO events(pid, condition, task, ts, kind, payload, source) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?)", (pid, cond, current, now, kind, payload,
                                                     source))
                ids.append(int(cur.lastrowid))
            self._n_events[pid] += len(rows)
            return ids

        return self._call(op) if rows else []

    def _check_room(self, conn: sqlite3.Connection, pid: str, n: int) -> None:
        """Refuse ``n`` more events of ``pid`` over the event or database caps (writer
        thread only)."""
        if pid not in self._n_events:
            self._n_events[pid] = conn.execute("SELECT COUNT(*) FROM events WHERE pid = ?",
                                               (pid,)).fetchone()[0]
        if self._n_events[pid] + n > self.max_events:
            raise StudyLimitError(f"participant {pid!r} has {self._n_events[pid]:,} events, "
                                  f"the limit is {self.max_events:,} — nothing more is "
                                  "logged for them")
        pages, size = (conn.execute(f"PRAGMA {p}").fetchone()[0]
                       for p in ("page_count", "page_size"))
        if pages * size > self.max_db_bytes:
            raise StudyLimitError(f"the study database is over {self.max_db_bytes:,} bytes, "
                                  "its limit — export it and start another (--db)")

    def log(self, pid: str, kind: str, payload: dict[str, Any] | None = None, *,
            task: str | None = None, source: str = "ui") -> int:
        """Store one event; its id once committed (see :meth:`log_many`)."""
        return self.log_many(pid, [(kind, payload or {})], task=task, source=source)[0]

    def start_task(self, pid: str, task: str, position: int,
                   payload: dict[str, Any] | None = None, *,
                   condition: str | None = None) -> dict[str, Any]:
        """Mark ``task`` started for ``pid`` unless it already is (a reload keeps the
        first start time). ``condition``: the one the task is shown in (default: the
        participant's). Returns ``{"started_at", "new"}``."""
        def op(conn: sqlite3.Connection) -> dict[str, Any]:
            row = conn.execute("SELECT started_at FROM tasks WHERE pid = ? AND task = ?",
                               (pid, task)).fetchone()
            if row:
                return {"started_at": row[0], "new": False}
            cond = conn.execute("SELECT condition FROM participants WHERE pid = ?",
                                (pid,)).fetchone()
            if cond is None:
                raise UnknownParticipant(f"participant {pid!r} has not joined this study — "
                                         "open the study page first")
            now, shown = self._clock(), condition or cond[0]
            conn.execute("INSERT INTO tasks(pid, task, position, started_at, condition) "
                         "VALUES (?, ?, ?, ?, ?)", (pid, task, position, now, shown))
            conn.execute("INSERT INTO events(pid, condition, task, ts, kind, payload, source) "
                         "VALUES (?, ?, ?, ?, 'task_started', ?, 'server')",
                         (pid, shown, task, now, json.dumps(
                             {"position": position, **(payload or {})}, sort_keys=True)))
            return {"started_at": now, "new": True}

        return self._call(op)

    def submit(self, pid: str, task: str, answer: dict[str, Any], *,
               timed_out: bool = False, limit_s: float | None = None,
               grace_s: float = 1.0) -> dict[str, Any] | None:
        """Store the answer to a started task once; None if it was already submitted.

        The server's clock decides lateness: an answer stored more than ``limit_s +
        grace_s`` seconds after the task's start is stored with ``timed_out = 1``, whatever
        the page said (``grace_s`` covers the page's own time-out submit in flight).
        Returns ``{"submitted_at", "seconds", "timed_out"}`` (seconds from the task's start).
        """
        text = _payload_text("answer", answer, MAX_ANSWER_BYTES)

        def op(conn: sqlite3.Connection) -> dict[str, Any] | None:
            row = conn.execute(
                "SELECT t.started_at, t.submitted_at, COALESCE(t.condition, p.condition) "
                "FROM tasks t JOIN "
                "participants p USING (pid) WHERE t.pid = ? AND t.task = ?",
                (pid, task)).fetchone()
            if row is None:
                raise StudyError(f"task {task!r} was not started by {pid!r} — reload the page")
            if row[1] is not None:
                return None
            now = self._clock()
            secs = seconds_between(row[0], now)
            late = timed_out or (limit_s is not None and secs > limit_s + grace_s)
            conn.execute("UPDATE tasks SET submitted_at = ?, answer = ?, seconds = ?, "
                         "timed_out = ? WHERE pid = ? AND task = ?",
                         (now, text, secs, int(late), pid, task))
            conn.execute("INSERT INTO events(pid, condition, task, ts, kind, payload, source) "
                         "VALUES (?, ?, ?, ?, 'task_submitted', ?, 'server')",
                         (pid, row[2], task, now, json.dumps(
                             {"answer": answer, "seconds": secs, "timed_out": late},
                             ensure_ascii=False, sort_keys=True)))
            return {"submitted_at": now, "seconds": secs, "timed_out": late}

        return self._call(op)

    def close(self) -> None:
        """Finish pending writes and stop the writer thread."""
        if not self._closed:
            self._closed = True
            self._queue.put(None)
            self._thread.join(timeout=30)
            while True:  # writes that raced with close() are refused, not left waiting
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is not None and not item[1].done():
                    item[1].set_exception(StudyError("the study log is closed — restart "
                                                     "the study server"))
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None
