"""Attribution with Captum: completeness, agreement with hand computations, segments."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from stateseer.core.errors import StateseerError
from stateseer.rnn_models.attribution import aggregate, attribute, segments
from tests.conftest import one_line


@pytest.fixture(scope="module")
def model_and_input(explored_run):
    from stateseer.rnn_models.run import ModelRun
    from stateseer.rnn_models.tokenizers import get_tokenizer

    run = ModelRun(explored_run)
    model, vocab = run.load_model(), run.vocab()
    toks = get_tokenizer("word")("a thin plot , but the acting is wonderful and moving .")
    return model, np.asarray(vocab.encode(toks)), toks


def _logits(model, emb):
    """Reference, independent of the protocol methods: the recurrent layers and the head."""
    x = emb
    for rnn in model.rnns:
        x, _ = rnn(x)
    return model.head(x[:, -1])


def _f(model, emb, cls, other=None):
    with torch.no_grad():
        z = _logits(model, emb)
    return float(torch.softmax(z, -1)[0, cls]) if other is None else float(
        z[0, cls] - z[0, other])


def test_integrated_gradients_are_complete(model_and_input):
    """Σ attributions = f(x) − f(baseline), checked against our own forward passes, and
    Captum's convergence delta is reported and small."""
    model, ids, toks = model_and_input
    emb = model.embedding(torch.as_tensor(ids)[None]).detach()
    for target in ("predicted", "contrastive"):
        a = attribute(model, ids, toks, method="ig", target=target)
        other = a.contrast_class if target == "contrastive" else None
        fx = _f(model, emb, a.target_class, other)
        f0 = _f(model, torch.zeros_like(emb), a.target_class, other)
        assert a.output == pytest.approx(fx, abs=1e-5)
        assert a.baseline_output == pytest.approx(f0, abs=1e-5)
        assert a.scores.sum() == pytest.approx(fx - f0, abs=1e-3 + 1e-2 * abs(fx - f0))
        assert abs(a.delta) < 1e-3 + 1e-2 * abs(fx - f0)
        assert a.relative_delta < 0.01
        assert len(a.scores) == len(toks)


def test_unk_baseline_is_complete_too(model_and_input):
    model, ids, toks = model_and_input
    a = attribute(model, ids, toks, method="ig", target="contrastive", baseline="unk")
    emb = model.embedding(torch.as_tensor(ids)[None]).detach()
    unk = model.embedding(torch.ones(1, len(ids), dtype=torch.long)).detach()
    f0 = _f(model, unk, a.target_class, a.contrast_class)
    assert a.baseline_output == pytest.approx(f0, abs=1e-5)
    fx = _f(model, emb, a.target_class, a.contrast_class)
    assert a.scores.sum() == pytest.approx(fx - f0, abs=1e-3 + 1e-2 * abs(fx - f0))
    o = attribute(model, ids, toks, method="occlusion", target="contrastive", baseline="unk")
    e = emb.clone()
    e[0, 2] = unk[0, 2]
    assert o.scores[2] == pytest.approx(fx - _f(model, e, o.target_class, o.contrast_class),
                                        abs=1e-4)


def test_occlusion_is_the_drop_when_a_token_is_zeroed(model_and_input):
    model, ids, toks = model_and_input
    a = attribute(model, ids, toks, method="occlusion", target="contrastive")
    emb = model.embedding(torch.as_tensor(ids)[None]).detach()
    fx = _f(model, emb, a.target_class, a.contrast_class)
    for t in (0, 4, len(ids) - 1):
        e = emb.clone()
        e[0, t] = 0
        assert a.scores[t] == pytest.approx(fx - _f(model, e, a.target_class,
                                                    a.contrast_class), abs=1e-4)


def test_gradient_times_input_matches_autograd(model_and_input):
    model, ids, toks = model_and_input
    a = attribute(model, ids, toks, method="gxi", target="predicted")
    emb = model.embedding(torch.as_tensor(ids)[None]).detach().requires_grad_(True)
    torch.softmax(_logits(model, emb), -1)[0, a.target_class].backward()
    want = (emb.grad * emb).sum(-1)[0].detach().numpy()
    np.testing.assert_allclose(a.scores, want, atol=1e-6)


def test_segments_and_aggregation():
    toks = ["great", "cast", ",", "dull", "plot", ".", "still", "fun"]
    assert segments(toks, "sentence") == [[0, 1, 2, 3, 4, 5], [6, 7]]
    assert segments(toks, "regex", pattern="[,.]") == [[0, 1, 2], [3, 4, 5], [6, 7]]
    assert segments(toks, "word") == [[i] for i in range(8)]
    assert segments(list("ab c"), "word", joiner="") == [[0, 1, 2], [3]]
    g = segments(toks, "regex", pattern="[,.]")
    assert aggregate(np.arange(8.0), g).tolist() == [3.0, 12.0, 13.0]


