"""The engine: addresses, one-line errors, the in-process default that imports no Dask."""

from __future__ import annotations

import subprocess
import sys

import pytest

from stateseer.rnn_models.engine import (
    ClusterError,
    DaskEngine,
    SerialEngine,
    open_engine,
    parse_address,
    tree_reduce,
)
from tests.conftest import one_line


@pytest.mark.parametrize(("address", "want"), [
    (None, ("inprocess", None)), ("", ("inprocess", None)), ("local", ("local", None)),
    ("local:3", ("local", 3)), ("tcp://10.0.0.5:8786", ("tcp", "tcp://10.0.0.5:8786")),
])
def test_addresses_parse(address, want):
    assert parse_address(address) == want


@pytest.mark.parametrize("address", ["locl", "local:0", "local:x", "tcp://host",
                                     "tcp://host:70000", "127.0.0.1:8786"])
def test_a_bad_address_is_one_line_naming_the_forms(address):
    with pytest.raises(ClusterError) as e:
        parse_address(address)
    msg = one_line(e.value)
    assert "--cluster" in msg and ("local" in msg or "tcp://HOST:PORT" in msg)


def test_the_environment_sets_the_default(monkeypatch):
    monkeypatch.setenv("STATESEER_CLUSTER", "nonsense")
    with pytest.raises(ClusterError, match="STATESEER_CLUSTER"):
        open_engine(None)
    monkeypatch.setenv("STATESEER_CLUSTER", "")
    assert isinstance(open_engine(None), SerialEngine)


def test_an_unreachable_scheduler_is_one_line_naming_the_fix():
    with pytest.raises(ClusterError) as e:
        DaskEngine("tcp://127.0.0.1:9", timeout=2)
    msg = one_line(e.value)
    assert "dask scheduler" in msg and "dask worker" in msg


def test_the_cli_reports_a_bad_cluster_in_one_line(capsys, tmp_path):
    from stateseer.app.cli.main import main

    assert main(["index", str(tmp_path), "--cluster", "local:none"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("stateseer: error:") and "\n" not in err and "local:N" in err


def test_serial_map_keeps_order_and_tree_reduce_has_a_fixed_shape():
    assert SerialEngine().map(pow, [1, 2, 3], exp=2) == [1, 4, 9]
    assert tree_reduce(lambda a, b: f"({a}{b})", list("abcde")) == "(((ab)(cd))e)"
    assert SerialEngine().reduce(lambda a, b: a + b, [7]) == 7


def test_the_in_process_path_imports_no_dask(text_run, tmp_path):
    """A whole in-process recording and abstraction, and the CLI's import, load no Dask."""
    import shutil

    run = tmp_path / "run"
    shutil.copytree(text_run, run, ignore=shutil.ignore_patterns("traces*", "abstraction*"))
    code = (
        "import sys\n"
        "import stateseer.app.cli, stateseer.rnn_models.engine, stateseer.abstraction.sharded\n"
        "from stateseer.rnn_models.engine import record_run\n"
        "from stateseer.abstraction.pipeline import abstract_run\n"
        f"record_run({str(run)!r}, splits=['train', 'test'])\n"
        f"abstract_run({str(run)!r}, n_states=4, save=False)\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('dask', 'distributed'))\n"
        "assert not bad, bad\n"
        "print('ok')\n")
    env = {k: v for k, v in __import__("os").environ.items() if k != "STATESEER_CLUSTER"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, timeout=300)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]
