"""What every command shares: option types that refuse bad values in one line, the
registries the choices come from (read on first use), and checks of output paths and
bind addresses."""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import tempfile
import warnings
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from stateseer.core.errors import StateseerError

SPLITS = ("train", "val", "test")


# -- registries (read on first use) -------------------------------------------------------
class _Registry(Sequence[str]):
    """The names of a registry, read whenever argparse looks at them: ``stateseer --help``
    imports no registry it does not show, and an entry added later is a valid choice."""

    def __init__(self, load: Callable[[], Any]) -> None:
        self._load = load

    def names(self) -> tuple[str, ...]:
        return tuple(self._load())

    def __getitem__(self, i):  # type: ignore[override]
        return self.names()[i]

    def __len__(self) -> int:
        return len(self.names())

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __contains__(self, name: object) -> bool:
        return name in self.names()


def _architectures() -> Any:
    from stateseer.rnn_models.archs import ARCHITECTURES  # torch-free

    return ARCHITECTURES


def _abstractors() -> Any:
    from stateseer.abstraction.abstractors.base import abstractor_names

    return abstractor_names()


def _export_formats() -> Any:
    from stateseer.abstraction.automata.export import EXPORT_FORMATS

    return (*EXPORT_FORMATS, "html")  # html: one page from the whole run (workflows)


def _arch_options() -> dict[str, tuple[str, Any]]:
    """Every architecture's own train options: name → (the archs that take it, the
    option)."""
    from stateseer.rnn_models.archs import ARCHITECTURES  # torch-free

    out: dict[str, tuple[str, Any]] = {}
    for arch in ARCHITECTURES.values():
        for k, opt in arch.options.items():
            names = f"{out[k][0]}, {arch.name}" if k in out else arch.name
            out[k] = (names, opt)
    return out


def _arch_states() -> Any:
    from stateseer.rnn_models.archs import ARCHITECTURES  # torch-free

    return dict.fromkeys(s for arch in ARCHITECTURES.values() for s in arch.states)


def _features() -> Any:
    from stateseer.abstraction.abstractors.features import FEATURES

    return FEATURES


def _fallbacks() -> Any:
    from stateseer.abstraction.automata.fsm import FALLBACKS

    return FALLBACKS


ARCHS = _Registry(_architectures)


FEATURES = _Registry(_features)


FALLBACKS = _Registry(_fallbacks)


STATES = _Registry(_arch_states)


METHODS = _Registry(_abstractors)


FORMATS = _Registry(_export_formats)


def _dataset_names() -> str:
    from stateseer.rnn_models.datasets import dataset_names

    return ", ".join(dataset_names())


# -- argument types (range checks) --------------------------------------------------------
def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None


def _positive_int(text: str) -> int:
    value = _int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def _nonnegative_int(text: str) -> int:
    value = _int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, not {value}")
    return value


def _fraction(text: str) -> float:
    value = _float(text)
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"an accuracy is between 0 and 1, not {value}")
    return value


def _seed(text: str) -> int:
    value = _int(text)
    if not 0 <= value < 2**32:
        raise argparse.ArgumentTypeError(f"a seed is between 0 and 2**32 - 1, not {value}")
    return value


def _port(text: str) -> int:
    value = _int(text)
    if not 1 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"a port is between 1 and 65535, not {value}")
    return value


def _float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number, not {text}")
    return value


def _positive_float(text: str) -> float:
    value = _float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be greater than 0, not {text}")
    return value


def _nonnegative_float(text: str) -> float:
    value = _float(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, not {text}")
    return value


def _dropout(text: str) -> float:
    value = _float(text)
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f"a dropout rate is in [0, 1), not {text}")
    return value


def _states_arg(text: str) -> int | str:
    return text if text == "auto" else _positive_int(text)


class RenamedOptionWarning(UserWarning):
    """An option was given by its old spelling (still accepted for one release)."""


