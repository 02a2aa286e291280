"""The server-side check of a participant's condition on every explorer callback.

Hiding a view with CSS hides nothing from a participant who calls its callbacks
directly. So every ``POST /_dash-update-component`` of the study server passes here
first: the participant comes from the request's link secret
(:mod:`stateseer.app.study.identity`; none: 403) and their condition from the log; then

- a request that is not, output by output and input by input, the callback it names as
  registered is not run (``204``; :func:`unregistered`: Dash reads inputs by position,
  so an id the client renames would otherwise hide a value from the checks below);

- a callback *triggered* by a component of a view the condition excludes, or whose
  outputs *all* belong to excluded views, is not run (``204``, Dash's "no update");
- in a callback that also updates allowed views, the outputs of excluded views are
  dropped from the response (as if the callback had returned ``no_update`` for them);
- a condition without state views (diagram, card, patterns) may not send a selection
  that names a state or a pattern (``204``): the table would otherwise filter by it;
  and the trace records it receives (the ``active-trace`` store) carry no abstract
  state (:meth:`stateseer.app.workflows.records.TraceRecord.without_states`).

The page itself holds no data of excluded views either: :func:`blank_excluded` empties
their components (the components stay, with their ids, so the explorer's callbacks keep
their shape). Which components belong to which view comes from one function,
:func:`component_ids`, which reads the explorer's view registry: a new view is guarded
without a line here.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

from flask import Flask, Response, current_app, g, jsonify, request

from stateseer.app.explorer.ids import ACTIVE_TRACE, SELECTION
from stateseer.app.explorer.registry import REGISTRY
from stateseer.app.explorer.tree import children
from stateseer.app.study import views as study_views
from stateseer.app.study.context import current
from stateseer.app.study.spec import VIEWS

__all__ = ["DASH_UPDATE", "STATE_VIEWS", "blank_excluded", "callback_ids", "component_ids",
           "excluded_ids", "register", "relay", "strip_states", "unregistered"]

DASH_UPDATE = "/_dash-update-component"
DASH_APP = "stateseer.study.dash_app"  # the Dash app, in its Flask server's extensions
STATE_VIEWS = REGISTRY.state_views()
"""The views that show abstract states (``View.shows_states``)."""
_CONTENT_PROPS = {"children": None, "elements": [], "figure": {}, "data": None}

def component_ids(view: str) -> frozenset[str]:
    """The ids of the components that belong to ``view`` (pattern-matching: their type),
    as the explorer's view registry lists them (:func:`stateseer.app.study.views.component_ids`).

    Examples
    --------
    >>> "diagram" in component_ids("diagram"), "table" in component_ids("diagram")
    (True, False)
    """
    return frozenset(study_views.component_ids(view))


def excluded_ids(views: tuple[str, ...]) -> frozenset[str]:
    """Ids that only views outside ``views`` own (a shared id stays allowed)."""
    allowed = set().union(*(component_ids(v) for v in views)) if views else set()
    hidden = set().union(*(component_ids(v) for v in VIEWS if v not in views))
    return frozenset(hidden - allowed)


def _key(cid: Any) -> str | None:
    """A component id as :func:`component_ids` names it (dict ids: their type)."""
    if isinstance(cid, dict):
        return str(cid.get("type")) if "type" in cid else None
    if isinstance(cid, str) and cid.startswith("{"):
        try:
            return _key(json.loads(cid))
        except ValueError:
            return None
    return cid if isinstance(cid, str) else None


def _spec_ids(spec: Any) -> Iterator[str | None]:
    """Ids in a Dash request's ``outputs``/``inputs``/``state`` (nested for ALL)."""
    if isinstance(spec, list):
        for s in spec:
            yield from _spec_ids(s)
    elif isinstance(spec, dict):
        yield _key(spec.get("id"))


def callback_ids(body: Any) -> tuple[list[str | None], list[str | None]]:
    """``(output ids, triggering ids)`` of a ``/_dash-update-component`` body.

    Examples
    --------
    >>> callback_ids({"outputs": [{"id": "state-card", "property": "children"}],
    ...               "changedPropIds": ['{"index":2,"type":"token"}.n_clicks']})
    (['state-card'], ['token'])
    """
    if not isinstance(body, dict):
        return [], []
    outputs = list(_spec_ids(body.get("outputs")))
    changed = body.get("changedPropIds") or []
    triggers = [_key(str(c).rsplit(".", 1)[0]) for c in changed] if isinstance(changed, list) \
        else [None]
    return outputs, triggers


