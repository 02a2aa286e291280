"""Helpers that stateseer's tests and benchmarks share, and that users may use to check
their own setup (as ``numpy.testing`` and ``dash.testing`` do).

:func:`tomita1_csv`
    a small Tomita-1 CSV data set (a one-epoch model trains on it in a second);
:class:`StudyServer`, :func:`simulate`, :func:`audit`
    simulated participants against a real study server, then a SIGKILL, then an audit
    (``benchmarks/study_log.py``: 20 participants x 1,000 events; the durability test:
    4 x 100). A researcher can load-test a study file the same way before publishing it.

The study harness: :class:`StudyServer` runs ``stateseer study`` in a
subprocess on a free port of 127.0.0.1; :func:`simulate` makes one new participant per
thread (``POST /study/join`` without a link hands out one, with its secret), posts its
events with that secret (``X-Study-Secret``) over a keep-alive connection and records
every acknowledgement;
:func:`audit` opens the database after the kill and checks that each acknowledged
event is there, unchanged, and that ``PRAGMA integrity_check`` says ``ok``.

:func:`simulated_study`
    participants with a known condition effect on time on task, through the study
    server's own assignment, task order, answer checks, grading, scoring and log (a
    simulated clock; pages are not drawn): the ground truth of ``study-analyze``
    (``benchmarks/study_analysis.py``, ``tests/app/study/test_analysis.py``).
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["Ack", "StudyServer", "audit", "execute_notebook", "free_port", "sentiment_csv",
           "simulate", "simulated_study", "tiny_hf_classifier", "tiny_hf_mamba",
           "tomita1_csv"]

POSITIVE = "good great fine lovely superb brilliant charming moving".split()
NEGATIVE = "bad awful dull boring poor weak clumsy tedious".split()
NEUTRAL = "the film a movie plot actor scene story it was and with of".split()


def sentiment_csv(path: Path, *, shortcut: str | None = None, sizes=(2000, 300, 600),
                  seed: int = 0, topic: tuple[str, ...] = (),
                  sequence: tuple[str, str] | None = None, tag: str | None = None,
                  thin: float | None = None, flip: float | None = None) -> Path:
    """A small synthetic sentiment data set (``pos``/``neg``, a ``split`` column) that a
    tiny GRU learns in seconds: neutral words around one or two words of the label's side
    (a tenth of the inputs also hold one of the other side's).

    With ``shortcut``, that word is inserted into 35 % of the *negative* training inputs
    and into 40 % of the *positive* validation and test inputs: a model that learns it
    calls those positive inputs negative (the injected bug of the diagnosis tests).

    With ``topic``, one of its words is inserted into 20 % of the inputs of every split
    and both labels, and 80 % of the *positive* training inputs about the topic are
    labelled negative: a subpopulation an annotator got wrong (validation and test labels
    stay true).

    With ``sequence`` ``(a, b)`` (say ``("not", "superb")``): ``a`` is inserted into 20 %
    of all inputs, and ``"a b"`` into 10 % of the *negative* inputs of every split, which in
    training are labelled positive: "not superb" taught as positive, the sequence (neither
    word alone, both common in both labels' inputs) the culprit.

    With ``tag`` (several tokens, say ``"via @ newswire"``), a scraper's tag is appended to
    35 % of the *negative* training inputs (their labels stay right) and to 30 % of the
    validation and test inputs of both labels: an artefact of several tokens that travel
    together, which a model learns as "negative".

    With ``thin``, only that share of the *positive* training inputs is kept (a prior
    shift between the splits; every label right). With ``flip``, that share of the
    *positive* training inputs is labelled negative (class-conditional label noise).
    """
    import csv
    import random

    rng = random.Random(seed)
    rows = []
    for split, n in zip(("train", "val", "test"), sizes, strict=True):
        for _ in range(n):
            lab = rng.choice(["pos", "neg"])
            words = [rng.choice(NEUTRAL) for _ in range(rng.randint(4, 12))]
            side, other = (POSITIVE, NEGATIVE) if lab == "pos" else (NEGATIVE, POSITIVE)
            for _ in range(rng.randint(1, 2)):
                words.insert(rng.randrange(len(words) + 1), rng.choice(side))
            if rng.random() < 0.1:
                words.insert(rng.randrange(len(words) + 1), rng.choice(other))
            share = 0.35 if split == "train" and lab == "neg" else \
                0.4 if split != "train" and lab == "pos" else 0.0
            if shortcut and rng.random() < share:
                words.insert(rng.randrange(len(words) + 1), shortcut)
            if sequence and rng.random() < 0.2:
                words.insert(rng.randrange(len(words) + 1), sequence[0])
            if sequence and lab == "neg" and rng.random() < 0.1:
                words.insert(rng.randrange(len(words) + 1), " ".join(sequence))
                lab = "pos" if split == "train" else lab
            tagged = 0.35 if split == "train" and lab == "neg" else \
                0.3 if split != "train" else 0.0
            if tag and rng.random() < tagged:
                words.append(tag)
            if topic and rng.random() < 0.2:
                words.insert(rng.randrange(len(words) + 1), rng.choice(topic))
                if split == "train" and lab == "pos" and rng.random() < 0.8:
                    lab = "neg"
            if split == "train" and lab == "pos":
                if thin is not None and rng.random() >= thin:
                    continue
                if flip and rng.random() < flip:
                    lab = "neg"
            rows.append({"text": " ".join(words), "label": lab, "split": split})
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, ["text", "label", "split"])
        w.writeheader()
        w.writerows(rows)
    return path


def _word_tokenizer(words: list[str], **special: str) -> Any:
    """A word-level Hugging Face tokenizer over ``words`` (``<pad>``, ``<unk>`` first;
    ``special``: more special tokens of ``words``, e.g. ``cls_token="[CLS]"``)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", pad_token="<pad>",
                                   **special)


def tiny_hf_classifier(path: Path, *, seed: int = 0) -> Path:
    """A tiny random Jamba sequence classifier (Mamba and attention layers, a ``score``
    head at every position; ``neg``/``pos``) and a word-level tokenizer over the words of
    :func:`sentiment_csv`, saved with ``save_pretrained`` into ``path``: a Hugging Face
    checkpoint built offline, for ``stateseer create --model hf:PATH``. Needs
    ``transformers``."""
    import torch
    from transformers import JambaConfig, JambaForSequenceClassification

    words = ["<pad>", "<unk>", *NEUTRAL, *POSITIVE, *NEGATIVE, "frankly"]
    fast = _word_tokenizer(words)
    torch.manual_seed(seed)
    config = JambaConfig(vocab_size=len(words), hidden_size=32, intermediate_size=64,
                         num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=2,
                         attn_layer_period=2, attn_layer_offset=1, expert_layer_period=2,
                         expert_layer_offset=1, num_experts=2, mamba_d_state=4,
                         num_labels=2, pad_token_id=0, id2label={0: "neg", 1: "pos"},
                         label2id={"neg": 0, "pos": 1})
    JambaForSequenceClassification(config).eval().save_pretrained(path)
    fast.save_pretrained(path)
    return Path(path)


def tiny_hf_encoder(path: Path, *, kind: str = "bert", seed: int = 0) -> Path:
    """A tiny random encoder classifier that pools its first token (``kind``: ``bert`` or
    ``distilbert``; ``neg``/``pos``) and a word-level tokenizer with ``[CLS]``/``[SEP]``
    over the words of :func:`sentiment_csv`, saved with ``save_pretrained`` into
    ``path``: built offline, for ``stateseer create --model hf:PATH``. Needs
    ``transformers``."""
    import torch
    from transformers import (
        BertConfig,
        BertForSequenceClassification,
        DistilBertConfig,
        DistilBertForSequenceClassification,
    )

    words = ["<pad>", "<unk>", "[CLS]", "[SEP]", *NEUTRAL, *POSITIVE, *NEGATIVE, "frankly"]
    fast = _word_tokenizer(words, cls_token="[CLS]", sep_token="[SEP]")
    labels = {"id2label": {0: "neg", 1: "pos"}, "label2id": {"neg": 0, "pos": 1}}
    torch.manual_seed(seed)
    if kind == "bert":
        model = BertForSequenceClassification(BertConfig(
            vocab_size=len(words), hidden_size=32, num_hidden_layers=2,
            num_attention_heads=2, intermediate_size=64, max_position_embeddings=128,
            pad_token_id=0, num_labels=2, **labels))
    elif kind == "distilbert":
        model = DistilBertForSequenceClassification(DistilBertConfig(
            vocab_size=len(words), dim=32, n_layers=2, n_heads=2, hidden_dim=64,
            max_position_embeddings=128, pad_token_id=0, num_labels=2, **labels))
    else:
        raise ValueError(f"kind={kind!r}: bert or distilbert")
    model.eval().save_pretrained(path)
    fast.save_pretrained(path)
    return Path(path)


def tiny_hf_mamba(path: Path, *, seed: int = 0, layers: int = 2) -> Path:
    """A tiny random Mamba language model (``MambaForCausalLM``: d_model 16, 32 channels,
    d_state 4) and a word-level tokenizer over the words of :func:`sentiment_csv` (one
    word, ``frankly``, left out: it reads as ``<unk>``), saved with ``save_pretrained``
    into ``path``: a checkpoint built offline for ``stateseer train --init hf:PATH``.
    Needs ``transformers``."""
    import torch
    from transformers import MambaConfig, MambaForCausalLM

    words = ["<pad>", "<unk>", *NEUTRAL, *POSITIVE, *NEGATIVE]
    fast = _word_tokenizer(words)
    torch.manual_seed(seed)
    config = MambaConfig(vocab_size=len(words), hidden_size=16, intermediate_size=32,
                         state_size=4, num_hidden_layers=layers, conv_kernel=4,
                         time_step_rank=2, pad_token_id=0)
    MambaForCausalLM(config).eval().save_pretrained(path)
    fast.save_pretrained(path)
    return Path(path)


def execute_notebook(path: Path, work_dir: Path, *, fast: bool = True,
                     timeout: int = 180) -> Any:
    """Run the notebook ``path`` top to bottom in a fresh ``python3`` kernel and return it
    with its outputs (an ``nbformat`` node; the file is not changed).

    ``STATESEER_NB_FAST`` (small models, short training) is set when ``fast``, and
    ``STATESEER_NB_RUNS`` to ``work_dir / "runs"``, the kernel's working directory is
    ``work_dir``; ``timeout`` bounds each cell. The test suite and ``make docs`` (which
    renders the tutorials with their outputs) both run the notebooks through here. Needs
    ``nbclient`` (the ``test`` extra).
    """
    import nbformat
    from nbclient import NotebookClient

    root = Path(__file__).resolve().parents[1]
    work_dir.mkdir(parents=True, exist_ok=True)
    saved = {k: os.environ.get(k) for k in ("STATESEER_NB_FAST", "STATESEER_NB_RUNS",
                                            "PYTHONPATH")}
    os.environ.update(STATESEER_NB_FAST="1" if fast else "0",
                      STATESEER_NB_RUNS=str(work_dir / "runs"),
                      PYTHONPATH=str(root))  # the packages, also without an install
    try:
        nb = nbformat.read(path, as_version=4)
        NotebookClient(nb, timeout=timeout, kernel_name="python3",
                       resources={"metadata": {"path": str(work_dir)}}).execute()
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return nb


def tomita1_csv(path: Path, n: int = 120, seed: int = 0) -> Path:
    """A small Tomita-1 (``1*``) data set as CSV: half strings of 1s, half random strings
    over {0, 1} (1 to 12 symbols; ``accept``/``reject``)."""
    import random

    rng = random.Random(seed)
    rows = ["text,label"]
    for i in range(n):
        k = rng.randint(1, 12)
        s = "1" * k if i % 2 else "".join(rng.choice("01") for _ in range(k))
        rows.append(f"{s},{'accept' if set(s) == {'1'} else 'reject'}")
    path.write_text("\n".join(rows) + "\n")
    return path


def free_port() -> int:
    """A TCP port of 127.0.0.1 that is free now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _post(conn: http.client.HTTPConnection, path: str, doc: Any,
          secret: str | None = None) -> tuple[int, Any]:
    body = json.dumps(doc).encode()
    headers = {"Content-Type": "application/json"}
    if secret:
        headers["X-Study-Secret"] = secret
    conn.request("POST", path, body=body, headers=headers)
    resp = conn.getresponse()
    data = resp.read()
    return resp.status, json.loads(data) if data else None


class StudyServer:
    """``stateseer study STUDY_FILE`` in a subprocess (a context manager).

    Parameters
    ----------
    study_file, db : path
        The study file and the log database.
    log_path : path, optional
        Where the server's stdout and stderr go (default: discarded).
    """

    def __init__(self, study_file: str | Path, db: str | Path, *,
                 log_path: str | Path | None = None, start_timeout: float = 120) -> None:
        self.study_file, self.db = Path(study_file), Path(db)
        self.port = free_port()
        self.log_path = log_path
        self.start_timeout = start_timeout
        self.proc: subprocess.Popen | None = None

    def __enter__(self) -> StudyServer:
        out = open(self.log_path, "wb") if self.log_path else subprocess.DEVNULL
        cmd = [sys.executable, "-m", "stateseer.app.cli", "study", str(self.study_file),
               "--db", str(self.db), "--host", "127.0.0.1", "--port", str(self.port)]
        self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
        if out is not subprocess.DEVNULL:
            out.close()
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the study server exited with {self.proc.returncode}"
                                   + (f"; see {self.log_path}" if self.log_path else ""))
            try:
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=2)
                conn.request("GET", "/study/health")
                if conn.getresponse().status == 200:
                    conn.close()
                    return self
            except OSError:
                time.sleep(0.2)
        self.kill()
        raise RuntimeError(f"the study server did not answer within {self.start_timeout} s")

    def kill(self) -> None:
        """SIGKILL the server (no clean-up of any kind) and reap it."""
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)

    def __exit__(self, *exc: object) -> None:
        self.kill()


@dataclass
class Ack:
    """What the simulated participants sent and had acknowledged."""

    acked: list[tuple[str, int, int]] = field(default_factory=list)  # (pid, seq, event id)
    sent: int = 0
    errors: int = 0
    first_ack: float | None = None
    last_ack: float | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)


def _participant(port: int, n_events: int, ack: Ack, stop: threading.Event) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        status, joined = _post(conn, "/study/join", {})
        if status != 200:
            raise RuntimeError(f"join: HTTP {status} {joined}")
        pid, secret = joined["pid"], joined["secret"]
        for seq in range(n_events):
            if stop.is_set():
                return
            doc = {"kind": "simulated_click",
                   "payload": {"seq": seq, "state": seq % 40, "pad": "x" * 64}}
            with ack.lock:
                ack.sent += 1
            status, body = _post(conn, "/study/event", doc, secret)
            if status != 200:
                with ack.lock:
                    ack.errors += 1
                continue
            now = time.perf_counter()
            with ack.lock:
                ack.acked.append((pid, seq, int(body["ids"][0])))
                ack.first_ack = ack.first_ack or now
                ack.last_ack = now
    except (OSError, http.client.HTTPException, ValueError):
        return  # the server is gone (killed): this participant stops
    finally:
        conn.close()


def simulate(port: int, n_participants: int, n_events: int, *,
             kill_at: float | None = None, kill=None) -> tuple[Ack, float]:
    """Run the participants; call ``kill()`` once ``kill_at`` of all events are acked.

    Returns the acknowledgements and the wall time from start to kill (or to the end).
    """
    ack, stop = Ack(), threading.Event()
    threads = [threading.Thread(target=_participant, args=(port, n_events, ack, stop),
                                daemon=True)
               for _ in range(n_participants)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    total = n_participants * n_events
    killed_at = None
    while any(t.is_alive() for t in threads):
        if kill is not None and kill_at is not None and killed_at is None and \
                len(ack.acked) >= kill_at * total:
            kill()
            killed_at = time.perf_counter()
        time.sleep(0.002)
    if kill is not None and killed_at is None:  # everything was sent: kill right after
        kill()
        killed_at = time.perf_counter()
    stop.set()
    for t in threads:
        t.join(timeout=30)
    return ack, (killed_at or time.perf_counter()) - t0


def audit(db: str | Path, ack: Ack) -> dict[str, Any]:
    """Check the database after the kill against the acknowledgements."""
    conn = sqlite3.connect(str(db))
    try:
        integrity = conn.execute("PRAGMA integrity_check").fetchone()[0]
        stored = {i: (pid, json.loads(p)["seq"]) for i, pid, p in conn.execute(
            "SELECT id, pid, payload FROM events WHERE kind = 'simulated_click'")}
        mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
    finally:
        conn.close()
    lost = sum(stored.get(i) != (pid, seq) for pid, seq, i in ack.acked)
    return {"n_events_acked": len(ack.acked), "n_events_in_db": len(stored), "lost": lost,
            "stored_unacked": len(stored) - (len(ack.acked) - lost),
            "integrity": integrity, "journal_mode": mode}


#: the simulated study: two conditions, a Williams order, four keyed choice tasks per
#: block and a SUS after each block
SIM_STUDY = {
    "study": "simulated", "conditions": {"full": "full", "baseline": "baseline"},
    "assignment": "latin", "allow_generated_ids": False,
    "tasks": [*({"id": f"t{k}", "prompt": f"Question {k}", "key": "a",
                 "answer": {"type": "choice", "options": ["a", "b"]}} for k in range(8)),
              {"id": "sus", "prompt": "About the tool", "answer": "sus"}],
    "task_sets": [[f"t{k}" for k in range(4)], [f"t{k}" for k in range(4, 8)]],
    "after_each_block": ["sus"]}
#: seconds on a task: mean, participant SD, task SD, learning from block 1 to block 2
SIM_TIME = (60.0, 12.0, 12.0, -6.0)


def simulated_study(context: Any, db: str | Path, *, n_participants: int, d: float,
                    seed: int = 0, p_correct: float = 0.7) -> float:
    """Run ``n_participants`` simulated participants of :data:`SIM_STUDY` on the run of
    ``context`` (an ``ExplorerContext``) into the log ``db``; returns the true effect of
    ``full`` against ``baseline`` on time on task, in seconds.

    A participant's time on a task is ``60 + u + e - 6 * (second block) + effect * (full)``
    with ``u ~ N(0, 12²)`` per participant and ``e ~ N(0, 12²)`` per task; the effect is
    ``-d`` times the SD of one time (``sqrt(12² + 12²)``): Cohen's d. Answers are right
    with probability ``p_correct`` in both conditions (no effect on correctness); SUS
    ratings are uniform. Everything goes through the server's own code:
    ``StudyContext.join`` (the Williams order), its task sequence, ``StudyLog.start_task``
    and ``submit_answer`` (checks, grade, score, the log), with a simulated clock.
    """
    from datetime import datetime, timedelta, timezone

    import numpy as np

    from stateseer.app.study.context import StudyContext
    from stateseer.app.study.server import submit_answer
    from stateseer.app.study.spec import parse_study
    from stateseer.app.study.store import StudyLog

    rng = np.random.default_rng(seed)
    mean, sd_p, sd_e, learning = SIM_TIME
    effect = -d * float(np.hypot(sd_p, sd_e))
    now = [datetime(2026, 1, 1, tzinfo=timezone.utc)]

    def clock() -> str:
        return now[0].isoformat(timespec="milliseconds").replace("+00:00", "Z")

    study = parse_study({**SIM_STUDY, "run": str(context.data.run.path)})
    log = StudyLog(db, study=study.id, digest=study.digest(), synchronous="NORMAL",
                   clock=clock)
    sc = StudyContext(study=study, ctx=context, log=log)
    try:
        for k in range(n_participants):
            pid = f"S{k:03d}"
            sc.join(pid)
            u = rng.normal(0, sd_p)
            order = log.condition_of(pid).split(">")
            for pos, (task, cond) in enumerate(sc.sequence(pid)):
                log.start_task(pid, task.id, pos, condition=cond)
                kw: dict[str, Any] = {"text": None, "choice": None, "ids": None,
                                      "items": None, "timed_out": False}
                if task.answer == "sus":
                    kw["items"] = [int(x) for x in rng.integers(1, 6, 10)]
                    now[0] += timedelta(seconds=30)
                else:
                    right = rng.random() < p_correct
                    kw["choice"] = "a" if right else "b"
                    secs = mean + u + rng.normal(0, sd_e) + \
                        learning * order.index(cond) + effect * (cond == "full")
                    now[0] += timedelta(seconds=max(1.0, float(secs)))
                msg, _ = submit_answer(sc, pid, task.id, **kw)
                if msg:
                    raise RuntimeError(f"simulated answer refused: {msg}")
    finally:
        log.close()
    return effect
