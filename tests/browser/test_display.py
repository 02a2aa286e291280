"""What the user trial found hard to read, in a real browser: the "edit selected row"
button after a typed trace, a very long typed word, the sweep tab's buttons over its
curve, and the empty bar a study condition without the side panel showed."""

from __future__ import annotations

import time

import pytest
from selenium.webdriver.common.by import By

from tests.browser.conftest import study_app_for
from tests.browser.test_explorer import _start, _wait_idle

pytestmark = pytest.mark.browser


def _wait(cond, timeout: float = 20, what: str = "condition"):
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = cond()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def _rect(driver, css: str) -> dict:
    return driver.execute_script(
        "const e = document.querySelector(arguments[0]);"
        "return e && e.getBoundingClientRect().toJSON();", css)


def _overflows(driver, css: str) -> bool:
    """Whether the element is wider inside than it is shown (a horizontal scrollbar or
    text past its edge)."""
    return driver.execute_script(
        "const e = document.querySelector(arguments[0]);"
        "return e.scrollWidth > e.clientWidth + 1;", css)


def test_edit_selected_row_copies_the_rows_text_after_a_typed_trace(dash_duo, explored_run):
    from stateseer.app.workflows.runview import RunView

    row_text = RunView(explored_run).trace_instance("test", 3).text
    _start(dash_duo, explored_run, "?split=test&row=3")
    dash_duo.wait_for_element("#trace-tokens .chip", timeout=20)
    box = dash_duo.find_element("#new-text")
    box.send_keys("a dull film")
    dash_duo.find_element("#trace-btn").click()
    dash_duo.wait_for_contains_text("#trace-title", "typed input", timeout=20)
    _wait_idle(dash_duo.driver)
    dash_duo.find_element("#edit-btn").click()  # the row is still selected
    _wait(lambda: box.get_attribute("value") == row_text, 10, "the row's text in the box")
    assert dash_duo.find_element("#compare-mode input").is_selected()
    assert dash_duo.get_logs() == []


def test_a_very_long_typed_word_stays_inside_the_trace_panel(dash_duo, explored_run):
    """The unknown-words message wraps, the attribution strip cuts the word (no
    horizontal scrollbar) and the chart labels every k-th of many tokens (at most 30
    labels: more were drawn on top of each other)."""
    _start(dash_duo, explored_run)
    long = "supercalifragilistic" * 12
    words = " ".join(["a", "dull", "film"] * 12)  # 36 words, then the long one and "film"
    dash_duo.find_element("#new-text").send_keys(f"{words} {long} film")
    dash_duo.find_element("#trace-btn").click()
    dash_duo.wait_for_contains_text("#input-message", "unknown word", timeout=20)
    d = dash_duo.driver
    segs = _wait(lambda: d.find_elements(By.CSS_SELECTOR, "#attr-strip .attr-seg"), 30,
                 "the attribution strip")
    _wait_idle(d)
    assert not _overflows(d, "#input-message")
    assert not _overflows(d, "#attr-strip .attr-strip")
    cut = [s.text for s in segs if s.text.startswith("supercalifragilistic")]
    assert cut and cut[0].endswith("…") and len(cut[0]) < 40
    ticks = d.execute_script("return [...document.querySelectorAll('#trace-chart .xtick "
                             "text')].map(t => t.textContent);")
    assert ticks[0] == "⟨start⟩" and 2 < len(ticks) <= 30
    assert dash_duo.get_logs() == []


def test_the_sweep_tabs_buttons_sit_above_its_curve(dash_duo, explored_run):
    """The buttons on a line of their own above the figure; the run's count labelled
    between the plotly toolbar and the plot, inside the figure."""
    from stateseer.app.explorer.context import ExplorerContext
    from stateseer.app.main import create_app

    dash_duo.start_server(create_app(context=ExplorerContext.load(explored_run, jobs=True)))
    dash_duo.wait_for_element("#table td", timeout=30)
    d = dash_duo.driver
    next(t for t in d.find_elements(By.CSS_SELECTOR, ".tab")
         if t.text == "Fidelity vs states").click()
    dash_duo.wait_for_element("#sweep-graph .annotation", timeout=20)
    graph = d.find_element(By.CSS_SELECTOR, "#sweep-graph")
    d.execute_script("arguments[0].scrollIntoView({block: 'center'})", graph)
    time.sleep(0.3)
    fig = _rect(d, "#sweep-graph")
    for above in ("#sweep-start", "#force-start", "#sweep-cancel", "#sweep-job"):
        assert _rect(d, above)["bottom"] <= fig["top"], above
    label, plot = _rect(d, "#sweep-graph .annotation"), _rect(d, "#sweep-graph .nsewdrag")
    assert "this run" in d.find_element(By.CSS_SELECTOR, "#sweep-graph .annotation").text
    assert fig["left"] <= label["left"] and label["right"] <= fig["right"]
    assert fig["top"] + 24 <= label["top"] and label["bottom"] <= plot["top"] + 1
    assert dash_duo.get_logs() == []


@pytest.fixture
def baseline_study(explored_run, tmp_path):
    app = study_app_for(explored_run, tmp_path / "log.sqlite", 1, lambda ids: {
        "study": "baseline", "title": "Baseline study", "run": str(explored_run),
        "conditions": {"baseline": "baseline"}, "assignment": {"method": "counterbalanced"},
        "tasks": [{"id": "why", "prompt": "Why is this review classified as it is?",
                   "open": ids}]})
    yield app
    app.study_context.log.close()


def test_a_condition_without_the_side_panel_shows_no_empty_bar(dash_duo, baseline_study):
    """The baseline (table, trace text, attribution) has no diagram and no side tab: the
    top row is hidden, and every panel shown has something in it."""
    dash_duo.start_server(baseline_study)
    secret = baseline_study.study_context.log.link("P01")[1]
    dash_duo.driver.get(f"{dash_duo.server_url}/?pid={secret}")
    dash_duo.wait_for_element("#trace-tokens .chip", timeout=30)
    d = dash_duo.driver
    assert not d.find_element(By.CSS_SELECTOR, ".page .side-panel").is_displayed()
    assert not d.find_element(By.CSS_SELECTOR, ".page .top-row").is_displayed()
    shown = [p for p in d.find_elements(By.CSS_SELECTOR, ".page .panel") if p.is_displayed()]
    assert len(shown) == 2 and all(p.text.strip() for p in shown)  # the table, the trace