def _names_a_state(body: dict[str, Any]) -> bool:
    """Whether the request sends a selection that names a state or a pattern."""
    specs = [x for part in ("inputs", "state") if isinstance(body.get(part), list)
             for x in body[part]]
    for spec in specs:
        if isinstance(spec, dict) and spec.get("id") == SELECTION:
            value = spec.get("value")
            if isinstance(value, dict) and (value.get("state") is not None or
                                            value.get("pattern")):
                return True
    return False


def _matches(pattern: dict[str, Any], cid: Any) -> bool:
    """Whether a sent pattern-matching id fits a registered one (wildcards: any value)."""
    return isinstance(cid, dict) and set(cid) == set(pattern) and all(
        isinstance(v, list) or cid[k] == v for k, v in pattern.items())


def _fits(registered: dict[str, Any], sent: Any) -> bool:
    """Whether a request's dependency (a dict, or a list of them for ``ALL``) is the
    registered ``{"id", "property"}``."""
    rid, prop = registered["id"], registered["property"].split("@")[0]

    def same(p: Any) -> bool:  # an allow_duplicate output is sent as "prop@hash"
        return isinstance(p, str) and p.split("@")[0] == prop

    if isinstance(rid, str) and rid.startswith("{"):
        pattern = json.loads(rid)
        items = sent if isinstance(sent, list) else [sent]
        return all(isinstance(x, dict) and same(x.get("property"))
                   and _matches(pattern, x.get("id")) for x in items)
    return isinstance(sent, dict) and sent.get("id") == rid and same(sent.get("property"))


def _outputs_of(key: str) -> list[dict[str, Any]]:
    """The ``{"id", "property"}`` outputs a ``callback_map`` key names."""
    out = []
    for part in key.strip(".").split("..."):
        cid, _, prop = part.split("@")[0].rpartition(".")
        out.append({"id": cid, "property": prop})
    return out


def unregistered(body: Any, callback_map: dict[str, Any]) -> str | None:
    """Why a callback request is not the registered callback it names, or None.

    Dash passes a callback its inputs *by position*: the ids a client writes beside the
    values are not read. A request whose outputs, inputs, states or fired properties are
    not, one by one, those the callback was registered with could carry one component's
    value under another's id (e.g. a selection that names a state, under an id the
    checks below do not look for), so it is refused.

    Examples
    --------
    >>> cmap = {"out.children": {"inputs": [{"id": "selection", "property": "data"}],
    ...                          "state": []}}
    >>> body = {"output": "out.children", "outputs": {"id": "out", "property": "children"},
    ...         "inputs": [{"id": "selection-x", "property": "data", "value": {}}],
    ...         "changedPropIds": ["selection-x.data"]}
    >>> unregistered(body, cmap)
    "input 1 is not the callback's 'selection.data'"
    """
    if body is None:
        return None  # not JSON: Dash answers 400 itself
    if not isinstance(body, dict) or body.get("output") not in callback_map:
        return "it names no callback of this page"
    cb, want = callback_map[body["output"]], _outputs_of(body["output"])
    outs = body.get("outputs")
    outs = outs if isinstance(outs, list) and len(want) > 1 else [outs]
    if len(outs) != len(want) or not all(_fits(w, o) for w, o in zip(want, outs,
                                                                       strict=True)):
        return "its outputs are not the callback's"
    for part in ("inputs", "state"):
        sent, reg = body.get(part) or [], cb.get(part) or []
        if not isinstance(sent, list) or len(sent) != len(reg):
            return f"its {part} are not the callback's"
        for k, (r, x) in enumerate(zip(reg, sent, strict=True)):
            if not _fits(r, x):
                return f"{part[:5].rstrip('s')} {k + 1} is not the callback's " \
                       f"'{r['id']}.{r['property']}'"
    fired = body.get("changedPropIds") or []
    for c in fired if isinstance(fired, list) else [None]:
        cid, _, prop = str(c).rpartition(".")
        try:
            sent = {"id": json.loads(cid) if cid.startswith("{") else cid, "property": prop}
        except ValueError:
            sent = None
        if not any(_fits(r, sent) for r in cb.get("inputs") or []):
            return f"{str(c)[:60]!r} is not an input of the callback"
    return None


def check(body: Any, views: tuple[str, ...], callback_map: dict[str, Any]) -> str | None:
    """Why a callback request is refused for a condition showing ``views``, or None
    (first :func:`unregistered`: is it the callback as registered in ``callback_map``)."""
    wrong = unregistered(body, callback_map)
    if wrong is not None:
        return wrong
    hidden = excluded_ids(views)
    outputs, triggers = callback_ids(body)
    bad = next((t for t in triggers if t in hidden), None)
    if bad is not None:
        return f"{bad!r} belongs to a view this condition does not show"
    if outputs and all(o in hidden for o in outputs):
        return "its outputs belong to views this condition does not show"
    if not STATE_VIEWS & set(views) and isinstance(body, dict) and _names_a_state(body):
        return "this condition shows no states"
    return None


