"""The analysis views in a real browser: nearest contexts, attribution, state forcing,
editing and comparing inputs, and comparing two runs."""

from __future__ import annotations

import shutil
import time

import pytest

from tests.browser.test_explorer import _cy, _select_state, _start, _wait_idle

pytestmark = pytest.mark.browser


def _wait(cond, timeout: float = 20, what: str = "condition"):
    from selenium.common.exceptions import WebDriverException

    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            value = cond()
        except WebDriverException:  # the element was re-rendered meanwhile: look again
            value = None
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def _plot_names(driver, graph_id: str) -> list[str]:
    return driver.execute_script(
        f"const g = document.querySelector('#{graph_id} .js-plotly-plot');"
        "return g && g.data ? g.data.map(t => t.name) : [];") or []


def _tokens(dash_duo) -> list[str]:
    return [t.text for t in dash_duo.find_elements("#trace-tokens .token-strip")[0]
            .find_elements("css selector", ".tok")][1:]


def _click_token(dash_duo, t: int) -> None:
    chip = dash_duo.find_elements("#trace-tokens .token-strip")[0].find_elements(
        "css selector", ".chip")[t + 1]
    dash_duo.driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", chip)
    chip.click()


def test_nearest_contexts_follow_the_clicked_token(dash_duo, analysed_run):
    _start(dash_duo, analysed_run, "?split=test&row=0")
    dash_duo.wait_for_element("#nn-list tr.nn-row", timeout=20)
    toks = _tokens(dash_duo)
    assert len(dash_duo.find_elements("#nn-list tr.nn-row")) == 8
    summary = dash_duo.find_element("#nn-list .nn-summary").text
    assert f"step {len(toks)}" in summary and "in the same state" in summary
    _click_token(dash_duo, 1)
    dash_duo.wait_for_contains_text("#nn-list .nn-summary", "(step 2,", timeout=15)
    # the clicked token is marked in the strip, and only it
    dash_duo.wait_for_element("#trace-tokens .chip.chip-step", timeout=10)
    marked = dash_duo.find_elements("#trace-tokens .chip.chip-step")
    assert len(marked) == 1 and marked[0].find_element("css selector", ".tok").text == toks[1]
    marks = [m.text for m in dash_duo.find_elements("#nn-list tr.nn-row mark")]
    assert len(marks) == 8 and all(marks)
    dash_duo.select_dcc_dropdown("#nn-k", value="5")
    _wait(lambda: len(dash_duo.find_elements("#nn-list tr.nn-row")) == 5, what="k = 5")
    names = _wait(lambda: _plot_names(dash_duo.driver, "proj-chart"), what="projection")
    assert {"this input", "selected step"} <= set(names)
    assert any(n.startswith("all ") and "training states, binned" in n for n in names)
    assert any(n.startswith("state ") for n in names)  # the step's state, outlined
    n_path = dash_duo.driver.execute_script(
        "const g = document.querySelector('#proj-chart .js-plotly-plot');"
        "return g.data.find(t => t.name === 'this input').x.length;")
    assert n_path == len(toks) + 1
    # a neighbour's context opens that training input
    ctx_cell = dash_duo.find_elements("#nn-list td.nn-ctx")[0]
    token = ctx_cell.find_element("css selector", "mark").text
    dash_duo.driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", ctx_cell)
    ctx_cell.click()
    _wait(lambda: "split=train" in dash_duo.driver.current_url, what="train split")
    _wait(lambda: token in _tokens(dash_duo), what="the training input's trace")
    assert dash_duo.get_logs() == []


def test_attribution_strip_methods_and_segments(dash_duo, analysed_run):
    _start(dash_duo, analysed_run, "?split=test&row=2")
    dash_duo.wait_for_element("#attr-strip .attr-seg", timeout=30)
    toks = _tokens(dash_duo)
    segs = dash_duo.find_elements("#attr-strip .attr-seg")
    assert [s.text for s in segs] == toks
    dash_duo.wait_for_contains_text("#attr-note", "convergence delta", timeout=10)
    assert "integrated gradients" in dash_duo.find_element("#attr-note").text
    # shaded by score: not all segments look alike
    styles = [s.get_attribute("style") for s in segs]
    assert len(set(styles)) > 1 and all("background" in st for st in styles)
    dash_duo.select_dcc_dropdown("#attr-method", value="occlusion")
    dash_duo.wait_for_contains_text("#attr-note", "occlusion", timeout=15)
    dash_duo.find_element("#attr-regex").send_keys("[,.]\n")
    dash_duo.select_dcc_dropdown("#attr-level", value="regex")
    _wait(lambda: 0 < len(dash_duo.find_elements("#attr-strip .attr-seg")) <= len(toks),
          what="regex segments")
    joined = " ".join(s.text for s in dash_duo.find_elements("#attr-strip .attr-seg"))
    assert joined.split() == " ".join(toks).split()
    dash_duo.select_dcc_dropdown("#attr-method", value="off")
    _wait(lambda: not dash_duo.find_elements("#attr-strip .attr-seg"), what="strip off")
    assert dash_duo.get_logs() == []


