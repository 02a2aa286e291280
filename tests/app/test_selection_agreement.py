"""The selection rules agree in Python and in the page.

``app/assets/explorer.js`` (``window.stateseer.applyEvent``, ``toQuery``, ``select``) mirrors
:mod:`stateseer.app.selection` (``apply_event``, ``to_query``) for the clientside callbacks,
and the diagram's ``TAP_JS``/``CLEAR_JS`` mirror its server callbacks ``tap``/``clear``.
A few hundred seeded random selections and events go through both sides, the JavaScript
side in one ``node`` process; the results must be equal.
"""

from __future__ import annotations

import json
import random
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from dash import no_update

from stateseer import app
from stateseer.app.explorer.views import diagram
from stateseer.app.selection import EMPTY, apply_event, to_query
from tests.conftest import REQUIRE_BROWSER

EXPLORER_JS = Path(app.__file__).with_name("assets") / "explorer.js"
#: what the stubbed ``window.dash_clientside.no_update`` is; mapped to ``dash.no_update``
NO_UPDATE = "__NO_UPDATE__"
N_CASES = 400
N_CALLBACK_CASES = 150

# Reachable values plus odd ones both sides must treat alike: None, falsy 0 and "",
# missing keys, negative and large ints, URL-special and non-ASCII split names. ("~" and
# "*" are left out: urlencode and URLSearchParams escape them differently, and split
# names are only ever train/val/test.)
SPLITS = [None, "train", "val", "test", "", "a b&c=d/e+f%g?h#i", "tést ✓", "x:y;z"]
INTS = [None, 0, 1, 2, 3, -1, 7, 12345, 2**40]
KINDS = ["influential", "buggy"]
EVENTS = ["state", "row", "pattern", "split", "clear", "hover", ""]

NODE_SCRIPT = r"""
const fs = require('fs');
const vm = require('vm');
const input = JSON.parse(fs.readFileSync(0, 'utf8'));
globalThis.window = {dash_clientside: {no_update: input.no_update}};
vm.runInThisContext(fs.readFileSync(input.explorer_js, 'utf8'), {filename: 'explorer.js'});
const ss = window.stateseer;
const fns = {};
for (const [name, src] of Object.entries(input.callbacks)) {
  fns[name] = vm.runInThisContext('(' + src + ')', {filename: name});
}
const out = {
  applyEvent: input.events.map(c => ss.applyEvent(c.sel, c.event, c.payload)),
  select: input.events.map(c => ss.select(c.sel, c.event, c.payload)),
  toQuery: input.queries.map(sel => ss.toQuery(sel)),
  tap: input.taps.map(c => fns.tap(c.node, c.sel)),
  clear: input.clears.map(c => fns.clear(c.n, c.sel)),
  empty: ss.EMPTY,
};
process.stdout.write(JSON.stringify(out));
"""


def _pattern(rng: random.Random) -> dict[str, Any]:
    n = rng.randrange(4)
    return {"kind": rng.choice(KINDS), "index": rng.randrange(3),
            "states": [rng.randrange(12) for _ in range(n)]}


def _selection(rng: random.Random) -> dict[str, Any]:
    """A prior selection: any key may be missing; ``pick`` only sometimes."""
    sel: dict[str, Any] = {}
    for key, make in (("split", lambda: rng.choice(SPLITS)),
                      ("state", lambda: rng.choice(INTS[:5]) if rng.random() < 0.7
                       else rng.choice(INTS)),
                      ("row", lambda: rng.choice(INTS)),
                      ("pattern", lambda: _pattern(rng) if rng.random() < 0.6 else None),
                      ("pick", lambda: rng.choice([None, 0, 1, 5]))):
        if rng.random() < (0.4 if key == "pick" else 0.9):
            sel[key] = make()
    return sel


def _event(rng: random.Random) -> dict[str, Any]:
    sel = _selection(rng)
    event = rng.choice(EVENTS)
    payload: Any = None
    if event == "state":
        # often the selected state again (a second click unselects it)
        payload = sel.get("state") if rng.random() < 0.35 else rng.choice(INTS[1:6])
    elif event == "row":
        payload = rng.choice(INTS)
    elif event == "pattern":
        payload = _pattern(rng)
        if sel.get("pattern") and rng.random() < 0.35:
            payload = {**payload, "kind": sel["pattern"]["kind"],
                       "index": sel["pattern"]["index"]}
    elif event == "split":
        payload = rng.choice(SPLITS)
    elif event == "hover":
        payload = rng.choice(INTS)
    return {"sel": sel, "event": event, "payload": payload}


