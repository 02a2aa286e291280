"""The run directory as a file format: everything one model produced, in one place.

::

    runs/NAME/config.json     data set, tokenizer, architecture, hyper-parameters, seed
    runs/NAME/model.pt        state_dict only (loaded by ``stateseer.rnn_models.loading``)
    runs/NAME/vocab.json
    runs/NAME/metrics.json    train/val/test accuracy; "abstraction" figures below
    runs/NAME/traces/         recorded traces, shards + manifest (:mod:`.traces`)
    runs/NAME/abstraction/    fitted abstraction and FSM

:class:`RunDir` reads and writes these files and never builds a model, so the
abstraction engine and the app read configs, metrics, vocabularies and traces without
torch. Model loading is :mod:`stateseer.rnn_models.loading`'s job.

Examples
--------
>>> import tempfile
>>> run = RunDir(tempfile.mkdtemp())
>>> run.exists()
False
>>> run.update_metrics(test_accuracy=0.9)
{'test_accuracy': 0.9}
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import socket
import warnings
from pathlib import Path
from typing import Any

from stateseer.core import layout
from stateseer.core.atomic import atomic_write_text
from stateseer.core.errors import CheckpointError, DataError, StateseerError
from stateseer.core.reading import load_json, regular_size

SMALL = 256 << 20  # config.json and metrics.json: settings and figures, never data

__all__ = ["MODEL_PATHS", "RELATIVE", "RunDir", "data_section", "located", "located_path",
           "portable", "portable_path", "sha256_file"]


def sha256_file(path: str | Path) -> str:
    """Hex SHA-256 of a regular file, read in 1 MiB blocks up to the size it had when
    opened (a link to a device or a pipe would be read forever).

    Raises
    ------
    DataError
        ``path`` is not a regular file, or grew while it was read (one line).
    """
    size = regular_size(path)
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        left = size
        while left > 0:
            chunk = fh.read(min(1 << 20, left))
            if not chunk:
                break
            h.update(chunk)
            left -= len(chunk)
        if fh.read(1):
            raise DataError(f"{path} grew while it was read; let the command writing it "
                            "finish, then run this again")
    return h.hexdigest()


#: the directories a command writes beside their target before swapping them in
WORK_DIRS = ("traces.tmp", "abstraction.tmp", "abstraction.scratch")
OWNER = ".owner"


class StrayWorkWarning(UserWarning):
    """A command removed the half-written directory an interrupted command left."""


def claim(work_dir: str | Path) -> Path:
    """Create ``work_dir`` (a half-written directory, e.g. ``RUN/traces.tmp``) anew and
    record which process writes it, so that a later command can tell a stray one (its
    writer is dead) from one being written."""
    work_dir = Path(work_dir)
    _remove_stray(work_dir)
    work_dir.mkdir(parents=True)
    (work_dir / OWNER).write_text(json.dumps({"pid": os.getpid(),
                                              "host": socket.gethostname()}))
    return work_dir


def _remove_stray(d: Path) -> bool:
    """Remove ``d`` when its writer is dead, saying so; refuse when it lives."""
    if not d.is_dir():
        return False
    if _writer_alive(d):
        raise StateseerError(f"another stateseer command is writing {d}; wait for it to end "
                             "(or stop it) and run this again")
    shutil.rmtree(d)
    warnings.warn(f"removed {d}, left half-written by an interrupted command; the run "
                  "itself is whole", StrayWorkWarning, stacklevel=3)
    return True


def release(work_dir: str | Path) -> None:
    """Drop the writer's mark before ``work_dir`` is swapped into place."""
    (Path(work_dir) / OWNER).unlink(missing_ok=True)


def _writer_alive(work_dir: Path) -> bool:
    try:
        owner = load_json(work_dir / OWNER, 4096)
        pid, host = int(owner["pid"]), str(owner["host"])
    except (OSError, DataError, ValueError, KeyError, TypeError):
        return False  # no owner (an older version, or killed before it wrote one)
    if host != socket.gethostname():
        return True  # written from another machine: it cannot be told, so it is kept
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


FILE_KINDS = ("csv", "jsonl")
RELATIVE = "relative to the run"
"""``data.paths`` of a run whose data file path is kept relative to it."""
#: the ``model`` section's paths of a ``create``d run (its factory's module)
MODEL_PATHS = ("search_path", "module_path", "module_file", "hf_path")


def portable_path(path: str, base: str | Path) -> str:
    """``path`` relative to ``base`` (the run directory), as ``config.json`` keeps paths: a
    run names no absolute path of its maker's machine (``/home/ana/...``), and a project
    folder holding runs, data and model code moves whole. A relative ``path`` is taken
    from the current directory; one on another drive is returned absolute.

    Examples
    --------
    >>> portable_path("/work/data/reviews.csv", "/work/runs/gru")
    '../../data/reviews.csv'
    """
    path = os.path.abspath(path)  # a relative one is the caller's, from its directory
    try:
        return Path(os.path.relpath(path, os.path.abspath(base))).as_posix()
    except ValueError:  # another drive
        return path