class _Renamed(argparse.Action):
    """The old spelling of a renamed option: it still sets the new option's value, with a
    one-line warning naming the new spelling. Hidden from ``--help``."""

    def __init__(self, option_strings: Sequence[str], dest: str, *, new: str, **kwargs: Any
                 ) -> None:
        self.new = new
        super().__init__(option_strings, dest, help=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        warnings.warn(f"{option_string} of `{parser.prog}` is now {self.new} "
                      f"({option_string} means a state count, or 'auto', everywhere else); "
                      "the old spelling goes in the next release", RenamedOptionWarning,
                      stacklevel=2)
        setattr(namespace, self.dest, values)


def _add_renamed(p: argparse.ArgumentParser, old: str, new: str, **kwargs: Any) -> None:
    """``new`` as the option, ``old`` as its deprecated spelling (same destination)."""
    action = p.add_argument(new, **kwargs)
    p.add_argument(old, action=_Renamed, new=new, dest=action.dest, type=kwargs.get("type"),
                   default=argparse.SUPPRESS)


_COLOR_PART = re.compile(r"(?:[^=,]+=)?#[0-9a-fA-F]{6}")


def _colors_arg(text: str) -> str:
    """``--colors``: ``NAME=#rrggbb`` pairs or ``#rrggbb`` colours in the class order,
    separated by commas (the names are checked against the run's classes)."""
    parts = [p.strip() for p in text.split(",") if p.strip()]
    bad = [p for p in parts if not _COLOR_PART.fullmatch(p)]
    if not parts or bad:
        raise argparse.ArgumentTypeError(
            f"{(bad or [text])[0][:40]!r} is not NAME=#rrggbb or #rrggbb; e.g. "
            "rotten=#d62728,fresh=#2ca02c")
    return text


def _set_colors(run_path: str | Path, text: str | None) -> dict[str, str] | None:
    """Write ``--colors`` into the run's ``config.json`` (``None``: the default scale)."""
    from stateseer.abstraction.colors import parse_colors
    from stateseer.abstraction.errors import AbstractionError
    from stateseer.core.rundir import RunDir

    run = RunDir(run_path)
    try:
        colors = parse_colors(text, run.config["data"]["classes"]) if text else None
    except AbstractionError as exc:
        raise StateseerError(f"{exc}; set them with `stateseer colors {run_path} "
                             "NAME=#rrggbb,...`") from None
    run.update_config(colors=colors)
    return colors


def _states_list(text: str) -> list[int]:
    parts = [p for p in text.replace(" ", "").split(",") if p]
    if not parts:
        raise argparse.ArgumentTypeError("give state counts separated by commas, e.g. 4,8,16")
    return sorted({_positive_int(p) for p in parts})


# -- checks before the work starts --------------------------------------------------------
def _writable_ancestor(path: Path) -> None:
    """Refuse ``path`` unless its nearest existing ancestor is a directory we can write."""
    anc = path.parent
    while not anc.exists() and anc != anc.parent:
        anc = anc.parent
    if not anc.is_dir():
        raise StateseerError(f"cannot write {path}: {anc} is a file, not a directory; "
                             "choose another --out")
    try:
        tempfile.TemporaryFile(dir=anc).close()
    except OSError as exc:
        raise StateseerError(f"cannot write {path}: {anc} is not writable "
                             f"({exc.strerror}); choose another --out") from None


def _check_out_dir(out: str | Path) -> Path:
    path = Path(out)
    if path.exists() and not path.is_dir():
        raise StateseerError(f"--out {path} is a file; give a directory path")
    _writable_ancestor(path / "x")
    return path


def _check_out_file(out: str | Path, force: bool = False) -> None:
    path = Path(out)
    if path.is_dir():
        raise StateseerError(f"--out {path} is a directory; give a file path")
    if path.exists() and not force:
        raise StateseerError(f"{path} exists; pass --force to overwrite it")
    _writable_ancestor(path)


def _check_bind(host: str, what: str, debug: bool = False, *, warn: bool = True) -> None:
    """``--debug`` only on loopback; a warning on stderr for any other interface (unless
    the server prints its own: ``warn=False``)."""
    from stateseer.app.security import bind_warning, is_loopback

    if is_loopback(host):
        return
    if debug:
        raise StateseerError(f"--debug runs the Werkzeug debugger (code typed in the browser "
                             f"runs here) and is refused on --host {host}; use --host "
                             "127.0.0.1 or drop --debug")
    if warn:
        print(bind_warning(host, what), file=sys.stderr)


def _note(line: str) -> None:
    print(f"stateseer: note: {line}", file=sys.stderr)


def _progress_writer(path: str | None) -> Callable[[str, int, int], None] | None:
    """``report(stage, done, total)`` keeping ``--progress-json FILE`` up to date (the
    explorer's background jobs read it), or None without the option."""
    if not path:
        return None
    from stateseer.core.atomic import atomic_write_text

    where = Path(path)
    if where.is_dir() or not where.parent.is_dir():
        raise StateseerError(f"--progress-json {path}: "
                             + ("is a directory; give a file path" if where.is_dir() else
                                f"the folder {where.parent} does not exist; create it or "
                                "give another file path"))
    _writable_ancestor(where)

    def report(stage: str, done: int, total: int) -> None:
        atomic_write_text(Path(path), json.dumps({"stage": stage, "done": done,
                                                  "total": total}))
    return report


def _cluster(text: str) -> str:
    from stateseer.core.engine import ClusterError, parse_address

    try:
        parse_address(text)
    except ClusterError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix(f"--cluster {text!r}: ")) \
            from None
    return text


def _add_cluster(p: argparse.ArgumentParser) -> None:
    p.add_argument("--cluster", metavar="ADDRESS", default=None, type=_cluster,
                   help="run the per-shard work on Dask: local, local:N (N worker "
                   "processes) or tcp://HOST:PORT (a running `dask scheduler`); default "
                   "$STATESEER_CLUSTER, else this process")


def _host_list(text: str) -> list[str]:
    """``--allowed-hosts a.example,b.example`` as a list of names."""
    hosts = [h.strip() for h in text.split(",") if h.strip()]
    if not hosts:
        raise argparse.ArgumentTypeError("give one or more host names separated by commas")
    return hosts


def _add_host_port(p: argparse.ArgumentParser) -> None:
    p.add_argument("--host", default="127.0.0.1",
                   help="interface to bind (127.0.0.1: this machine only; others get a warning)")
    p.add_argument("--port", type=_port, default=8050, help="TCP port")
    p.add_argument("--allowed-hosts", type=_host_list, default=None, metavar="H1,H2",
                   help="host names (besides loopback, IP addresses and --host) the server "
                   "answers, against DNS rebinding; default: $STATESEER_ALLOWED_HOSTS")
