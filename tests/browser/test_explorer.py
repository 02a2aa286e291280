"""The explorer in a real browser: clicks, typing, downloads, URL state, escaping."""

from __future__ import annotations

import csv
import json
import time
from pathlib import Path

import pytest
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By

PLOTLY_JS = "4.1.1"  # app/assets/vendor (tests/app/test_assets.py checks it against plotly)

pytestmark = pytest.mark.browser

def _cy(driver, expr: str, root: str = "#diagram"):
    return driver.execute_script(
        f"const root = document.querySelector('{root}');"
        "const el = root && [root, ...root.querySelectorAll('*')].find(d => d._cyreg);"
        f"if (!el) return null; const cy = el._cyreg.cy; return {expr};")


def _start(dash_duo, run_dir, query: str = ""):
    from stateseer.app.main import create_app

    app = create_app(run_dir)
    dash_duo.start_server(app)
    if query:
        dash_duo.driver.get(dash_duo.server_url + "/" + query)
    dash_duo.wait_for_element("#table td", timeout=20)
    deadline = time.time() + 20
    while time.time() < deadline and not _cy(dash_duo.driver, "cy.nodes().length"):
        time.sleep(0.2)
    return app


def _wait_idle(driver, timeout: float = 15) -> None:
    """Wait until no Dash component is loading (callbacks settled)."""
    deadline = time.time() + timeout
    while time.time() < deadline and driver.execute_script(
            "return document.querySelectorAll('[data-dash-is-loading=\"true\"]').length"):
        time.sleep(0.1)


def _click_state(dash_duo, state: int) -> None:
    """Physically click the node of ``state`` on the cytoscape canvas."""
    d = dash_duo.driver
    _wait_idle(d)
    xy, deadline = None, time.time() + 15
    while xy is None and time.time() < deadline:  # elements may be replaced meanwhile
        # the node must exist and, once the layout has fitted the graph, lie inside the
        # visible part of the canvas
        xy = _cy(d, f"(() => {{ const n = cy.$('#s{state}'); if (n.empty()) return null;"
                    f" cy.container().scrollIntoView({{block: 'center'}});"
                    f" const p = n.renderedPosition();"
                    f" const r = cy.container().getBoundingClientRect();"
                    f" const x = r.left + p.x, y = r.top + p.y;"
                    f" if (x < r.left || x > r.right || y < r.top || y > r.bottom"
                    f"     || y < 0 || y > window.innerHeight) return null;"
                    f" return [x, y]; }})()")
        if xy is None:
            time.sleep(0.2)
    assert xy is not None, f"state {state} not found on the diagram"
    actions = ActionChains(d)
    actions.w3c_actions.pointer_action.move_to_location(int(xy[0]), int(xy[1]))
    actions.w3c_actions.pointer_action.click()
    actions.perform()


def _select_state(dash_duo, state: int, attempts: int = 3) -> None:
    """Click a state until its card opens: a click that lands while cytoscape is still
    replacing elements is lost (a second click on a *selected* state would unselect it, so
    the card is checked before every retry)."""
    from selenium.common.exceptions import TimeoutException

    for _ in range(attempts):
        _click_state(dash_duo, state)
        try:
            dash_duo.wait_for_text_to_equal("#state-card h4", f"State {state}", timeout=6)
            return
        except TimeoutException:
            if f"state={state}" in dash_duo.driver.current_url:  # selected, card slow
                dash_duo.wait_for_text_to_equal("#state-card h4", f"State {state}",
                                                timeout=10)
                return
    raise AssertionError(f"clicking state {state} never opened its card")


def _count(dash_duo) -> int:
    text = dash_duo.find_element("#filter-chips .count").text
    return int(text.split(" of ")[0].replace(",", ""))


def test_click_state_filters_table_and_opens_card(dash_duo, explored_run):
    _start(dash_duo, explored_run)
    total = _count(dash_duo)
    # the most visited non-initial state that not every test input passes through
    data = json.loads((explored_run / "abstraction" / "fsm.json").read_text())
    state = max(data["states"][1:], key=lambda s: s["visits"])["id"]
    _select_state(dash_duo, state)
    dash_duo.wait_for_contains_text("#filter-chips", f"through state {state}", timeout=10)
    assert 0 < _count(dash_duo) <= total
    assert f"state={state}" in dash_duo.driver.current_url
    assert _cy(dash_duo.driver, f"cy.$('#s{state}').style('border-width')") == "6px"
    dash_duo.find_element("#clear").click()
    dash_duo.wait_for_text_to_equal("#filter-chips .count",
                                    f"{total:,} of {total:,} inputs", timeout=10)
    assert dash_duo.get_logs() == []