def located_path(path: str, base: str | Path) -> str:
    """:func:`portable_path`'s inverse: a relative path read against ``base`` (an absolute
    one, as runs made before kept them, is returned as it is).

    Examples
    --------
    >>> located_path("../../data/reviews.csv", "/work/runs/gru")
    '/work/data/reviews.csv'
    """
    if os.path.isabs(path):
        return path
    return os.path.normpath(os.path.join(os.path.abspath(base), path))


def _file_name(name: Any, base: str | Path, how: Any) -> Any:
    kind, sep, rest = str(name).partition(":")
    if isinstance(name, str) and sep and kind in FILE_KINDS and rest:
        return f"{kind}:{how(rest, base)}"
    return name


def portable(name: str, base: str | Path) -> str:
    """A ``csv:PATH``/``jsonl:PATH`` data-set name with ``PATH`` made :func:`portable_path`
    (other names are returned as they are).

    >>> portable("csv:/work/data/reviews.csv", "/work/runs/gru"), portable("tomita3", "/x")
    ('csv:../../data/reviews.csv', 'tomita3')
    """
    return _file_name(name, base, portable_path)


def located(name: str, base: str | Path) -> str:
    """:func:`portable`'s inverse (:func:`located_path` of a data file's path).

    >>> located("csv:../../data/reviews.csv", "/work/runs/gru")
    'csv:/work/data/reviews.csv'
    """
    return _file_name(name, base, located_path)


def data_section(ds: Any, *, text_col: str = "text", label_col: str = "label", seed: int = 0,
                 max_tokens: int | None = 2000, truncate: int | None = None,
                 base: str | Path | None = None) -> dict[str, Any]:
    """The ``"data"`` section of ``config.json``: how to reload ``ds`` and its splits.

    Parameters
    ----------
    ds : TextDataset
        As returned by :func:`stateseer.rnn_models.datasets.load_dataset` with these options (read
        through its ``name``, ``tokenizer``, ``classes``, ``grammar``, ``info`` and
        ``splits`` attributes).
    truncate : int, optional
        The model is shown only each input's first ``truncate`` tokens (kept only when set).
    base : str or Path, optional
        The run directory: a data file's path is kept relative to it (:func:`portable`);
        :attr:`RunDir.data` reads it back absolute.
    """
    extra = {"truncate": int(truncate)} if truncate is not None else {}
    name, info = ds.name, ds.info
    kept = portable(name, base) if base is not None else name
    if kept != name:
        name = kept
        extra["paths"] = RELATIVE  # runs made before: absolute, or from the cwd
        if isinstance(info, dict) and "source" in info:  # the same file
            info = {**info, "source": name.partition(":")[2]}
    return {**extra, "name": name, "tokenizer": ds.tokenizer, "classes": ds.classes,
            "text_col": text_col, "label_col": label_col, "seed": seed,
            "max_tokens": max_tokens, "grammar": ds.grammar, "source": info,
            "split_sizes": {s: len(v) for s, v in ds.splits.items()}}


