"""Registries carry the knowledge: an addition is one file and one line.

Each test adds an entry the way a contributor (or a third-party package) would, with one
registration call, and then finds it everywhere it belongs: the command line's choices, the
workflows, the explorer. The abstractor registry has its own test
(``tests/abstraction/abstractors/test_base_plugin.py``), the view registry too
(``tests/app/explorer/test_registry.py``).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from stateseer.abstraction.automata import export
from stateseer.app.cli.main import build_parser, main
from stateseer.rnn_models import datasets


def _choices(command: str, flag: str) -> list[str]:
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    action = next(a for a in sub.choices[command]._actions if flag in a.option_strings)
    return list(action.choices)


# -- export formats ---------------------------------------------------------------------------
def _edge_list(automaton, **_):
    return "".join(f"{t['source']}\t{t['token']}\t{t['target']}\n"
                   for t in automaton.to_dict()["transitions"])


def test_an_export_format_is_one_registration(monkeypatch, analysed_run, tmp_path, capsys):
    fmt = export.ExportFormat("edges-tsv", "automaton", ".tsv", False, False, _edge_list)
    monkeypatch.setitem(export.EXPORT_FORMATS, fmt.name, fmt)  # = register_format(fmt)
    assert "edges-tsv" in _choices("export", "--format")
    out = tmp_path / "fsm.tsv"
    assert main(["export", str(analysed_run), "--format", "edges-tsv", "--out", str(out)]) == 0
    assert json.loads(capsys.readouterr().out)["format"] == "edges-tsv"
    rows = [r.split("\t") for r in out.read_text().splitlines()]
    fsm = json.loads((analysed_run / "abstraction" / "fsm.json").read_text())
    assert len(rows) == len(fsm["transitions"]) > 0


def test_the_explorer_offers_the_registry_s_labelled_formats():
    from stateseer.app.explorer import ids
    from stateseer.app.explorer.views.diagram import DOWNLOADS

    labelled = [f.name for f in export.EXPORT_FORMATS.values() if f.label]
    assert list(ids.FSM_DOWNLOADS) == labelled and len(DOWNLOADS) == len(labelled)
    assert {ids.download_id(n) for n in labelled} <= set(ids.EXPORTS)  # study mode logs them


def test_a_taken_format_name_is_refused():
    with pytest.raises(export.AbstractionError, match="cannot register export format"):
        export.register_format(export.EXPORT_FORMATS["dot"])


# -- data sets --------------------------------------------------------------------------------
def _tiny(seed: int) -> datasets.TextDataset:
    texts = ["good fun", "bad dull", "good good", "dull bad"] * 5
    labels = np.array([1, 0, 1, 0] * 5)
    return datasets.TextDataset(name="tiny", texts=texts, labels=labels,
                                classes=["neg", "pos"], tokenizer="word",
                                splits=datasets.stratified_splits(labels, seed=seed))


def test_a_data_set_is_one_registration(monkeypatch, capsys):
    monkeypatch.setattr(datasets, "DATASETS", dict(datasets.DATASETS))  # undone after
    datasets.register_dataset("tiny", _tiny, "four words")  # the one line
    assert datasets.load_dataset("tiny").classes == ["neg", "pos"]
    assert main(["train", "--help"]) == 0
    assert "tiny" in capsys.readouterr().out
    with pytest.raises(datasets.DataError, match="taken"):
        datasets.register_dataset("tiny", _tiny)


PLUGIN = textwrap.dedent('''
    import numpy as np
    from stateseer.abstraction.abstractors.base import BaseAbstractor
    from stateseer.rnn_models.datasets import TextDataset, stratified_splits


    def load(seed):
        texts = ["0 1", "1 1", "0 0", "1 0"] * 10
        labels = np.array([0, 1, 0, 1] * 10)
        return TextDataset(name="plugged", texts=texts, labels=labels, classes=["a", "b"],
                           tokenizer="word", splits=stratified_splits(labels, seed=seed))


    class FirstAxis(BaseAbstractor):
        kind = "first-axis"
''')


def test_an_installed_package_adds_a_data_set_and_an_abstractor(tmp_path):
    """Entry points (``stateseer.datasets``, ``stateseer.abstractors``) of a package on
    the path, as ``pip install`` would leave it: no import of it anywhere in stateseer."""
    (tmp_path / "plugged.py").write_text(PLUGIN)
    info = tmp_path / "plugged-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: plugged\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        "[stateseer.datasets]\nplugged = plugged:load\n\n"
        "[stateseer.abstractors]\nfirst-axis = plugged:FirstAxis\n")
    probe = ("import stateseer\n"
             "from stateseer.abstraction.abstractors.base import abstractor_names\n"
             "print(stateseer.load_dataset('plugged').classes, 'plugged' in "
             "stateseer.DATASETS, 'first-axis' in abstractor_names())\n")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         timeout=120, env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin"})
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["['a',", "'b']", "True", "True"]


# -- architectures ----------------------------------------------------------------------------
def test_an_architecture_brings_its_own_train_flags(monkeypatch, tmp_path):
    from stateseer.rnn_models import archs
    from stateseer.rnn_models.train import TrainConfig, train_run

    gru = archs.ARCHITECTURES["gru"]

    def build(vocab_size, n_classes, *, width_boost, **hp):
        return gru.build(vocab_size, n_classes, **{**hp, "hidden": hp["hidden"] + width_boost})

    tiny = archs.Architecture("gru-wide", build, gru.states, "a GRU, wider",
                              options={"width_boost": archs.ArchOption(2, "extra units")})
    monkeypatch.setitem(archs.ARCHITECTURES, tiny.name, tiny)  # the one line
    assert "gru-wide" in _choices("train", "--arch")
    args = build_parser().parse_args(["train", "--dataset", "tomita1", "--arch", "gru-wide",
                                      "--out", str(tmp_path / "r"), "--width-boost", "3"])
    assert args.width_boost == 3
    cfg = TrainConfig(dataset="tomita1", arch="gru-wide", epochs=1, embed=4, hidden=3,
                      arch_options={"width_boost": 3})
    run = train_run(cfg, tmp_path / "run", progress=False)
    assert run.config["model"]["width_boost"] == 3
    assert run.load_model().n_classes == 2
    with pytest.raises(datasets.DataError, match="--width-boost is not an option of --arch gru"):
        train_run(TrainConfig(dataset="tomita1", arch="gru", arch_options={"width_boost": 1}),
                  tmp_path / "bad", progress=False)


# -- views: study presets derive from the registry --------------------------------------------
def test_study_presets_and_state_views_come_from_the_views():
    from stateseer.app.explorer.registry import REGISTRY
    from stateseer.app.study import guard, spec

    assert spec.PRESETS["full"] == tuple(REGISTRY.names())
    assert spec.PRESETS["baseline"] == tuple(v.name for v in REGISTRY.views
                                             if "baseline" in v.presets)
    assert guard.STATE_VIEWS == {v.name for v in REGISTRY.views if v.shows_states}
    assert {"diagram", "card", "patterns"} <= guard.STATE_VIEWS
    assert not guard.STATE_VIEWS & set(spec.PRESETS["baseline"])
