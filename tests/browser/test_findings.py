"""The Findings tab in a real browser: it opens first, names the injected culprit, and an
example input opens its trace."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def diagnosed_run(tmp_path_factory, shortcut_run):
    """The shared shortcut run with its data file (the run names it relative to itself),
    copied (repairs write beside it), and diagnosed."""
    import shutil

    from stateseer.app.workflows.diagnose import diagnose_run

    where = tmp_path_factory.mktemp("diagnosed") / "project"
    shutil.copytree(shortcut_run.parent, where)
    run = where / shortcut_run.name
    diagnose_run(run)
    return run


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
    # the training inputs that carry the word open too (in the training split)
    carrier = first.find_element("css selector", ".examples.training button")
    tid = carrier.text
    carrier.click()
    dash_duo.wait_for_contains_text("#trace-title", tid, timeout=20)
    assert "frankly" in dash_duo.find_element("#trace-tokens").text
    assert dash_duo.get_logs() == []


def test_a_repair_runs_in_the_background_and_ends_in_the_comparison(dash_duo, diagnosed_run):
    from stateseer.app.main import create_app

    app = create_app(diagnosed_run)
    dash_duo.start_server(app)
    dash_duo.wait_for_contains_text("#findings-list", "frankly", timeout=30)
    first = dash_duo.find_element("#findings-list .finding")
    button = next(b for b in first.find_elements("css selector", ".repairs button")
                  if b.text == "counterfactual")
    control, seeds = dash_duo.find_elements("#repair-control input")
    control.click()  # with a control
    seeds.click()  # and over 3 seeds
    button.click()
    # the job shows its progress while the page stays usable: an example opens its trace
    dash_duo.wait_for_element("#repair-job progress", timeout=20)
    example = first.find_element("css selector", ".examples button")
    example.click()
    dash_duo.wait_for_contains_text("#trace-title", example.text, timeout=20)
    dash_duo.wait_for_contains_text("#repair-job", "Repaired by counterfactual", timeout=240)
    result = dash_duo.find_element("#repair-job").text
    assert "finding is gone" in result and "fixed" in result and "→" in result
    doc = __import__("json").loads((diagnosed_run.with_name(
        f"{diagnosed_run.name}-repair-1-counterfactual") / "repair.json").read_text())
    assert ("lost more than a point" in result) == bool(doc["classes_hurt"])
    assert ("on average" in result) and (("lost more than a point on average" in result)
                                         == bool(doc["seeds"]["classes_hurt"]))
    # the control trained beside the repair, and the comparison reads the change against it
    assert doc["control"]["left_out"] >= 1 and "retraining alone" in result
    # the seeds: the run's data and the edited data trained twice more each
    assert doc["seeds"]["seeds"] == [0, 1000, 2000] and "Over 3 seeds" in result
    out = diagnosed_run.with_name(f"{diagnosed_run.name}-repair-1-counterfactual")
    assert (out / "repair.json").exists() and str(out) in result
    fixed = dash_duo.find_element("#repair-job .examples button")
    fixed.click()
    dash_duo.wait_for_contains_text("#trace-title", fixed.text, timeout=20)
    assert dash_duo.get_logs() == []


def test_a_cancelled_repair_leaves_no_worker_behind(dash_duo, diagnosed_run):
    import psutil

    from stateseer.app.explorer.context import ExplorerContext
    from stateseer.app.main import create_app

    ctx = ExplorerContext.load(diagnosed_run, jobs=True)
    dash_duo.start_server(create_app(context=ctx))
    dash_duo.wait_for_contains_text("#findings-list", "frankly", timeout=30)
    first = dash_duo.find_element("#findings-list .finding")
    next(b for b in first.find_elements("css selector", ".repairs button")
         if b.text == "augment").click()
    dash_duo.wait_for_element("#repair-job progress", timeout=20)
    status = ctx.jobs.status()
    pid = status["pid"]
    assert status["state"] == "running" and psutil.pid_exists(pid)
    dash_duo.find_element("#repair-cancel").click()
    dash_duo.wait_for_contains_text("#repair-job", "cancelled", timeout=30)
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    assert ctx.jobs.status()["state"] == "cancelled"
    # the half-made run is not left behind
    out = diagnosed_run.with_name(f"{diagnosed_run.name}-repair-1-augment")
    assert not out.exists() and not out.with_name(out.name + ".tmp").exists()
    assert dash_duo.get_logs() == []

