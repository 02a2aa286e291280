"""ClassifierAdapter reads any classifier exactly (#50): the prediction after the last token
is the model's own, and every prefix's is the model on that prefix, for model shapes
RecurrentAdapter cannot read: a mean-pooled head, a bidirectional net, stacked separate
modules, a class read after an END token, a softmax output, a padded (ids, lengths) net, a
net that runs its head input by input."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from torch import nn

from stateseer.rnn_models.classifier import ClassifierAdapter
from stateseer.rnn_models.models import RecurrentAdapter

VOCAB = ["<pad>", "<unk>", "<s>", "</s>"] + [f"w{i}" for i in range(26)]
CLASSES = ["a", "b", "c"]


class BiGRU(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(30, 8)
        self.gru = nn.GRU(8, 10, batch_first=True, bidirectional=True)
        self.out = nn.Linear(20, 3)

    def forward(self, ids):
        _, h = self.gru(self.emb(ids))  # (2, batch, 10): the last state of each direction
        return self.out(torch.cat([h[0], h[1]], -1))


class Stacked(nn.Module):
    """Two separate single-layer RNNs (TAYSIR's shape)."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(30, 8)
        self.rnn1, self.rnn2 = nn.RNN(8, 10, batch_first=True), nn.RNN(10, 10, batch_first=True)
        self.out = nn.Linear(10, 3)

    def forward(self, ids):
        h, _ = self.rnn2(self.rnn1(self.emb(ids))[0])
        return self.out(h[:, -1])


class LastState(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb, self.lstm = nn.Embedding(30, 8), nn.LSTM(8, 12, batch_first=True)
        self.out = nn.Linear(12, 3)

    def forward(self, ids):
        h, _ = self.lstm(self.emb(ids))
        return self.out(h[:, -1])


class MeanPooled(LastState):
    def forward(self, ids):
        h, _ = self.lstm(self.emb(ids))
        return self.out(h.mean(1))


class Softmaxed(LastState):
    def forward(self, ids):
        return torch.softmax(super().forward(ids), -1)


class OneAtATime(LastState):
    """A net whose forward loops over its batch (TAYSIR's own nets do): its head is
    called once per input."""

    def forward(self, ids):
        return torch.cat([LastState.forward(self, x[None]) for x in ids])


class Padded(nn.Module):
    """A net that reads (ids, lengths): packed, so padding never changes its answer."""

    def __init__(self) -> None:
        super().__init__()
        self.emb, self.gru = nn.Embedding(30, 8, padding_idx=0), nn.GRU(8, 12, batch_first=True)
        self.head = nn.Sequential(nn.Linear(12, 12), nn.Tanh(), nn.Linear(12, 3))

    def forward(self, ids, lengths):
        packed = nn.utils.rnn.pack_padded_sequence(self.emb(ids), lengths.cpu(),
                                                   batch_first=True, enforce_sorted=False)
        _, h = self.gru(packed)
        return self.head(h[-1])


def _inputs(seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    lengths = torch.tensor([5, 1, 7, 3, 7, 2])
    ids = torch.randint(4, 30, (len(lengths), int(lengths.max())), generator=g)
    ids[torch.arange(ids.shape[1])[None, :] >= lengths[:, None]] = 0
    return ids, lengths


def _one(net, ids, **kw):
    """The model on one id sequence, as its author would call it."""
    with torch.no_grad():
        if kw.get("lengths"):
            return net(ids[None], torch.tensor([len(ids)]))[0]
        return net(ids[None])[0]


@pytest.mark.parametrize(("net", "kwargs"), [
    (MeanPooled, {}), (BiGRU, {}), (Stacked, {}), (Softmaxed, {"outputs": "proba"}),
    (LastState, {"bos": "<s>", "eos": "</s>"}), (Padded, {"pad": "<pad>"}),
    (OneAtATime, {})])
def test_every_prefix_is_the_model_on_that_prefix(net, kwargs):
    torch.manual_seed(0)
    model = net().eval()
    adapter = ClassifierAdapter(model, vocab=VOCAB, tokenize=str.split, classes=CLASSES,
                                **kwargs)
    ids, lengths = _inputs()
    with torch.no_grad():
        hidden, proba = adapter.trace(ids, lengths)
    around = ([2] if "bos" in kwargs else [], [3] if "eos" in kwargs else [])
    for b, n in enumerate(lengths.tolist()):
        for t in range(1, n + 1):
            seq = torch.tensor([*around[0], *ids[b, :t].tolist(), *around[1]])
            own = _one(model, seq, lengths="pad" in kwargs)
            want = own if kwargs.get("outputs") == "proba" else torch.softmax(own, -1)
            assert torch.allclose(proba[b, t - 1], want, atol=1e-5), (net.__name__, b, t)
        assert not proba[b, n:].any() and not hidden[b, n:].any()  # past the input: zeros
    # the last step is the model's own prediction of the whole input
    final = adapter.predict(ids, lengths)
    assert torch.allclose(final, proba[torch.arange(len(ids)), lengths - 1], atol=1e-6)


def test_the_state_is_what_the_head_reads():
    torch.manual_seed(1)
    bi = BiGRU().eval()
    adapter = ClassifierAdapter(bi, vocab=VOCAB, tokenize=str.split, classes=CLASSES)
    ids, lengths = _inputs(1)
    with torch.no_grad():
        hidden, proba = adapter.trace(ids, lengths)
        assert hidden.shape[-1] == 20  # the pair of directions
        # the head applied to the recorded state gives the recorded prediction
        assert torch.allclose(torch.softmax(bi.out(hidden[0, :5]), -1), proba[0, :5],
                              atol=1e-5)


def test_on_a_last_state_lstm_it_reads_what_recurrent_adapter_reads():
    torch.manual_seed(2)
    net = LastState().eval()
    fast = RecurrentAdapter(net.emb, net.lstm, net.out, classes=CLASSES)
    exact = ClassifierAdapter(net, vocab=VOCAB, tokenize=str.split, classes=CLASSES)
    ids, lengths = _inputs(2)
    with torch.no_grad():
        h1, p1 = fast.trace(ids, lengths)
        h2, p2 = exact.trace(ids, lengths)
    mask = (torch.arange(ids.shape[1])[None, :] < lengths[:, None])[..., None]
    assert torch.allclose(h1 * mask, h2, atol=1e-5) and torch.allclose(p1 * mask, p2, atol=1e-5)
    h0, p0 = exact.initial()
    f0, q0 = fast.initial()
    assert h0.shape == f0.shape and torch.allclose(p0, q0, atol=1e-5)


def test_a_two_argument_model_is_called_on_padded_blocks_and_a_plain_one_never_sees_padding():
    seen = []

    class Spy(LastState):
        def forward(self, ids):
            seen.append(ids.clone())
            return super().forward(ids)

    torch.manual_seed(3)
    adapter = ClassifierAdapter(Spy().eval(), vocab=VOCAB, tokenize=str.split, classes=CLASSES)
    assert not adapter.takes_lengths and ClassifierAdapter(
        Padded(), vocab=VOCAB, tokenize=str.split, classes=CLASSES, pad="<pad>").takes_lengths
    ids, lengths = _inputs(3)
    with torch.no_grad():
        adapter.trace(ids, lengths)
    assert seen and all((block != 0).all() for block in seen)  # no <pad> ever
    assert len(seen) <= int(lengths.max())  # one block per prefix length, not per prefix


@pytest.mark.parametrize(("kwargs", "needle"), [
    ({"eos": "<end>"}, "eos='<end>' is not a token of vocab"),
    ({"state": "nowhere"}, "state='nowhere' is not a submodule"),
    ({"outputs": "scores"}, "give 'logits' or 'proba'")])
def test_bad_settings_are_one_line(kwargs, needle):
    with pytest.raises(ValueError, match=needle) as e:
        ClassifierAdapter(LastState(), vocab=VOCAB, tokenize=str.split, classes=CLASSES,
                          **kwargs)
    assert "\n" not in str(e.value)
    with pytest.raises(ValueError, match="give pad="):
        ClassifierAdapter(Padded(), vocab=VOCAB, tokenize=str.split, classes=CLASSES)


def test_its_weights_are_the_models_once():
    net = LastState()
    adapter = ClassifierAdapter(net, vocab=VOCAB, tokenize=str.split, classes=CLASSES)
    assert sorted(adapter.state_dict()) == sorted(f"model.{k}" for k in net.state_dict())


POOLED_MODULE = '''
import json
import re
from pathlib import Path

import torch
from torch import nn

from stateseer import ClassifierAdapter

ITOS = json.loads((Path(__file__).parent / "itos.json").read_text())
TOKEN = re.compile(r"[\\w/']+|[^\\w\\s]")


def tokenize(text):
    return TOKEN.findall(text.lower())


class Pooled(nn.Module):
    """The user's model: mean-pooled GRU outputs, then the head."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.emb = nn.Embedding(len(ITOS), 16, padding_idx=0)
        self.gru = nn.GRU(16, 24, batch_first=True)
        self.head = nn.Linear(24, 2)

    def forward(self, ids):
        out, _ = self.gru(self.emb(ids))
        return self.head(out.mean(1))


def build():
    return ClassifierAdapter(Pooled().eval(), vocab=ITOS, tokenize=tokenize,
                             classes=["rotten", "fresh"])
'''


def test_a_pooled_model_created_through_the_command_line_records_its_own_accuracy(
        tmp_path, text_csv):
    """The trial's silent error: a mean-pooled head read as a last-state one recorded 0.621
    against the model's 0.646. Through ClassifierAdapter the run records the model's own
    predictions, every one."""
    import csv
    import importlib
    import json
    import re
    import sys
    from collections import Counter

    from stateseer.app.cli.main import main
    from stateseer.core.traces import Traces

    token = re.compile(r"[\w/']+|[^\w\s]")
    with text_csv.open(encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    counts = Counter(t for r in rows for t in token.findall(r["review"].lower()))
    (tmp_path / "itos.json").write_text(json.dumps(
        ["<pad>", "<unk>", *sorted(t for t, c in counts.items() if c >= 2)]))
    (tmp_path / "pooled_user.py").write_text(POOLED_MODULE)
    run = tmp_path / "run"
    assert main(["create", str(run), "--model", f"{tmp_path / 'pooled_user.py'}:build",
                 "--dataset", f"csv:{text_csv}", "--text-col", "review", "--label-col",
                 "sentiment"]) == 0
    assert main(["record", str(run)]) == 0
    assert main(["abstract", str(run), "--states", "6", "--no-index", "--no-forcing"]) == 0
    traces = Traces(run / "traces")
    test = traces["test"]
    sys.path.insert(0, str(tmp_path))
    try:
        mod = importlib.import_module("pooled_user")
    finally:
        sys.path.remove(str(tmp_path))
    net, stoi = mod.Pooled().eval(), {t: i for i, t in enumerate(mod.ITOS)}
    classes = list(traces.classes)
    with torch.no_grad():
        for i in range(test.n_inputs):
            ids = [stoi.get(t, 1) for t in mod.tokenize(test.texts[i])]
            if not ids:
                continue
            own = ["rotten", "fresh"][int(net(torch.tensor([ids]))[0].argmax())]
            assert classes[int(test.predictions[i])] == own, i


def test_a_factory_returning_a_bare_module_is_shown_the_call_to_write(tmp_path, text_csv,
                                                                      capsys):
    from stateseer.app.cli.main import main

    (tmp_path / "bare_user.py").write_text(
        "from torch import nn\n\n\ndef build():\n    return nn.Sequential(nn.Embedding(9, 4))\n")
    assert main(["create", str(tmp_path / "run"), "--model",
                 f"{tmp_path / 'bare_user.py'}:build", "--dataset", f"csv:{text_csv}",
                 "--text-col", "review", "--label-col", "sentiment"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "bare nn.Module (Sequential)" in err
    assert "ClassifierAdapter(net, vocab=ITOS" in err


def test_a_recurrent_adapter_handed_the_whole_pooled_net_is_refused_at_create(tmp_path,
                                                                             text_csv,
                                                                             capsys):
    """RecurrentAdapter(..., model=net): create compares the net's own answers with the
    last state's, by default; a pooled head disagrees and the run is not made."""
    from stateseer.app.cli.main import main

    src = POOLED_MODULE.replace("from stateseer import ClassifierAdapter",
                                "from stateseer import RecurrentAdapter")
    src = src.split("def build():")[0] + (
        "def build():\n    net = Pooled().eval()\n"
        "    return RecurrentAdapter(net.emb, net.gru, net.head, vocab=ITOS, "
        "tokenize=tokenize,\n                            classes=['rotten', 'fresh'], "
        "model=net)\n")
    (tmp_path / "itos.json").write_text(json.dumps(["<pad>", "<unk>", "the", "a", "film"]))
    (tmp_path / "rec_user.py").write_text(src)
    assert main(["create", str(tmp_path / "run"), "--model",
                 f"{tmp_path / 'rec_user.py'}:build", "--dataset", f"csv:{text_csv}",
                 "--text-col", "review", "--label-col", "sentiment"]) == 2
    err = capsys.readouterr().err.strip()
    assert "differ from what the adapter reads at the last token" in err, err
    assert "ClassifierAdapter(" in err and err.count("\n") == 0


def test_integrated_gradients_run_through_the_models_embedding_and_forcing_says_why_not():
    """#50 item 5: attribution wherever an embedding is found; the embeddings of an input
    give back the model's own logits; state forcing is refused with its reason."""
    from stateseer.rnn_models.attribution import attribute
    from stateseer.rnn_models.protocol import STEPPING, ModelProtocolError, require

    torch.manual_seed(4)
    net = LastState().eval()
    adapter = ClassifierAdapter(net, vocab=VOCAB, tokenize=str.split, classes=CLASSES,
                                bos="<s>", eos="</s>")
    ids = torch.tensor([5, 9, 12, 7])
    with torch.no_grad():
        logits = adapter.forward_from_embeddings(adapter.embed(ids[None]))[0]
        own = net(torch.tensor([[2, *ids.tolist(), 3]]))[0]
    assert torch.allclose(logits, own, atol=1e-5)
    att = attribute(adapter, ids.numpy(), [VOCAB[i] for i in ids.tolist()], method="ig")
    assert len(att.scores) == len(ids) and np.isfinite(att.scores).all()
    with pytest.raises(ModelProtocolError, match="reads whole prefixes"):
        require(adapter, STEPPING, "state forcing")


def test_a_prefix_stride_reads_every_kth_prefix_and_the_last_and_carries_between():
    torch.manual_seed(5)
    net = MeanPooled().eval()
    every = ClassifierAdapter(net, vocab=VOCAB, tokenize=str.split, classes=CLASSES)
    third = ClassifierAdapter(net, vocab=VOCAB, tokenize=str.split, classes=CLASSES,
                              prefix_stride=3)
    ids, lengths = _inputs(5)
    with torch.no_grad():
        h1, p1 = every.trace(ids, lengths)
        h3, p3 = third.trace(ids, lengths)
        _, p0 = third.initial()
    for b, n in enumerate(lengths.tolist()):
        for t in range(1, n + 1):
            read = t % 3 == 0 or t == n
            want = p1[b, t - 1] if read else (p1[b, 3 * (t // 3) - 1] if t >= 3 else p0)
            assert torch.allclose(p3[b, t - 1], want, atol=1e-6), (b, t)
        assert torch.allclose(p3[b, n - 1], p1[b, n - 1])  # the model's own, always
        assert torch.allclose(h3[b, n - 1], h1[b, n - 1], atol=1e-6)
    with pytest.raises(ValueError, match="prefix_stride=0"):
        ClassifierAdapter(net, vocab=VOCAB, tokenize=str.split, classes=CLASSES,
                          prefix_stride=0)


def test_create_keeps_a_prefix_stride_and_record_says_what_it_read(tmp_path, text_csv,
                                                                   capsys):
    import csv
    import re
    from collections import Counter

    from stateseer.app.cli.main import main
    from stateseer.core.traces import Traces

    token = re.compile(r"[\w/']+|[^\w\s]")
    with text_csv.open(encoding="utf-8") as fh:
        counts = Counter(t for r in csv.DictReader(fh) for t in token.findall(r["review"].lower()))
    (tmp_path / "itos.json").write_text(json.dumps(
        ["<pad>", "<unk>", *sorted(t for t, c in counts.items() if c >= 2)]))
    (tmp_path / "strided_user.py").write_text(POOLED_MODULE)
    common = ["--model", f"{tmp_path / 'strided_user.py'}:build", "--dataset",
              f"csv:{text_csv}", "--text-col", "review", "--label-col", "sentiment"]
    assert main(["create", str(tmp_path / "run"), "--prefix-stride", "4", *common]) == 0
    cfg = json.loads((tmp_path / "run" / "config.json").read_text())
    assert cfg["model"]["prefix_stride"] == 4
    assert main(["record", str(tmp_path / "run"), "--splits", "test"]) == 0
    assert Traces(tmp_path / "run" / "traces").meta["prefix_stride"] == 4
    # a model read in one pass has no prefixes to skip: one line
    (tmp_path / "fast_user.py").write_text(
        "from stateseer import RecurrentAdapter\nfrom torch import nn\n\n\ndef build():\n"
        "    return RecurrentAdapter(nn.Embedding(9, 4), nn.GRU(4, 4, batch_first=True), "
        "nn.Linear(4, 2), vocab=['<pad>', '<unk>'] + list('abcdefg'), tokenize=str.split, "
        "classes=['fresh', 'rotten'])\n")
    capsys.readouterr()
    assert main(["create", str(tmp_path / "fast"), "--prefix-stride", "4", "--model",
                 f"{tmp_path / 'fast_user.py'}:build", *common[2:]]) == 2
    err = capsys.readouterr().err.strip()
    assert "reads every step in one pass already" in err and err.count("\n") == 0


def test_batches_read_in_parallel_threads_each_hear_only_their_own_calls():
    """The recorder traces batches in several threads on one model: a state hook must
    not catch another thread's call (a user's run failed with a shape error)."""
    from stateseer.rnn_models.record import record_traces

    torch.manual_seed(6)
    net = MeanPooled().eval()
    adapter = ClassifierAdapter(net, vocab=VOCAB, tokenize=str.split, classes=CLASSES)
    g = np.random.default_rng(6)
    seqs = [g.integers(4, 30, g.integers(1, 12)).astype(np.int64) for _ in range(300)]
    n = sum(map(len, seqs))
    h, p = np.zeros((n, 12), np.float32), np.zeros((n, 3), np.float32)
    final = np.zeros((len(seqs), 3), np.float32)
    torch.set_num_threads(max(2, torch.get_num_threads()))
    with torch.no_grad():
        record_traces(adapter, seqs, h, p, final, batch_size=8, parallel=True)
        at = 0
        for s in seqs[:40]:
            own = torch.softmax(net(torch.from_numpy(s)[None])[0], -1).numpy()
            assert np.allclose(p[at + len(s) - 1], own, atol=1e-5)
            at += len(s)


def test_final_predictions_of_a_prefix_reader_need_only_the_whole_inputs():
    from stateseer.rnn_models.record import predict_ids

    torch.manual_seed(7)
    net = MeanPooled().eval()
    adapter = ClassifierAdapter(net, vocab=VOCAB, tokenize=str.split, classes=CLASSES)
    seqs = [np.array([5, 6, 7]), np.array([], np.int64), np.array([9]), np.array([4, 4])]
    got = predict_ids(adapter, seqs)
    with torch.no_grad():
        for s, row in zip(seqs, got, strict=True):
            want = (adapter.initial()[1] if not len(s) else
                    torch.softmax(net(torch.from_numpy(s)[None])[0], -1)).numpy()
            assert np.allclose(row, want, atol=1e-5)
