"""load_model rebuilds any registered architecture from config.json and model.pt."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from stateseer.core.errors import CheckpointError
from stateseer.rnn_models.archs import build_model
from stateseer.rnn_models.loading import load_model
from stateseer.rnn_models.train import TrainConfig, train_run
from tests.conftest import one_line


@pytest.mark.parametrize("arch", ["mingru", "mamba"])
def test_load_model_traces_like_the_trained_model(arch, tmp_path):
    cfg = TrainConfig(dataset="tomita1", arch=arch, epochs=1, embed=4, hidden=3, layers=1,
                      arch_options={"d_state": 2} if arch == "mamba" else {})
    run = train_run(cfg, tmp_path / arch, progress=False)
    trained = build_model(run.config["model"])
    trained.load_state_dict(torch.load(run.model_path, weights_only=True))
    loaded = load_model(run.path)
    assert type(loaded) is type(trained) and not loaded.training
    assert loaded.state == run.config["model"]["state"]
    ids = torch.tensor([[2, 3, 2, 3], [3, 3, 0, 0]])
    lengths = torch.tensor([4, 2])
    with torch.no_grad():
        pairs = zip(trained.eval().trace(ids, lengths), loaded.trace(ids, lengths), strict=True)
        for a, b in pairs:
            np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_unknown_arch_is_one_line(tmp_path):
    run = train_run(TrainConfig(dataset="tomita1", arch="mingru", epochs=1, embed=4,
                                hidden=3, layers=1), tmp_path / "r", progress=False)
    cfg = run.config
    cfg["model"]["arch"] = "transformer"
    import json

    run.config_path.write_text(json.dumps(cfg))
    with pytest.raises(CheckpointError) as e:
        load_model(run.path)
    assert one_line(e.value) and "retrain" in str(e.value)


def test_train_stores_the_vocab_hash_and_loading_refuses_another_vocab(tmp_path):
    from stateseer.core.rundir import sha256_file
    from stateseer.rnn_models.tokenizers import Vocab

    run = train_run(TrainConfig(dataset="tomita1", arch="gru", epochs=1, embed=4, hidden=3),
                    tmp_path / "r", progress=False)
    assert run.config["vocab_sha256"] == sha256_file(run.vocab_path)
    assert not list(run.path.glob("*.tmp*"))  # atomic writes leave no temporaries
    load_model(run.path)  # the matching vocabulary loads
    tokens = Vocab.load(run.vocab_path).tokens
    Vocab(tokens[:1] + tokens[2:3] + tokens[1:2] + tokens[3:]).save(run.vocab_path)
    with pytest.raises(CheckpointError) as e:
        load_model(run.path)
    assert "vocab.json" in one_line(e.value) and "sha256" in str(e.value)


def test_record_swaps_the_traces_directory_in(tmp_path):
    from stateseer.core.atomic import swap_dir as _swap_in

    target, new = tmp_path / "traces", tmp_path / "traces.tmp"
    target.mkdir()
    (target / "meta.json").write_text("old")
    (target / "old.npy").write_text("x")
    new.mkdir()
    (new / "meta.json").write_text("new")
    _swap_in(new, target)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["traces"]
    assert sorted(p.name for p in target.iterdir()) == ["meta.json"]
    assert (target / "meta.json").read_text() == "new"
    # a crash after the old traces were moved aside: the next recording cleans up
    (tmp_path / "traces.old").mkdir()
    new.mkdir()
    _swap_in(new, target)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["traces"]


def test_a_vocabulary_of_another_size_is_refused_even_without_the_hash(tmp_path):
    """A run trained before the hash was stored: a vocab.json shorter than the embedding
    (every id past its end would read another token) is one line, not a silent model."""
    import json

    from stateseer.rnn_models.tokenizers import Vocab

    run = train_run(TrainConfig(dataset="tomita1", arch="gru", epochs=1, embed=4, hidden=3),
                    tmp_path / "r", progress=False)
    cfg = run.config
    cfg.pop("vocab_sha256")
    run.config_path.write_text(json.dumps(cfg))
    load_model(run.path)  # the matching vocabulary still loads
    Vocab(Vocab.load(run.vocab_path).tokens[:-1]).save(run.vocab_path)
    with pytest.raises(CheckpointError) as e:
        load_model(run.path)
    msg = one_line(e.value)
    assert "vocab.json" in msg and "embeds" in msg and "restore" in msg
