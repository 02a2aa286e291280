"""The formats layer and the numpy-only modules load without torch, so ``abstraction`` can
read traces and ``import stateseer`` stays cheap."""

from __future__ import annotations

import subprocess
import sys


def test_numpy_only_modules_do_not_import_torch():
    probe = (
        "import sys\n"
        "import stateseer, stateseer.rnn_models, stateseer.rnn_models.formats\n"
        "import stateseer.rnn_models.formats.automaton, stateseer.rnn_models.run\n"
        "import stateseer.rnn_models.datasets, stateseer.rnn_models.formal\n"
        "import stateseer.rnn_models.tokenizers, stateseer.rnn_models.factory\n"
        "print('torch' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True, timeout=60)
    assert out.stdout.strip() == "False"


def test_the_formal_module_reexports_the_automaton_types():
    from stateseer.rnn_models import formal, formats

    assert formal.DFA is formats.DFA and formal.minimize is formats.minimize