def test_bad_requests_get_one_line_errors(model_and_input):
    model, ids, toks = model_and_input
    for kwargs, word in [({"method": "lime"}, "method"), ({"target": "x"}, "target"),
                         ({"baseline": "mask"}, "baseline"),
                         ({"target": "contrastive", "contrast": 7}, "contrast")]:
        with pytest.raises(StateseerError) as e:
            attribute(model, ids, toks, **kwargs)
        assert word in one_line(e.value)
    with pytest.raises(StateseerError) as e:
        attribute(model, [], [])
    assert "non-empty" in one_line(e.value)
    with pytest.raises(StateseerError) as e:
        segments(toks, "regex", pattern="[")
    assert "regular expression" in one_line(e.value)


def test_delimiter_patterns_are_bounded():
    """A pathological pattern on a long typed token must not stall the server."""
    # the 41-character token is never matched (it would backtrack for minutes)
    assert segments(["a" * 40 + "b", ","], "regex", pattern="(a+)+") == [[0, 1]]
    with pytest.raises(StateseerError) as e:
        segments(["a"], "regex", pattern="x" * 101)
    assert "limit" in one_line(e.value)


def test_unk_baseline_follows_the_vocabularys_unk_id():
    from torch import nn

    from stateseer.rnn_models.models import RecurrentAdapter

    torch.manual_seed(0)
    m = RecurrentAdapter(nn.Embedding(6, 3), nn.GRU(3, 4, batch_first=True), nn.Linear(4, 2),
                         classes=["a", "b"])
    ids = [3, 4, 5]
    outs = {}
    for unk in (1, 0):  # a user's vocabulary may hold <unk> at id 0
        a = attribute(m, ids, ["x", "y", "z"], method="ig", baseline="unk", unk_id=unk)
        with torch.no_grad():
            p = torch.softmax(m.forward_from_embeddings(m.embed(torch.full((1, 3), unk))), -1)
        assert a.baseline_output == pytest.approx(float(p[0, a.target_class]), abs=1e-5)
        outs[unk] = a.baseline_output
    assert outs[0] != outs[1]
    with pytest.raises(StateseerError):
        class NoEmbed:  # occlusion by id needs a <pad> id for baseline='pad'
            n_classes, n_layers = 2, 1
            trace = m.trace
        attribute(NoEmbed(), ids, ["x", "y", "z"], method="occlusion", pad_id=None)


def test_ig_refines_its_path_where_the_prediction_jumps(monkeypatch):
    """A saturated net flips its class within a sliver of the path from the baseline:
    Gauss–Legendre's 64 fixed nodes miss the jump (attributions sum to 0 of a change of
    1), and the path refined where the prediction jumps makes them complete again."""
    from torch import nn

    from stateseer.rnn_models import attribution
    from stateseer.rnn_models.models import RecurrentAdapter

    emb, rnn, head = nn.Embedding(6, 3), nn.RNN(3, 4, batch_first=True), nn.Linear(4, 2)
    with torch.no_grad():  # h = tanh(400 (sum of the input's 3 features) - 600)
        emb.weight.copy_(torch.tensor([[0.0] * 3] * 2 + [[1.0] * 3] * 4))
        rnn.weight_ih_l0.fill_(400.0)
        rnn.weight_hh_l0.zero_()
        rnn.bias_ih_l0.fill_(-600.0)
        rnn.bias_hh_l0.zero_()
        head.weight.copy_(torch.tensor([[-30.0] * 4, [30.0] * 4]))
        head.bias.zero_()
    m = RecurrentAdapter(emb, rnn, head, classes=["a", "b"])
    with monkeypatch.context() as fixed:  # the fixed nodes alone
        fixed.setattr(attribution, "IG_TOLERANCE", float("inf"))
        plain = attribute(m, [3, 4, 5, 2], list("wxyz"), method="ig")
    refined = attribute(m, [3, 4, 5, 2], list("wxyz"), method="ig")
    change = refined.output - refined.baseline_output
    assert change == pytest.approx(1.0, abs=1e-3) and plain.relative_delta > 0.9
    assert refined.relative_delta < attribution.IG_TOLERANCE
    assert refined.scores.sum() == pytest.approx(change, abs=0.05)