def test_select_row_shows_trace_chart_and_path(dash_duo, explored_run):
    _start(dash_duo, explored_run)
    cell = dash_duo.find_element('#table td[data-dash-column="text"]')
    text = cell.text
    cell.click()
    dash_duo.wait_for_element("#trace-tokens .chip", timeout=10)
    chips = dash_duo.find_elements("#trace-tokens .tok")
    assert chips[0].text == "⟨start⟩" and len(chips) > 2
    assert chips[1].text.lower() in text.lower()
    dash_duo.wait_for_element("#trace-chart .scatterlayer .trace", timeout=10)
    assert _cy(dash_duo.driver, "cy.$('node.path').length") >= 2
    assert "row=" in dash_duo.driver.current_url
    # the clicked row is marked in the page (no request restyles the table)
    marked = dash_duo.driver.execute_script(
        "return [...document.querySelectorAll('#table tr.selected-row td')]"
        ".map(td => [td.innerText, getComputedStyle(td).fontWeight])")
    assert [t for t, _ in marked if t == text] and all(int(w) >= 600 for _, w in marked)
    # the chart is drawn by the page's own plotly.js bundle (app/assets/vendor), in place:
    # the 4.8 MB full build is never fetched
    d = dash_duo.driver
    assert d.execute_script("return window.Plotly.version") == PLOTLY_JS
    assert not d.execute_script("return performance.getEntriesByType('resource')"
                                ".filter(e => e.name.includes('plotly.min.js')).length")
    assert dash_duo.get_logs() == []


def test_a_click_at_the_same_place_on_new_rows_shows_the_new_row(dash_duo, explored_run):
    """#52's row-click mystery: one seeded click of six showed input #7, the input of the
    click before, instead of the row clicked. The table kept its active cell when a state
    click replaced its rows, so a click at the same place set the same active cell:
    nothing fired, and the trace stayed on the earlier input. The page now clears the
    active cell after each row click (SELECT_ROW_JS)."""
    d = dash_duo.driver
    _start(dash_duo, explored_run)

    def row(k: int) -> tuple[str, object]:
        ids = d.find_elements(By.CSS_SELECTOR, '#table td[data-dash-column="id"]')
        return ids[k].text, d.find_elements(By.CSS_SELECTOR,
                                            '#table td[data-dash-column="text"]')[k]

    first, cell = row(3)
    cell.click()
    dash_duo.wait_for_contains_text("#trace-title", f"#{first} ", timeout=10)
    import numpy as np

    from stateseer.core.traces import Traces

    # a state whose fourth input is not the table's fourth (inputs are listed in order)
    off = np.asarray(Traces(explored_run / "traces")["test"].offsets)
    st = np.load(explored_run / "abstraction" / "test.states.npy")
    through = {s: np.unique(np.searchsorted(off, np.flatnonzero(st == s), "right") - 1)
               for s in range(1, int(st.max()) + 1)}
    state = next(s for s, inputs in sorted(through.items(), key=lambda kv: -len(kv[1]))
                 if len(inputs) > 12 and inputs[3] != 3)
    ids0 = [e.text for e in d.find_elements(By.CSS_SELECTOR,
                                            '#table td[data-dash-column="id"]')]
    _select_state(dash_duo, state)
    dash_duo.wait_for_contains_text("#filter-chips", f"through state {state}", timeout=10)
    deadline = time.time() + 10
    while time.time() < deadline and [e.text for e in d.find_elements(
            By.CSS_SELECTOR, '#table td[data-dash-column="id"]')] == ids0:
        time.sleep(0.1)
    _wait_idle(d)
    second, cell = row(3)
    assert second != first  # the same place now holds another input
    cell.click()
    dash_duo.wait_for_contains_text("#trace-title", f"#{second} ", timeout=10)
    assert dash_duo.get_logs() == []


