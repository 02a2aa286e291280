"""``abstraction`` never imports torch or dash (DESIGN.md's one-way imports)."""

from __future__ import annotations

import subprocess
import sys


def test_abstraction_imports_neither_torch_nor_dash():
    probe = (
        "import sys\n"
        "import abstraction, abstraction.pipeline, abstraction.dfa, abstraction.cluster\n"
        "import abstraction.export, abstraction.patterns, abstraction.metrics\n"
        "print('torch' in sys.modules, 'dash' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True, timeout=120)
    assert out.stdout.split() == ["False", "False"]
