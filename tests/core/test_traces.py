"""Sharded traces: the layout, whole-split reading, one shard alone, the manifest checks,
old single-file traces, temporary shards, recording from paths only and the CLI option."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from stateseer.core.errors import TraceError
from stateseer.core.traces import (
    ARRAYS,
    ShardedArray,
    Traces,
    open_shard,
    remove_tmp_shards,
    shard_layout,
)
from stateseer.rnn_models.record import ShardJob, record_in_process, record_job
from tests.conftest import one_line

SHARD = 1000  # Tomita 3: train 4,047 inputs -> 5 shards, val 500 -> 1, test 10,191 -> 11


@pytest.fixture(scope="module")
def pair(tomita_run, tmp_path_factory) -> tuple[Path, Path]:
    """The Tomita run recorded twice: one shard per split, and SHARD inputs per shard."""
    base = tmp_path_factory.mktemp("sharded")
    one, many = base / "one", base / "many"
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("STATESEER_SHARD_SIZE", raising=False)
        for dst, size in ((one, None), (many, SHARD)):
            shutil.copytree(tomita_run, dst, ignore=shutil.ignore_patterns("traces*",
                                                                           "abstraction"))
            record_in_process(dst, shard_size=size)
    return one, many


def _arrays_equal(a, b) -> None:
    for k in ARRAYS:
        x, y = np.asarray(getattr(a, k)), np.asarray(getattr(b, k))
        assert x.dtype == y.dtype and np.array_equal(x, y), k
    assert list(a.texts) == list(b.texts)


def test_shard_layout_depends_on_the_data_and_the_size_only():
    assert shard_layout(10, 4) == [(0, 4), (4, 8), (8, 10)]
    assert shard_layout(list("abcdefg"), 7) == [(0, 7)]
    assert shard_layout(15, 7) == [(0, 7), (7, 14), (14, 15)]
    assert shard_layout(0, 7) == [(0, 0)]
    assert shard_layout(5) == [(0, 5)]  # default: one shard for ordinary runs
    for bad in (0, -3, 2.5, True):
        with pytest.raises(ValueError, match="positive"):
            shard_layout(10, bad)


def test_sharded_split_equals_the_unsharded_one(pair):
    one, many = (Traces(p / "traces") for p in pair)
    assert many.meta["shard_size"] == SHARD
    for split in one.split_names:
        a, b = one[split], many[split]
        n = a.n_inputs
        assert [(s.input_start, s.input_stop) for s in many.shards(split)] == \
            shard_layout(n, SHARD)
        assert len(one.shards(split)) == 1 and isinstance(a.hidden, np.memmap)
        _arrays_equal(a, b)
        assert a.tokens(n - 1) == b.tokens(n - 1)
        assert one.meta["splits"][split]["accuracy"] == many.meta["splits"][split]["accuracy"]
    assert one.surface == many.surface
    assert isinstance(many["train"].hidden, ShardedArray)
    assert isinstance(many["val"].hidden, np.memmap)  # one shard: the shard's own map


def test_abstraction_of_a_sharded_run_is_identical(pair):
    """With a fit sample of every row (the per-shard sample then draws the same rows),
    states, paths, FSM and patterns do not depend on the shard layout."""
    from stateseer.abstraction.abstractors.kmeans import KMeansAbstractor
    from stateseer.abstraction.pipeline import abstract_run

    method = KMeansAbstractor(n_states=6, max_fit_samples=10**6)
    a, b = (abstract_run(p, method=method, save=False) for p in pair)
    for split in ("train", "val", "test"):
        assert np.array_equal(a.states[split], b.states[split])
        assert np.array_equal(a.simulated[split], b.simulated[split])
    da, db = a.fsm.to_dict(), b.fsm.to_dict()
    da.pop("provenance", None)
    db.pop("provenance", None)
    assert da == db
    assert a.patterns == b.patterns
    # and assigning the whole-split view gives the sharded run's states
    many = Traces(pair[1] / "traces")["test"]
    assert np.array_equal(b.assign(many.hidden, many.proba), b.states["test"])


def test_one_shard_opens_alone_with_local_offsets(pair, tmp_path):
    many = tmp_path / "many"
    shutil.copytree(pair[1], many)
    whole = Traces(pair[1] / "traces")["train"]
    info = Traces(many / "traces").shards("train")[1]
    shutil.rmtree(Traces(many / "traces").shards("train")[3].path)  # others may be gone
    sh = open_shard(many / "traces", "train", 1)
    assert (info.input_start, info.input_stop) == (SHARD, 2 * SHARD)
    assert sh.offsets[0] == 0 and sh.n_inputs == SHARD and sh.n_steps == info.n_steps
    assert np.array_equal(sh.rows, whole.rows[SHARD:2 * SHARD])
    assert np.array_equal(sh.hidden, whole.hidden[info.step_start:info.step_stop])
    assert sh.tokens(5) == whole.tokens(SHARD + 5)
    with pytest.raises(TraceError, match="shard 00003 of split 'train' is missing") as e:
        Traces(many / "traces")["train"]
    assert "stateseer record" in one_line(e.value)


def test_a_worker_reads_a_directory_once_and_texts_only_when_used(pair, tmp_path):
    """``open_shard`` (what a per-shard task calls) keeps the directory's manifest per
    process, re-reads it when the traces are re-recorded, and reads a shard's raw texts
    only when they are used: damaged texts fail there, in one line, not at the open."""
    many = tmp_path / "many"
    shutil.copytree(pair[1], many)
    t = many / "traces"
    whole = Traces(pair[1] / "traces")["train"]
    assert list(open_shard(t, "train", 1).texts) == list(whole.texts[SHARD:2 * SHARD])
    (t / "train" / "shards" / "00002" / "texts.json").write_text('["only one"]')
    sh = open_shard(t, "train", 2)  # the arrays are checked; the texts wait
    assert sh.n_inputs == SHARD and sh.tokens(0) == whole.tokens(2 * SHARD)
    with pytest.raises(TraceError, match="has 1 texts for 1000 inputs") as e:
        sh.texts[0]
    one_line(e.value)
    with pytest.raises(TraceError, match="has 1 texts"):  # the whole split checks at once
        Traces(t)["train"]
    _edit_meta(t, lambda entry: entry["shards"][1].update(step_start=1))  # a new stamp
    with pytest.raises(TraceError, match="damaged shard manifest"):
        open_shard(t, "train", 1)


def _edit_meta(traces: Path, edit) -> None:
    meta = json.loads((traces / "meta.json").read_text())
    edit(meta["splits"]["train"])
    (traces / "meta.json").write_text(json.dumps(meta))


def _gap(entry):
    entry["shards"][2]["step_start"] += 1


def _shift(entry):  # ranges still tile the split, but shard 0 does not hold them
    entry["shards"][0]["step_stop"] += 1
    entry["shards"][1]["step_start"] += 1


@pytest.mark.parametrize(("edit", "words"), [
    (_gap, "damaged shard manifest.*follow one another"),
    (lambda e: e.update(shards=[]), "damaged shard manifest.*no shard list"),
    (lambda e: e["shards"][1].pop("input_stop"), "damaged shard manifest.*integer"),
    (lambda e: e.update(n_steps=e["n_steps"] + 1), "damaged shard manifest.*n_steps"),
    (_shift, "manifest in meta.json says"),
])
def test_damaged_manifest_is_one_line(pair, tmp_path, edit, words):
    run = tmp_path / "many"
    shutil.copytree(pair[1], run)
    _edit_meta(run / "traces", edit)
    traces = Traces(run / "traces")
    with pytest.raises(TraceError, match=words) as e:
        traces["train"]
    assert "stateseer record" in one_line(e.value)
    traces["test"]  # the other splits still load


def test_old_single_file_traces_still_load(pair, tmp_path):
    """Traces written before shards: SPLIT/hidden.npy directly, no manifest."""
    old = tmp_path / "old"
    shutil.copytree(pair[0], old)
    meta = json.loads((old / "traces" / "meta.json").read_text())
    for split, entry in meta["splits"].items():
        d = old / "traces" / split
        for f in (d / "shards" / "00000").iterdir():
            f.rename(d / f.name)
        shutil.rmtree(d / "shards")
        del entry["shards"]
    del meta["shard_size"]
    (old / "traces" / "meta.json").write_text(json.dumps(meta))
    traces, ref = Traces(old / "traces"), Traces(pair[0] / "traces")
    assert traces.shard_size is None
    for split in ref.split_names:
        (info,) = traces.shards(split)
        assert info.path == old / "traces" / split and info.n_steps == ref[split].n_steps
        _arrays_equal(traces[split], ref[split])
        _arrays_equal(traces.open_shard(split, 0), ref[split])
    (old / "traces" / "val" / "offsets.npy").write_bytes(b"broken")
    with pytest.raises(TraceError, match="damaged") as e:
        Traces(old / "traces")["val"]
    one_line(e.value)


def test_temporary_shards_are_never_read(pair, tmp_path):
    run = tmp_path / "many"
    shutil.copytree(pair[1], run)
    junk = run / "traces" / "train" / "shards" / "00001.tmp-0123abcd"
    junk.mkdir()
    (junk / "hidden.npy").write_bytes(b"half a shard")
    _arrays_equal(Traces(run / "traces")["train"], Traces(pair[1] / "traces")["train"])
    assert remove_tmp_shards(run / "traces") == 1 and not junk.exists()


def test_jobs_from_paths_with_a_killed_attempt_and_a_retry(pair, tmp_path):
    """A map function stands in for a cluster: every job runs from paths alone (the model
    loaded per process), one attempt dies half-way leaving its temporary directory, and
    one job runs twice; the traces are those of an in-process recording."""
    run = tmp_path / "run"
    shutil.copytree(pair[1], run, ignore=shutil.ignore_patterns("traces*"))
    calls: list[ShardJob] = []

    def flaky_map(fn, jobs):
        jobs = list(jobs)
        assert fn is record_job and all(isinstance(j, ShardJob) for j in jobs)
        killed = jobs[1].shards_dir / "00001.tmp-deadbeef"
        killed.mkdir(parents=True)
        (killed / "hidden.npy").write_bytes(b"killed")
        calls.extend(jobs)
        out = {j: fn(j) for j in reversed(jobs)}  # any order
        out[jobs[0]] = fn(jobs[0])  # a retry of a finished shard
        return [out[j] for j in jobs]

    traces = record_in_process(run, splits=["val"], shard_size=150, map_fn=flaky_map)
    assert [j.index for j in calls] == [0, 1, 2, 3]
    assert not list((run / "traces" / "val" / "shards").glob("*.tmp-*"))
    _arrays_equal(traces["val"], Traces(pair[0] / "traces")["val"])
    assert traces.meta["splits"]["val"]["accuracy"] == 1.0


def test_cli_shard_size(pair, tmp_path, capsys):
    from stateseer.app.cli.main import main

    run = tmp_path / "run"
    shutil.copytree(pair[0], run)
    assert main(["record", str(run), "--splits", "val", "--shard-size", "300"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert [s["input_stop"] for s in out["splits"]["val"]["shards"]] == [300, 500]
    assert main(["record", str(run), "--shard-size", "0"]) == 2
    assert "--shard-size" in one_line(capsys.readouterr().err.strip())


@pytest.fixture(scope="module")
def parts():
    rng = np.random.default_rng(0)
    sizes = (5, 0, 3, 8, 1)
    p = [rng.normal(size=(n, 4)).astype(np.float32) for n in sizes]
    return p, np.concatenate(p)


@pytest.mark.parametrize("key", [
    0, 5, 8, -1, -17, slice(None), slice(2, 4), slice(3, 12), slice(7, 8), slice(4, 4),
    slice(None, None, 3), slice(15, 2, -2), np.array([16, 0, 7, 7, 3]), [2, 9],
    np.array([], np.int64), [], (slice(None), 2), (slice(2, 11), 1), (3, 2),
    (np.array([1, 9, 12]), np.array([0, 3, 1])), (np.array([4, 10]), slice(1, 3)),
    np.arange(17) % 3 == 0, np.array([[1, 2], [15, 0]]), (Ellipsis, 1),
])
def test_sharded_array_indexes_like_the_concatenation(parts, key):
    arr, ref = ShardedArray(parts[0]), parts[1]
    got, want = arr[key], ref[key]
    assert np.shape(got) == np.shape(want) and np.array_equal(got, want)


def test_sharded_array_as_an_array(parts):
    arr, ref = ShardedArray(parts[0]), parts[1]
    assert (arr.shape, arr.ndim, len(arr), arr.dtype, arr.nbytes) == \
        (ref.shape, 2, 17, np.float32, ref.nbytes)
    assert np.array_equal(np.asarray(arr), ref)
    assert np.asarray(arr, dtype=np.float64).dtype == np.float64
    assert arr.astype(np.float16).dtype == np.float16
    assert np.array_equal(np.asarray(arr).argmax(1), ref.argmax(1))
    assert np.isclose(np.sum(arr), ref.sum()) and np.array_equal(np.stack(list(arr)), ref)
    assert arr[2:4].base is not None  # a slice inside one part is that part's view
    with pytest.raises(IndexError):
        arr[17]
    with pytest.raises(IndexError):
        arr[np.array([0, 17])]
    with pytest.raises(IndexError):
        arr[np.ones(3, bool)]


def test_a_stray_half_written_directory_is_removed_by_the_next_writer_and_said(
        explored_run, copy_run, tmp_path):
    import json as _json
    import subprocess
    import sys
    import warnings

    from stateseer.abstraction.pipeline import abstract_run
    from stateseer.core.errors import StateseerError
    from stateseer.core.rundir import RunDir, StrayWorkWarning, claim

    run = copy_run(explored_run)
    before = sorted(p.name for p in (run / "traces").iterdir())
    # a record killed mid-way: its writer is gone
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stray = run / "traces.tmp"
    stray.mkdir()
    (stray / ".owner").write_text(_json.dumps({"pid": dead.pid, "host": __import__(
        "socket").gethostname()}))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        abstract_run(run, n_states=4)
    assert not stray.exists()
    said = [w for w in caught if issubclass(w.category, StrayWorkWarning)]
    assert len(said) == 1 and "traces.tmp" in str(said[0].message)
    assert sorted(p.name for p in (run / "traces").iterdir()) == before  # whole
    # one being written by a live command is left alone, and the writer refused
    claim(stray)
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        (stray / ".owner").write_text(_json.dumps({"pid": live.pid, "host": __import__(
            "socket").gethostname()}))
        with pytest.raises(StateseerError, match="another stateseer command") as e:
            RunDir(run).clean_stray()
        one_line(e.value)
        assert stray.exists()
    finally:
        live.kill()
        live.wait()
    with pytest.warns(StrayWorkWarning):
        assert RunDir(run).clean_stray() == [stray]


@pytest.mark.parametrize("scan", [3, 1 << 26])
def test_single_texts_are_read_alone_and_equal_the_parsed_list(tmp_path, monkeypatch, scan):
    """A shard's texts are located in texts.json (scanned a few bytes at a time here)
    and read one by one; quotes, '", "' inside a text, trailing backslashes and non-ASCII
    text read back exactly. Another layout (indented) is parsed whole, as before."""
    import json as _json

    from stateseer.core import traces as tr_mod
    from stateseer.core.traces import _LazyTexts, text_spans

    monkeypatch.setattr(tr_mod, "TEXT_SCAN_BYTES", scan)
    texts = ['plain', 'he said ", " and left', 'ends in a backslash \\', '',
             'ünïcödé, "quoted", \\"', 'a\\\\", "b', 'last']
    (tmp_path / "texts.json").write_text(_json.dumps(texts, ensure_ascii=False), "utf-8")
    spans = text_spans(tmp_path / "texts.json", len(texts))
    assert spans is not None and len(spans[0]) == len(texts)
    lazy = _LazyTexts(tmp_path, len(texts), "fix")
    assert [lazy[i] for i in range(len(texts))] == texts
    assert lazy[-1] == "last" and lazy[1:3] == texts[1:3] and len(lazy) == len(texts)
    assert lazy._texts is None  # never parsed whole
    assert list(lazy) == texts  # iteration reads the list
    (tmp_path / "texts.json").write_text(_json.dumps(texts, indent=1), "utf-8")
    assert text_spans(tmp_path / "texts.json", len(texts)) is None
    assert _LazyTexts(tmp_path, len(texts), "fix")[1] == texts[1]
    assert text_spans(tmp_path / "texts.json", len(texts) + 1) is None


def test_the_measured_split_is_test_unless_the_data_has_no_test_inputs():
    from types import SimpleNamespace

    from stateseer.core.traces import Traces

    def with_test(n: int) -> str:
        fake = SimpleNamespace(meta={"splits": {"train": {"n_inputs": 9},
                                                "val": {"n_inputs": 3},
                                                "test": {"n_inputs": n}}})
        return Traces.measured_split.fget(fake)

    assert with_test(5) == "test" and with_test(0) == "val"
