"""A loaded explorer context on the session's explored run (one per module)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def ctx(explored_run):
    from stateseer.app.explorer.context import ExplorerContext

    return ExplorerContext.load(explored_run)
