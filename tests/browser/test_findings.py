"""The Findings tab in a real browser: it opens first, names the injected culprit, and an
example input opens its trace."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def diagnosed_run(tmp_path_factory):
    from stateseer import TrainConfig, abstract_run, record_run, train_run
    from stateseer.app.workflows.diagnose import diagnose_run
    from stateseer.testing import sentiment_csv

    where = tmp_path_factory.mktemp("diagnosed")
    data = sentiment_csv(where / "data.csv", shortcut="frankly")
    run = train_run(TrainConfig(dataset=f"csv:{data}", arch="gru", epochs=3, hidden=32,
                                embed=32), where / "run", progress=False)
    record_run(run)
    abstract_run(run, n_states=8)
    diagnose_run(run.path)
    return run.path


def test_findings_open_first_and_an_example_opens_its_trace(dash_duo, diagnosed_run):
    from stateseer.app.main import create_app

    dash_duo.start_server(create_app(diagnosed_run))
    dash_duo.wait_for_contains_text("#findings-list", "frankly", timeout=30)
    first = dash_duo.find_element("#findings-list .finding")
    assert "significant" in first.text and "shortcut" in first.text
    example = first.find_element("css selector", ".examples button")
    iid = example.text
    example.click()
    dash_duo.wait_for_contains_text("#trace-title", iid, timeout=20)
    assert "frankly" in dash_duo.find_element("#trace-tokens").text
    assert dash_duo.get_logs() == []
