"""The version of stateseer, written into every run's provenance (one place: the public
``stateseer.__version__`` and the recorders both read it from here)."""

__version__ = "0.1.0"
