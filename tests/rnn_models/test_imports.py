"""The numpy-only modules load without torch, so ``abstraction`` can read traces."""

from __future__ import annotations

import subprocess
import sys


def test_numpy_only_modules_do_not_import_torch():
    probe = (
        "import sys\n"
        "import rnn_models, rnn_models.traces, rnn_models.run, rnn_models.datasets\n"
        "import rnn_models.formal, rnn_models.tokenizers, rnn_models.errors\n"
        "print('torch' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True, timeout=60)
    assert out.stdout.strip() == "False"


def test_lazy_names_resolve():
    import rnn_models

    assert rnn_models.RNNClassifier.__name__ == "RNNClassifier"
    assert rnn_models.Traces.__module__ == "rnn_models.traces"
    try:
        rnn_models.does_not_exist  # noqa: B018
    except AttributeError as exc:
        assert "does_not_exist" in str(exc)
    else:  # pragma: no cover
        raise AssertionError("unknown attribute did not raise")
