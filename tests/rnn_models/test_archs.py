"""minGRU, minLSTM and Mamba: learnt exactly on a Tomita grammar, recorded with the shapes
their --state documents, forced exactly when nothing is replaced, parallel scan = steps;
abstracted, extracted, forced, indexed and explored like any other run."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from stateseer.core.errors import DataError
from stateseer.rnn_models.archs import ARCHITECTURES, build_model
from stateseer.rnn_models.attribution import attribute
from stateseer.rnn_models.forcing import forced_run
from stateseer.rnn_models.mamba import MambaClassifier, linear_scan
from stateseer.rnn_models.minrnn import MinRNNClassifier, log_scan
from stateseer.rnn_models.train import TrainConfig, train_run
from tests.conftest import one_line

MODERN = ("mingru", "minlstm", "mamba")
GRAMMAR = "tomita1"  # 1*: an absorbing "seen a 0" flag


def _small(arch: str, state: str | None = None, layers: int = 2,
           gate: str | None = None) -> torch.nn.Module:
    torch.manual_seed(0)
    hp = dict(embed=6, hidden=5, layers=layers, state=state or ARCHITECTURES[arch].default_state)
    if gate:
        hp["gate"] = gate
    if arch == "mamba":
        hp["d_state"] = 3
    return ARCHITECTURES[arch](17, 3, **hp).eval()


def _batch() -> tuple[torch.Tensor, torch.Tensor]:
    ids = torch.tensor([[3, 4, 5, 6, 7, 8, 9], [9, 2, 0, 0, 0, 0, 0], [12, 13, 14, 1, 0, 0, 0]])
    return ids, torch.tensor([7, 2, 4])


def _loaded(run) -> torch.nn.Module:
    """The run's model rebuilt from config.json through the registry."""
    model = build_model(run.config["model"])
    model.load_state_dict(torch.load(run.model_path, weights_only=True))
    return model.eval()


@pytest.fixture(scope="module", params=MODERN)
def trained(request, tmp_path_factory):
    from stateseer.rnn_models.engine import record_run

    arch = request.param
    # the formal defaults (2 layers for the min-RNNs); 100 % from the first epoch on
    run = train_run(TrainConfig(dataset=GRAMMAR, arch=arch, epochs=4),
                    tmp_path_factory.mktemp("modern") / arch, progress=False)
    model = _loaded(run)
    return arch, run, model, record_run(run, model=model)


def test_learns_a_tomita_grammar_exactly(trained):
    from stateseer.rnn_models.formal import GRAMMARS, all_strings
    from stateseer.rnn_models.train import evaluate

    arch, run, model, _ = trained
    assert run.config["model"]["arch"] == arch
    assert run.metrics()["test_accuracy"] == 1.0
    dfa = GRAMMARS[GRAMMAR].dfa
    strings = all_strings(dfa.alphabet, 10)
    seqs = [run.vocab().encode(list(s)) for s in strings]
    acc, _ = evaluate(model, seqs, dfa.accepts(strings).astype(np.int64))
    assert acc == 1.0


def test_recording_shapes_and_forcing_without_replacement_is_exact(trained):
    _arch, _run, model, traces = trained
    te = traces["test"]
    assert te.hidden.shape == (te.n_steps, model.state_size)
    assert traces.meta["state"] == model.state
    idx = np.flatnonzero(te.lengths > 0)[:50]
    seqs = [np.asarray(te.token_ids[te.steps(int(i))], np.int64) for i in idx]
    from stateseer.rnn_models.batching import pad_batch

    ids, lens = (torch.as_tensor(a) for a in pad_batch(seqs, np.arange(len(seqs))))
    cent = np.zeros((2, model.state_size), np.float32)
    assign = lambda h, p: (p[:, 1] > 0.5).astype(np.int64)  # noqa: E731
    r = forced_run(model, ids, lens, assign, cent, mask=np.zeros(ids.shape, bool))
    np.testing.assert_allclose(r.final_proba, te.final_proba[idx], atol=1e-5)
    for b, i in enumerate(idx[:10]):
        np.testing.assert_allclose(r.proba[b, : lens[b]], te.proba[te.steps(int(i))], atol=1e-5)


