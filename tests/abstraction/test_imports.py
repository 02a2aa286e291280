"""``abstraction`` never imports torch or dash (DESIGN.md's one-way imports)."""

from __future__ import annotations

import subprocess
import sys


def test_abstraction_imports_neither_torch_nor_dash():
    probe = (
        "import sys\n"
        "import stateseer.abstraction, stateseer.abstraction.pipeline\n"
        "import stateseer.abstraction.dfa, stateseer.abstraction.abstractor\n"
        "import stateseer.abstraction.export, stateseer.abstraction.patterns\n"
        "import stateseer.abstraction.metrics, stateseer.abstraction.sharded\n"
        "print('torch' in sys.modules, 'dash' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True, timeout=120)
    assert out.stdout.split() == ["False", "False"]
