"""Every module's examples run, under the name users import it by (``stateseer.…``)."""

from __future__ import annotations

import doctest
import importlib
import importlib.util
import pkgutil

import pytest

LAYERS = ("stateseer.core", "stateseer.rnn_models", "stateseer.abstraction", "stateseer.app")


def _modules() -> list[str]:
    # each layer is walked from its own folder: an editable install maps them apart
    names = ["stateseer", *LAYERS]
    for layer in LAYERS:
        pkg = importlib.import_module(layer)
        names += [i.name for i in pkgutil.walk_packages(pkg.__path__, layer + ".")]
    return sorted(names)


def _with_examples() -> list[str]:
    # a module is imported only to find its examples when its source has one
    out = []
    for name in _modules():
        spec = importlib.util.find_spec(name)
        if spec and spec.origin and ">>>" in open(spec.origin, encoding="utf-8").read():
            out.append(name)
    return out


def test_the_walk_finds_every_layer():
    names = _modules()
    for layer in LAYERS:
        assert any(n.startswith(layer + ".") for n in names), layer


@pytest.mark.parametrize("name", _with_examples())
def test_examples(name):
    module = importlib.import_module(name)
    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    tests = finder.find(module, name)
    for t in tests:
        runner.run(t)
    result = runner.summarize(verbose=False)
    assert result.attempted > 0, f"{name} has '>>>' in its source but no example was found"
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed in {name}"