@pytest.mark.parametrize("arch,state,size,gate", [
    ("mingru", "h", 5, None), ("minlstm", "h", 5, None), ("mingru", "h", 5, "signed"),
    ("mamba", "full", 5 * (3 + 3), None), ("mamba", "ssm", 5 * 3, None),
    ("mamba", "summary", 5, None), ("mamba", "full", 5 * (3 + 3), "signed")])
@pytest.mark.parametrize("layer", [0, -1])
def test_parallel_scan_equals_stepping(arch, state, size, gate, layer):
    """trace (one parallel scan over the batch) = step (one token at a time), every layer."""
    model = _small(arch, state, gate=gate)
    ids, lens = _batch()
    with torch.no_grad():
        hidden, proba = model.trace(ids, lens, layer)
        st = model.initial_state(len(ids))
        hs, ps = [], []
        for t in range(ids.shape[1]):
            st = model.step(st, ids[:, t])
            hs.append(model.get_state(st, layer))
            ps.append(model.state_proba(st))
    assert hidden.shape == (3, 7, size) and proba.shape == (3, 7, 3)
    torch.testing.assert_close(torch.stack(hs, 1), hidden, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(torch.stack(ps, 1), proba, atol=1e-6, rtol=1e-5)
    h0, p0 = model.initial(layer)
    assert h0.shape == (size,) and not h0.any()
    torch.testing.assert_close(p0, torch.softmax(model.head.bias, -1))  # head of a zero state


@pytest.mark.parametrize("arch,state", [("mingru", "h"), ("minlstm", "h"), ("mamba", "full"),
                                        ("mamba", "ssm"), ("mamba", "summary")])
@pytest.mark.parametrize("layer", [0, -1])
def test_forcing_with_nothing_replaced_is_the_model_itself(arch, state, layer):
    """Every --state, every layer: forcing under an all-False mask gives the model's own
    per-step probabilities (the trained fixture checks the default states on a real run)."""
    model = _small(arch, state)
    ids, lens = _batch()
    cent = np.full((2, model.state_size), 7.0, np.float32)  # would show if it leaked in
    assign = lambda h, p: np.ones(len(h), np.int64)  # noqa: E731
    r = forced_run(model, ids, lens, assign, cent, layer=layer,
                   mask=np.zeros(ids.shape, bool))
    with torch.no_grad():
        _hidden, proba = model.trace(ids, lens, layer)
    for b in range(len(ids)):
        np.testing.assert_allclose(r.proba[b, : lens[b]], proba[b, : lens[b]].numpy(),
                                   atol=1e-5)
        np.testing.assert_allclose(r.final_proba[b], proba[b, lens[b] - 1].numpy(), atol=1e-5)


@pytest.mark.parametrize("arch,state", [("mingru", "h"), ("mamba", "full"),
                                        ("mamba", "summary")])
def test_forcing_replaces_the_state_and_the_head_sees_it(arch, state):
    model = _small(arch, state, layers=1)
    ids, lens = _batch()
    cent = np.random.default_rng(0).normal(size=(2, model.state_size)).astype(np.float32)
    assign = lambda h, p: np.ones(len(h), np.int64)  # noqa: E731
    r = forced_run(model, ids, lens, assign, cent)
    with torch.no_grad():  # replaying the same replacements by hand
        st = model.initial_state(3)
        for t in range(ids.shape[1]):
            st = model.step(st, ids[:, t])
            st = model.set_state(st, -1, torch.as_tensor(cent[[1, 1, 1]]))
            np.testing.assert_allclose(r.proba[:, t], model.state_proba(st).numpy(), atol=1e-6)
            got = model.get_state(st, -1).numpy()
            np.testing.assert_allclose(got, cent[[1, 1, 1]], atol=1e-5)  # it holds the centroid
    if arch == "mingru":  # h is the head's input: the head on the centroid
        with torch.no_grad():
            want = torch.softmax(model.head(torch.as_tensor(cent[1])), -1).numpy()
        np.testing.assert_allclose(r.final_proba, np.stack([want] * 3), atol=1e-5)


@pytest.mark.parametrize("arch", MODERN)
def test_integrated_gradients_through_the_protocol(arch):
    model = _small(arch)
    ids = np.array([3, 4, 5, 6])
    a = attribute(model, ids, list("abcd"), method="ig", target="contrastive")
    emb = model.embed(torch.as_tensor(ids)[None]).detach()
    with torch.no_grad():
        z, z0 = model.forward_from_embeddings(emb)[0], model.forward_from_embeddings(0 * emb)[0]
    diff = float((z - z0)[a.target_class] - (z - z0)[a.contrast_class])
    assert a.scores.sum() == pytest.approx(diff, abs=1e-3 + 1e-2 * abs(diff))


def test_scans_on_known_values():
    a, b = torch.tensor([[[0.5], [0.25], [1.0]]]), torch.tensor([[[2.0], [1.0], [3.0]]])
    want = [2.0, 1.5, 4.5]
    assert log_scan(a.log(), b.log()).flatten().tolist() == pytest.approx(want)
    assert linear_scan(a, b).flatten().tolist() == pytest.approx(want)


def test_a_signed_gate_counts_modulo_two_where_a_positive_one_cannot():
    """A one-unit signed minGRU set by hand reads parity exactly on strings of up to 100
    symbols (its decay is −1 on a 1, +1 on a 0), through the parallel scan; a positive
    gate's decay stays in (0, 1), and a signed Mamba's transition values go negative."""
    from stateseer.rnn_models.formal import GRAMMARS, sample_strings

    model = MinRNNClassifier("mingru", 4, 2, embed=2, hidden=1, layers=1, gate="signed")
    with torch.no_grad():  # ids: 2 = '0', 3 = '1'; z = σ(±40), candidate 1
        model.embedding.weight.copy_(torch.tensor([[0.0, 0], [0, 0], [-40, 1], [40, 1]]))
        model.layers[0].proj.weight.copy_(torch.eye(2))
        model.layers[0].proj.bias.zero_()
        model.head.weight.copy_(torch.tensor([[10.0], [-10.0]]))  # h = 1: odd → reject
        model.head.bias.copy_(torch.tensor([-5.0, 5.0]))
    dfa = GRAMMARS["parity"].dfa
    strings = sample_strings(dfa, 200, 1, 100, np.random.default_rng(0))
    ids = torch.zeros(len(strings), 100, dtype=torch.long)
    for i, s in enumerate(strings):
        ids[i, : len(s)] = torch.tensor([2 + int(c) for c in s])
    lens = torch.tensor([len(s) for s in strings])
    with torch.no_grad():
        _, proba = model.trace(ids, lens)
    final = proba[torch.arange(len(strings)), lens - 1].argmax(-1).numpy()
    assert (final == dfa.accepts(strings)).all()  # accept is class 1
    a, _ = _small("mingru", layers=1).layers[0].linear(torch.randn(50, 6) * 5)
    assert (a > 0).all() and (a < 1).all()
    # the signed gate is stretched and clipped: a decay of exactly −1 (a flip that stays a
    # flip over any length) or +1 at a finite pre-activation, not only in the limit
    with torch.no_grad():
        model.layers[0].proj.weight.copy_(torch.eye(2))
        a, _ = model.layers[0].linear(torch.tensor([[3.0, 1.0], [-3.0, 1.0], [0.0, 1.0]]))
    assert a[:, 0].tolist() == [-1.0, 1.0, 0.0]
    signed = _small("mamba", layers=1, gate="signed").layers[0]
    decay = signed._ssm_inputs(torch.randn(50, 5) * 5)[0]
    assert (decay < 0).any() and (decay.abs() < 1).all()


def test_the_gate_option_is_checked_in_one_line():
    with pytest.raises(ValueError, match="only 'positive'"):
        MinRNNClassifier("minlstm", 10, 2, gate="signed")
    with pytest.raises(DataError) as e:
        train_run(TrainConfig(dataset="parity", arch="lstm", arch_options={"gate": "signed"}),
                  "/nonexistent/x", progress=False)
    assert "--gate is not an option of --arch lstm" in one_line(e.value)


def test_states_and_arguments_are_checked():
    with pytest.raises(DataError) as e:
        train_run(TrainConfig(dataset="tomita1", arch="mamba", state="h"), "/nonexistent/x",
                  progress=False)
    msg = one_line(e.value)
    assert "full, ssm, summary" in msg
    with pytest.raises(ValueError, match="only 'h'"):
        MinRNNClassifier("mingru", 10, 2, state="c")
    with pytest.raises(ValueError, match="does not exist"):
        MambaClassifier(10, 2, state="h")
    with pytest.raises(ValueError, match="does not exist"):
        _small("mamba").initial(layer=2)
    assert {"lstm", "gru", "rnn", "mingru", "minlstm", "mamba"} <= set(ARCHITECTURES)


def test_the_whole_pipeline_runs_unchanged_on_a_modern_run(trained):
    """abstract, extract-dfa, forcing, the context index and the explorer's views (typed
    input, attribution, nearest contexts, diagram tap) on the trained run, as on an LSTM."""
    from stateseer.abstraction.automata.dfa import extract_dfa
    from stateseer.abstraction.pipeline import abstract_run
    from stateseer.app.explorer.context import ExplorerContext
    from stateseer.app.explorer.views import diagram
    from stateseer.app.main import create_app
    from stateseer.app.workflows.forcing import measure_forcing
    from stateseer.rnn_models.formal import GRAMMARS

    arch, run, _model, traces = trained
    ab = abstract_run(run.path, n_states=4)
    # 1* is the RNN's language exactly, so the FSM alone reproduces it
    assert ab.metrics["simulation_fidelity"] == 1.0 and ab.fsm.n_states == 5
    dfa = extract_dfa(traces, grammar=GRAMMARS[GRAMMAR])
    assert dfa.n_states == 2 and dfa.report["grammar_agreement_le12"] == 1.0, arch
    forcing = measure_forcing(run.path)["forcing_agreement"]
    assert 0.9 <= forcing <= 1.0, (arch, forcing)
    assert create_app(run.path) is not None
    ctx = ExplorerContext.load(run.path)
    typed = ctx.models.trace_text("1110")
    assert typed.tokens == tuple("1110") and typed.prediction == 0  # a 0: rejected
    assert len(typed.states) == len(typed.simulated) == 5
    attr = ctx.models.attribution(typed)
    assert attr.scores.shape == (4,) and np.isfinite(attr.scores).all()
    near = ctx.contexts.nearest(typed, step=3, k=4, window=2)
    assert len(near["rows"]) == 4 and near["summary"]["k"] == 4
    s = int(np.bincount(np.asarray(ctx.data.abstraction.states["test"])).argmax())
    sel, _url = diagram.tap(ctx, {"state": s}, {"split": "test", "state": None, "row": None,
                                                  "pattern": None})
    assert sel["state"] == s


def test_mamba_learns_tomita_7_and_its_minimal_dfa_is_extracted(tmp_path):
    """The star-free ceiling: Mamba at its formal defaults is exact on Tomita 7
    (0*1*0*1*), and so is the automaton extracted from its traces (119 states before
    the lossless merge of states that only remember recent symbols)."""
    from stateseer.abstraction.automata.dfa import extract_dfa
    from stateseer.core.traces import Traces
    from stateseer.rnn_models.engine import record_run
    from stateseer.rnn_models.formal import GRAMMARS

    run = train_run(TrainConfig(dataset="tomita7", arch="mamba"), tmp_path / "t7",
                    progress=False)
    assert run.metrics()["test_accuracy"] == 1.0
    record_run(run)
    dfa = extract_dfa(Traces(run.traces_dir), grammar=GRAMMARS["tomita7"])
    assert dfa.n_states == 5 and dfa.report["minimal_size_match"]
    assert dfa.report["grammar_agreement_le12"] == 1.0


def test_a_signed_mamba_at_its_formal_defaults_extracts_tomita_5s_minimal_dfa(tmp_path):
    """Beyond star-free: an even number of 0s and of 1s, two parities at once. The signed
    Mamba's formal default (two layers) learns it and the 4-state minimal DFA is
    extracted; one layer did not (0.856 test accuracy, 21 states)."""
    from stateseer.abstraction.automata.dfa import extract_dfa
    from stateseer.core.traces import Traces
    from stateseer.rnn_models.engine import record_run
    from stateseer.rnn_models.formal import GRAMMARS

    run = train_run(TrainConfig(dataset="tomita5", arch="mamba",
                                arch_options={"gate": "signed"}), tmp_path / "t5",
                    progress=False)
    assert run.config["model"]["layers"] == 2
    assert run.metrics()["test_accuracy"] >= 0.99
    record_run(run, splits=("train", "test"))
    dfa = extract_dfa(Traces(run.traces_dir), grammar=GRAMMARS["tomita5"])
    assert dfa.n_states == 4 and dfa.report["minimal_size_match"]
    assert dfa.report["grammar_agreement_le12"] == 1.0