class RunDir:
    """A run directory (the files only; no model is built here).

    Parameters
    ----------
    path : str or Path
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        #: every path of the run (:class:`~stateseer.core.layout.RunLayout`)
        self.layout = layout.RunLayout(self.path)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self.path)!r})"

    def __fspath__(self) -> str:
        return str(self.path)

    def _repr_html_(self) -> str:
        """In a notebook: the data set, the model and the headline figures."""
        from stateseer.core.reprs import figures_html

        try:
            cfg, m = self.config, self.metrics()
        except StateseerError as exc:
            return figures_html(f"run {self.path.name}", [("cannot be read", str(exc))])
        data, model = cfg.get("data") or {}, cfg.get("model") or {}
        a = m.get("abstraction") or {}
        shape = [model.get("arch"), model.get("layers") and f"{model['layers']} layer(s)",
                 model.get("hidden") and f"hidden {model['hidden']}"]
        rows = [("data set", data.get("name")),
                ("classes", ", ".join(map(str, data.get("classes") or ()))),
                ("model", " · ".join(str(x) for x in shape if x) or "—"),
                ("test accuracy", m.get("test_accuracy")),
                ("states", a.get("n_states")),
                ("simulation fidelity", a.get("simulation_fidelity")),
                ("chance agreement", a.get("simulation_chance")),
                ("Cohen's κ", a.get("simulation_kappa")),
                ("traces", "recorded" if self.traces_dir.exists() else "not recorded")]
        return figures_html(f"run {self.path.name}", rows)

    # paths ------------------------------------------------------------------------------
    @property
    def config_path(self) -> Path:
        return self.layout.config

    @property
    def model_path(self) -> Path:
        return self.layout.model

    @property
    def vocab_path(self) -> Path:
        return self.layout.vocab

    @property
    def metrics_path(self) -> Path:
        return self.layout.metrics

    @property
    def traces_dir(self) -> Path:
        return self.layout.traces

    @property
    def abstraction_dir(self) -> Path:
        return self.layout.abstraction

    # content ----------------------------------------------------------------------------
    def exists(self) -> bool:
        """Whether the directory holds a run (its ``config.json``)."""
        return self.config_path.exists()

    @property
    def config(self) -> dict[str, Any]:
        """``config.json`` (read on every access).

        Raises
        ------
        StateseerError
            Not a run, or the file is not JSON.
        """
        if not self.config_path.exists():
            raise StateseerError(
                f"{self.path} is not a stateseer run (no config.json); "
                "create it with `stateseer train --dataset NAME --arch gru --out "
                f"{self.path}`"
            )
        try:
            cfg = load_json(self.config_path, SMALL, fix="restore it or retrain the run")
        except DataError as exc:
            raise StateseerError(str(exc)) from None
        except OSError as exc:
            raise StateseerError(f"{self.config_path} cannot be read ({exc.strerror or exc}); "
                                 "restore it or retrain the run") from None
        if not isinstance(cfg, dict):
            raise StateseerError(f"{self.config_path} is corrupt (not a JSON object); restore "
                                 "it or retrain the run")
        return cfg

    @property
    def data(self) -> dict[str, Any]:
        """The ``data`` section of ``config.json`` (see :func:`data_section`), a data file's
        path made absolute again (:func:`located`)."""
        d = self.config.get("data")
        if not isinstance(d, dict):
            raise StateseerError(f"{self.config_path} has no 'data' section; retrain the run")
        if isinstance(d.get("name"), str) and d.get("paths") == RELATIVE:
            d = {**d, "name": located(d["name"], self.path)}
        return d

    @property
    def truncate(self) -> int | None:
        """The most tokens of an input the model is shown (``data.truncate``), or None."""
        d = self.config.get("data")
        n = d.get("truncate") if isinstance(d, dict) else None
        return int(n) if n else None

    def metrics(self) -> dict[str, Any]:
        """``metrics.json``, or ``{}`` when there is none yet."""
        if not self.metrics_path.exists():
            return {}
        try:
            m = load_json(self.metrics_path, SMALL)
        except (OSError, DataError):
            raise StateseerError(
                f"{self.metrics_path} is not valid JSON; delete it and rerun the step that wrote it"
            ) from None
        if not isinstance(m, dict):
            raise StateseerError(f"{self.metrics_path} is corrupt (not a JSON object); delete "
                                 "it and rerun the step that wrote it")
        return m

    def update_config(self, **keys: Any) -> dict[str, Any]:
        """Set top-level keys of ``config.json`` (atomically; ``None`` removes one) and
        return the result: settings that change no recorded number, such as the class
        ``colors``."""
        cfg = self.config
        for k, v in keys.items():
            if v is None:
                cfg.pop(k, None)
            else:
                cfg[k] = v
        atomic_write_text(self.config_path, json.dumps(cfg, indent=2))
        return cfg

    def update_metrics(self, **sections: Any) -> dict[str, Any]:
        """Merge top-level keys into ``metrics.json`` (atomically) and return the result."""
        m = self.metrics()
        m.update(_finite(sections))
        atomic_write_text(self.metrics_path, json.dumps(m, indent=2, sort_keys=True))
        return m

    def vocab_tokens(self) -> list[str]:
        """The token strings of ``vocab.json``, in id order.

        Raises
        ------
        CheckpointError
            The file is missing or damaged.
        """
        try:
            tokens = load_json(self.vocab_path)["tokens"]
        except (OSError, DataError, KeyError, TypeError):
            raise CheckpointError(
                f"{self.vocab_path} is missing or damaged; retrain the run"
            ) from None
        return [str(t) for t in tokens]

    def model_sha256(self) -> str:
        """SHA-256 of ``model.pt`` (what traces and abstractions record as provenance)."""
        if not self.model_path.exists():
            raise CheckpointError(
                f"{self.model_path} not found; train the run first with `stateseer train`"
            )
        return sha256_file(self.model_path)

    def clean_stray(self) -> list[Path]:
        """Remove the half-written directories (:data:`WORK_DIRS`) that an interrupted
        command left (their writer is dead), saying so (:class:`StrayWorkWarning`); every
        command that writes the run calls it first.

        Raises
        ------
        StateseerError
            Another live command is writing one of them (one line).
        """
        return [self.path / name for name in WORK_DIRS if _remove_stray(self.path / name)]

    def require_new(self, force: bool = False) -> None:
        """Refuse to overwrite an existing run unless ``force``."""
        if self.exists() and not force:
            raise DataError(
                f"{self.path} already holds a run; pass --force to overwrite it or choose "
                "another --out"
            )


def _finite(value: Any) -> Any:
    """``value`` with every NaN or infinite float replaced by None (``null``): JSON has
    no NaN, and strict readers refuse the ``NaN`` Python writes (a test accuracy without a
    test split)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value
