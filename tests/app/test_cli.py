"""The ``stateseer`` command line: commands work, errors are one clear line."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stateseer.app.cli.main import main
from stateseer.core.errors import StateseerError


def test_train_and_record_from_the_command_line(tmp_path, capsys):
    run = tmp_path / "t6"
    assert main(["train", "--dataset", "tomita6", "--arch", "gru", "--out", str(run),
                 "--quiet"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["test_accuracy"] == 1.0
    assert main(["record", str(run), "--splits", "test"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["splits"]["test"]["accuracy"] == 1.0
    assert (run / "traces" / "test" / "shards" / "00000" / "hidden.npy").exists()


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
    out = subprocess.run([sys.executable, "-m", "stateseer.app.cli", "--help"], capture_output=True,
                         text=True, check=True, timeout=60)
    for cmd in ("train", "record"):
        assert cmd in out.stdout
    probe = "import sys, stateseer.app.cli; print('torch' in sys.modules, 'dash' in sys.modules)"
    res = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True, timeout=60)
    assert res.stdout.split() == ["False", "False"]


def test_cli_force_and_index(analysed_run, copy_run, capsys):
    from stateseer.app.cli.main import main

    run = copy_run(analysed_run)
    assert main(["force", str(run)]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert 0 <= out["forcing_agreement"] <= 1 and out["n_inputs"] > 0
    assert main(["index", str(run)]) == 0
    assert (run / "index" / "train.contexts.npz").exists()


def test_abstract_keeps_its_result_when_forcing_is_impossible(analysed_run, copy_run,
                                                              monkeypatch, capsys):
    """A run of a user's own model cannot be forced by the CLI; the abstraction stays and
    the reason is one line on stderr."""
    import stateseer.app.cli.main as cli
    import stateseer.app.workflows.forcing as forcing

    def refuse(run, split="test", **_):
        raise StateseerError("state forcing needs a stateseer RNNClassifier")

    monkeypatch.setattr(forcing, "measure_forcing", refuse)
    run = copy_run(analysed_run)
    assert cli.main(["abstract", str(run), "--states", "6", "--no-index"]) == 0
    captured = capsys.readouterr()
    assert "forcing skipped" in captured.err
    assert json.loads(captured.out.strip().splitlines()[-1])["n_states"] == 6


def test_cli_compare_writes_the_matching_and_changed_inputs(analysed_run, tmp_path, capsys):
    from stateseer.abstraction.pipeline import abstract_run
    from stateseer.app.cli.main import main

    other = tmp_path / "other"
    shutil.copytree(analysed_run, other)
    abstract_run(other, n_states=7, random_state=1)
    out = tmp_path / "cmp.json"
    assert main(["compare", str(analysed_run), str(other), "--out", str(out)]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    doc = json.loads(out.read_text())
    assert doc["format"] == "stateseer.comparison" and doc["summary"] == summary
    assert len(doc["matching"]) == json.loads(
        (analysed_run / "abstraction" / "fsm.json").read_text())["states"].__len__()
    assert all(r["n_diff"] > 0 or r["prediction_a"] != r["prediction_b"]
               for r in doc["changed"])
    assert len(doc["changed"]) == summary["path_changed"]  # same model: paths only
    assert main(["compare", str(analysed_run), str(other), "--out", str(out)]) == 2
    assert "--force" in capsys.readouterr().err


# -- bad input: one line, exit status 2, no traceback -------------------------------------
def _one_line_error(capsys, rc: int) -> str:
    err = capsys.readouterr().err
    assert rc == 2, err
    assert "Traceback" not in err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("stateseer: error: "), err
    return lines[0]


@pytest.mark.parametrize(
    "argv,needle",
    [
        (["train", "--dataset", "tomita3", "--out", "{tmp}/x", "--lr", "nan"], "finite"),
        (["train", "--dataset", "tomita3", "--out", "{tmp}/x", "--lr", "-1"], "greater than 0"),
        (["train", "--dataset", "tomita3", "--out", "{tmp}/x", "--dropout", "2"], "[0, 1)"),
        (["train", "--dataset", "tomita3", "--out", "{tmp}/x", "--seed", "-1"], "seed"),
        (["train", "--dataset", "tomita3", "--out", "{tmp}/x", "--epochs", "0"], "at least 1"),
        (["train", "--dataset", "tomita3", "--out", "{tmp}/x", "--arch", "lstmx"],
         "invalid choice"),
        (["serve", "{tmp}/r", "--port", "99999"], "between 1 and 65535"),
        (["study", "s.json", "--port", "0"], "between 1 and 65535"),
        (["abstract", "{tmp}/r", "--method", "dbscan"], "invalid choice"),
        (["abstract", "{tmp}/r", "--states", "many"], "not an integer"),
        (["sweep", "{tmp}/r", "--candidates", "4,x"], "not an integer"),
        (["export", "{tmp}/r", "--format", "xlsx", "--out", "{tmp}/o"], "invalid choice"),
        (["nonsense"], "invalid choice"),
    ],
)
def test_bad_option_values_are_one_line(tmp_path, capsys, argv, needle):
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    line = _one_line_error(capsys, main(argv))
    assert needle in line and "--help" in line
    assert not (tmp_path / "x").exists()


def test_train_refuses_an_unwritable_out_before_training(tmp_path, capsys, monkeypatch):
    import stateseer.rnn_models.train as train

    def never(*a, **kw):
        raise AssertionError("training started")

    monkeypatch.setattr(train, "train_run", never)
    file = tmp_path / "file"
    file.write_text("x")
    for out, needle in ((file, "is a file"), (file / "run", "is a file, not a directory")):
        line = _one_line_error(capsys, main(["train", "--dataset", "tomita3", "--out",
                                             str(out), "--quiet"]))
        assert needle in line and "--out" in line


def test_debug_only_on_loopback(tmp_path, capsys, monkeypatch):
    import stateseer.app.main

    served = []

    class FakeApp:
        def run(self, **kw):
            served.append(kw)

    made = []
    monkeypatch.setattr(stateseer.app.main, "create_app",
                        lambda run, **kw: made.append(kw) or FakeApp())
    line = _one_line_error(capsys, main(["serve", str(tmp_path), "--host", "0.0.0.0",
                                         "--debug"]))
    assert "--debug" in line and "127.0.0.1" in line and not served
    assert main(["serve", str(tmp_path), "--debug"]) == 0  # loopback: allowed
    assert served[-1]["debug"] is True
    assert main(["serve", str(tmp_path), "--host", "0.0.0.0"]) == 0
    err = capsys.readouterr().err
    warn = [ln for ln in err.splitlines() if "warning" in ln]
    assert len(warn) == 1 and "0.0.0.0" in warn[0]
    assert main(["serve", str(tmp_path), "--host", "::1"]) == 0
    assert "warning" not in capsys.readouterr().err
    assert made[-1]["bind_host"] == "::1" and made[-1]["allowed_hosts"] is None


def test_study_warns_when_bound_beyond_loopback(capsys, monkeypatch):
    import stateseer.app.study.server as server

    monkeypatch.setattr(server, "serve_study", lambda *a, **kw: 0)
    assert main(["study", "s.json", "--host", "192.168.1.5", "--admin-token", "t" * 32]) == 0
    err = capsys.readouterr().err
    assert "warning" in err and "admin token" in err and err.count("\n") == 1
    assert main(["study", "s.json"]) == 0
    assert capsys.readouterr().err == ""


def test_unexpected_loader_failures_are_one_line(tmp_path, capsys, monkeypatch):
    import stateseer.rnn_models.record as record

    def broken(*a, **kw):
        raise ValueError("cannot reshape array of size 7 into shape (3,)\nmore detail")

    monkeypatch.setattr(record, "record_in_process", broken)
    line = _one_line_error(capsys, main(["record", str(tmp_path)]))
    assert "ValueError: cannot reshape" in line and "more detail" not in line


def test_every_help_shows_its_defaults(capsys):
    from stateseer.app.cli.main import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    for name, p in sub.choices.items():
        text = " ".join(p.format_help().split())
        for action in p._actions:
            if action.option_strings and action.default not in (None, False, "==SUPPRESS=="):
                shown = " ".join(f"(default: {action.default})".split())
                assert shown in text, (name, action.dest)
            elif action.option_strings and action.default is None and action.help:
                assert "default" in action.help or action.required or \
                    action.dest in ("help",), (name, action.dest)  # says what None means


def test_compare_says_which_input_differs(analysed_run, copy_run, capsys):
    other = copy_run(analysed_run)
    texts = other / "traces" / "test" / "shards" / "00000" / "texts.json"
    if not texts.exists():
        pytest.skip("traces store texts elsewhere")
    data = json.loads(texts.read_text())
    data[2] = "an input of another data set"
    texts.write_text(json.dumps(data))
    line = _one_line_error(capsys, main(["compare", str(analysed_run), str(other)]))
    assert "input 2 is" in line and "'an input of another data set'" in line


# -- sweep and --states auto --------------------------------------------------------------
def test_sweep_writes_json_png_html_and_a_table(explored_run, tmp_path, capsys):
    out = tmp_path / "sw"
    assert main(["sweep", str(explored_run), "--candidates", "3,6", "--out", str(out)]) == 0
    stdout = capsys.readouterr().out
    assert "simulation fidelity" in stdout and json.loads(stdout.splitlines()[-1])["written"]
    pts = json.loads((out / "sweep.json").read_text())
    assert [p["n_states"] for p in pts] == [3, 6]
    for p in pts:
        lo, hi = p["simulation_fidelity_ci"]
        assert lo <= p["simulation_fidelity"] <= hi
        assert 0 <= p["forcing_agreement"] <= 1 and p["seconds"] >= 0
    assert (out / "sweep.png").read_bytes()[:4] == b"\x89PNG"
    assert "plotly" in (out / "sweep.html").read_text()[:5_000_000]


def test_abstract_says_when_the_states_are_too_many_for_the_data(explored_run, copy_run,
                                                                 capsys, monkeypatch):
    """A count that leaves fewer than MIN_STEPS_PER_STATE training steps per state is
    fitted, with one line saying so and the count to ask for instead. (The threshold is
    raised so that 12 states cross it: thousands of states would take a minute to fit;
    ``size_notes``' own doctests check it at its real value.)"""
    import stateseer.app.workflows.abstract as abstract_workflow

    run = copy_run(explored_run)
    steps = json.loads((run / "traces" / "meta.json").read_text())["splits"]["train"]["n_steps"]
    least = steps // 9
    monkeypatch.setattr(abstract_workflow, "MIN_STEPS_PER_STATE", least)
    assert main(["abstract", str(run), "--states", "12", "--no-forcing", "--no-index"]) == 0
    err = capsys.readouterr().err
    assert f"for {steps:,} training steps" in err
    assert f"ask for at most {steps // least}" in err
    assert main(["abstract", str(run), "--states", "6", "--no-forcing", "--no-index"]) == 0
    assert "training steps" not in capsys.readouterr().err


def test_abstract_auto_stays_under_its_cap_and_says_why(explored_run, copy_run, capsys):
    run = copy_run(explored_run)
    assert main(["abstract", str(run), "--states", "auto", "--auto-cap", "6",
                 "--no-forcing", "--no-index"]) == 0
    captured = capsys.readouterr()
    out = json.loads(captured.out.strip().splitlines()[-1])
    assert out["n_states"] <= 6 and out["auto"]["cap"] == 6
    assert "--states auto chose" in captured.err and "cap 6" in captured.err
    m = json.loads((run / "metrics.json").read_text())["abstraction"]
    assert m["auto"]["curve"] and max(c["n_states"] for c in m["auto"]["curve"]) == 6


# -- fuzz: data-set files and run directories ---------------------------------------------
def _run_cli(argv: list[str], capsys) -> tuple[int, str]:
    rc = main(argv)
    err = capsys.readouterr().err
    return rc, err


def _assert_clean(rc: int, err: str) -> None:
    assert "Traceback" not in err, err
    if rc != 0:
        assert rc == 2, err
        errors = [ln for ln in err.splitlines() if ln.startswith("stateseer: error: ")]
        assert len(errors) == 1, err
        # every loader wraps its own failures: the CLI's catch-all line never shows
        assert "unexpected input" not in errors[0], errors[0]


_FUZZ = settings(max_examples=25, deadline=None, derandomize=True,
                 suppress_health_check=[HealthCheck.function_scoped_fixture,
                                        HealthCheck.too_slow])
_cell = st.one_of(st.text(max_size=12), st.sampled_from(["", "0", "1", "pos", "neg", "\ud800",
                                                          "=1+1", "a,b", '"q"', "\x00"]))


@_FUZZ
@given(kind=st.sampled_from(["csv", "jsonl"]),
       header=st.lists(st.sampled_from(["text", "label", "split", "txt", "", "text "]),
                       min_size=0, max_size=4),
       rows=st.lists(st.lists(_cell, min_size=0, max_size=4), max_size=12),
       raw=st.one_of(st.none(), st.binary(max_size=64)),
       cols=st.tuples(st.sampled_from(["text", "txt", "label", " "]),
                      st.sampled_from(["label", "text", "split", "y"])))
def test_fuzz_dataset_files_never_traceback(tmp_path, capsys, kind, header, rows, raw, cols):
    import csv as _csv
    import io
    import uuid

    d = tmp_path / uuid.uuid4().hex
    d.mkdir()
    path = d / f"data.{kind}"
    if raw is not None:
        path.write_bytes(raw)
    elif kind == "csv":
        buf = io.StringIO()
        w = _csv.writer(buf)
        w.writerow(header)
        w.writerows(rows)
        path.write_text(buf.getvalue(), encoding="utf-8", errors="surrogatepass")
    else:
        lines = [json.dumps(dict(zip(header, r, strict=False))) for r in rows]
        path.write_text("\n".join(lines), encoding="utf-8", errors="surrogatepass")
    rc, err = _run_cli(["train", "--dataset", f"{kind}:{path}", "--out", str(d / "run"),
                        "--text-col", cols[0], "--label-col", cols[1], "--epochs", "1",
                        "--hidden", "4", "--embed", "4", "--quiet"], capsys)
    _assert_clean(rc, err)


_RUN_FILES = ["config.json", "metrics.json", "vocab.json", "model.pt", "traces/meta.json",
              "traces/surface.json", "traces/initial_hidden.npy",
              "traces/test/shards/00000/hidden.npy", "traces/test/shards/00000/texts.json",
              "traces/train/shards/00000/hidden.npy", "abstraction/meta.json",
              "abstraction/fsm.json", "abstraction/patterns.json",
              "abstraction/abstractor.npz", "abstraction/test.states.npy",
              "abstraction/train.states.npy", "abstraction/centroids.npy",
              "index/train.contexts.json", "index/train.contexts.npz"]
_DAMAGE = st.sampled_from(["delete", "empty", "garbage", "json-list", "truncate"])
_COMMANDS = [["force"], ["index"], ["export", "--format", "json", "--out", "{d}/fsm.json"],
             ["export", "--format", "traces-csv", "--out", "{d}/t.csv"],
             ["abstract", "--states", "4", "--no-index"], ["sweep", "--candidates", "3",
                                                           "--out", "{d}/sw"],
             ["record", "--splits", "test"], ["compare", "{src}", "--out", "{d}/c.json"]]


@pytest.fixture(scope="module")
def fuzz_source(tmp_path_factory, analysed_run) -> Path:
    return analysed_run


@_FUZZ
@given(target=st.sampled_from(_RUN_FILES), damage=_DAMAGE,
       command=st.sampled_from(_COMMANDS), seed=st.integers(0, 2**16))
def test_fuzz_damaged_run_directories_never_traceback(tmp_path, capsys, fuzz_source, target,
                                                      damage, command, seed):
    import uuid

    d = tmp_path / uuid.uuid4().hex
    run = d / "run"
    shutil.copytree(fuzz_source, run)
    f = run / target
    if f.exists():
        data = f.read_bytes()
        if damage == "delete":
            f.unlink()
        elif damage == "empty":
            f.write_bytes(b"")
        elif damage == "garbage":
            f.write_bytes(bytes((seed * 7 + i * 13) % 256 for i in range(64)))
        elif damage == "json-list":
            f.write_text("[1, 2, 3]")
        else:
            f.write_bytes(data[: max(1, len(data) // 3)])
    argv = [command[0], str(run), *[a.replace("{d}", str(d)).replace("{src}", str(fuzz_source))
                                    for a in command[1:]]]
    rc, err = _run_cli(argv, capsys)
    _assert_clean(rc, err)


@pytest.mark.parametrize("target,damage,command", [
    ("abstraction/centroids.npy", b"", ["force"]),
    ("index/train.contexts.npz", b"", ["index"]),
    ("index/train.contexts.npz", b"PK\x03\x04 cut short", ["index"])])
def test_empty_or_cut_numpy_files_are_recomputed_not_unexpected(tmp_path, capsys, fuzz_source,
                                                                 target, damage, command):
    """What the exhaustive damage sweep found: np.load's EOFError and BadZipFile escaped
    the loaders (one line only by the CLI's catch-all); the files are now rebuilt."""
    run = tmp_path / "run"
    shutil.copytree(fuzz_source, run)
    (run / target).write_bytes(damage)
    rc, err = _run_cli([command[0], str(run)], capsys)
    assert rc == 0 and "unexpected" not in err, err
    assert (run / target).stat().st_size > 100  # written again, whole


def test_allowed_hosts_on_every_command_that_serves(capsys):
    from stateseer.app.cli.main import build_parser

    parser = build_parser()
    for argv in (["serve", "runs/x"], ["demo"], ["study", "study.json"]):
        args = parser.parse_args([*argv, "--allowed-hosts", "a.example, b.example"])
        assert args.allowed_hosts == ["a.example", "b.example"]
        assert parser.parse_args(argv).allowed_hosts is None  # then $STATESEER_ALLOWED_HOSTS
    assert main(["serve", "runs/x", "--allowed-hosts", " , "]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "host names separated by commas" in err


def test_export_says_what_a_drawing_left_out(analysed_run, tmp_path, capsys):
    from stateseer.app.cli.main import main

    assert main(["export", str(analysed_run), "--format", "dot", "--out",
                 str(tmp_path / "a.dot")]) == 0
    err = capsys.readouterr().err
    assert "of the FSM's" in err and "--top-k 0 draws every edge" in err
    assert main(["export", str(analysed_run), "--format", "dot", "--top-k", "0", "--out",
                 str(tmp_path / "b.dot")]) == 0
    assert "of the FSM's" not in capsys.readouterr().err
    assert (tmp_path / "b.dot").read_text().count("->") > \
        (tmp_path / "a.dot").read_text().count("->")


def test_states_means_one_thing_and_the_old_spellings_warn(capsys):
    """``--states`` is a count (or auto) everywhere; sweep's list is ``--candidates``,
    extract-dfa's cap ``--merge-to``; their old ``--states`` still parses, with a warning."""
    import warnings

    from stateseer.app.cli.main import build_parser
    from stateseer.app.cli.options import RenamedOptionWarning

    p = build_parser()
    assert p.parse_args(["demo", "--states", "auto"]).states == "auto"
    assert p.parse_args(["abstract", "r", "--states", "12"]).states == 12
    assert p.parse_args(["sweep", "r", "--candidates", "8,4"]).candidates == [4, 8]
    assert p.parse_args(["extract-dfa", "r", "--merge-to", "5"]).merge_to == 5
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert p.parse_args(["sweep", "r", "--states", "6,3"]).candidates == [3, 6]
        assert p.parse_args(["extract-dfa", "r", "--states", "7"]).merge_to == 7
    said = [str(w.message) for w in caught if issubclass(w.category, RenamedOptionWarning)]
    assert len(said) == 2 and "--candidates" in said[0] and "--merge-to" in said[1]
    assert "--states" not in p._subparsers._group_actions[0].choices["sweep"].format_help()


# -- #53: endless and odd files, damaged sizes, weights that diverged, bounds ----------------
def _cli_line(args: list[str], timeout: int = 120) -> str:
    """Run the command in a child (a hang fails here instead of blocking the suite) and
    return its one stderr line."""
    done = subprocess.run([sys.executable, "-m", "stateseer.app.cli", *args],
                          capture_output=True, text=True, timeout=timeout)
    err = done.stderr.strip()
    assert done.returncode == 2 and err.count("\n") == 0, err
    return err


@pytest.mark.parametrize("name", ["vocab.json", "model.pt"])
def test_a_run_file_pointing_at_an_endless_device_is_refused(tomita_run, copy_run, name):
    run = copy_run(tomita_run)
    (run / name).unlink()
    (run / name).symlink_to("/dev/zero")
    err = _cli_line(["record", str(run)])
    assert "not a regular file" in err and name in err


def test_weights_that_diverged_are_refused_at_record_naming_the_tensor(tomita_run, copy_run):
    import torch

    run = copy_run(tomita_run)
    state = torch.load(run / "model.pt", weights_only=True)
    name = next(k for k, v in state.items() if v.is_floating_point())
    state[name][0] = float("nan")
    torch.save(state, run / "model.pt")
    err = _cli_line(["record", str(run)])
    assert "NaN or infinite" in err and name in err and not (run / "traces").exists()


def test_config_sizes_out_of_range_are_refused_before_anything_is_allocated(tomita_run,
                                                                           copy_run):
    run = copy_run(tomita_run)
    cfg = json.loads((run / "config.json").read_text())
    for key, value, needle in (("hidden", 10**9, "hidden is 1000000000"),
                               ("layers", -3, "layers is -3"),
                               ("embed", "wide", "embed is wide")):
        (run / "config.json").write_text(json.dumps(
            {**cfg, "model": {**cfg["model"], key: value}}))
        assert needle in _cli_line(["record", str(run)])


def test_seeds_are_bounded_and_control_characters_are_escaped(tmp_path, capsys):
    err = _cli_line(["repair", str(tmp_path), "--finding", "1", "--action", "drop",
                     "--out", str(tmp_path / "x"), "--seeds", "1000"])
    assert "--seeds" in err and "at most" in err
    code = main(["train", "--dataset", "csv:/no/such\x1b[31mfile.csv", "--out",
                 str(tmp_path / "r")])
    line = capsys.readouterr().err.strip()
    assert code == 2 and "\x1b" not in line and "\\x1b[31m" in line, line


def test_class_colours_are_set_checked_drawn_and_cleared(explored_tomita, copy_run, tmp_path,
                                                         capsys):
    """#53: ``--colors`` on train/create, ``stateseer colors``; the run's colours reach the
    exported drawing and the explorer's views."""
    from stateseer.app.explorer.views.diagram import diagram_elements
    from stateseer.app.explorer.views.table import column_widths
    from stateseer.app.workflows.runview import RunView

    run = copy_run(explored_tomita)
    assert main(["colors", str(run), "accept=#00aa00,reject=#aa0000"]) == 0
    assert json.loads(capsys.readouterr().out)["colors"] == {"accept": "#00aa00",
                                                             "reject": "#aa0000"}
    rv = RunView(run)
    els = diagram_elements(rv.fsm, positions=rv.positions)
    drawn = {e["data"]["color"] for e in els if "color" in e.get("data", {})}
    assert {"#00aa00", "#aa0000"} & drawn
    dot = tmp_path / "fsm.dot"
    assert main(["export", str(run), "--format", "dot", "--out", str(dot)]) == 0
    assert "#00aa00" in dot.read_text() or "#aa0000" in dot.read_text()
    capsys.readouterr()
    for bad, needle in ((["colors", str(run), "maybe=#00aa00"], "no class 'maybe'"),
                        (["colors", str(run), "accept=green"], "not NAME=#rrggbb"),
                        (["colors", str(run)], "--clear")):
        assert main(bad) == 2
        err = capsys.readouterr().err.strip()
        assert needle in err and err.count("\n") == 0, err
    assert main(["colors", str(run), "--clear"]) == 0
    assert "colors" not in json.loads((run / "config.json").read_text())
    widths = {c["if"]["column_id"]: c["width"] for c in column_widths(["a" * 30, "b"])}
    assert widths["label"] == widths["prediction"] == "33ch"


def test_an_option_a_command_does_not_take_points_at_that_commands_help(tmp_path, capsys):
    assert main(["record", str(tmp_path), "--states", "5"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == ("stateseer: error: unrecognized arguments: --states 5 (see `stateseer "
                   "record --help`)")


def test_extract_dfa_on_a_text_run_fits_in_memory_and_says_it_approximates(explored_run,
                                                                          copy_run, capsys):
    """A text run's alphabet is its vocabulary (thousands of symbols): the prefix tree's
    child table and the merge signatures stay sparse or sampled (they were dense: a
    MemoryError of 29-50 GiB), and a budget that runs out is said in one line."""
    run = copy_run(explored_run)
    assert main(["extract-dfa", str(run), "--method", "refine", "--max-states", "12",
                 "--seconds", "5"]) == 0
    captured = capsys.readouterr()
    out = json.loads(captured.out.strip().splitlines()[-1])
    assert out["method"] == "refine" and out["n_states"] <= 12 and out["budget_exhausted"]
    assert "the budget ran out at" in captured.err and "read the FSM" in captured.err


def test_data_without_a_test_split_is_measured_on_val_everywhere(tmp_path, capsys):
    """Training says test accuracy is not measured (null in metrics.json, never NaN);
    forcing, sweep and compare measure the validation split; diagnose points to it."""
    from stateseer.testing import sentiment_csv

    data = sentiment_csv(tmp_path / "data.csv", sizes=(400, 100, 0))
    run = tmp_path / "run"
    assert main(["train", "--dataset", f"csv:{data}", "--arch", "gru", "--epochs", "1",
                 "--hidden", "16", "--embed", "16", "--out", str(run), "--quiet"]) == 0
    assert "no test inputs" in capsys.readouterr().err
    metrics = json.loads((run / "metrics.json").read_text(), parse_constant=lambda x: 1 / 0)
    assert metrics["test_accuracy"] is None
    assert main(["record", str(run)]) == 0
    assert main(["abstract", str(run), "--states", "4", "--no-index"]) == 0
    capsys.readouterr()
    forcing = json.loads((run / "metrics.json").read_text())["abstraction"]["forcing"]
    assert forcing["split"] == "val" and forcing["n_inputs"] == 100
    assert main(["sweep", str(run), "--candidates", "4", "--no-forcing"]) == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["split"] == "val"
    assert main(["compare", str(run), str(run)]) == 0
    assert json.loads(capsys.readouterr().out)["split"] == "val"
    assert main(["diagnose", str(run)]) == 2
    assert f"stateseer diagnose {run} --split val" in capsys.readouterr().err
