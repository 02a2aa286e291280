"""The ``stateseer`` command line: commands work, errors are one clear line."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from app.cli import main


def test_train_and_record_from_the_command_line(tmp_path, capsys):
    run = tmp_path / "t6"
    assert main(["train", "--dataset", "tomita6", "--arch", "gru", "--out", str(run),
                 "--quiet"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["test_accuracy"] == 1.0
    assert main(["record", str(run), "--splits", "test"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["splits"]["test"]["accuracy"] == 1.0
    assert (run / "traces" / "test" / "hidden.npy").exists()


@pytest.mark.parametrize(
    "argv,needle",
    [
        (["train", "--dataset", "imdb", "--out", "{tmp}/x"], "unknown data set 'imdb'"),
        (["train", "--dataset", "csv:{tmp}/nope.csv", "--out", "{tmp}/x"], "not found"),
        (["train", "--dataset", "csv:{tmp}/d.csv", "--text-col", "txt", "--out", "{tmp}/x"],
         "columns are: text, label — pass --text-col"),
        (["record", "{tmp}/no_run"], "not a stateseer run"),
    ],
)
def test_user_errors_are_one_line_without_traceback(tmp_path, capsys, argv, needle):
    (tmp_path / "d.csv").write_text("text,label\ngood,1\nbad,0\nfine,1\nawful,0\n")
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("stateseer: error: ")
    assert needle in err
    assert not (tmp_path / "x").exists()


def test_console_script_help_is_fast_and_lists_commands():
    out = subprocess.run([sys.executable, "-m", "app.cli", "--help"], capture_output=True,
                         text=True, check=True, timeout=60)
    for cmd in ("train", "record"):
        assert cmd in out.stdout
    probe = "import sys, app.cli; print('torch' in sys.modules, 'dash' in sys.modules)"
    res = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True, timeout=60)
    assert res.stdout.split() == ["False", "False"]
