"""Training: formal languages learnt exactly, determinism, run directories, checkpoints."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from stateseer.core.errors import CheckpointError, DataError, StateseerError
from stateseer.rnn_models.formal import GRAMMARS, all_strings, sample_strings
from stateseer.rnn_models.run import ModelRun
from stateseer.rnn_models.train import DEFAULTS, TrainConfig, default_drift, evaluate, train_run
from tests.conftest import one_line


def _check_exact(run: ModelRun, grammar: str) -> tuple[float, float]:
    """Accuracy on every string of length ≤ 12 and on 1,000 random strings of length 13–20."""
    model, vocab = run.load_model(), run.vocab()
    dfa = GRAMMARS[grammar].dfa
    short = all_strings(dfa.alphabet, 12)
    long = sample_strings(dfa, 1000, 13, 20, np.random.default_rng(123))
    accs = []
    for strings in (short, long):
        seqs = [vocab.encode(list(s)) for s in strings]
        acc, _ = evaluate(model, seqs, dfa.accepts(strings).astype(np.int64))
        accs.append(acc)
    return accs[0], accs[1]


@pytest.mark.slow
@pytest.mark.parametrize("arch", ["lstm", "gru"])
@pytest.mark.parametrize("grammar", [f"tomita{i}" for i in range(1, 8)])
def test_tomita_learnt_exactly_with_default_settings(shared_trained, grammar, arch):
    # trained once for this test and the DFA extraction tests (tests/conftest.py)
    run = ModelRun(shared_trained(grammar, arch=arch))
    short, long = _check_exact(run, grammar)
    assert short == 1.0, f"{grammar}/{arch}: {short:.4f} on strings ≤ 12"
    assert long == 1.0, f"{grammar}/{arch}: {long:.4f} on random strings 13–20"
    assert run.metrics()["test_accuracy"] == 1.0  # the time it takes: benchmarks/dfa_extraction.py


def test_tomita3_lstm_run_directory(tomita_run):
    run = ModelRun(tomita_run)
    for p in (run.config_path, run.model_path, run.vocab_path, run.metrics_path):
        assert p.exists()
    m = run.metrics()
    assert {"train_accuracy", "val_accuracy", "test_accuracy"} <= set(m)
    assert m["model_sha256"] == run.model_sha256()
    cfg = run.config
    assert cfg["model"]["arch"] == "lstm" and cfg["data"]["name"] == "tomita3"
    assert cfg["training"]["prefix_loss"] is True
    assert _check_exact(run, "tomita3") == (1.0, 1.0)
    # The empty string is classified by head(h0): Tomita 3 accepts it.
    model = run.load_model()
    logits = model(torch.zeros(1, 0, dtype=torch.long), torch.tensor([0]))
    assert logits.argmax().item() == 1


def test_training_is_deterministic_for_a_seed(tmp_path, text_csv):
    def fit(out, seed):
        cfg = TrainConfig(dataset=f"csv:{text_csv}", arch="gru", text_col="review",
                          label_col="sentiment", epochs=1, hidden=8, embed=8, seed=seed)
        return torch.load(train_run(cfg, out, progress=False).model_path, weights_only=True)

    a, b, c = fit(tmp_path / "a", 0), fit(tmp_path / "b", 0), fit(tmp_path / "c", 1)
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert not all(torch.equal(a[k], c[k]) for k in a)


def test_fit_predict_trains_as_train_run_does_and_writes_nothing(tmp_path, text_csv):
    """``repair --seeds`` trains extra models only for their test predictions: the same
    code, settings and seed as a run of ``train`` give the same predictions."""
    from stateseer.rnn_models.train import fit_predict

    cfg = TrainConfig(dataset=f"csv:{text_csv}", arch="gru", text_col="review",
                      label_col="sentiment", epochs=2, hidden=8, embed=8, seed=3)
    run = train_run(cfg, tmp_path / "run", progress=False)
    before = set(tmp_path.rglob("*"))
    pred, labels = fit_predict(cfg)
    assert set(tmp_path.rglob("*")) == before
    assert len(pred) == len(labels) == len(run.dataset().splits["test"])
    assert float((pred == labels).mean()) == pytest.approx(
        run.metrics()["test_accuracy"], abs=1e-12)
    model, vocab = run.load_model(), run.vocab()
    ds = run.dataset()
    seqs = [vocab.encode(ds.tokens[i]) for i in ds.splits["test"].tolist()]
    assert np.array_equal(evaluate(model, seqs, labels)[1], pred)


def test_existing_run_is_not_overwritten_without_force(tomita_run):
    before = ModelRun(tomita_run).model_sha256()
    with pytest.raises(DataError, match="--force") as e:
        train_run(TrainConfig(dataset="tomita1"), tomita_run, progress=False)
    one_line(e.value)
    assert ModelRun(tomita_run).model_sha256() == before


def test_bad_training_options_are_refused(tmp_path):
    with pytest.raises(DataError, match="arch"):
        train_run(TrainConfig(dataset="tomita1", arch="cnn"), tmp_path / "x", progress=False)
    with pytest.raises(DataError, match="unknown data set"):
        train_run(TrainConfig(dataset="imdb"), tmp_path / "y", progress=False)
    assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists()


@pytest.mark.parametrize(
    "damage,match",
    [
        ("truncate", "corrupt .*zip archive is truncated or damaged"),
        ("garbage", "corrupt .*it is not a PyTorch file: it starts with b'this is "),
        ("missing", "not found"),
        ("pickle_module", "corrupt .*save model.state_dict"),
        ("other_arch", "does not match"),
        ("wrong_shape", "does not match"),
        ("not_a_state_dict", "state_dict"),
    ],
)
def test_damaged_checkpoints_get_a_clear_error(copy_run, tomita_run, damage, match):
    run = ModelRun(copy_run(tomita_run))
    original = run.model_path.read_bytes()
    if damage == "truncate":
        run.model_path.write_bytes(original[: len(original) // 2])
    elif damage == "garbage":
        run.model_path.write_bytes(b"this is not a checkpoint")
    elif damage == "missing":
        run.model_path.unlink()
    elif damage == "pickle_module":
        # A whole pickled module: weights_only loading must refuse to unpickle it.
        torch.save(run.load_model(), run.model_path)
    elif damage == "other_arch":
        cfg = run.config
        cfg["model"]["arch"] = "gru"
        run.config_path.write_text(json.dumps(cfg))
    elif damage == "wrong_shape":
        cfg = run.config
        cfg["model"]["hidden"] = 64
        run.config_path.write_text(json.dumps(cfg))
    elif damage == "not_a_state_dict":
        torch.save({"weights": [1, 2, 3]}, run.model_path)
    with pytest.raises(CheckpointError, match=match) as e:
        run.load_model()
    one_line(e.value)


def test_not_a_run_directory(tmp_path):
    with pytest.raises(StateseerError, match="not a stateseer run") as e:
        _ = ModelRun(tmp_path).config
    one_line(e.value)


def test_a_spent_time_budget_stops_training_after_one_batch(tmp_path):
    run = train_run(TrainConfig(dataset="tomita1", arch="gru", max_seconds=0.0),
                    tmp_path / "budget", progress=False)
    m = run.metrics()
    assert m["epochs_run"] == 1 and m["best_epoch"] == 1
    assert run.config["config"]["max_seconds"] == 0.0


def test_default_drift_names_only_defaults_that_changed(tomita_run):
    cfg = json.loads((tomita_run / "config.json").read_text())
    assert default_drift(cfg) == {}  # trained with today's defaults
    old = json.loads(json.dumps(cfg))
    old["training"]["lr"] = 0.5  # as if the default had been 0.5 then
    assert default_drift(old) == {"lr": (0.5, DEFAULTS["formal"]["lr"])}
    old["config"]["lr"] = 0.5  # chosen by the user: not a drift of the defaults
    assert default_drift(old) == {}
    assert default_drift({"format": "something else"}) == {}


def test_a_signed_mamba_stacks_two_layers_on_formal_languages_unless_told():
    """The option's own default (OPTION_DEFAULTS) applies to that option's runs only, on
    their data kind only, gives way to an explicit value, and an older signed run trained
    with one layer by default is told that the default changed."""
    from stateseer import load_dataset

    parity, words = load_dataset("parity"), load_dataset("rotten_tomatoes")
    signed = {"gate": "signed"}
    assert TrainConfig("parity", arch="mamba", arch_options=signed).resolve(parity)["layers"] == 2
    assert TrainConfig("parity", arch="mamba").resolve(parity)["layers"] == 1
    assert TrainConfig("parity", arch="mamba", layers=1,
                       arch_options=signed).resolve(parity)["layers"] == 1
    assert TrainConfig("rotten_tomatoes", arch="mamba",
                       arch_options=signed).resolve(words)["layers"] == 1
    old = {"format": "stateseer.run", "data": {"tokenizer": "char"},
           "config": {"arch": "mamba", "layers": None, "arch_options": signed},
           "model": {"arch": "mamba", "layers": 1}, "training": {}}
    assert default_drift(old)["layers"] == (1, 2)


def test_mamba_on_text_trains_every_prefix_towards_its_label_by_default():
    """``--prefix-loss auto`` is ``label`` for Mamba on text (its intermediate predictions
    then accumulate the evidence instead of swinging with the last tokens): the loss is the
    last step's cross-entropy plus PREFIX_LOSS_WEIGHT times the mean over the text's steps,
    an empty input's being the initial prediction's; an older Mamba text run trained on
    the last step alone is told that the default changed."""
    import torch

    from stateseer import load_dataset
    from stateseer.rnn_models.mamba import MambaClassifier
    from stateseer.rnn_models.train import PREFIX_LOSS_WEIGHT, _every_prefix_loss, _prepare_data

    words = load_dataset("rotten_tomatoes")
    data, _hp = _prepare_data(TrainConfig("rotten_tomatoes", arch="mamba"), words)
    assert data.every_prefix and data.prefix is None
    lstm, _hp = _prepare_data(TrainConfig("rotten_tomatoes"), words)
    assert not lstm.every_prefix
    torch.manual_seed(0)
    model = MambaClassifier(20, 2, embed=8, hidden=8, layers=1, dropout=0.0).eval()
    ids = torch.tensor([[3, 4, 5], [6, 0, 0], [0, 0, 0]])
    lengths, labels = torch.tensor([3, 1, 0]), torch.tensor([1, 0, 1])
    with torch.no_grad():
        steps = model.step_logits(ids).log_softmax(-1)
        init = model.initial_logits().log_softmax(-1)
        want = []
        for i, n in enumerate(lengths.tolist()):
            nll = -(steps[i, :n, labels[i]] if n else init[labels[i]][None])
            want.append(nll[-1] + PREFIX_LOSS_WEIGHT * nll.mean())
        got = _every_prefix_loss(model, ids, lengths, labels)
    assert torch.allclose(got, torch.stack(want).mean(), atol=1e-6)
    old = {"format": "stateseer.run", "data": {"tokenizer": "word"},
           "config": {"arch": "mamba", "prefix_loss": "auto", "arch_options": {}},
           "model": {"arch": "mamba"}, "training": {"prefix_loss": False}}
    assert default_drift(old)["label_prefix_loss"] == (False, True)
    old["config"]["prefix_loss"] = "off"  # chosen by the user: no drift
    assert "label_prefix_loss" not in default_drift(old)


def test_truncate_and_vocab_exclude_are_pipeline_settings_kept_everywhere(tmp_path, text_csv):
    from stateseer.core.traces import Traces
    from stateseer.rnn_models.engine import record_run
    from stateseer.rnn_models.record import record_texts

    cfg = TrainConfig(dataset=f"csv:{text_csv}", arch="gru", text_col="review",
                      label_col="sentiment", epochs=1, hidden=8, embed=8, truncate=5,
                      vocab_exclude=r"\d+|the")
    run = train_run(cfg, tmp_path / "run", progress=False)
    assert run.truncate == 5 and run.data["truncate"] == 5
    assert run.config["config"]["vocab_exclude"] == r"\d+|the"
    vocab = run.vocab()
    assert "the" not in vocab.index and not any(t.isdigit() for t in vocab.tokens)
    assert "then" in vocab.index or "there" in vocab.index  # whole tokens only
    ds = run.dataset()
    assert max(map(len, ds.tokens)) == 5 and max(len(t.split()) for t in ds.texts) > 5
    record_run(run)
    tr = Traces(run.traces_dir)["test"]
    assert int(np.asarray(tr.lengths).max()) == 5
    typed = record_texts(run.load_model(), vocab, ["one two three four five six seven"],
                         truncate=run.truncate)
    assert typed.n_inputs == 1 and int(typed.lengths[0]) == 5
    for bad, needle in (({"truncate": 0}, "--truncate"), ({"vocab_exclude": "(["},
                                                          "regular expression")):
        with pytest.raises(DataError, match=needle) as e:
            train_run(TrainConfig(dataset="tomita1", **bad), tmp_path / "bad",
                      progress=False)
        one_line(e.value)
        assert not (tmp_path / "bad").exists()


def _good_or_bad(rng: np.random.Generator, n: int, fillers: int) -> tuple[np.ndarray, list[str]]:
    """``n`` toy inputs: a class word ('good' for pos, 'bad' for neg) and ``fillers`` random
    filler words; their true classes (n,) and texts."""
    true = rng.integers(0, 2, n)
    texts = [f"{'good' if y else 'bad'} " + " ".join(f"w{rng.integers(40)}" for _ in range(fillers))
             for y in true]
    return true, texts


def test_held_out_probabilities_tell_the_labels_a_model_would_learn_by_heart():
    """Cross-fitted: each fold is scored by a model that never saw it, so a mislabelled
    training input is given its true class (the model trained on it learns the wrong one)."""
    from stateseer.rnn_models.datasets import TextDataset
    from stateseer.rnn_models.train import held_out_proba

    rng = np.random.default_rng(0)
    n = 360
    true, texts = _good_or_bad(rng, n, 4)
    labels = true.copy()
    flipped = rng.choice(np.arange(300), 20, replace=False)
    labels[flipped] = 1 - labels[flipped]
    splits = {"train": np.arange(300), "val": np.arange(300, 330), "test": np.arange(330, n)}
    ds = TextDataset("toy", texts, labels, ["neg", "pos"], "word", splits)
    cfg = TrainConfig(dataset="toy", arch="gru", epochs=12, hidden=16, embed=16, seed=0, lr=0.01)
    folds = np.array_split(rng.permutation(300), 2)
    proba, val = held_out_proba(cfg, ds, folds)
    rows = np.concatenate(folds)
    assert proba.shape == (300, 2) and val.shape == (30, 2)
    assert np.allclose(proba.sum(1), 1) and np.allclose(val.sum(1), 1)
    at = {int(r): k for k, r in enumerate(rows)}
    told = [proba[at[int(r)]].argmax() == true[r] for r in flipped]
    assert np.mean(told) >= 0.9, f"{np.mean(told):.2f} of the mislabelled rows told"
    again, _ = held_out_proba(cfg, ds, folds)
    assert np.array_equal(proba, again)  # the run's seed: the same models


def test_label_noise_lets_the_model_learn_the_classes_the_noisy_labels_hide():
    """neg inputs labelled pos at a rate of 0.6: trained on the labels as given, the model
    calls neg inputs pos; trained with that noise in the loss (forward correction), it
    calls them neg. Its validation inputs are labelled truly."""
    from stateseer.rnn_models.datasets import TextDataset
    from stateseer.rnn_models.train import held_out_proba

    rng = np.random.default_rng(1)
    n = 300
    true, texts = _good_or_bad(rng, n, 3)
    labels = true.copy()
    neg = np.flatnonzero(true[:240] == 0)
    labels[rng.choice(neg, int(0.6 * len(neg)), replace=False)] = 1
    splits = {"train": np.arange(240), "val": np.arange(240, n), "test": np.arange(0)}
    ds = TextDataset("toy", texts, labels, ["neg", "pos"], "word", splits)
    val_neg = true[240:] == 0
    got = {}
    for noise in (None, [[0.4, 0.6], [0.0, 1.0]]):
        cfg = TrainConfig(dataset="toy", arch="gru", epochs=8, hidden=16, embed=16, seed=0,
                          lr=0.01, label_noise=noise)
        _, val = held_out_proba(cfg, ds, [np.array([], np.int64)])
        got[noise is None] = (val[val_neg].argmax(1) == 0).mean()
    assert got[True] < 0.3 and got[False] > 0.9, got


def test_a_label_noise_matrix_that_is_not_one_is_refused_in_one_line():
    for bad, needle in (([[0.5, 0.6], [0, 1]], "summing to 1"), ([[1, 0]], "square"),
                        ([[1.2, -0.2], [0, 1]], "non-negative")):
        with pytest.raises(DataError, match=needle) as e:
            TrainConfig(dataset="x", label_noise=bad).check()
        one_line(e.value)


def test_a_label_noise_matrix_of_the_wrong_size_is_refused_before_training():
    from stateseer.rnn_models.datasets import TextDataset
    from stateseer.rnn_models.train import held_out_proba

    true, texts = _good_or_bad(np.random.default_rng(0), 40, 2)
    ds = TextDataset("toy", texts, true, ["neg", "pos"], "word",
                     {"train": np.arange(30), "val": np.arange(30, 40), "test": np.arange(0)})
    cfg = TrainConfig(dataset="toy", arch="gru", epochs=1, hidden=4, embed=4,
                      label_noise=np.eye(3).tolist())
    with pytest.raises(DataError, match="3x3 but the data set has 2 classes") as e:
        held_out_proba(cfg, ds, [np.array([], np.int64)])
    one_line(e.value)
