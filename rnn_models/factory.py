"""Bring your own model: a run whose model comes from a factory in the user's own module.

``stateseer create RUN --model MODULE:FACTORY --dataset DATA`` writes a run directory
whose ``config.json`` remembers the factory (``--model hf:PATH`` is the built-in factory of
a local Hugging Face checkpoint, :mod:`stateseer.rnn_models.hf`)::

    "model": {"kind": "factory", "factory": "mymodel:build",
              "module_path": "/abs/path/mymodel.py", "search_path": "/abs/cwd",
              "module_sha256": "…", "weights_sha256": "…", "n_classes": 3, "vocab_size": 5000,
              "classes": [...], "tokenizer": "model" | "word" | "char" | "space"}

and every command that needs the model calls the factory again through
:func:`stateseer.rnn_models.loading.load_model` → :func:`load_factory`, which warns
(:class:`ModuleChangedWarning`) when the module file or the built model's weights differ
from the fingerprints kept at ``create`` (and renewed by each ``record``). ``MODULE`` is an
importable module name (the current directory first on ``sys.path``, then the directory
``create`` ran in) or a path to a ``.py`` file; ``FACTORY`` is called with no arguments
and returns a model in the protocol of :mod:`stateseer.rnn_models.protocol` (``n_classes``,
``n_layers``, ``trace``, ``initial``; ``embed``/``forward_from_embeddings`` for
attribution, the stepping methods for forcing).

A model may also declare, as attributes:

``vocab``
    Its vocabulary: the token strings indexed by id (a list containing ``'<unk>'``), or a
    :class:`~stateseer.rnn_models.tokenizers.Vocab`. ``create`` writes it as the run's
    ``vocab.json``.
``tokenize``
    ``tokenize(text) -> list[str]``: recording then uses the model's own tokeniser
    (``data.tokenizer`` is ``"model"`` in ``config.json``).
``classes``
    Class names in the order of the head's outputs. The run uses this order (the data
    set's labels are remapped); a different *set* of names is refused.

Without ``classes`` the run uses the data set's order: alphabetical for ``csv:``/
``jsonl:`` files (numeric labels in numeric order), the documented order of the built-in
data sets.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import importlib
import importlib.util
import os
import sys
import warnings
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from stateseer.core import layout
from stateseer.core.errors import CheckpointError, DataError, StateseerError
from stateseer.core.rundir import RunDir, located_path, sha256_file

__all__ = ["FactoryError", "ModuleChangedWarning", "check_model_sizes", "check_protocol",
           "describe", "factory_section", "fingerprints", "load_factory", "model_classes",
           "model_tokenizer", "model_vocab", "obtain_model", "parse_spec", "reorder_classes",
           "vocabulary_of", "weights_sha256"]

PAD, UNK = "<pad>", "<unk>"
#: the spec prefix of a local Hugging Face checkpoint (:mod:`stateseer.rnn_models.hf`)
HF = "hf:"
#: attributes and methods every model needs (stateseer.rnn_models.protocol's required part)
REQUIRED_ATTRS = ("n_classes", "n_layers")
REQUIRED_METHODS = ("trace", "initial")


class FactoryError(CheckpointError):
    """The model factory of a run cannot be imported, called, or returns no model."""


class ModuleChangedWarning(UserWarning):
    """The factory's module file, or the weights of the model it builds, changed since the
    run's traces were recorded (``stateseer create`` or the last ``stateseer record``)."""


# -- the MODULE:FACTORY spec --------------------------------------------------------------
def parse_spec(spec: str) -> tuple[str, str]:
    """Split ``"MODULE:FACTORY"`` (MODULE a dotted name or a ``.py`` path).

    Examples
    --------
    >>> parse_spec("mymodel:build")
    ('mymodel', 'build')
    >>> parse_spec("C:/work/my model.py:build")
    ('C:/work/my model.py', 'build')
    """
    module, sep, name = str(spec).rpartition(":")
    if not sep or not module or not name.isidentifier():
        raise FactoryError(f"--model must be MODULE:FACTORY, e.g. mymodel:build or "
                           f"path/to/mymodel.py:build (got {spec!r})")
    return module, name


def _is_path(module: str) -> bool:
    return module.endswith(".py") or os.sep in module or "/" in module


@contextlib.contextmanager
def _front_of_path(dirs: Sequence[str]) -> Iterator[None]:
    """Put ``dirs`` first on ``sys.path`` while importing (restored afterwards)."""
    saved = list(sys.path)
    sys.path[:0] = [d for d in dirs if d]
    try:
        yield
    finally:
        sys.path[:] = saved