def test_a_page_with_some_views_left_out_works_without_them(dash_duo, explored_run):
    """Registry.layout(views=...): the views left out are not in the page; the callbacks
    that read their components get None and nothing fails."""
    from dash import Dash

    from stateseer.app.explorer.context import ExplorerContext
    from stateseer.app.explorer.registry import REGISTRY
    from stateseer.app.main import ASSETS, initial_selection

    ctx = ExplorerContext.load(explored_run)
    app = Dash(__name__, assets_folder=str(ASSETS), suppress_callback_exceptions=True)
    app.layout = lambda: REGISTRY.layout(ctx, initial_selection(ctx, ""),
                                         views=["table", "trace_text", "trace_chart"])
    REGISTRY.register(app, ctx)
    dash_duo.start_server(app)
    dash_duo.wait_for_element("#table td", timeout=20)
    for absent in ("#diagram", "#new-text", "#forcing-panel", "#nn-list", "#attr-strip"):
        assert not dash_duo.driver.find_elements(By.CSS_SELECTOR, absent), absent
    # outputs of left-out views that callbacks on the page also update: hidden holders
    assert not dash_duo.find_element("#state-card").is_displayed()
    dash_duo.find_element('#table td[data-dash-column="text"]').click()
    dash_duo.wait_for_element("#trace-tokens .chip", timeout=10)
    dash_duo.wait_for_element("#trace-chart .scatterlayer .trace", timeout=10)
    assert "row=" in dash_duo.driver.current_url
    assert dash_duo.get_logs() == []


def test_typed_input_draws_its_path_and_names_unknown_words(dash_duo, explored_run):
    _start(dash_duo, explored_run)
    dash_duo.find_element("#new-text").send_keys("a zorblaxian and truly moving film")
    dash_duo.find_element("#trace-btn").click()
    dash_duo.wait_for_contains_text("#input-message", "zorblaxian", timeout=15)
    dash_duo.wait_for_contains_text("#trace-title", "typed input", timeout=10)
    unknown = dash_duo.find_elements("#trace-tokens .tok.unknown")
    assert [u.text for u in unknown] == ["zorblaxian"]
    assert _cy(dash_duo.driver, "cy.$('node.path').length") >= 2
    assert dash_duo.get_logs() == []


def test_exports_download_files(dash_duo, explored_run):
    _start(dash_duo, explored_run)
    folder = Path(dash_duo.download_path)
    # one click at a time: Chromium holds back a second download a page starts at once
    # (its "multiple automatic downloads" setting), which is the browser's policy, not ours
    for button, name in (("#dl-json", f"{explored_run.name}-fsm.json"),
                         ("#dl-table", f"{explored_run.name}-test-instances.csv")):
        dash_duo.find_element(button).click()
        deadline = time.time() + 20
        while time.time() < deadline and not (folder / name).exists():
            time.sleep(0.2)
        assert (folder / name).exists(), name
    fsm = json.loads((folder / f"{explored_run.name}-fsm.json").read_text())
    assert fsm["format"] == "stateseer.fsm" and fsm["version"] == 1
    with (folder / f"{explored_run.name}-test-instances.csv").open(newline="") as fh:
        rows = list(csv.reader(fh))
    assert rows[0][:4] == ["id", "text", "label", "prediction"]
    assert len(rows) - 1 == _count(dash_duo)


def _download(dash_duo, button: str, name: str) -> Path:
    path = Path(dash_duo.download_path) / name
    dash_duo.find_element(button).click()
    deadline = time.time() + 30
    while time.time() < deadline and not path.exists():
        time.sleep(0.2)
    assert path.exists(), name
    return path


