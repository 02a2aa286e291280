"""`stateseer import-traces`: traces written with numpy alone become a run without a model."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest

from stateseer.app.cli.main import main
from stateseer.core.traces import Traces


def write_import_dir(run: Path, out: Path, *, proba: bool = True) -> Path:
    """What a TensorFlow or JAX user writes (numpy and json only), here taken from the
    files of a recorded run."""
    tr = run / "traces"
    meta = json.loads((tr / "meta.json").read_text())
    surface = json.loads((tr / "surface.json").read_text(encoding="utf-8"))
    out.mkdir(parents=True)
    (out / "manifest.json").write_text(json.dumps(
        {"classes": meta["classes"], "splits": list(meta["splits"]), "layer": meta["layer"],
         "description": "exported from another framework"}))
    np.save(out / "initial.npy", np.load(tr / "initial_hidden.npy"))
    if proba:
        np.save(out / "initial_proba.npy", np.load(tr / "initial_proba.npy"))
    vocab = json.loads((run / "vocab.json").read_text(encoding="utf-8"))["tokens"]
    (out / "vocab.json").write_text(json.dumps(vocab))
    traces = Traces(tr)
    for split in meta["splits"]:
        d = out / split
        d.mkdir()
        t = traces[split]
        off, sid = np.asarray(t.offsets), np.asarray(t.surface_ids)
        np.save(d / "hidden.npy", np.asarray(t.hidden))
        np.save(d / "offsets.npy", off)
        np.save(d / "labels.npy", np.asarray(t.labels))
        if proba:
            np.save(d / "proba.npy", np.asarray(t.proba))
        tokens = [[surface[j] for j in sid[a:b]] for a, b in itertools.pairwise(off)]
        (d / "tokens.json").write_text(json.dumps(tokens))
        (d / "texts.json").write_text(json.dumps(list(t.texts)))
        np.save(d / "rows.npy", np.asarray(t.rows))  # the user's own ids of the inputs
    return out


@pytest.fixture(scope="module")
def imported(tmp_path_factory, explored_run):
    """The explored run's traces, written by the numpy-only writer, imported, abstracted
    with the explored run's parameters (12 states) and exported."""
    base = tmp_path_factory.mktemp("imported")
    src = write_import_dir(explored_run, base / "from_tf")
    run = base / "run"
    assert main(["import-traces", str(run), "--from", str(src)]) == 0
    assert main(["abstract", str(run), "--states", "12", "--no-index"]) == 0
    assert main(["export", str(run), "--format", "json", "--out", str(base / "fsm.json")]) == 0
    return run, base


def test_the_imported_run_gives_the_same_fsm_as_the_original(imported, explored_run):
    run, base = imported
    cfg = json.loads((run / "config.json").read_text())
    assert cfg["model"]["kind"] == "imported" and not (run / "model.pt").exists()
    original = json.loads((explored_run / "abstraction" / "fsm.json").read_text())
    exported = json.loads((base / "fsm.json").read_text())
    assert exported["classes"] == original["classes"]
    assert exported["states"] == original["states"]
    assert exported["transitions"] == original["transitions"]
    m = json.loads((run / "metrics.json").read_text())
    om = json.loads((explored_run / "metrics.json").read_text())
    assert m["abstraction"]["simulation_fidelity"] == om["abstraction"]["simulation_fidelity"]
    # the inputs keep the ids the user gave them: the same as the created run's
    mine, theirs = Traces(run / "traces"), Traces(explored_run / "traces")
    for split in theirs.split_names:
        assert np.asarray(mine[split].rows).tolist() == np.asarray(theirs[split].rows).tolist()


