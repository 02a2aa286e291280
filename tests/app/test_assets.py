"""The page's static files: the vendored plotly.js bundle matches the plotly package."""

from __future__ import annotations

import re
from pathlib import Path

from stateseer import app

VENDOR = Path(app.__file__).with_name("assets") / "vendor"


def test_the_vendored_plotly_bundle_is_the_version_plotly_py_writes_figures_for():
    from plotly.offline import get_plotlyjs_version

    bundles = sorted(VENDOR.glob("plotly-basic-*.min.js"))
    assert len(bundles) == 1, "exactly one plotly.js bundle in app/assets/vendor"
    head = bundles[0].read_text(encoding="utf-8")[:400]
    version = re.search(r"plotly\.js \(basic - minified\) v(\S+)", head).group(1)
    assert bundles[0].name == f"plotly-basic-{version}.min.js"
    assert version == get_plotlyjs_version(), (
        f"app/assets/vendor holds plotly.js {version} but plotly writes figures for "
        f"{get_plotlyjs_version()}: replace it with plotly.js-basic-dist-min of that "
        "version (npm pack plotly.js-basic-dist-min@VERSION), or pin plotly back")
    assert (VENDOR / "plotly-basic-LICENSE.txt").read_text().startswith("MIT License")
