"""Browser tests run in Debian's chromium through dash.testing.

They skip when chromium or chromedriver is missing, except in CI, where
``STATESEER_REQUIRE_BROWSER=1`` turns a missing browser into a failure.
"""

from __future__ import annotations

import os
import shutil

import pytest

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
HAVE_BROWSER = os.path.exists(CHROMIUM) and (
    os.path.exists(CHROMEDRIVER) or shutil.which("chromedriver") is not None)


def pytest_setup_options():
    """Chrome options for dash.testing: headless Debian chromium."""
    from selenium.webdriver.chrome.options import Options

    options = Options()
    options.binary_location = CHROMIUM
    options.add_argument("--headless=new")
    options.add_argument("--window-size=1500,1200")
    return options


def pytest_collection_modifyitems(config, items):
    if HAVE_BROWSER:
        return
    if os.environ.get("STATESEER_REQUIRE_BROWSER") == "1":
        raise pytest.UsageError(
            "STATESEER_REQUIRE_BROWSER=1 but chromium/chromedriver are missing; install "
            "Debian's chromium and chromium-driver (.ci/run does)")
    skip = pytest.mark.skip(reason="chromium/chromedriver not installed")
    for item in items:
        if "browser" in item.keywords:
            item.add_marker(skip)