def test_html_pages_open_offline_from_file(dash_duo, explored_run):
    """The explorer's HTML downloads (the FSM page, and a recorded input's trace page)
    open from file:// with the network off: no console error, the diagram drawn, a click
    on a state opens its card, the trace drawn with its chart."""
    from stateseer.core.traces import Traces

    _start(dash_duo, explored_run)
    d = dash_duo.driver
    fsm = _download(dash_duo, "#dl-html", f"{explored_run.name}-fsm.html")
    d.find_elements(By.CSS_SELECTOR, '#table td[data-dash-column="text"]')[1].click()
    dash_duo.wait_for_element("#trace-tokens .chip", timeout=15)
    _wait_idle(d)
    iid = int(Traces(explored_run / "traces")["test"].rows[1])
    trace = _download(dash_duo, "#dl-figure", f"{explored_run.name}-input-{iid}.html")
    assert dash_duo.get_logs() == []
    d.set_network_conditions(offline=True, latency=0, download_throughput=0,
                             upload_throughput=0)
    try:
        d.get(fsm.as_uri())
        nodes = d.find_elements(By.CSS_SELECTOR, "#diagram g.node")
        assert len(nodes) >= 5
        target = next(n for n in nodes
                      if n.find_element(By.TAG_NAME, "title").get_attribute("textContent")
                      == "s2")
        d.execute_script("arguments[0].dispatchEvent(new MouseEvent('click', "
                         "{bubbles: true}))", target)
        assert d.find_element(By.CSS_SELECTOR, "#card h4").text == "State 2"
        assert "inputs pass through it" in d.find_element(By.ID, "card").text
        assert "sel" in target.get_attribute("class")
        d.get(trace.as_uri())
        chips = d.find_elements(By.CSS_SELECTOR, "#trace .tok")
        assert chips and all(c.find_element(By.CLASS_NAME, "st").text.startswith("s")
                             for c in chips)
        assert len(d.find_elements(By.CSS_SELECTOR, "#chart polyline")) == 2
        errors = [e for e in d.get_log("browser") if e["level"] == "SEVERE"]
        assert errors == []
        # nothing the pages hold asked for the network (it is off: a fetch would fail)
        assert d.execute_script("return performance.getEntriesByType('resource').length") == 0
    finally:
        d.delete_network_conditions()


def test_url_restores_the_selection(dash_duo, explored_run):
    _start(dash_duo, explored_run, "?split=test&state=2&row=1")
    dash_duo.wait_for_text_to_equal("#state-card h4", "State 2", timeout=15)
    dash_duo.wait_for_element("#trace-tokens .chip", timeout=15)
    assert _cy(dash_duo.driver, "cy.$('#s2').style('border-width')") == "6px"


def _page_shown(dash_duo) -> str:
    """The instance table's current page number (1-based) as its pager shows it."""
    inp = dash_duo.find_element("#table input.current-page")
    return inp.get_attribute("value") or inp.get_attribute("placeholder")


