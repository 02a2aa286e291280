"""Run directories for models trained outside stateseer."""

from __future__ import annotations

import json

import numpy as np
import pytest

from stateseer.core.errors import DataError, StateseerError
from tests.conftest import one_line


def test_create_run_reloads_the_same_splits_and_records_an_adapter(tmp_path, text_csv):
    import torch
    from torch import nn

    from stateseer.rnn_models.datasets import load_dataset
    from stateseer.rnn_models.engine import record_run
    from stateseer.rnn_models.models import RecurrentAdapter
    from stateseer.rnn_models.run import create_run
    from stateseer.rnn_models.tokenizers import Vocab

    ds = load_dataset(f"csv:{text_csv}", text_col="review", label_col="sentiment")
    vocab = Vocab.build([ds.tokens[i] for i in ds.splits["train"]], min_freq=2)
    run = create_run(tmp_path / "mine", ds, vocab, model={"arch": "custom:TinyGRU"},
                     text_col="review", label_col="sentiment",
                     metrics={"test_accuracy": 0.5})
    cfg = json.loads(run.config_path.read_text())
    assert cfg["model"] == {"arch": "custom:TinyGRU", "n_classes": 2,
                            "vocab_size": len(vocab)}
    assert run.metrics()["test_accuracy"] == 0.5
    again = run.dataset()
    for s in ("train", "val", "test"):
        assert np.array_equal(again.splits[s], ds.splits[s])
    torch.manual_seed(0)
    model = RecurrentAdapter(nn.Embedding(len(vocab), 8), nn.GRU(8, 12, batch_first=True),
                             nn.Linear(12, 2), n_classes=2)
    traces = record_run(run, model=model)
    assert traces["test"].n_inputs == len(ds.splits["test"])
    with pytest.raises(DataError) as e:
        create_run(tmp_path / "mine", ds, vocab, model={"arch": "x"})
    assert "--force" in one_line(e.value)
    with pytest.raises(StateseerError) as e:
        create_run(tmp_path / "other", ds, vocab, model={})
    assert "arch" in one_line(e.value)


@pytest.mark.parametrize(("name", "content"), [("config.json", "[1, 2]"),
                                                ("config.json", "\udcff"),
                                                ("metrics.json", "[]"),
                                                ("metrics.json", "{oops")])
def test_run_files_that_are_not_json_objects(tmp_path, name, content):
    from stateseer.core.rundir import RunDir

    (tmp_path / name).write_bytes(content.encode("utf-8", "surrogateescape"))
    run = RunDir(tmp_path)
    with pytest.raises(StateseerError, match=name) as e:
        run.config if name == "config.json" else run.update_metrics(x=1)
    one_line(e.value)


def test_traces_meta_that_is_a_list(tmp_path):
    from stateseer.core.errors import TraceError
    from stateseer.core.traces import Traces

    (tmp_path / "meta.json").write_text("[]")
    with pytest.raises(TraceError, match=r"not a JSON object.*stateseer record") as e:
        Traces(tmp_path)
    one_line(e.value)


def test_atomic_writes_get_the_mode_of_an_ordinary_file(tmp_path):
    """mkstemp creates 0600 files; config.json and friends must not differ from the rest."""
    from stateseer.core.atomic import atomic_write_text

    ordinary = tmp_path / "plain.txt"
    ordinary.write_text("x")
    atomic_write_text(tmp_path / "config.json", "{}")
    assert (tmp_path / "config.json").stat().st_mode & 0o777 == ordinary.stat().st_mode & 0o777