def strip_states(active: Any) -> Any:
    """An ``active-trace`` store value with every record's abstract states removed.

    Examples
    --------
    >>> strip_states({"main": {"states": [0, 2], "simulated": [0, 1], "text": "a"},
    ...               "compare": None})
    {'main': {'states': [], 'simulated': [], 'text': 'a'}, 'compare': None}
    """
    if not isinstance(active, dict):
        return active
    out = dict(active)
    for k in ("main", "compare"):
        rec = out.get(k)
        if isinstance(rec, dict):
            rec = {f: v for f, v in rec.items() if f != "states_own"}
            out[k] = {**rec, "states": [], "simulated": []}
    return out


def relay(component_id: Any, value: Any) -> Any:
    """What an explorer callback passes to the next one in the same request
    (:func:`stateseer.app.explorer.registry.fuse`): the ``active-trace`` store without its
    abstract states in a condition that shows none, as :func:`drop_hidden_outputs` sends
    it to the page (so the views drawn from it in the same request show no state)."""
    if component_id == ACTIVE_TRACE and getattr(g, "study_stateless", False):
        return strip_states(value)
    return value


def _strip_trace(part: dict[str, Any]) -> None:
    """Strip the states of an ``active-trace`` output in a response part, in place."""
    for k, v in part.items():
        if _key(k) == ACTIVE_TRACE and isinstance(v, dict) and "data" in v:
            part[k] = {**v, "data": strip_states(v["data"])}


def _drop_hidden(resp: Response, hidden: frozenset[str], stateless: bool = False) -> Response:
    """Remove the outputs of hidden views from a callback response (and, ``stateless``,
    the abstract states of the trace records it sends)."""
    doc = resp.get_json(silent=True)
    if not isinstance(doc, dict):
        return resp
    kept = False
    for part in ("response", "sideUpdate"):
        if isinstance(doc.get(part), dict):
            doc[part] = {k: v for k, v in doc[part].items() if _key(k) not in hidden}
            if stateless:
                _strip_trace(doc[part])
            kept = kept or bool(doc[part])
    if not kept:
        return Response(status=204)
    resp.set_data(json.dumps(doc))
    return resp


def guard_callbacks() -> Response | None:
    """``before_request``: a Dash callback request is answered only for a participant,
    only with what their condition shows (see the module notes)."""
    if request.path != DASH_UPDATE:
        return None
    sc = current()
    pid = sc.participant()
    views = sc.condition_views(pid) if pid else None
    if views is None:
        resp = jsonify({"ok": False, "error": "this request carries no valid participant "
                        "link — reload the study page from your link"})
        resp.status_code = 403
        return resp
    reason = check(request.get_json(silent=True), tuple(views),
                   current_app.extensions[DASH_APP].callback_map)
    if reason is not None:
        return Response(status=204, headers={"X-Study-Refused": reason[:200]})
    g.study_hidden = excluded_ids(tuple(views))
    g.study_stateless = not STATE_VIEWS & set(views)
    return None


def drop_hidden_outputs(resp: Response) -> Response:
    """``after_request``: outputs of views the condition hides are dropped."""
    hidden = g.pop("study_hidden", None)
    stateless = g.pop("study_stateless", False)
    if (hidden or stateless) and request.path == DASH_UPDATE and resp.status_code == 200:
        return _drop_hidden(resp, hidden or frozenset(), stateless)
    return resp


def register(server: Flask, app: Any) -> None:
    """Check every Dash callback request of ``server`` (see the module notes) against
    the callbacks registered on the Dash ``app`` and the participant's condition."""
    server.extensions[DASH_APP] = app
    server.before_request(guard_callbacks)
    server.after_request(drop_hidden_outputs)


def _has_named_child(c: Any) -> bool:
    """Whether a component holds a component with a plain (string) id."""
    return any(isinstance(getattr(k, "id", None), str) or _has_named_child(k)
               for k in children(c))


def blank_excluded(layout: Any, views: Iterable[str]) -> Any:
    """Empty, in place, the components of views outside ``views``; returns ``layout``.

    A component of an excluded view that holds no component with a plain id (its content:
    text, rows, elements, a figure) loses that content; components with ids stay, so the
    explorer's callbacks find what they expect.
    """
    hidden = excluded_ids(tuple(views))
    stack = [layout]
    while stack:
        c = stack.pop()
        if _key(getattr(c, "id", None)) in hidden and not _has_named_child(c):
            for prop, empty in _CONTENT_PROPS.items():
                if getattr(c, prop, None) is not None:
                    setattr(c, prop, empty)
            continue
        stack.extend(children(c))
    return layout