def test_a_linked_input_is_shown_on_its_page_of_the_table(dash_duo, explored_run):
    """A URL naming an input on a later page opens the table at that page, the input's
    row highlighted; paging away by hand afterwards stays where the user went."""
    from stateseer.core.traces import Traces

    n = Traces(explored_run / "traces")["test"].n_inputs
    last = n - 1
    _start(dash_duo, explored_run, f"?split=test&row={last}")
    want = str(last // 12 + 1)
    deadline = time.time() + 15
    while time.time() < deadline and _page_shown(dash_duo) != want:
        time.sleep(0.2)
    assert _page_shown(dash_duo) == want
    _wait_idle(dash_duo.driver)
    bold = dash_duo.driver.execute_script(
        "return [...document.querySelectorAll('#table td')].filter("
        "td => getComputedStyle(td).fontWeight >= 600).map(td => td.innerText)")
    rows = Traces(explored_run / "traces")["test"].rows
    assert str(int(rows[last])) in bold
    dash_duo.find_element("#table button.first-page").click()
    _wait_idle(dash_duo.driver)
    time.sleep(0.5)
    assert _page_shown(dash_duo) == "1"


def test_markup_in_inputs_is_shown_as_text(dash_duo, explored_run):
    _start(dash_duo, explored_run)
    evil = "<script>window.__pwned=1</script> <img src=x onerror=\"window.__pwned=2\">"
    dash_duo.find_element("#new-text").send_keys(evil)
    dash_duo.find_element("#trace-btn").click()
    dash_duo.wait_for_contains_text("#trace-title", "typed input", timeout=15)
    d = dash_duo.driver
    assert d.execute_script("return window.__pwned === undefined")
    assert d.find_elements(By.CSS_SELECTOR, "#trace-tokens img") == []
    assert d.find_elements(By.CSS_SELECTOR, "#trace-tokens script") == []
    tokens = [t.text for t in dash_duo.find_elements("#trace-tokens .tok")]
    assert "<" in tokens and "script" in tokens


def test_four_classes_get_legend_swatches_and_a_distinct_path_colour(dash_duo,
                                                                     multiclass_run):
    from stateseer.app.explorer.palette import PATH_COLOR, delta_e

    _start(dash_duo, multiclass_run)
    swatches = dash_duo.find_elements("#diagram-panel .legend .lg-class")
    assert len(swatches) == 4
    names = sorted(s.text for s in swatches)
    assert names == sorted(["fresh-long", "fresh-short", "rotten-long", "rotten-short"])
    colours = [dash_duo.driver.execute_script(
        "const c = getComputedStyle(arguments[0].querySelector('.sw')).backgroundColor;"
        "const m = c.match(/\\d+/g).map(Number);"
        "return '#' + m.slice(0, 3).map(x => x.toString(16).padStart(2, '0')).join('');",
        s) for s in swatches]
    assert len(set(colours)) == 4
    dash_duo.find_element('#table td[data-dash-column="text"]').click()
    dash_duo.wait_for_element("#trace-chart .scatterlayer .trace", timeout=10)
    deadline = time.time() + 10
    while time.time() < deadline and not _cy(dash_duo.driver, "cy.$('node.path').length"):
        time.sleep(0.2)
    border = _cy(dash_duo.driver, "cy.$('node.path').first().style('border-color')")
    rgb = [int(x) for x in border[border.index("(") + 1:-1].split(",")[:3]]
    path = "#" + "".join(f"{x:02x}" for x in rgb)
    assert path == PATH_COLOR
    assert min(delta_e(path, c) for c in colours) > 20  # the path never looks like a class
    # the chart's legend names every class, right of the plot (not under the toolbar)
    names = dash_duo.driver.execute_script(
        "return [...document.querySelectorAll('#trace-chart .legendtext')]"
        ".map(e => e.textContent);")
    assert sum(n.startswith("P(") for n in names) == 4
    assert dash_duo.get_logs() == []


def test_the_dfa_tab_extracts_the_automaton_in_the_background_and_draws_it(
        dash_duo, explored_tomita, tmp_path):
    import shutil

    from stateseer.app.explorer.context import ExplorerContext
    from stateseer.app.main import create_app

    run = tmp_path / "t3"
    shutil.copytree(explored_tomita, run)
    ctx = ExplorerContext.load(run, jobs=True)
    dash_duo.start_server(create_app(context=ctx))
    dash_duo.wait_for_element("#table td", timeout=30)
    d = dash_duo.driver
    next(t for t in d.find_elements(By.CSS_SELECTOR, ".tab") if t.text == "DFA").click()
    dash_duo.wait_for_contains_text("#dfa-body", "No automaton yet", timeout=20)
    dash_duo.find_element("#dfa-start").click()
    dash_duo.wait_for_contains_text("#dfa-body", "the grammar's minimal DFA exactly",
                                    timeout=120)
    dash_duo.wait_for_element("#automaton-graph canvas", timeout=20)
    assert _cy(d, "cy.nodes().length", "#automaton-graph") == 5
    assert (run / "abstraction" / "dfa.json").exists()
    assert dash_duo.get_logs() == []


def test_a_notebook_frame_on_another_port_shows_the_explorer(dash_duo, explored_run,
                                                            tmp_path):
    """What a notebook's output cell does: a page on another loopback port holds
    ``stateseer.show``'s <iframe>; the explorer loads inside it (the served explorer,
    ``stateseer serve``, still refuses to be framed)."""
    import functools
    import http.server
    import threading

    from stateseer.app.notebook import show

    view = show(explored_run)
    (tmp_path / "cell.html").write_text(f"<html><body>{view._repr_html_()}</body></html>")
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(tmp_path))
    notebook = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=notebook.serve_forever, daemon=True).start()
    try:
        d = dash_duo.driver
        d.get(f"http://127.0.0.1:{notebook.server_address[1]}/cell.html")
        d.switch_to.frame(d.find_element(By.CSS_SELECTOR, "iframe"))
        dash_duo.wait_for_element("#table td", timeout=40)
        dash_duo.wait_for_element("#diagram canvas", timeout=20)
        d.switch_to.default_content()
    finally:
        notebook.shutdown()
        view.stop()
