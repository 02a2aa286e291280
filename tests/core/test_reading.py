"""Bounded reads: what a run or import directory holds cannot make stateseer read
forever, run out of memory or recurse without a one-line error naming the file."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from stateseer.core.errors import StateseerError
from stateseer.core.reading import load_json, read_bounded
from tests.conftest import one_line


def test_a_device_a_pipe_and_an_oversized_file_are_refused_before_reading(tmp_path):
    link = tmp_path / "tokens.json"
    link.symlink_to("/dev/zero")
    with pytest.raises(StateseerError, match="not a regular file") as e:
        load_json(link)
    one_line(e.value)
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    with pytest.raises(StateseerError, match="not a regular file"):
        read_bounded(fifo)  # would block forever if opened
    big = tmp_path / "big.json"
    big.write_text("[" + "1," * 1000 + "1]")
    with pytest.raises(StateseerError, match="more than the 100 read") as e:
        read_bounded(big, limit=100)
    assert str(big) in one_line(e.value)


def test_json_nested_too_deeply_is_one_line_naming_the_file(tmp_path):
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(StateseerError, match="nested too deeply") as e:
        load_json(deep)
    assert str(deep) in one_line(e.value)


def test_the_import_directory_and_the_run_use_the_bounded_reads(tmp_path, explored_run,
                                                                copy_run):
    from stateseer.core.imported import read_import
    from stateseer.core.rundir import RunDir

    d = tmp_path / "imp"
    (d / "train").mkdir(parents=True)
    (d / "manifest.json").write_text(json.dumps({"classes": ["a", "b"],
                                                 "splits": ["train"]}))
    np.save(d / "train" / "hidden.npy", np.zeros((3, 2), np.float32))
    np.save(d / "train" / "offsets.npy", np.array([0, 3]))
    np.save(d / "train" / "labels.npy", np.array([1]))
    (d / "train" / "tokens.json").symlink_to("/dev/zero")
    with pytest.raises(StateseerError, match="not a regular file") as e:
        read_import(d)
    one_line(e.value)
    run = copy_run(explored_run)
    (run / "config.json").unlink()
    (run / "config.json").write_text("[" * 100_000)
    with pytest.raises(StateseerError) as e:
        _ = RunDir(run).config
    assert "config.json" in one_line(e.value)
