"""Bring your own model: the factory loader, its one-line errors, and model_kind dispatch."""

from __future__ import annotations

import json
import textwrap
import warnings

import pytest

from rnn_models.factory import (
    FactoryError,
    ModuleChangedWarning,
    factory_section,
    load_factory,
    model_classes,
    model_tokenizer,
    model_vocab,
    parse_spec,
    reorder_classes,
)
from rnn_models.formats import RunDir
from rnn_models.formats.imported import NoModelError
from rnn_models.loading import load_model
from tests.conftest import one_line

MODULE = '''
import torch
from torch import nn
from rnn_models.models import RecurrentAdapter

ITOS = ["<pad>", "<unk>", "good", "bad", "film"]


class Adapter(RecurrentAdapter):
    """RecurrentAdapter with the vocab/tokenize/classes keywords of the design."""

    def __init__(self, embedding, rnn, head, *, vocab, tokenize, classes):
        super().__init__(embedding, rnn, head, n_classes=len(classes))
        self.vocab, self.tokenize, self.classes = vocab, tokenize, classes


def build():
    torch.manual_seed(0)
    return Adapter(nn.Embedding(len(ITOS), 4), nn.GRU(4, 6, batch_first=True),
                   nn.Linear(6, 2), vocab=ITOS, tokenize=str.split, classes=["neg", "pos"])


def broken():
    raise RuntimeError("weights.pt not found")


class NoTrace:
    n_classes, n_layers = 2, 1

    def initial(self, layer=-1):
        return None


def no_trace():
    return NoTrace()


def no_classes():
    m = build()
    m.n_classes = None
    return m

NOT_CALLABLE = 3
'''


@pytest.fixture
def user_module(tmp_path, monkeypatch):
    """``tmp_path/mymodel_<id>.py`` written by the user; the current directory is tmp_path."""
    name = f"mymodel_{abs(hash(str(tmp_path))) % 10**8}"
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(MODULE))
    monkeypatch.chdir(tmp_path)
    return name


def test_spec_is_module_colon_factory():
    assert parse_spec("pkg.mod:make") == ("pkg.mod", "make")
    for bad in ("mymodel", "mymodel:", ":build", "mymodel:1x"):
        with pytest.raises(FactoryError) as exc:
            parse_spec(bad)
        assert "MODULE:FACTORY" in one_line(exc.value)


def test_factory_by_name_and_by_path_returns_a_protocol_model(user_module, tmp_path):
    model = load_factory(f"{user_module}:build")
    assert model.n_classes == 2 and not model.training
    assert model_vocab(model)[:3] == ["<pad>", "<unk>", "good"]
    assert model_classes(model) == ["neg", "pos"]
    assert model_tokenizer(model)("good film") == ["good", "film"]
    by_path = load_factory(f"{tmp_path / user_module}.py:build")
    assert type(by_path).__name__ == "Adapter"
    section = factory_section(f"{user_module}.py:build")
    assert section["module_path"] == str((tmp_path / f"{user_module}.py").resolve())
    assert len(section["module_sha256"]) == 64


@pytest.mark.parametrize("factory, words", [
    ("nowhere_xyz:build", "module 'nowhere_xyz' not found"),
    ("{m}:missing", "has no attribute 'missing'; it defines"),
    ("{m}:NOT_CALLABLE", "not a callable"),
    ("{m}:broken", "raised RuntimeError: weights.pt not found"),
    ("{m}:no_trace", "lacks the protocol method `trace(ids, lengths, layer)`"),
    ("{m}:no_classes", "no positive integer attribute `n_classes`"),
    ("does/not/exist.py:build", "not found"),
])
def test_factory_failures_are_one_line(user_module, factory, words):
    with pytest.raises(FactoryError) as exc:
        load_factory(factory.format(m=user_module))
    assert words in one_line(exc.value)


def test_a_changed_module_warns_but_loads(user_module, tmp_path):
    section = factory_section(f"{user_module}:build")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        load_factory(section)  # unchanged: no warning
    (tmp_path / f"{user_module}.py").write_text(textwrap.dedent(MODULE) + "\n# edited\n")
    with pytest.warns(ModuleChangedWarning, match="changed since `stateseer create`"):
        assert load_factory(section).n_classes == 2


class _M:
    n_classes, n_layers = 2, 1


@pytest.mark.parametrize("vocab, words", [
    ({"a": 0}, "is a dict"),
    (["<pad>", "a"], "no '<unk>' token"),
    (["<unk>", "<pad>", "a"], "'<unk>' at id 0 and '<pad>' at id 1"),
    (["<pad>", "<unk>", "a", "a"], "holds 'a' twice"),
])
def test_bad_vocabularies_are_refused(vocab, words):
    m = _M()
    m.vocab = vocab
    with pytest.raises(FactoryError) as exc:
        model_vocab(m)
    assert words in one_line(exc.value)


def test_declared_classes_must_match_the_head_and_the_data():
    m = _M()
    m.classes = ["a", "b", "c"]
    with pytest.raises(FactoryError, match="declares 3 classes"):
        model_classes(m)

    import numpy as np

    from rnn_models.datasets import TextDataset

    ds = TextDataset(name="x", texts=["u", "v", "w"], labels=np.array([0, 1, 1]),
                     classes=["fresh", "rotten"], tokenizer="word", splits={})
    flipped = reorder_classes(ds, ["rotten", "fresh"])
    assert flipped.classes == ["rotten", "fresh"] and flipped.labels.tolist() == [1, 0, 0]
    with pytest.raises(Exception) as exc:
        reorder_classes(ds, ["pos", "neg"])
    msg = one_line(exc.value)
    assert "['pos', 'neg']" in msg and "['fresh', 'rotten']" in msg


def _config(tmp_path, model):
    (tmp_path / "config.json").write_text(json.dumps({"data": {}, "model": model}))
    return RunDir(tmp_path)


def test_load_model_dispatches_and_never_says_train_for_other_runs(tmp_path, user_module):
    with pytest.raises(NoModelError) as exc:
        load_model(_config(tmp_path, {"kind": "imported"}))
    msg = one_line(exc.value)
    assert "import-traces" in msg and "stateseer create" in msg and "train" not in msg
    with pytest.raises(Exception) as exc:
        load_model(_config(tmp_path, {"arch": "custom:MyNet"}))
    msg = one_line(exc.value)
    assert "stateseer create" in msg and "stateseer train" not in msg
    run = _config(tmp_path, factory_section(f"{user_module}:build"))
    assert load_model(run).n_classes == 2
