"""Packaging: the three folders of the design card install under one import name.

``rnn_models/``, ``abstraction/`` and ``app/`` stay where the card puts them and install as
``stateseer.rnn_models``, ``stateseer.abstraction`` and ``stateseer.app``; the torch-free core
they all read (``core/``: errors, the run layout, readers and writers, the engine) installs as
``stateseer.core``; ``stateseer/`` holds the public API. Nothing named ``core``, ``app``,
``abstraction`` or ``rnn_models`` lands at the top of site-packages (``tests/test_packaging.py``
builds the wheel and checks).
Everything else about the project is in ``pyproject.toml``.
"""

from setuptools import find_packages, setup

PARTS = ("core", "rnn_models", "abstraction", "app")

setup(
    packages=["stateseer", *(f"stateseer.{p}"
                             for p in find_packages(include=[f"{x}*" for x in PARTS]))],
    package_dir={"stateseer": "stateseer", **{f"stateseer.{p}": p for p in PARTS}},
)
