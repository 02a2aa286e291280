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


@pytest.fixture(scope="session")
def multiclass_run(tmp_path_factory):
    """A 4-class run: Rotten Tomatoes snippets labelled by sentiment × length
    (``fresh-short``, ``fresh-long``, ``rotten-short``, ``rotten-long``), a small GRU,
    recorded and abstracted into 8 states."""
    import csv

    from stateseer.abstraction.pipeline import abstract_run
    from stateseer.rnn_models.datasets import load_dataset
    from stateseer.rnn_models.engine import record_run
    from stateseer.rnn_models.train import TrainConfig, train_run

    ds = load_dataset("rotten_tomatoes")
    path = tmp_path_factory.mktemp("data") / "rt4.csv"
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["review", "kind"])
        for i in range(1200):
            text = ds.texts[i * 9]
            size = "short" if len(text.split()) < 20 else "long"
            w.writerow([text, f"{ds.classes[ds.labels[i * 9]]}-{size}"])
    out = tmp_path_factory.mktemp("runs") / "four"
    train_run(TrainConfig(dataset=f"csv:{path}", arch="gru", text_col="review",
                          label_col="kind", epochs=2, hidden=16, embed=16, layers=1),
              out, progress=False)
    record_run(out)
    abstract_run(out, n_states=8)
    return out


def study_app_for(run, db, n_inputs: int, spec_of):
    """A study app over ``run`` (its log in ``db``) whose spec ``spec_of(ids)`` is built
    from the ids of the first ``n_inputs`` test inputs; ``app.test_ids`` holds them. The
    caller closes ``app.study_context.log``."""
    from stateseer.app.explorer.context import ExplorerContext
    from stateseer.app.study.server import create_study_app
    from stateseer.app.study.spec import parse_study

    context = ExplorerContext.load(run)
    ids = [int(i) for i in context.data.traces["test"].rows[:n_inputs]]
    app = create_study_app(parse_study(spec_of(ids), source=None), db=db, context=context)
    app.test_ids = ids
    return app
