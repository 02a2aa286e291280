"""prepare_run (the demo's "trains or reuses") reuses every step that is up to date."""

from __future__ import annotations


def test_prepare_reuses_an_analysed_run(copy_run, analysed_run):
    from stateseer.app.workflows.diagnose import load_findings
    from stateseer.app.workflows.prepare import prepare_run

    run = copy_run(analysed_run)
    lines: list[str] = []
    prepare_run(run, n_states=12, log=lines.append)
    text = "\n".join(lines)
    assert "reusing the model" in text
    assert not any(ln.startswith(("recording", "abstracting", "training ")) for ln in lines)
    assert "simulation fidelity" in lines[-1]
    # the explorer's first tab has its findings, for this model; a second time reuses them
    assert "diagnosing the test split (the Findings tab)" in lines
    doc = load_findings(run)
    assert doc is not None and doc["split"] == "test"
    lines.clear()
    prepare_run(run, n_states=12, log=lines.append)
    assert not any(ln.startswith("diagnosing") for ln in lines)


def test_prepare_names_defaults_that_changed_since_the_run_was_trained(copy_run,
                                                                      analysed_run):
    """A run kept from before a change of the training defaults is reused, not retrained
    behind the user's back, and the demo says which defaults moved and how to follow."""
    import json

    from stateseer.app.workflows.prepare import prepare_run
    from stateseer.rnn_models.train import DEFAULTS

    run = copy_run(analysed_run)
    cfg_path = run / "config.json"
    cfg = json.loads(cfg_path.read_text())
    assert cfg["config"]["dropout"] is None  # the run took the default
    cfg["training"]["dropout"] = 0.125  # as if trained under an older default
    cfg_path.write_text(json.dumps(cfg))
    lines: list[str] = []
    prepare_run(run, n_states=12, log=lines.append)
    notes = [ln for ln in lines if ln.startswith("note:")]
    assert len(notes) == 1
    assert "dropout 0.125" in notes[0]
    assert f"today's default is dropout {DEFAULTS['text']['dropout']}" in notes[0]
    assert not any(ln.startswith(("recording", "abstracting", "training ")) for ln in lines)


def test_a_new_models_training_keeps_to_its_budget_and_says_so(tmp_path):
    """#53: the demo caps its training (a loaded machine took 9 minutes an epoch); when the
    budget ends it, the run is whole (the best model so far) and the log says so."""
    from stateseer.app.workflows.prepare import _train_or_reuse
    from stateseer.rnn_models.run import ModelRun

    run = ModelRun(tmp_path / "run")
    lines: list[str] = []
    _train_or_reuse(run, "tomita3", "gru", lines.append, max_seconds=1e-9)
    assert "at most 0 s" in lines[0]
    m = run.metrics()
    assert m["epochs_run"] == 1 and run.model_path.exists()
    assert any("budget ended the training after 1 epoch" in ln for ln in lines), lines

