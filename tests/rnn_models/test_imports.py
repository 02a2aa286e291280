"""The formats layer and the numpy-only modules load without torch, so ``abstraction`` can
read traces; the shims keep the old import paths working."""

from __future__ import annotations

import subprocess
import sys


def test_numpy_only_modules_do_not_import_torch():
    probe = (
        "import sys\n"
        "import rnn_models, rnn_models.formats, rnn_models.formats.automaton\n"
        "import rnn_models.traces, rnn_models.run, rnn_models.datasets\n"
        "import rnn_models.formal, rnn_models.tokenizers, rnn_models.errors\n"
        "print('torch' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True, timeout=60)
    assert out.stdout.strip() == "False"


def test_lazy_names_resolve():
    import rnn_models

    assert rnn_models.RNNClassifier.__name__ == "RNNClassifier"
    assert rnn_models.Traces.__module__ == "rnn_models.formats.traces"
    try:
        rnn_models.does_not_exist  # noqa: B018
    except AttributeError as exc:
        assert "does_not_exist" in str(exc)
    else:  # pragma: no cover
        raise AssertionError("unknown attribute did not raise")


def test_shims_reexport_the_same_objects():
    from rnn_models import errors, formal, formats, run, traces
    from rnn_models.formats import rundir

    assert errors.StateseerError is formats.StateseerError
    assert traces.Traces is formats.Traces
    assert formal.DFA is formats.DFA and formal.minimize is formats.minimize
    assert issubclass(run.Run, rundir.RunDir)
    assert run.atomic_write_text is formats.atomic_write_text