def _import_file(path: Path) -> Any:
    if not path.is_file():
        raise FactoryError(f"model file {path} not found; give the path of the .py file that "
                           "defines the factory (MODULE:FACTORY)")
    name = "stateseer_user_" + hashlib.sha1(str(path).encode()).hexdigest()[:12]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise FactoryError(f"{path} cannot be imported as a Python module; give a .py file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        with _front_of_path([str(path.parent)]):  # its own folder, for sibling imports
            spec.loader.exec_module(module)
    except BaseException as exc:
        sys.modules.pop(name, None)
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise
        raise FactoryError(f"importing {path} failed ({_first_line(exc)}); fix the module"
                           ) from None
    return module


def _import_name(module: str, search: Sequence[str]) -> Any:
    try:
        with _front_of_path(search):
            return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name and module.split(".")[0] != exc.name.split(".")[0] and \
                not module.startswith(exc.name):
            raise FactoryError(f"importing {module} failed ({_first_line(exc)}); install what "
                               "it imports") from None
        where = ", ".join(dict.fromkeys(s for s in search if s)) or "sys.path"
        raise FactoryError(f"module {module!r} not found (looked in {where} and sys.path); "
                           f"run from the folder that holds {module.split('.')[0]}.py or give "
                           "its path, e.g. --model path/to/mymodel.py:build") from None
    except Exception as exc:
        raise FactoryError(f"importing {module} failed ({_first_line(exc)}); fix the module"
                           ) from None


def _first_line(exc: BaseException) -> str:
    text = (str(exc).strip().splitlines() or [""])[0][:160]
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _resolve(module: str, search: Sequence[str]) -> tuple[Any, Path | None]:
    """The imported module and its file (None for a module without one)."""
    if _is_path(module):
        path = Path(module).expanduser()
        if not path.is_absolute() and search and search[-1]:
            path = Path(search[-1]) / path if not path.exists() else path
        mod = _import_file(path.resolve())
    else:
        mod = _import_name(module, search)
    file = getattr(mod, "__file__", None)
    return mod, (Path(file).resolve() if file else None)


# -- the model protocol -------------------------------------------------------------------
def check_protocol(model: Any, where: str) -> Any:
    """Refuse an object that lacks a required attribute or method of the model protocol.

    Parameters
    ----------
    model : object
    where : str
        Where the object came from, e.g. ``"mymodel:build()"`` (for the message).

    Returns
    -------
    object
        ``model``, in eval mode when it has an ``eval`` method.
    """
    from stateseer.rnn_models.protocol import SIGNATURES

    if callable(getattr(model, "forward", None)) and callable(getattr(model, "parameters", None)) \
            and not callable(getattr(model, "trace", None)):  # the user's network, unwrapped
        raise FactoryError(
            f"{where} returned a bare nn.Module ({type(model).__name__}); wrap it so stateseer "
            "can read every prefix: return ClassifierAdapter(net, vocab=ITOS, "
            "tokenize=tokenize, classes=[...]) (from stateseer import ClassifierAdapter; "
            "RecurrentAdapter(net.emb, net.rnn, net.head, ...) is the fast path for an "
            "Embedding -> RNN -> last-state head)")
    for name in REQUIRED_ATTRS:
        value = getattr(model, name, None)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise FactoryError(f"the object returned by {where} ({type(model).__name__}) has "
                               f"no positive integer attribute `{name}` of the model protocol "
                               "— set it (see stateseer.rnn_models.protocol)")
    for name in REQUIRED_METHODS:
        if not callable(getattr(model, name, None)):
            raise FactoryError(f"the object returned by {where} ({type(model).__name__}) lacks "
                               f"the protocol method `{SIGNATURES[name]}` — add it or wrap the "
                               "network in stateseer.rnn_models.models.RecurrentAdapter (see "
                               "stateseer.rnn_models.protocol)")
    if model.n_classes < 2:
        raise FactoryError(f"the model returned by {where} has n_classes={model.n_classes}; "
                           "a classifier needs at least two")
    if callable(getattr(model, "eval", None)):
        model.eval()
    return model


def model_vocab(model: Any) -> list[str] | None:
    """The model's vocabulary as an id-ordered token list, or None when it declares none.

    Accepts a list/tuple of strings, a :class:`~stateseer.rnn_models.tokenizers.Vocab` (``tokens``)
    or a torchtext-style object (``get_itos()``), under the attribute ``vocab`` (or
    ``itos``).

    Raises
    ------
    FactoryError
        Not a list of distinct strings, no ``'<unk>'``, or a layout stateseer cannot map.
    """
    v = getattr(model, "vocab", None)
    if v is None:
        v = getattr(model, "itos", None)
    if v is None:
        return None
    if callable(getattr(v, "get_itos", None)):
        v = v.get_itos()
    elif hasattr(v, "tokens") and not isinstance(v, (list, tuple)):
        v = v.tokens
    if isinstance(v, dict):
        raise FactoryError("the model's `vocab` is a dict; give the id-ordered list of token "
                           "strings (itos), e.g. sorted(stoi, key=stoi.get)")
    if not isinstance(v, (list, tuple)) or not all(isinstance(t, str) for t in v):
        raise FactoryError(f"the model's `vocab` is a {type(v).__name__}; give the id-ordered "
                           "list of token strings (itos) containing '<unk>'")
    tokens = list(v)
    dup = next((t for i, t in enumerate(tokens) if t in tokens[:i]), None)
    if dup is not None:
        raise FactoryError(f"the model's `vocab` holds {dup!r} twice; token strings must be "
                           "distinct (one id each)")
    if UNK not in tokens:
        raise FactoryError("the model's `vocab` has no '<unk>' token; add it (unknown words "
                           "map to it)")
    return tokens


def model_classes(model: Any) -> list[str] | None:
    """The class names the model declares (head output order), or None."""
    c = getattr(model, "classes", None)
    if c is None:
        return None
    if not isinstance(c, (list, tuple)) or not all(isinstance(x, (str, int)) for x in c):
        raise FactoryError(f"the model's `classes` is a {type(c).__name__}; give the list of "
                           "class names in the order of the head's outputs")
    names = [str(x) for x in c]
    if len(set(names)) != len(names):
        raise FactoryError(f"the model's `classes` {names} repeat a name; give each class once")
    if len(names) != model.n_classes:
        raise FactoryError(f"the model declares {len(names)} classes {names} but n_classes="
                           f"{model.n_classes}; make them agree")
    return names


def model_tokenizer(model: Any) -> Callable[[str], list[str]] | None:
    """The model's ``tokenize(text) -> list[str]``, checked on a sample, or None."""
    fn = getattr(model, "tokenize", None)
    if fn is None:
        return None
    if not callable(fn):
        raise FactoryError("the model's `tokenize` is not callable; give a function "
                           "text -> list of token strings")
    try:
        sample = fn("A sample, text.")
    except Exception as exc:
        raise FactoryError(f"the model's tokenize('A sample, text.') raised "
                           f"{_first_line(exc)}; fix it") from None
    if not isinstance(sample, (list, tuple)) or not all(isinstance(t, str) for t in sample):
        raise FactoryError(f"the model's tokenize(text) returned {type(sample).__name__}; it "
                           "must return a list of token strings")
    return fn


# -- loading --------------------------------------------------------------------------------
def _module_sha(file: Path | None) -> str | None:
    return sha256_file(file) if file is not None and file.is_file() else None


def weights_sha256(model: Any) -> str | None:
    """SHA-256 of the weights the model computes with: its ``state_dict()`` tensors.

    Names are taken in sorted order, each with its dtype, shape and bytes, so a new weights
    file loaded by the factory gives another digest. An adapter
    (:class:`~stateseer.rnn_models.models.RecurrentAdapter`,
    :class:`~stateseer.rnn_models.classifier.ClassifierAdapter`) registers the network it
    wraps, so its parameters and buffers are these tensors.

    Parameters
    ----------
    model : object
        What a factory returned.

    Returns
    -------
    str or None
        64 hex digits; None for a model that is not an ``nn.Module`` (a plain callable has
        no weights to read) or whose tensors cannot be read as bytes (sparse, meta).
    """
    state_dict = getattr(model, "state_dict", None)
    if not callable(getattr(model, "parameters", None)) or not callable(state_dict):
        return None
    import torch

    digest = hashlib.sha256()
    try:
        state = state_dict()
        for name in sorted(state):
            tensor = state[name]
            if not isinstance(tensor, torch.Tensor):
                continue  # a module's extra state: no weights
            flat = tensor.detach().to("cpu").contiguous().reshape(-1)
            digest.update(f"{name}:{flat.dtype}:{tuple(tensor.shape)}".encode())
            digest.update(memoryview(flat.view(torch.uint8).numpy()))
    except (RuntimeError, TypeError, ValueError, NotImplementedError):
        return None
    return digest.hexdigest()


def fingerprints(section: dict[str, Any], model: Any, base: str | Path | None = None
                 ) -> dict[str, str]:
    """The SHA-256 of a factory run's module file and of the weights of ``model``, as the
    ``model`` section of ``config.json`` keeps them (``module_sha256``, ``weights_sha256``).

    ``stateseer record`` stores them for the model it recorded with, so that later commands
    compare the model they build with the one the traces come from.

    Parameters
    ----------
    section : dict
        The ``model`` section (``module_file`` or ``module_path``; ``factory``).
    model : object
        The model the traces were recorded with.
    base : str or Path, optional
        The run directory a relative module path is read against.

    Returns
    -------
    dict
        The fingerprints that can be taken (none for a Hugging Face checkpoint's weights,
        which ``config_sha256`` covers).
    """
    out: dict[str, str] = {}
    file = section.get("module_file") or section.get("module_path")
    if isinstance(file, str):
        sha = _module_sha(Path(located_path(file, base) if base is not None else file))
        if sha is not None:
            out["module_sha256"] = sha
    return {**out, **_weights_fingerprint(section, model)}


def _weights_fingerprint(section: dict[str, Any], model: Any) -> dict[str, str]:
    """``{"weights_sha256": ...}`` of the built ``model`` (:func:`weights_sha256`); empty
    for a Hugging Face checkpoint (``config_sha256`` covers it) or a model whose weights
    cannot be read."""
    if str(section.get("factory", "")).startswith(HF):
        return {}
    sha = weights_sha256(model)
    return {} if sha is None else {"weights_sha256": sha}


#: where a fingerprint is kept from: what a warning tells the user
SINCE = "since `stateseer create` or the last `stateseer record`"


def _warn_if_module_changed(file: Path | None, want: str | None) -> None:
    if want and _module_sha(file) not in (None, want):
        warnings.warn(f"{file} changed {SINCE} (SHA-256 differs); traces recorded before the "
                      "change may not match the model — re-record them with `stateseer "
                      "record RUN`", ModuleChangedWarning, stacklevel=3)


def _warn_if_weights_changed(model: Any, where: str, want: str | None) -> None:
    if want and weights_sha256(model) not in (None, want):
        warnings.warn(f"the weights of the model {where} builds changed {SINCE} (SHA-256 of "
                      "its state_dict differs: a new weights file, or random weights without "
                      "a fixed seed); traces recorded before may not match the model — "
                      "re-record them with `stateseer record RUN`", ModuleChangedWarning,
                      stacklevel=3)


def _call_factory(mod: Any, module: str, name: str, dirs: Sequence[str]) -> Any:
    """``mod.name()``, with ``dirs`` first on ``sys.path`` while it runs (a factory that
    imports a sibling module inside its body finds it, as the module's own imports did)."""
    factory = getattr(mod, name, None)
    if factory is None:
        public = sorted(k for k, v in vars(mod).items()
                        if callable(v) and not k.startswith("_"))[:8]
        raise FactoryError(f"module {module} has no attribute {name!r}; it defines "
                           f"{', '.join(public) or 'no public callables'}")
    if not callable(factory):
        raise FactoryError(f"{module}:{name} is a {type(factory).__name__}, not a callable; "
                           "give a function that returns the model")
    try:
        with _front_of_path(dirs):
            return factory()
    except Exception as exc:
        raise FactoryError(f"{module}:{name}() raised {_first_line(exc)}; fix the factory "
                           "(it is called with no arguments)") from None


def load_factory(spec: dict[str, Any] | str, base_dir: str | Path | None = None, *,
                 check: bool = True) -> Any:
    """Import the factory's module, call the factory and check what it returns.

    Parameters
    ----------
    spec : dict or str
        The ``model`` section of a run's ``config.json`` (``factory``, ``module_path``,
        ``search_path``, ``module_sha256``, ``weights_sha256``), or a bare
        ``"MODULE:FACTORY"``.
    base_dir : str or Path, optional
        Where a relative module path or a module name is looked up after the current
        directory (default: ``spec["search_path"]``).
    check : bool
        Warn (:class:`ModuleChangedWarning`) when the module file's SHA-256 differs from
        ``spec["module_sha256"]``, or the built model's weights (:func:`weights_sha256`)
        from ``spec["weights_sha256"]``.

    Returns
    -------
    object
        The model (eval mode), implementing the required part of the protocol.

    Raises
    ------
    FactoryError
        One line: module not found, no such attribute, the factory raised, or the result
        lacks a protocol attribute or method.
    """
    spec = {"factory": spec} if isinstance(spec, str) else dict(spec)
    if str(spec.get("factory", "")).startswith(HF):
        from stateseer.rnn_models.hf import load_hf

        where = spec.get("hf_path") or spec["factory"][len(HF):]
        return check_protocol(load_hf(where), spec["factory"])
    module, name = parse_spec(spec.get("factory", ""))
    search = [os.getcwd(), str(base_dir or spec.get("search_path") or "")]
    if spec.get("module_path") and _is_path(module):
        module = str(spec["module_path"])
    mod, file = _resolve(module, search)
    if check:
        _warn_if_module_changed(file, spec.get("module_sha256"))
    dirs = [str(file.parent) if file is not None else "", *search]
    where = f"{module}:{name}()"
    model = check_protocol(_call_factory(mod, module, name, dirs), where)
    if check:
        _warn_if_weights_changed(model, where, spec.get("weights_sha256"))
    return model


def factory_section(spec: str, base_dir: str | Path | None = None) -> dict[str, Any]:
    """The ``model`` section ``create`` writes for ``"MODULE:FACTORY"`` or ``"hf:PATH"``
    (no model built)."""
    base = str(Path(base_dir or os.getcwd()).resolve())
    if spec.startswith(HF):
        where = (Path(base) / spec[len(HF):]).resolve()
        return {"kind": "factory", "factory": spec, "hf_path": str(where),
                "search_path": base,
                "config_sha256": sha256_file(where / layout.CONFIG)
                if (where / layout.CONFIG).is_file() else None}
    module, name = parse_spec(spec)
    _, file = _resolve(module, [os.getcwd(), base])
    out: dict[str, Any] = {"kind": "factory", "factory": f"{module}:{name}",
                           "search_path": base}
    if _is_path(module) and file is not None:
        out["module_path"] = str(file)
    if file is not None:
        out["module_file"] = str(file)
        out["module_sha256"] = _module_sha(file)
    return out


# -- class order and tokeniser of a run's data set ------------------------------------------
def reorder_classes(ds: Any, classes: Sequence[str]) -> Any:
    """``ds`` with its labels renumbered to follow ``classes`` (same names, new order).

    Raises
    ------
    DataError
        ``classes`` is not an ordering of the data set's class names.
    """
    classes = [str(c) for c in classes]
    if list(ds.classes) == classes:
        return ds
    if sorted(ds.classes) != sorted(classes):
        raise DataError(f"the model's classes {classes} (head order) differ from the data "
                        f"set's {list(ds.classes)}; give the model the data set's class names "
                        "or relabel the data")
    import numpy as np

    new = np.array([classes.index(c) for c in ds.classes], dtype=np.int64)
    return dataclasses.replace(ds, labels=new[np.asarray(ds.labels)], classes=classes)


# -- create: what a model object brings ----------------------------------------------------
def obtain_model(model: Any, base_dir: Path) -> tuple[Any, dict[str, Any]]:
    """The model object and the config's ``model`` section for a spec, factory or object."""
    if isinstance(model, str):
        section = factory_section(model, base_dir)
        obj = load_factory(section, base_dir, check=False)
        if "hf_path" in section:  # what the run header shows: the transformers class
            section["arch"] = obj.arch
        return obj, {**section, **_weights_fingerprint(section, obj)}
    mod, qual = getattr(model, "__module__", None), getattr(model, "__qualname__", "")
    if callable(model) and not hasattr(model, "trace") and mod and qual.isidentifier() \
            and mod != "__main__":
        section = factory_section(f"{mod}:{qual}", base_dir)  # an importable function
        obj = check_protocol(model(), f"{mod}:{qual}()")
        return obj, {**section, **_weights_fingerprint(section, obj)}
    if callable(model) and not hasattr(model, "trace"):
        raise FactoryError(f"the factory {qual or model!r} cannot be imported again by later "
                           "commands (defined in __main__ or locally); move it into a module "
                           "and pass 'module:function'")
    obj = check_protocol(model, "the model object")
    return obj, {"kind": "object", "class": f"{type(obj).__module__}.{type(obj).__qualname__}"}


class _TooFewRows(Exception):
    """A token id at or past the end of an ``nn.Embedding`` (raised by the probe's hook)."""

    def __init__(self, rows: int) -> None:
        super().__init__(rows)
        self.rows = rows


@contextlib.contextmanager
def _embedding_guard(model: Any) -> Iterator[None]:
    """While the probe runs: an ``nn.Embedding`` of the model given an id it has no row for
    stops the call with :class:`_TooFewRows` (instead of an ``IndexError`` deep inside)."""

    def hook(module: Any, args: tuple) -> None:
        ids = args[0] if args else None
        if getattr(ids, "numel", lambda: 0)() and int(ids.max()) >= module.num_embeddings:
            raise _TooFewRows(module.num_embeddings)

    from torch import nn

    modules = model.modules() if isinstance(model, nn.Module) else ()
    handles = [m.register_forward_pre_hook(hook) for m in modules
               if isinstance(m, nn.Embedding)]
    try:
        yield
    finally:
        for h in handles:
            h.remove()


def _score_widths(model: Any, ids: Any, lengths: Any) -> Iterator[int]:
    """The number of class scores each reading of the model gives on the probe: its own
    ``predict`` (when it has one), the last traced step, the empty input."""
    if callable(getattr(model, "predict", None)):
        yield int(model.predict(ids, lengths).shape[-1])
    yield int(model.trace(ids, lengths)[1].shape[-1])
    yield int(model.initial()[1].shape[-1])


def check_model_sizes(model: Any, tokens: Sequence[str], classes: Sequence[str], *,
                declared: bool = True) -> None:
    """Run the model once on a two-token probe (the vocabulary's highest id, then
    ``'<unk>'``'s) and refuse sizes that disagree, before ``create`` writes anything.

    Parameters
    ----------
    model : object
        The built model (protocol: ``trace``, ``initial``; ``predict`` when it has one).
    tokens : sequence of str
        The run's vocabulary, by id.
    classes : sequence of str
        The run's classes, in the order of the model's outputs.
    declared : bool
        Whether the model declares ``classes`` (else they are the data set's): for the
        message.

    Raises
    ------
    FactoryError
        An embedding the token ids go into has fewer rows than the vocabulary has tokens,
        or the model gives another number of class scores than there are classes (one line
        each). A model that fails on the probe for another reason is not judged here: it
        may need longer inputs than two tokens, and ``record`` reads the data's own.
    """
    import torch

    high, low = len(tokens) - 1, list(tokens).index(UNK)
    device = next(iter(getattr(model, "parameters", tuple)()), torch.zeros(0)).device
    ids, lengths = torch.tensor([[high, low]], device=device), torch.tensor([2], device=device)
    try:
        with torch.no_grad(), _embedding_guard(model):
            for width in _score_widths(model, ids, lengths):
                if width != len(classes):
                    named = (f"classes names {len(classes)}" if declared else
                             f"the data set has {len(classes)} classes")
                    raise FactoryError(
                        f"the model gives {width} class scores but {named} ({list(classes)}); "
                        f"make its head give one score per class (e.g. nn.Linear(hidden, "
                        f"{len(classes)})) or name all {width} classes")
    except _TooFewRows as exc:
        raise FactoryError(
            f"the vocabulary has {len(tokens)} tokens but the model's embedding has "
            f"{exc.rows} rows; give the embedding one row per token (nn.Embedding(len(vocab), "
            "...)) or give the model the vocabulary it was trained with") from None
    except FactoryError:
        raise
    except Exception:  # a model that cannot read two tokens (a convolution wider than
        return  # that, say) may still read the data's inputs: recording tells


def vocabulary_of(model: Any, vocab: Any, ds: Any) -> list[str]:
    tokens = model_vocab(model)
    if vocab is not None:
        if tokens is not None:
            raise FactoryError("the model declares its own `vocab` and a vocabulary was "
                               "given too; drop --vocab")
        tokens = model_vocab(type("V", (), {"vocab": vocab})())  # same checks
    if tokens is None:
        raise FactoryError("the model declares no vocabulary (a `vocab` attribute: the "
                           "id-ordered token list containing '<unk>') and none was "
                           "given; add it or pass --vocab FILE")
    return tokens


def describe(run: RunDir) -> str:
    """How the run's model is obtained, for messages (``"factory mymodel:build"``)."""
    try:
        m = run.config.get("model") or {}
    except StateseerError:
        return "unknown"
    return {"factory": f"factory {m.get('factory')}", "imported": "imported traces",
            "object": f"your {m.get('class', 'model')} object"}.get(
        m.get("kind", ""), f"architecture {m.get('arch')}")
