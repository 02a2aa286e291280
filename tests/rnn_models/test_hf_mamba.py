"""``train --init hf:PATH``: a tiny random Hugging Face Mamba (``MambaForCausalLM``) built
offline, fine-tuned with a head, recorded, abstracted, forced, attributed, diagnosed and
explored; its recorded states are transformers' own, and what does not fit is refused in
one line with nothing written."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import numpy as np
import pytest
import torch

pytest.importorskip("transformers")

from stateseer.core.errors import CheckpointError, DataError
from stateseer.testing import sentiment_csv, tiny_hf_classifier, tiny_hf_mamba
from tests.conftest import one_line


@pytest.fixture(scope="module")
def mamba_run(tmp_path_factory):
    from stateseer import record_run
    from stateseer.rnn_models.train import TrainConfig, train_run

    where = tmp_path_factory.mktemp("hfmamba")
    ckpt = tiny_hf_mamba(where / "ckpt")
    data = sentiment_csv(where / "data.csv", sizes=(300, 60, 120))
    cfg = TrainConfig(dataset=f"csv:{data}", arch="mamba", init=f"hf:{ckpt}", epochs=30,
                      lr=1e-2, dropout=0.0, patience=10)
    run = train_run(cfg, where / "run", progress=False)
    shutil.rmtree(ckpt)  # the run keeps what it needs: later commands never read PATH
    return run, record_run(run)


def _cache_states(backbone, ids, layer):
    """Every step's (SSM state, conv buffer) of ``layer`` from stepping transformers'
    model one token at a time with its cache."""
    cache, out = None, []
    with torch.no_grad():
        for t in range(ids.shape[1]):
            cache = backbone(ids[:, t : t + 1], cache=cache, use_cache=True).cache
            ssm = cache.get_recurrent_state(layer, state_idx=0)[0].flatten()
            conv = cache.get_conv_state(layer)[0][:, 1:].flatten()  # it keeps d_conv inputs
            out.append(torch.cat([ssm, conv]))
    return torch.stack(out)


def test_the_trained_run_is_a_mamba_from_the_checkpoint_that_learnt_the_task(mamba_run):
    run, traces = mamba_run
    cfg = run.config
    m = cfg["model"]
    assert m["arch"] == "hf-mamba" and m["state"] == "ssm"  # text: the SSM state
    assert (m["embed"], m["hidden"], m["layers"], m["d_state"]) == (16, 32, 2, 4)
    assert m["hf_config"]["model_type"] == "mamba"
    assert cfg["data"]["tokenizer"] == "model" and (run.path / "tokenizer").is_dir()
    tokens = json.loads(run.vocab_path.read_text())["tokens"]
    assert tokens[:2] == ["<pad>", "<unk>"] and len(tokens) == m["vocab_size"]
    assert run.metrics()["test_accuracy"] >= 0.7  # chance is 0.5
    # the checkpoint is named relative to the run; repair reads it back absolute
    from stateseer.app.workflows.retraining import training_settings

    assert cfg["config"]["init"] == "hf:../ckpt"
    assert training_settings(run)["init"] == f"hf:{run.path.parent / 'ckpt'}"
    te = traces["test"]
    assert te.hidden.shape[1] == 32 * 4
    # the tokenizer is the checkpoint's: a word it lacks is <unk>
    assert run.load_model().tokenize("frankly good") == ["<unk>", "good"]


def test_recorded_states_are_transformers_states_and_predictions_its_forward(mamba_run):
    from stateseer.rnn_models.hf_mamba import build_hf_mamba

    run, traces = mamba_run
    model = run.load_model()
    te = traces["test"]
    vocab = model.vocab
    seqs = [[vocab.index(t) for t in te.tokens(i)] for i in range(te.n_inputs)]
    width = max(map(len, seqs))
    ids = torch.tensor([q + [0] * (width - len(q)) for q in seqs])
    lengths = torch.tensor([len(q) for q in seqs])
    own = torch.softmax(model.predict(ids, lengths), -1).numpy()  # transformers' forward
    assert np.abs(np.asarray(te.final_proba) - own).max() <= 1e-6
    # the recorded SSM states are those of transformers' model stepped with its cache,
    # for every layer and every --state (the full state ends with the conv buffer)
    section = dict(run.config["model"], state="full")
    full = build_hf_mamba(section, run.path)
    full.load_state_dict(model.state_dict())
    one = ids[:1, : lengths[0]]
    n_ssm = 32 * 4
    for layer in (0, 1):
        want = _cache_states(model._backbone, one, layer)
        got, _ = full.trace(one, lengths[:1], layer=layer)
        assert (got[0] - want).abs().max() <= 1e-5
        if layer == 1:
            np.testing.assert_allclose(te.hidden[te.steps(0)], want[:, :n_ssm].numpy(),
                                       atol=1e-5)


def test_abstraction_forcing_attribution_diagnosis_and_the_explorer_run(mamba_run):
    from stateseer import abstract_run
    from stateseer.app.main import create_app
    from stateseer.app.workflows.diagnose import diagnose_run
    from stateseer.app.workflows.forcing import measure_forcing
    from stateseer.rnn_models.attribution import attribute

    run, traces = mamba_run
    ab = abstract_run(run, n_states=6)
    assert ab.metrics["simulation_fidelity"] > ab.metrics["simulation_chance"]
    forced = measure_forcing(run.path, save=False)  # stepping replaces the SSM state
    assert forced["forcing_agreement"] >= 0.9
    te = traces["test"]
    model = run.load_model()
    ids = np.asarray(te.token_ids[te.steps(0)])
    att = attribute(model, ids, te.tokens(0), method="ig", n_steps=16)
    assert len(att.scores) == len(ids) and np.isfinite(att.scores).all()
    found = diagnose_run(run, split="test")
    assert found["findings"] is not None
    assert create_app(run).layout is not None


def test_what_does_not_fit_is_refused_in_one_line_and_nothing_is_written(tmp_path):
    from stateseer.rnn_models.train import TrainConfig, train_run

    data = sentiment_csv(tmp_path / "data.csv", sizes=(30, 9, 9))
    mamba = tiny_hf_mamba(tmp_path / "mamba")
    jamba = tiny_hf_classifier(tmp_path / "jamba")
    cases = [
        (dict(init=f"hf:{jamba}"), CheckpointError, "'jamba' model"),
        (dict(init=f"hf:{tmp_path / 'none'}"), CheckpointError, "no Hugging Face checkpoint"),
        (dict(init=f"hf:{mamba}", hidden=64), DataError, "--hidden does not apply"),
        (dict(init=f"hf:{mamba}", arch_options={"d_state": 8}), DataError, "--d-state"),
        (dict(init=f"hf:{mamba}", arch="lstm"), DataError, "drop --arch lstm"),
        (dict(init=f"{mamba}"), DataError, "is not hf:PATH"),
    ]
    for kw, err, text in cases:
        kw = {"arch": "mamba", **kw}
        with pytest.raises(err, match=text) as e:
            train_run(TrainConfig(dataset=f"csv:{data}", epochs=1, **kw), tmp_path / "run",
                      progress=False)
        one_line(e.value)
        assert not (tmp_path / "run").exists()


def test_the_command_line_trains_from_a_checkpoint(tmp_path):
    data = sentiment_csv(tmp_path / "data.csv", sizes=(40, 10, 10))
    ckpt = tiny_hf_mamba(tmp_path / "ckpt", layers=1)
    out = subprocess.run(
        [sys.executable, "-m", "stateseer", "train", "--init", f"hf:{ckpt}", "--dataset",
         f"csv:{data}", "--out", str(tmp_path / "run"), "--epochs", "2", "--quiet"],
        capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["run"].endswith("run")
    cfg = json.loads((tmp_path / "run" / "config.json").read_text())
    assert cfg["model"]["arch"] == "hf-mamba" and cfg["config"]["arch"] == "mamba"
    bad = subprocess.run(
        [sys.executable, "-m", "stateseer", "train", "--init", f"hf:{ckpt}", "--arch", "gru",
         "--dataset", f"csv:{data}", "--out", str(tmp_path / "bad")],
        capture_output=True, text=True, timeout=300)
    assert bad.returncode != 0 and "drop --arch gru" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1 and not (tmp_path / "bad").exists()