def test_state_forcing_every_step_one_step_and_state_card(dash_duo, analysed_run):
    _start(dash_duo, analysed_run, "?split=test&row=1")
    dash_duo.wait_for_element("#trace-chart .js-plotly-plot", timeout=20)
    dash_duo.find_element("#force-all").click()
    dash_duo.wait_for_contains_text("#force-note", "Forced every step", timeout=20)
    assert any(w in dash_duo.find_element("#force-note").text for w in ("survives", "flips"))
    names = _wait(lambda: [n for n in _plot_names(dash_duo.driver, "trace-chart")
                           if "forced at every step" in n], what="forced curve")
    assert names
    _click_token(dash_duo, 1)
    _wait_idle(dash_duo.driver)
    dash_duo.find_element("#force-step").click()
    dash_duo.wait_for_contains_text("#force-note", "Forced step 2", timeout=20)
    _wait(lambda: [n for n in _plot_names(dash_duo.driver, "trace-chart")
                   if "forced at step 2" in n], what="one-step curve")
    dash_duo.find_element("#force-clear").click()
    _wait(lambda: not [n for n in _plot_names(dash_duo.driver, "trace-chart")
                       if "forced" in n], what="cleared")
    # the diagram can be coloured by the per-state forcing figures
    before = _cy(dash_duo.driver, "cy.nodes().map(n => n.data('color')).join(',')")
    dash_duo.select_dcc_dropdown("#color-by", value="by forcing agreement")
    dash_duo.wait_for_contains_text("#color-note", "forcing agreement", timeout=10)
    _wait(lambda: _cy(dash_duo.driver, "cy.nodes().map(n => n.data('color')).join(',')")
          != before, what="recoloured nodes")
    # the state card reports the state's own forcing figure
    state = int(dash_duo.find_elements("#trace-tokens .st")[2].text)
    _select_state(dash_duo, state)
    dash_duo.wait_for_contains_text("#state-card", "State forcing", timeout=15)
    assert "test inputs" in dash_duo.find_element("#state-card .forcing-line").text
    assert dash_duo.get_logs() == []


def test_edit_a_row_and_pin_a_trace_to_compare(dash_duo, analysed_run):
    _start(dash_duo, analysed_run, "?split=test&row=0")
    dash_duo.wait_for_element("#trace-tokens .chip", timeout=20)
    row_id = dash_duo.find_element("#trace-title b").text.strip()
    dash_duo.find_element("#edit-btn").click()
    box = dash_duo.find_element("#new-text")
    _wait(lambda: box.get_attribute("value"), what="text copied")
    assert dash_duo.find_element("#compare-mode input").is_selected()
    box.send_keys(" but the ending is a dreadful , boring mess")
    dash_duo.find_element("#trace-btn").click()
    dash_duo.wait_for_contains_text("#trace-title", "typed input", timeout=20)
    dash_duo.wait_for_contains_text(".compare-note", row_id, timeout=10)
    note = dash_duo.find_element(".compare-note").text
    assert "abstract states differ after" in note
    assert len(dash_duo.find_elements(".token-strip")) == 2
    assert _wait(lambda: [n for n in _plot_names(dash_duo.driver, "trace-chart")
                          if "(compared)" in n], what="two curves")
    assert _cy(dash_duo.driver, "cy.$('node.compare').length") >= 1
    # with two strips on the page, a click on the main one still selects its step
    _click_token(dash_duo, 2)
    dash_duo.wait_for_contains_text("#nn-list .nn-summary", "(step 3,", timeout=15)
    # pin the edited input; every row selected next is compared with it
    dash_duo.find_element("#pin-btn").click()
    dash_duo.wait_for_contains_text("#pin-info", "pinned the typed input", timeout=10)
    dash_duo.find_elements('#table td[data-dash-column="text"]')[3].click()
    dash_duo.wait_for_contains_text(".compare-note", "the typed input", timeout=15)
    dash_duo.find_element("#pin-btn").click()
    _wait(lambda: not dash_duo.find_elements(".compare-note"), what="unpinned")
    assert dash_duo.get_logs() == []


@pytest.fixture(scope="module")
def other_run(tmp_path_factory, analysed_run):
    from stateseer.abstraction.pipeline import abstract_run

    dst = tmp_path_factory.mktemp("runs") / "other"
    shutil.copytree(analysed_run, dst)
    abstract_run(dst, n_states=8, random_state=5)
    return dst


def test_compare_two_runs_matches_states_and_lists_changed_inputs(dash_duo, analysed_run,
                                                                   other_run):
    from stateseer.app.main import create_app

    app = create_app(analysed_run, compare=other_run)
    dash_duo.start_server(app)
    dash_duo.wait_for_element("#table td", timeout=20)
    tab = [t for t in dash_duo.find_elements("#side-tabs .tab") if "Compare" in t.text]
    assert tab and "other" in tab[0].text
    tab[0].click()
    dash_duo.wait_for_contains_text("#compare-panel .cmp-summary", "analysed vs other",
                                    timeout=20)
    assert "steps in matched states" in dash_duo.find_element(".cmp-summary").text
    assert len(dash_duo.find_elements("#compare-panel .cmp-table tr")) > 2
    btn = dash_duo.find_elements("#compare-panel .cmp-btn")[0]
    rid = btn.text
    btn.click()
    dash_duo.wait_for_contains_text("#trace-title", rid, timeout=15)
    dash_duo.wait_for_contains_text(".compare-note", "run other", timeout=15)
    assert len(dash_duo.find_elements(".token-strip")) == 2
    assert dash_duo.get_logs() == []