def _cases() -> dict[str, Any]:
    rng = random.Random(20240611)
    events = [_event(rng) for _ in range(N_CASES)]
    queries = [_selection(rng) for _ in range(N_CASES)] + [dict(EMPTY), {}]
    taps = []
    for _ in range(N_CALLBACK_CASES):
        sel = rng.choice([None, {}, _selection(rng), _selection(rng)])
        state = (sel or {}).get("state") if rng.random() < 0.3 else rng.randrange(12)
        node = None if rng.random() < 0.15 or state is None else \
            {"id": f"s{state}", "state": state, "label": str(state)}
        taps.append({"node": node, "sel": sel})
    clears = [{"n": rng.choice([None, 1, 3]), "sel": rng.choice([None, {}, _selection(rng)])}
              for _ in range(N_CALLBACK_CASES)]
    # the same JSON goes to both sides
    return json.loads(json.dumps({"events": events, "queries": queries, "taps": taps,
                                  "clears": clears}))


def _run_node(cases: dict[str, Any]) -> dict[str, Any]:
    node = shutil.which("node")
    if node is None:
        if REQUIRE_BROWSER:
            pytest.fail("Node.js (`node`) is required (STATESEER_REQUIRE_BROWSER=1)")
        pytest.skip("Node.js (`node`) is not installed: cannot run app/assets/explorer.js")
    assert NO_UPDATE not in json.dumps(cases), "a generated value collides with the sentinel"
    stdin = json.dumps({**cases, "explorer_js": str(EXPLORER_JS), "no_update": NO_UPDATE,
                        "callbacks": {"tap": diagram.TAP_JS, "clear": diagram.CLEAR_JS}})
    proc = subprocess.run([node, "-e", NODE_SCRIPT], input=stdin, capture_output=True,
                          text=True, encoding="utf-8", timeout=60, check=False)
    assert proc.returncode == 0, f"node failed:\n{proc.stderr}"
    return json.loads(proc.stdout)


def _from_js(value: Any) -> Any:
    """A JS result as the Python side writes it: the sentinel is ``dash.no_update``."""
    if value == NO_UPDATE:
        return no_update
    if isinstance(value, list):
        return [_from_js(v) for v in value]
    return value


def _py(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


@pytest.fixture(scope="module")
def both() -> tuple[dict[str, Any], dict[str, Any]]:
    cases = _cases()
    return cases, _run_node(cases)


def _mismatches(name, inputs, js, py) -> list[str]:
    assert len(js) == len(inputs) == len(py)
    bad = [f"{name}{args!r}:\n  python {p!r}\n  js     {j!r}"
           for args, j, p in zip(inputs, js, py, strict=True) if j != p]
    return bad[:5] + ([f"... and {len(bad) - 5} more"] if len(bad) > 5 else [])


def test_apply_event_agrees(both):
    cases, js = both
    args = [(c["sel"], c["event"], c["payload"]) for c in cases["events"]]
    py = [apply_event(*a) for a in args]
    assert not _mismatches("apply_event", args, js["applyEvent"], py)
    assert js["empty"] == EMPTY


def test_to_query_agrees(both):
    cases, js = both
    args = [(sel,) for sel in cases["queries"]]
    assert not _mismatches("to_query", args, js["toQuery"], [to_query(*a) for a in args])


def test_select_is_apply_event_then_to_query(both):
    cases, js = both
    args = [(c["sel"], c["event"], c["payload"]) for c in cases["events"]]
    py = [[new, to_query(new)] for new in (apply_event(*a) for a in args)]
    assert not _mismatches("select", args, js["select"], py)


def test_diagram_clientside_callbacks_agree_with_their_server_twins(both):
    cases, js = both
    taps = [(None, c["node"], c["sel"]) for c in cases["taps"]]
    py = [_py(diagram.tap(*a)) for a in taps]
    assert not _mismatches("tap", taps, [_from_js(r) for r in js["tap"]], py)
    assert [no_update, no_update] in py, "no case left the selection unchanged"
    clears = [(None, c["n"], c["sel"]) for c in cases["clears"]]
    py = [_py(diagram.clear(*a)) for a in clears]
    assert not _mismatches("clear", clears, [_from_js(r) for r in js["clear"]], py)


def test_the_cases_reach_every_rule():
    """The random cases are not vacuous: each event and each toggle occurs."""
    events = _cases()["events"]
    seen = {c["event"] for c in events}
    assert seen == set(EVENTS)
    unselect_state = [c for c in events if c["event"] == "state" and "state" in c["sel"]
                      and c["payload"] == c["sel"]["state"]]
    unselect_pattern = [c for c in events if c["event"] == "pattern" and c["sel"].get("pattern")
                        and c["payload"]["kind"] == c["sel"]["pattern"]["kind"]
                        and c["payload"]["index"] == c["sel"]["pattern"]["index"]]
    missing = [c for c in events if set(c["sel"]) < {"split", "state", "row", "pattern"}]
    assert len(unselect_state) >= 10 and len(unselect_pattern) >= 10 and len(missing) >= 20
