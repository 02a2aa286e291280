"""``--model hf:PATH``: a tiny random Jamba classifier (Mamba and attention layers) built and
saved offline, created, recorded, abstracted, attributed and explored; what cannot exist
for it is refused in one line."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

pytest.importorskip("transformers")

from stateseer.core.errors import CheckpointError
from stateseer.rnn_models.protocol import ModelProtocolError
from stateseer.testing import sentiment_csv, tiny_hf_classifier
from tests.conftest import one_line


@pytest.fixture(scope="module")
def hf_run(tmp_path_factory):
    from stateseer import record_run
    from stateseer.rnn_models.run import create_model_run

    where = tmp_path_factory.mktemp("hf")
    ckpt = tiny_hf_classifier(where / "ckpt")
    data = sentiment_csv(where / "data.csv", sizes=(120, 30, 60))
    run = create_model_run(where / "run", f"csv:{data}", f"hf:{ckpt}")
    return run, record_run(run)


def test_the_last_recorded_step_is_the_models_own_pooled_prediction(hf_run):
    from stateseer.rnn_models.hf import load_hf
    from stateseer.rnn_models.tokenizers import Vocab

    run, traces = hf_run
    m = run.config["model"]
    assert m["arch"] == "hf:JambaForSequenceClassification" and m["tokenizer"] == "model"
    assert m["classes"] == ["neg", "pos"] and m["own_agreement"]["agreement"] == 1.0
    assert not m["hf_path"].startswith("/")  # kept relative to the run
    te = traces["test"]
    model = load_hf(run.path / m["hf_path"])
    vocab = Vocab(json.loads(run.vocab_path.read_text())["tokens"])
    rows = range(te.n_inputs)
    seqs = [list(map(int, vocab.encode(te.tokens(i)))) for i in rows]
    width = max(map(len, seqs))
    ids = torch.tensor([q + [0] * (width - len(q)) for q in seqs])
    lengths = torch.tensor([len(q) for q in seqs])
    own = torch.softmax(model.predict(ids, lengths).float(), -1).numpy()
    assert np.abs(np.asarray(te.final_proba) - own).max() <= 1e-6
    # and every step is the head on that position's output (causal: padding changes none)
    one = torch.tensor([seqs[0]])
    _, proba = model.trace(one, torch.tensor([len(seqs[0])]))
    np.testing.assert_allclose(te.proba[te.steps(0)], proba[0].numpy(), atol=1e-6)
    assert te.hidden.shape[1] == 32 and te.tokens(0) == [w for w in te.texts[0].split()]


def test_abstraction_attribution_and_the_explorer_run_forcing_says_why_not(hf_run):
    from stateseer import abstract_run
    from stateseer.app.main import create_app
    from stateseer.rnn_models.attribution import attribute
    from stateseer.rnn_models.forcing import forced_run

    run, traces = hf_run
    ab = abstract_run(run, n_states=4)
    assert ab.metrics["simulation_fidelity"] > 0
    model = run.load_model()
    te = traces["test"]
    ids = np.asarray(te.token_ids[te.steps(0)])
    att = attribute(model, ids, te.tokens(0), method="ig", n_steps=8)
    assert len(att.scores) == len(ids) and np.isfinite(att.scores).all()
    assert create_app(run).layout is not None
    with pytest.raises(ModelProtocolError) as e:
        forced_run(model, torch.from_numpy(ids[None]), torch.tensor([len(ids)]),
                   lambda h, p: np.zeros(len(h), np.int64), np.zeros((1, 32), np.float32))
    assert "state forcing is not possible for this model" in one_line(e.value)


def test_what_cannot_be_read_is_refused_in_one_line_and_a_pooling_bert_is_read(tmp_path):
    from tokenizers import Tokenizer, models
    from transformers import BertConfig, BertForSequenceClassification, PreTrainedTokenizerFast

    from stateseer.rnn_models.classifier import ClassifierAdapter
    from stateseer.rnn_models.hf import load_hf

    with pytest.raises(CheckpointError, match="no Hugging Face checkpoint") as e:
        load_hf(tmp_path)
    one_line(e.value)
    ckpt = tiny_hf_classifier(tmp_path / "jamba")
    bert = BertConfig(vocab_size=32, hidden_size=8, num_hidden_layers=1,
                      num_attention_heads=2, intermediate_size=16)
    BertForSequenceClassification(bert).save_pretrained(tmp_path / "bert")
    for f in ("tokenizer.json", "tokenizer_config.json"):
        (tmp_path / "bert" / f).write_bytes((ckpt / f).read_bytes())
    # a BERT pools its first token before its head: read by the prefix definition (#50)
    assert isinstance(load_hf(tmp_path / "bert"), ClassifierAdapter)
    BertForSequenceClassification(bert).save_pretrained(tmp_path / "nopad")
    PreTrainedTokenizerFast(tokenizer_object=Tokenizer(models.WordLevel(
        {"<unk>": 0, "a": 1}, unk_token="<unk>")), unk_token="<unk>").save_pretrained(
        tmp_path / "nopad")
    with pytest.raises(CheckpointError, match="no padding token") as e:
        load_hf(tmp_path / "nopad")
    one_line(e.value)


@pytest.mark.parametrize("kind", ["bert", "distilbert"])
def test_an_encoder_that_pools_its_first_token_is_read_by_the_prefix_definition(
        tmp_path, kind):
    """#50: BERT and DistilBERT pool their [CLS] token before the head, so no position has
    a prediction of its own; hf: reads them as ClassifierAdapter does: the prediction
    after token t is the model on [CLS] x[:t] [SEP], the last one its own prediction."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from stateseer import record_run
    from stateseer.rnn_models.classifier import ClassifierAdapter
    from stateseer.rnn_models.run import create_model_run
    from stateseer.testing import tiny_hf_encoder

    ckpt = tiny_hf_encoder(tmp_path / "ckpt", kind=kind)
    data = sentiment_csv(tmp_path / "data.csv", sizes=(60, 20, 30))
    run = create_model_run(tmp_path / "run", f"csv:{data}", f"hf:{ckpt}")
    assert isinstance(run.load_model(), ClassifierAdapter)
    assert run.config["model"]["own_agreement"]["agreement"] == 1.0
    traces = record_run(run)
    test = traces["test"]
    model = AutoModelForSequenceClassification.from_pretrained(ckpt).eval()
    tok = AutoTokenizer.from_pretrained(ckpt)
    cls, sep = tok.cls_token_id, tok.sep_token_id
    for i in range(5):
        words = tok.tokenize(test.texts[i])
        ids = tok.convert_tokens_to_ids(words)
        steps = test.steps(i)
        proba = np.asarray(test.proba[steps])
        for t in (1, len(ids) // 2, len(ids)):
            with torch.no_grad():
                own = torch.softmax(model(input_ids=torch.tensor([[cls, *ids[:t], sep]])).logits,
                                    -1)[0].numpy()
            assert np.allclose(proba[t - 1], own, atol=1e-4), (kind, i, t)
    assert list(traces.classes) == ["neg", "pos"]
