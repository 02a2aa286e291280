"""``import stateseer``: one import name, the public API in one place."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys

import pytest

import stateseer


def test_import_is_cheap():
    probe = "import sys, stateseer; print('torch' in sys.modules, 'dash' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True, timeout=60)
    assert out.stdout.split() == ["False", "False"]


@pytest.mark.parametrize("name", sorted(set(stateseer.__all__) - {"__version__"}))
def test_every_public_name_resolves_to_its_definition(name):
    obj = getattr(stateseer, name)
    module = stateseer._API[name]
    assert importlib.import_module(f"stateseer.{module}").__dict__[name] is obj


def test_the_names_users_write_are_there():
    # DESIGN.md: at least these; the README and the notebooks use the rest
    for name in ("RecurrentAdapter", "load_dataset", "TrainConfig", "train_run", "record_run",
                 "abstract_run", "sweep_run", "extract_dfa", "export_run", "create_app",
                 "create_model_run", "ModelRun", "RunDir", "DATASETS", "ARCHITECTURES"):
        assert name in stateseer.__all__, name


def test_unknown_names_raise_attribute_error():
    with pytest.raises(AttributeError, match="no_such_name"):
        stateseer.no_such_name  # noqa: B018
    assert "abstract_run" in dir(stateseer)


def test_version_is_the_installed_distributions():
    assert stateseer.__version__ == importlib.metadata.version("stateseer")


def test_the_command_runs_under_the_package_name():
    out = subprocess.run([sys.executable, "-m", "stateseer.app.cli", "--help"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "usage: stateseer" in out.stdout


@pytest.mark.parametrize(("modules", "absent"), [
    # the formats layer and the numpy-only modules: abstraction can read traces
    ("stateseer.rnn_models, stateseer.core, stateseer.core."
     "automaton, stateseer.rnn_models.run, stateseer.rnn_models.datasets, "
     "stateseer.rnn_models.formal, stateseer.rnn_models.tokenizers, "
     "stateseer.rnn_models.factory", ("torch",)),
    # DESIGN.md's one-way imports, at run time (tests/test_architecture.py: statically)
    ("stateseer.abstraction, stateseer.abstraction.pipeline, stateseer.abstraction.automata.dfa, "
     "stateseer.abstraction.abstractors.base, stateseer.abstraction.automata.export, "
     "stateseer.abstraction.analysis.patterns, stateseer.abstraction.analysis.metrics, "
     "stateseer.abstraction.sharded", ("torch", "dash")),
])
def test_layers_load_without_what_they_must_not_import(modules, absent):
    probe = f"import sys, {modules}; print(*(m in sys.modules for m in {absent!r}))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True, timeout=120)
    assert out.stdout.split() == ["False"] * len(absent)


def test_the_formal_module_reexports_the_automaton_types():
    from stateseer.core import automaton
    from stateseer.rnn_models import formal

    assert formal.DFA is automaton.DFA and formal.minimize is automaton.minimize
