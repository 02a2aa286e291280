"""Defaults that several commands share, each written once.

``N_STATES`` is what ``stateseer abstract``, ``demo``, the estimators and the Python API
use when no state count is given; ``AUTO_CAP`` is the readability cap of
``--states auto`` (the knee of the fidelity curve is never taken above it). The two are
the same number on purpose: an automatic choice never draws more states than the
default would.
"""

from __future__ import annotations

__all__ = ["AUTO_CAP", "N_STATES"]

#: abstract states when none are asked for (DeepSeer used 39 mixture components)
N_STATES = 40
#: the most states ``--states auto`` may choose
AUTO_CAP = N_STATES
