"""The wheel, as a user installs it: one import name, everything it needs inside.

The wheel is built from the checkout's tracked files (what a clean clone holds) and
installed into a fresh virtualenv outside the repository, whose only other packages are the
dependencies (this environment's site-packages, read as a plain path: no editable finder,
no checkout on ``sys.path``). A small end-to-end script then trains a tiny Tomita model,
records, abstracts, exports DOT and builds the explorer, and checks that ``app``,
``abstraction`` and ``rnn_models`` cannot be imported there.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
import textwrap
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.slow

SCRIPT = textwrap.dedent('''
    import importlib.util, json, sys
    from pathlib import Path

    import stateseer
    from stateseer.testing import tomita1_csv

    here = Path.cwd()
    assert Path(stateseer.__file__).is_relative_to(Path(sys.prefix)), stateseer.__file__
    for name in ("app", "abstraction", "rnn_models", "core"):
        assert importlib.util.find_spec(name) is None, f"{name} is importable"
    cfg = stateseer.TrainConfig(dataset=f"csv:{tomita1_csv(here / 't1.csv')}", arch="gru",
                                epochs=1, embed=4, hidden=4, tokenizer="char")
    run = stateseer.train_run(cfg, here / "run", progress=False)
    stateseer.record_run(run)
    stateseer.abstract_run(run, n_states=4)
    out = stateseer.export_run(run, "dot", here / "fsm.dot")
    assert Path(out).read_text().startswith("digraph"), "not a DOT file"
    app = stateseer.create_app(run.path)
    assert app.layout is not None and app.server is not None
    print(json.dumps({"ok": True, "stateseer": stateseer.__file__}))
''')


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    src = tmp_path_factory.mktemp("clone")
    # what a clean clone of this commit holds (plus files not yet committed, locally)
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others",
                             "--exclude-standard"], cwd=ROOT, capture_output=True,
                            check=True).stdout.decode().split("\0")
    for rel in filter(None, listed):
        if (ROOT / rel).is_file():  # deleted but not yet committed: not in a clone
            (src / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / rel, src / rel)
    out = tmp_path_factory.mktemp("dist")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                    "--no-build-isolation", "-w", str(out), str(src)],
                   check=True, capture_output=True, timeout=300)
    (whl,) = out.glob("stateseer-*.whl")
    return whl


def test_the_wheel_holds_one_top_level_name_and_the_assets(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names}
    assert tops == {"stateseer", next(t for t in tops if t.endswith(".dist-info"))}, tops
    for needed in ("stateseer/__init__.py", "stateseer/py.typed",
                   "stateseer/app/cli/main.py", "stateseer/abstraction/automata/fsm.py",
                   "stateseer/core/traces.py",
                   "stateseer/app/study/study.js", "stateseer/app/assets/explorer.js"):
        assert needed in names, needed
    assert any(n.startswith("stateseer/app/assets/vendor/") for n in names)
    entry = zipfile.ZipFile(wheel).read(
        next(n for n in names if n.endswith("entry_points.txt"))).decode()
    assert "stateseer = stateseer.app.cli.main:main" in entry


def test_installed_wheel_runs_end_to_end_outside_the_repository(wheel, tmp_path):
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    py = env_dir / "bin" / "python"
    site = Path(subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()"
                                "['purelib'])"], capture_output=True, text=True,
                               check=True).stdout.strip())
    with zipfile.ZipFile(wheel) as z:  # what pip does for a pure wheel: unpack into purelib
        z.extractall(site)
    # the dependencies, as a plain path after the venv's own (a .pth line adds a path and
    # runs none of that directory's .pth files, so the checkout's editable finder stays off)
    (site / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    work = tmp_path / "work"
    work.mkdir()
    (work / "e2e.py").write_text(SCRIPT)
    out = subprocess.run([str(py), "-I", "e2e.py"], cwd=work, capture_output=True, text=True,
                         timeout=600, env={"OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin",
                                           "HOME": str(tmp_path)})
    assert out.returncode == 0, out.stderr[-3000:]
    assert str(env_dir) in out.stdout.strip().splitlines()[-1]
