"""prepare_run (the demo's "trains or reuses") reuses every step that is up to date."""

from __future__ import annotations


def test_prepare_reuses_an_analysed_run(copy_run, analysed_run):
    from app.workflows.prepare import prepare_run

    run = copy_run(analysed_run)
    lines: list[str] = []
    prepare_run(run, n_states=12, log=lines.append)
    text = "\n".join(lines)
    assert "reusing the model" in text
    assert not any(ln.startswith(("recording", "abstracting", "training ")) for ln in lines)
    assert "simulation fidelity" in lines[-1]
