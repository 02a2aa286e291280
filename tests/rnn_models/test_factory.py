"""Bring your own model: the factory loader, its one-line errors, and model_kind dispatch."""

from __future__ import annotations

import json
import textwrap
import warnings

import pytest

from stateseer.core.imported import NoModelError
from stateseer.core.rundir import RunDir
from stateseer.rnn_models.factory import (
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
from stateseer.rnn_models.loading import load_model
from tests.conftest import one_line

MODULE = '''
import torch
from torch import nn
from stateseer.rnn_models.models import RecurrentAdapter

ITOS = ["<pad>", "<unk>", "good", "bad", "film"]


def build():
    torch.manual_seed(0)
    return RecurrentAdapter(nn.Embedding(len(ITOS), 4), nn.GRU(4, 6, batch_first=True),
                            nn.Linear(6, 2), vocab=ITOS, tokenize=str.split,
                            classes=["neg", "pos"])


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
    assert type(by_path).__name__ == "RecurrentAdapter"
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
    with pytest.warns(ModuleChangedWarning, match="changed since `stateseer create` or the "
                      "last `stateseer record`") as rec:
        assert load_factory(section).n_classes == 2
    assert "stateseer record RUN" in str(rec[0].message)


class _M:
    n_classes, n_layers = 2, 1


@pytest.mark.parametrize("vocab, words", [
    ({"a": 0}, "is a dict"),
    (["<pad>", "a"], "no '<unk>' token"),
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

    from stateseer.rnn_models.datasets import TextDataset

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


def test_any_vocab_layout_with_unk_is_accepted():
    m = _M()
    m.vocab = ["<unk>", "<pad>", "a"]  # a user's itos: <unk> first
    assert model_vocab(m) == ["<unk>", "<pad>", "a"]
    m.vocab = ["a", "<unk>"]  # no <pad>
    assert model_vocab(m) == ["a", "<unk>"]


CONTRACT = '''
import re
import torch
from torch import nn
from stateseer.rnn_models.models import RecurrentAdapter

ITOS = ["<unk>", "good", "bad", "a/c", "film", "not", "<pad>"]  # the user's own id order
NAMES = ["pos", "neg"]  # the head's output order (not alphabetical)


def tokenize(text):  # keeps "a/c" whole, unlike stateseer's word tokeniser
    return re.findall(r"[a-z/]+", text.lower())


def build():
    torch.manual_seed(0)
    return RecurrentAdapter(nn.Embedding(len(ITOS), 4), nn.LSTM(4, 5, batch_first=True),
                            nn.Linear(5, 2), vocab=ITOS, tokenize=tokenize, classes=NAMES)
'''


def test_design_contract_recorded_accuracy_equals_the_users_own(tmp_path, monkeypatch):
    """RecurrentAdapter(embedding, rnn, head, vocab=ITOS, tokenize=FN, classes=NAMES)
    through create_model_run + record_run(path): per split, the recorded accuracy is the
    user's own evaluation (own tokeniser, own ids, own class order) exactly."""
    import importlib
    import random

    import torch

    from stateseer.rnn_models.engine import record_run
    from stateseer.rnn_models.run import create_model_run

    name = f"contract_{abs(hash(str(tmp_path))) % 10**8}"
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(CONTRACT))
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    rng = random.Random(0)
    words = ["good", "bad", "a/c", "film", "not", "Great", "meh!"]
    rows = ["text,label,split"]
    for i in range(90):
        text = " ".join(rng.choice(words) for _ in range(rng.randint(1, 7)))
        rows.append(f"{text},{rng.choice(['pos', 'neg'])},{('train', 'val', 'test')[i % 3]}")
    (tmp_path / "data.csv").write_text("\n".join(rows) + "\n")

    create_model_run(tmp_path / "run", "csv:data.csv", f"{name}:build")
    traces = record_run(str(tmp_path / "run"))
    assert traces.meta["classes"] == ["pos", "neg"] and traces.meta["unk_id"] == 0

    user = importlib.import_module(name)
    net, stoi = user.build().eval(), {t: i for i, t in enumerate(user.ITOS)}
    for split in ("train", "val", "test"):
        data = [r.rsplit(",", 2) for r in rows[1:] if r.endswith("," + split)]
        hits = []
        with torch.no_grad():
            for text, label, _ in data:
                ids = torch.tensor([[stoi.get(t, 0) for t in user.tokenize(text)]])
                out, _ = net.rnn(net.embedding(ids))
                hits.append(user.NAMES[int(net.head(out[0, -1]).argmax())] == label)
        assert traces.meta["splits"][split]["n_inputs"] == len(data)
        assert traces.meta["splits"][split]["accuracy"] == sum(hits) / len(hits)
    assert "a/c" in traces["test"].surface or "a/c" in traces["train"].surface


def test_record_texts_with_the_models_own_tokeniser(tmp_path, monkeypatch):
    import importlib

    from stateseer.core.errors import DataError
    from stateseer.rnn_models.record import record_texts
    from stateseer.rnn_models.tokenizers import Vocab

    name = f"contract_t_{abs(hash(str(tmp_path))) % 10**8}"
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(CONTRACT))
    monkeypatch.syspath_prepend(str(tmp_path))
    user = importlib.import_module(name)
    model, vocab = user.build().eval(), Vocab(list(user.ITOS))
    typed = record_texts(model, vocab, ["Good a/c zzz"], tokenizer="model")
    assert typed.surface == ["good", "a/c", "zzz"]
    assert typed.token_ids.tolist() == [1, 3, 0]  # zzz -> <unk>, id 0 in this vocabulary
    same = record_texts(model, vocab, ["Good a/c zzz"], tokenizer=user.tokenize)
    assert same.final_proba.tolist() == typed.final_proba.tolist()
    m = user.build()
    m.tokenize = None
    with pytest.raises(DataError) as exc:
        record_texts(m, vocab, ["a"], tokenizer="model")
    assert "tokenize" in one_line(exc.value)


# -- fingerprints of the model the traces come from; sizes checked at create ----------------
TOPICS = '''
from pathlib import Path

import torch
from torch import nn

from stateseer import ClassifierAdapter, RecurrentAdapter

ITOS = ["<pad>", "<unk>", "ball", "goal", "vote", "law", "rain", "sun"]
CLASSES = ["politics", "sport", "weather"]
HERE = Path(__file__).parent


class Net(nn.Module):
    def __init__(self, rows=len(ITOS), width=len(CLASSES)):
        super().__init__()
        self.emb = nn.Embedding(rows, 4)
        self.rnn = nn.GRU(4, 6, batch_first=True)
        self.out = nn.Linear(6, width)

    def forward(self, ids):
        h, _ = self.rnn(self.emb(ids))
        return self.out(h.mean(1))


def recurrent(net):
    return RecurrentAdapter(net.emb, net.rnn, net.out, vocab=ITOS, tokenize=str.split,
                            classes=CLASSES)


def build():  # the user's trained weights, from a file next to the module
    net = Net()
    net.load_state_dict(torch.load(HERE / "deep.pt", weights_only=True))
    return recurrent(net)


def wide_head():
    torch.manual_seed(0)
    return recurrent(Net(width=5))


def wide_pooled():
    torch.manual_seed(0)
    return ClassifierAdapter(Net(width=5).eval(), vocab=ITOS, tokenize=str.split,
                             classes=CLASSES)


def few_rows():
    torch.manual_seed(0)
    return recurrent(Net(rows=3))
'''


@pytest.fixture
def topics(tmp_path, monkeypatch):
    """A user folder: ``topics_<id>.py``, its weights ``deep.pt`` and ``news.csv``."""
    import random

    import torch

    name = f"topics_{abs(hash(str(tmp_path))) % 10**8}"
    (tmp_path / f"{name}.py").write_text(TOPICS)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    _save_weights(tmp_path, name, seed=0)
    rng = random.Random(0)
    words = {"politics": ["vote", "law"], "sport": ["ball", "goal"], "weather": ["rain", "sun"]}
    rows = ["sentence,topic,split"]
    for i in range(60):
        topic = rng.choice(sorted(words))
        text = " ".join(rng.choice(words[topic]) for _ in range(rng.randint(1, 5)))
        rows.append(f"{text},{topic},{('train', 'val', 'test')[i % 3]}")
    (tmp_path / "news.csv").write_text("\n".join(rows) + "\n")
    torch.manual_seed(0)
    return tmp_path, name


def _save_weights(folder, name, seed):
    import importlib

    import torch

    torch.manual_seed(seed)
    torch.save(importlib.import_module(name).Net().state_dict(), folder / "deep.pt")


def _create(folder, name, factory):
    from stateseer.rnn_models.run import create_model_run

    return create_model_run(folder / "run", "csv:news.csv", f"{folder / name}.py:{factory}",
                            text_col="sentence", label_col="topic")


def _build(run):
    """The run's model as a later command builds it, and the warnings it gave."""
    from stateseer.rnn_models.run import ModelRun

    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        ModelRun(run.path).load_model()
    return [str(w.message) for w in rec if issubclass(w.category, ModuleChangedWarning)]


def test_weights_sha256_follows_the_tensors_not_the_object():
    import torch
    from torch import nn

    from stateseer.rnn_models.factory import weights_sha256
    from stateseer.rnn_models.models import RecurrentAdapter

    def adapter(seed):
        torch.manual_seed(seed)
        return RecurrentAdapter(nn.Embedding(5, 4), nn.GRU(4, 6, batch_first=True),
                                nn.Linear(6, 2), n_classes=2)

    first = weights_sha256(adapter(0))
    assert len(first) == 64 and weights_sha256(adapter(0)) == first
    assert weights_sha256(adapter(1)) != first
    moved = adapter(0)
    with torch.no_grad():
        moved.head.bias[0] += 1e-3
    assert weights_sha256(moved) != first
    assert weights_sha256(_M()) is None  # no nn.Module: no weights to read


def test_new_weights_behind_an_unchanged_factory_warn(topics):
    folder, name = topics
    run = _create(folder, name, "build")
    assert len(run.config["model"]["weights_sha256"]) == 64
    assert _build(run) == []
    _save_weights(folder, name, seed=1)  # the user retrained: same factory, new deep.pt
    (msg,) = _build(run)
    assert "weights of the model" in msg and "stateseer record RUN" in msg
    assert "\n" not in msg


def test_recording_again_renews_the_fingerprints_so_the_warning_stops(topics):
    """An edited factory file and new weights warn until the traces are recorded again
    with the current model (``stateseer record`` keeps its fingerprints)."""
    from stateseer.rnn_models.run import ModelRun

    folder, name = topics
    run = _create(folder, name, "build")
    module = folder / f"{name}.py"
    module.write_text(module.read_text() + "\n# tuned\n")
    _save_weights(folder, name, seed=2)
    assert len(_build(run)) == 2  # the file and the weights, one line each
    current = ModelRun(run.path)
    with pytest.warns(ModuleChangedWarning):  # the record itself builds the new model
        model = current.load_model()
    kept = current.keep_fingerprints(model)  # what `stateseer record` does at its end
    assert set(kept) == {"module_sha256", "weights_sha256"}
    assert _build(run) == []
    assert ModelRun(run.path).config["model"]["weights_sha256"] == kept["weights_sha256"]


def test_a_factory_that_imports_a_sibling_inside_its_body_finds_it(tmp_path):
    import sys

    sibling = f"mymodels_{abs(hash(str(tmp_path))) % 10**8}"
    folder = tmp_path / "user"
    folder.mkdir()
    (folder / f"{sibling}.py").write_text(textwrap.dedent(MODULE).replace(
        "def build():", "def build_deep():"))
    (folder / "lazy.py").write_text(f"def build():\n    import {sibling}\n"
                                    f"    return {sibling}.build_deep()\n")
    before = list(sys.path)
    try:
        model = load_factory(f"{folder / 'lazy.py'}:build")
    finally:
        sys.modules.pop(sibling, None)
    assert model.n_classes == 2
    assert sys.path == before  # the folder was on it only while the factory ran


@pytest.mark.parametrize("factory", ["wide_head", "wide_pooled"])
def test_a_head_of_another_width_than_the_classes_is_refused_at_create(topics, factory):
    folder, name = topics
    with pytest.raises(FactoryError) as exc:
        _create(folder, name, factory)
    msg = one_line(exc.value)
    assert "the model gives 5 class scores but classes names 3" in msg
    assert "nn.Linear(hidden, 3)" in msg
    assert not (folder / "run").exists()


def test_an_embedding_smaller_than_the_vocabulary_is_refused_at_create(topics):
    folder, name = topics
    with pytest.raises(FactoryError) as exc:
        _create(folder, name, "few_rows")
    msg = one_line(exc.value)
    assert "the vocabulary has 8 tokens but the model's embedding has 3 rows" in msg
    assert not (folder / "run").exists()


def test_record_renews_the_fingerprints_so_the_warning_stops(topics):
    """Edit the factory file and retrain: every build warns, until `record` re-records."""
    from stateseer.rnn_models.engine import record_run

    folder, name = topics
    run = _create(folder, name, "build")
    module = folder / f"{name}.py"
    module.write_text(module.read_text() + "\n# tuned\n")
    _save_weights(folder, name, seed=2)
    assert len(_build(run)) == 2
    with pytest.warns(ModuleChangedWarning):  # the record builds the changed model
        record_run(str(run.path), splits=["test"])
    assert _build(run) == []


def test_a_model_that_needs_more_than_two_tokens_is_not_refused_by_the_size_probe():
    """The probe checks sizes only: a model that cannot read a two-token input (a
    convolution of width 3, say) is left to recording, which reads the data's inputs."""
    import torch
    from torch import nn

    from stateseer.rnn_models.factory import check_model_sizes

    class Wide(nn.Module):
        def trace(self, ids, lengths):
            if ids.shape[1] < 3:
                raise RuntimeError("kernel size can't be greater than actual input size")
            return torch.zeros(len(ids), ids.shape[1], 4), torch.zeros(len(ids), ids.shape[1], 2)

        def initial(self):
            return torch.zeros(4), torch.full((2,), 0.5)

    check_model_sizes(Wide(), ["<pad>", "<unk>", "a", "b"], ["neg", "pos"])