def test_model_free_commands_work_and_model_only_ones_say_why(imported, explored_run,
                                                              capsys):
    run, _ = imported
    assert main(["index", str(run)]) == 0
    capsys.readouterr()
    assert main(["compare", str(run), str(explored_run)]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["path_changed"] == 0 and summary["prediction_changed"] == 0
    assert main(["force", str(run)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "import-traces" in err and "stateseer create" in err
    from stateseer.app.explorer.context import ExplorerContext

    ctx = ExplorerContext.load(run)
    with pytest.raises(Exception, match="typed input, attribution and state forcing"):
        ctx.models.load()
    # the page says it once, in its header; each view that needs the model says only
    # that it does
    import json as _json

    from stateseer.app.explorer import ids
    from stateseer.app.explorer.page import NO_MODEL, NO_MODEL_NOTE, header
    from stateseer.app.explorer.view import Trigger
    from stateseer.app.explorer.views import attribution, core, forcing

    text = _json.dumps(header(ctx).to_plotly_json(), default=str)
    assert text.count(NO_MODEL_NOTE) == 1
    sel = {"split": "test", "state": None, "row": 0, "pattern": None}
    active = core.active_store(ctx.data.trace_instance("test", 0))
    shown = [attribution.attribution(ctx, active, "ig", None, "token", None, 1, "pad")[1],
             forcing.force(ctx, Trigger(ids.FORCE_STEP, 1), 0, 1, None, active, 0)[1],
             core.choose_trace(ctx, Trigger(ids.TRACE_BTN, 1), sel, 1, None, "a text",
                               False, None)[1]]
    assert shown == [NO_MODEL] * 3 and NO_MODEL_NOTE not in " ".join(shown)


def test_without_probabilities_there_are_no_predictions(tmp_path, explored_run, capsys):
    src = write_import_dir(explored_run, tmp_path / "src", proba=False)
    run = tmp_path / "run"
    assert main(["import-traces", str(run), "--from", str(src)]) == 0
    assert "no predictions" in capsys.readouterr().err
    assert main(["abstract", str(run), "--states", "6", "--no-index"]) == 0
    captured = capsys.readouterr()
    out = json.loads(captured.out)
    assert out["predictions"] is False and out["label_fidelity"] is None
    assert "--features pca" in captured.err
    info = json.loads((run / "abstraction" / "meta.json").read_text())["info"]
    assert info["features"] == "pca" and info["split_by_prediction"] is False
    assert not (run / "metrics.json").exists() or \
        "test_accuracy" not in json.loads((run / "metrics.json").read_text())
    # nothing read from the stand-in uniform predictions is written or shown as a figure
    a = json.loads((run / "metrics.json").read_text())["abstraction"]
    assert a["predictions"] is False
    assert all(a[k] is None for k in a if "fidelity" in k or k in (
        "simulation_chance", "simulation_kappa", "state_purity"))
    from stateseer.app.explorer.page import header
    from stateseer.app.explorer.views.table import COLUMNS, columns_of
    from stateseer.app.workflows.runview import RunView

    view = RunView(run)
    assert not view.has_predictions
    assert columns_of(view) == tuple(c for c in COLUMNS
                                     if c not in ("prediction", "correct", "confidence"))
    shown = [c.children for c in header(type("Ctx", (), {"data": view})()).children
             if "fidelity" in (getattr(c, "className", "") or "")]
    assert shown == [""]  # no figure is shown where there are no predictions
    from stateseer.app.explorer.views.chart import NO_PREDICTIONS_FIGURE, show_chart
    from stateseer.app.explorer.views.trace import trace_title

    ctx = type("Ctx", (), {"data": view})()
    title = str(trace_title(ctx, view.trace_instance("test", 0)))
    assert "label" in title and "predicted" not in title and "misclassified" not in title
    from stateseer.app.explorer.views.core import active_store

    assert show_chart(ctx, active_store(view.trace_instance("test", 0)), None) \
        is NO_PREDICTIONS_FIGURE
    assert main(["sweep", str(run), "--no-forcing"]) == 2
    assert "imported without probabilities" in capsys.readouterr().err


# -- every check, on a small synthetic folder ---------------------------------------------
def _valid(tmp_path: Path) -> Path:
    rng = np.random.default_rng(0)
    src = tmp_path / "src"
    src.mkdir()
    (src / "manifest.json").write_text(json.dumps({"classes": ["a", "b", "c"],
                                                   "splits": ["train", "test"]}))
    for split, n in (("train", 6), ("test", 3)):
        d = src / split
        d.mkdir()
        lengths = rng.integers(0, 5, n)
        lengths[0] = 3
        off = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        np.save(d / "hidden.npy", rng.normal(size=(off[-1], 4)).astype(np.float32))
        p = rng.random((off[-1], 3)).astype(np.float32)
        np.save(d / "proba.npy", p / p.sum(1, keepdims=True))
        np.save(d / "offsets.npy", off)
        np.save(d / "labels.npy", rng.integers(0, 3, n))
        (d / "tokens.json").write_text(json.dumps([["x"] * int(k) for k in lengths]))
        np.save(d / "rows.npy", np.arange(n) + (0 if split == "train" else 50))
    return src


def _set(path: Path, value) -> None:
    if path.suffix == ".npy":
        np.save(path, value)
    else:
        path.write_text(value if isinstance(value, str) else json.dumps(value))


BAD = [
    ("manifest.json", "not JSON", "is not valid UTF-8 JSON"),
    ("manifest.json", {"classes": ["a"], "splits": ["train"]}, "'classes' is"),
    ("manifest.json", {"classes": ["a", "a"], "splits": ["train"]}, "'classes' is"),
    ("manifest.json", {"classes": ["a", "b", "c"], "splits": ["test"]}, "train is required"),
    ("manifest.json", {"classes": ["a", "b", "c"], "splits": ["train", "dev"]}, "'splits' is"),
    ("manifest.json", {"classes": ["a", "b", "c"], "splits": ["train"], "layer": "top"},
     "'layer' is"),
    ("train/hidden.npy", np.zeros((9, 4), np.int32), "has dtype int32"),
    ("train/hidden.npy", np.zeros(9, np.float32), "expected 2"),
    ("train/hidden.npy", "nan", "NaN or infinite"),
    ("test/hidden.npy", "size5", "states of size 5"),
    ("train/offsets.npy", "start1", "must start with 0"),
    ("train/offsets.npy", "decrease", "decreases at index"),
    ("train/offsets.npy", "short", "but hidden.npy has"),
    ("train/offsets.npy", np.zeros(7, np.float64), "save integers"),
    ("train/tokens.json", [["x"]], "holds 1 inputs"),
    ("train/tokens.json", "one-more", "tokens but offsets.npy gives it"),
    ("train/tokens.json", {"not": "a list"}, "not a list of lists of strings"),
    ("train/labels.npy", np.array([0, 1, 2, 3, 0, 0]), "outside 0..2"),
    ("train/labels.npy", np.array([0, 1]), "expected (6,)"),
    ("train/labels.npy", np.zeros(6, np.float32), "save integers"),
    ("train/proba.npy", "wide", "expected"),
    ("train/proba.npy", "unnormalised", "not a probability distribution"),
    ("test/proba.npy", None, "has no proba.npy but other splits do"),
    ("train/texts.json", ["only one"], "is not a list of 6 strings"),
    ("initial.npy", np.zeros(5, np.float32), "expected (4,)"),
    ("train/rows.npy", np.array([0, 1, 2, 3, 4, 4]), "more than once"),
    ("test/rows.npy", np.array([0, 1, 2]), "more than once"),
    ("test/rows.npy", np.array([-1, 100, 101]), "negative"),
    ("train/rows.npy", np.zeros(3, np.int64), "expected (6,)"),
    ("test/rows.npy", None, "has no rows.npy but other splits do"),
    ("train/hidden.npy", None, "not found"),
    ("test", None, "not found"),
]


def _damage(src: Path, rel: str, value) -> None:
    path = src / rel
    if value is None:
        import shutil

        shutil.rmtree(path) if path.is_dir() else path.unlink()
        return
    if isinstance(value, str) and path.suffix == ".npy":
        arr = np.load(path)
        value = {
            "nan": lambda: np.where(np.arange(arr.size).reshape(arr.shape) == 5, np.nan,
                                    arr).astype(np.float32),
            "size5": lambda: np.zeros((arr.shape[0], 5), np.float32),
            "start1": lambda: arr + 1,
            "decrease": lambda: np.concatenate([[0, 3, 2], arr[3:]]),
            "short": lambda: np.concatenate([arr[:-1], [arr[-1] + 1]]),
            "wide": lambda: np.full((arr.shape[0], 4), 0.25, np.float32),
            "unnormalised": lambda: arr * 2,
        }[value]()
    elif isinstance(value, str) and value == "one-more":
        toks = json.loads(path.read_text())
        toks[0].append("x")
        value = toks
    _set(path, value)


@pytest.mark.parametrize("rel, value, words", BAD, ids=[f"{b[0]}:{b[2]}" for b in BAD])
def test_every_bad_input_is_one_line_naming_file_and_fix(tmp_path, capsys, rel, value, words):
    src = _valid(tmp_path)
    assert main(["import-traces", str(tmp_path / "ok"), "--from", str(src)]) == 0
    _damage(src, rel, value)
    capsys.readouterr()
    assert main(["import-traces", str(tmp_path / "bad"), "--from", str(src)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and words in err, err
    assert not (tmp_path / "bad" / "traces").exists()


def test_tokens_txt_and_defaults(tmp_path):
    from stateseer.core.imported import import_traces

    src = _valid(tmp_path)
    for split in ("train", "test"):
        toks = json.loads((src / split / "tokens.json").read_text())
        (src / split / "tokens.json").unlink()
        (src / split / "tokens.txt").write_text("".join(" ".join(t) + "\n" for t in toks))
    traces = import_traces(tmp_path / "run", src)
    assert traces.meta["proba"] is True and traces.initial_hidden.tolist() == [0, 0, 0, 0]
    test = traces["test"]
    assert test.tokens(0) == ["x", "x", "x"] and test.texts[0] == "x x x"
    empty = np.flatnonzero(test.lengths == 0)
    np.testing.assert_allclose(test.final_proba[empty], 1 / 3, rtol=1e-6)


def test_tokens_txt_read_in_blocks_makes_the_tokens_json_run(tmp_path, monkeypatch,
                                                             explored_run):
    """``tokens.txt`` is read a block of lines at a time (10M inputs' tokens as Python
    lists held about 12 GB): read in blocks of 7 lines, with float64 states written a
    block of rows at a time, the run's files are those of the same import given as
    ``tokens.json`` and float32, and a wrong line past the first block is still named."""
    from stateseer.core import atomic, imported

    monkeypatch.setattr(imported, "TOKEN_LINES", 7)
    monkeypatch.setattr(atomic.atomic_save_npy_rows, "__defaults__", (None, 5 * 4 * 64))
    src = write_import_dir(explored_run, tmp_path / "json")
    txt = write_import_dir(explored_run, tmp_path / "txt")
    for split in json.loads((txt / "manifest.json").read_text())["splits"]:
        d = txt / split
        toks = json.loads((d / "tokens.json").read_text())
        (d / "tokens.json").unlink()
        (d / "texts.json").unlink()  # the texts: the token lines, written from the file
        (d / "tokens.txt").write_text("".join(" ".join(t) + "\n" for t in toks))
        np.save(d / "hidden.npy", np.load(d / "hidden.npy").astype(np.float64))
    assert main(["import-traces", str(tmp_path / "a"), "--from", str(src)]) == 0
    assert main(["import-traces", str(tmp_path / "b"), "--from", str(txt)]) == 0
    a, b = Traces(tmp_path / "a" / "traces"), Traces(tmp_path / "b" / "traces")
    assert (tmp_path / "a" / "vocab.json").read_bytes() == \
        (tmp_path / "b" / "vocab.json").read_bytes()
    assert a.surface == b.surface and len(a.surface) > 20
    for split in a.split_names:
        for name in ("hidden", "proba", "token_ids", "surface_ids", "offsets", "final_proba"):
            np.testing.assert_array_equal(getattr(a[split], name), getattr(b[split], name))
        assert list(b[split].texts) == [" ".join(b[split].tokens(i))
                                  for i in range(b[split].n_inputs)]
    d = txt / "train"
    lines = (d / "tokens.txt").read_text().split("\n")
    lines[30] += " extra"  # the fifth block
    (d / "tokens.txt").write_text("\n".join(lines))
    with pytest.raises(imported.TraceError, match=r"input 30 has \d+ tokens but offsets"):
        imported.import_traces(tmp_path / "c", txt)
    assert not (tmp_path / "c" / "traces").exists()


def test_a_tokens_txt_changed_during_the_import_is_refused_whole(tmp_path, monkeypatch):
    """``tokens.txt`` is read again to write the texts: a file that changed in between
    (a line more) is refused in one line, and no run is left behind."""
    from stateseer.core import imported

    src = _valid(tmp_path)
    for split in ("train", "test"):
        toks = json.loads((src / split / "tokens.json").read_text())
        (src / split / "tokens.json").unlink()
        (src / split / "tokens.txt").write_text("".join(" ".join(t) + "\n" for t in toks))
    real = imported._write_split

    def grow_then_write(d, sp, *args):
        if sp.tokens_txt is not None:
            with open(sp.tokens_txt, "a", encoding="utf-8") as fh:
                fh.write("late line\n")
        return real(d, sp, *args)

    monkeypatch.setattr(imported, "_write_split", grow_then_write)
    with pytest.raises(imported.TraceError, match=r"now holds .* inputs") as e:
        imported.import_traces(tmp_path / "run", src)
    assert "\n" not in str(e.value)
    assert not (tmp_path / "run" / "traces").exists()
