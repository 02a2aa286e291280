"""The exact automaton of a formal-language run (a tab of the side panel).

``stateseer extract-dfa RUN`` refines the abstraction into a deterministic, complete, minimal
automaton (``RUN/abstraction/dfa.json``, :mod:`stateseer.abstraction.automata.dfa`). This tab draws
it
— states coloured by class, the initial one ringed, one arrow per pair of states labelled
with its symbols — with the report's headline: states, agreement with the RNN on the test
split, and for a built-in grammar whether it is the grammar's minimal DFA. Where the explorer
may run jobs (``stateseer serve``) a button extracts it (again) as a background
``stateseer extract-dfa`` with a progress bar and a cancel button, and the tab redraws when
it ends. The tab exists for runs over characters (``tokenizer`` ``char``: Tomita, parity,
your own ``csv:`` strings) and for any run that already holds an automaton.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import dash_cytoscape as cyto
from dash import Input, Output, dcc, html, no_update

from stateseer.abstraction.colors import ClassColors
from stateseer.app.explorer import ids
from stateseer.app.explorer.view import Callback, Trigger, View
from stateseer.core import layout as run_layout

__all__ = ["AUTOMATON", "MAX_DRAWN", "TAB_AUTOMATON", "VIEW", "automaton_elements",
           "automaton_panel", "load_automaton", "positions"]

TAB_AUTOMATON = "automaton"
AUTOMATON = "automaton-graph"
#: larger automata are summarised, not drawn (``stateseer export`` writes them whole)
MAX_DRAWN = 120
#: symbols listed on one arrow before "…"
MAX_LABEL = 6


def load_automaton(run_dir: str | Path) -> tuple[Any, str | None]:
    """The run's extracted automaton, or None and why not (no file yet: None, None)."""
    from stateseer.abstraction.automata.dfa.extracted import ExtractedDFA
    from stateseer.core.errors import StateseerError

    path = run_layout.RunLayout(run_dir).dfa
    if not path.is_file():
        return None, None
    try:
        return ExtractedDFA.load(path), None
    except (StateseerError, OSError, ValueError, KeyError, TypeError) as exc:
        return None, f"{path} cannot be read ({type(exc).__name__}); extract it again"


def positions(dfa: Any, dx: float = 140.0, dy: float = 100.0) -> list[tuple[float, float]]:
    """Left to right by distance from the initial state (breadth first), the states of
    one distance stacked and centred; unreachable states (none in an extracted DFA) last.
    """
    depth = {dfa.initial: 0}
    order = [dfa.initial]
    for q in order:  # grows while walked: breadth first
        for r in dfa.transitions[q].tolist():
            if r not in depth:
                depth[r] = depth[q] + 1
                order.append(r)
    far = max(depth.values()) + 1
    columns: dict[int, list[int]] = {}
    for q in range(dfa.n_states):
        columns.setdefault(depth.get(q, far), []).append(q)
    out = [(0.0, 0.0)] * dfa.n_states
    for d, qs in columns.items():
        for i, q in enumerate(qs):
            out[q] = (d * dx, (i - (len(qs) - 1) / 2) * dy)
    return out


def automaton_elements(dfa: Any, palette: ClassColors | None = None) -> list[dict[str, Any]]:
    """Cytoscape elements: a node per state (``label`` its number and class, ``color`` its
    class's, placed by :func:`positions`), an edge per (source, target) pair labelled by
    its symbols."""
    classes = list(dfa.classes)
    where = positions(dfa)
    nodes = [{"data": {"id": f"q{q}", "label": f"{q}: {classes[c]}",
                       "color": (palette or ClassColors(len(classes))).solid(c)},
              "position": {"x": where[q][0], "y": where[q][1]},
              "classes": "initial" if q == dfa.initial else ""}
             for q, c in enumerate(dfa.state_class.tolist())]
    pairs: dict[tuple[int, int], list[str]] = {}
    for q, row in enumerate(dfa.transitions.tolist()):
        for a, r in enumerate(row):
            pairs.setdefault((q, r), []).append(str(dfa.alphabet[a]))
    edges = []
    for (q, r), symbols in pairs.items():
        symbols = sorted(symbols, key=_natural)
        label = ", ".join(symbols[:MAX_LABEL]) + (" …" if len(symbols) > MAX_LABEL else "")
        edges.append({"data": {"id": f"e{q}-{r}", "source": f"q{q}", "target": f"q{r}",
                               "label": label},
                      "classes": "loop" if q == r else ""})
    return nodes + edges


STYLESHEET = [
    {"selector": "node", "style": {"label": "data(label)", "background-color": "data(color)",
                                   "color": "#fff", "text-outline-color": "data(color)",
                                   "text-outline-width": 1.5, "font-size": 11,
                                   "font-weight": "bold", "text-valign": "center",
                                   "text-halign": "center", "width": 46, "height": 46,
                                   "text-wrap": "wrap", "text-max-width": 44,
                                   "border-width": 1, "border-color": "#555"}},
    {"selector": "node.initial", "style": {"border-width": 4, "border-color": "#222"}},
    {"selector": "edge", "style": {"label": "data(label)", "curve-style": "bezier",
                                   "target-arrow-shape": "triangle", "width": 1.5,
                                   "line-color": "#888", "target-arrow-color": "#888",
                                   "font-size": 11, "text-background-color": "#fff",
                                   # along the arrow: two arrows between the same states
                                   # (one each way) keep their labels apart
                                   "text-rotation": "autorotate",
                                   "text-background-opacity": 0.85,
                                   "text-background-padding": 1}},
    {"selector": "edge.loop", "style": {"loop-direction": "0deg", "loop-sweep": "50deg"}},
]


def _natural(symbol: str) -> tuple[int, int, str]:
    """Numbers in numeric order first, then the rest (``2`` before ``10``).

    >>> sorted(["10", "b", "2", "a"], key=_natural)
    ['2', '10', 'a', 'b']
    """
    return (0, int(symbol), symbol) if symbol.isdigit() else (1, 0, symbol)


def _method(r: Mapping[str, Any]) -> str:
    """How the automaton was built, with the figures of that method."""
    if r.get("method") != "active":
        return "refined from the recorded hidden states (no model asked)"
    text = (f"learnt by asking the model ({str(r.get('algorithm', 'kv')).upper()}: "
            f"{r.get('membership_queries', 0):,} queries, {r.get('rounds', 0)} hypotheses")
    if isinstance(r.get("seconds"), (int, float)):
        text += f", {r['seconds']:.1f} s"
    text += ")"
    if isinstance(r.get("heldout_error"), (int, float)) and \
            isinstance(r.get("majority_error"), (int, float)):
        text += (f"; held-out error {r['heldout_error']:.2%} (always the majority class: "
                 f"{r['majority_error']:.2%})")
    off = r.get("off_data")
    if isinstance(off, Mapping) and isinstance(off.get("error"), (int, float)) and \
            isinstance(off.get("majority_error"), (int, float)):
        text += (f"; on random words of the data's lengths {off['error']:.2%} (the majority "
                 f"class: {off['majority_error']:.2%})")
    return text


def _headline(dfa: Any) -> str:
    r = dfa.report or {}
    symbols = sorted(map(str, dfa.alphabet), key=_natural)
    parts = [f"{dfa.n_states} states over {{{', '.join(symbols)}}}",
             _method(r)]
    if isinstance(r.get("agreement"), (int, float)):
        parts.append(f"agrees with the RNN on {r['agreement']:.2%} of the test strings")
    if r.get("minimal_size_match") is True and r.get("grammar_agreement_le12") == 1.0:
        parts.append("the grammar's minimal DFA exactly")
    elif isinstance(r.get("grammar_agreement_le12"), (int, float)):
        parts.append(f"agrees with the grammar on {r['grammar_agreement_le12']:.2%} of the "
                     "strings up to length 12")
    if r.get("budget_exhausted"):
        parts.append("a budget ran out: an approximation")
    return "; ".join(parts) + "."


def automaton_panel(run_dir: str | Path, palette: ClassColors | None = None) -> html.Div:
    """The tab's content: the drawn automaton and its headline, or what to do."""
    dfa, problem = load_automaton(run_dir)
    if dfa is None:
        text = problem or ("No automaton yet: extract it (`stateseer extract-dfa RUN`, or "
                           "the button above).")
        return html.Div(html.P(text, className="muted"), className="automaton-panel")
    parts: list[Any] = [html.P(_headline(dfa), className="automaton-headline")]
    if dfa.n_states > MAX_DRAWN:
        parts.append(html.P(f"{dfa.n_states} states are too many to draw here; `stateseer "
                            "export RUN --dfa --format dot` writes the whole automaton.",
                            className="muted"))
    else:
        parts.append(cyto.Cytoscape(
            id=AUTOMATON, elements=automaton_elements(dfa, palette),
            stylesheet=STYLESHEET,
            layout={"name": "preset", "fit": True, "padding": 30},
            style={"width": "100%", "height": "340px"}, userZoomingEnabled=True,
            minZoom=0.3, maxZoom=3))
    return html.Div(parts, className="automaton-panel")


def job_status(status: Mapping[str, Any]) -> list[Any]:
    """The tab's job as it shows it (nothing when it was not started here)."""
    state = status.get("state", "idle")
    if state == "idle" or status.get("kind") != "dfa":
        return []
    if state == "running":
        return [html.Div(f"stateseer extract-dfa: extracting the automaton, "
                         f"{status['seconds']:.0f} s", className="job-status"),
                html.Progress(className="job-bar")]  # no count: indeterminate
    if state == "failed":
        return [html.Div(f"the extraction failed: {status.get('message', '')}",
                         className="job-status wrong")]
    done = "was cancelled" if state == "cancelled" else "is done"
    return [html.Div(f"the extraction {done} ({status['seconds']:.0f} s)",
                     className="job-status muted")]


def _shown(ctx) -> bool:
    d = ctx.data
    return d.tokenizer == "char" or load_automaton(d.run.path) != (None, None)


def layout(ctx, initial: dict[str, Any]) -> dict[str, Any]:
    d = ctx.data
    if not _shown(ctx):
        return {}
    body = html.Div(automaton_panel(d.run.path, d.palette), id=ids.DFA_BODY)
    jobs = []
    if ctx.jobs is not None:
        status = ctx.jobs.status()
        running = status.get("state") == "running"
        jobs = [html.Div([
            html.Button("extract the automaton", id=ids.DFA_START, n_clicks=0,
                        disabled=running, title="run `stateseer extract-dfa` in the "
                        "background: ask the model (or refine the abstraction) for the "
                        "minimal DFA"),
            html.Button("cancel", id=ids.DFA_CANCEL, n_clicks=0,
                        disabled=not (running and status.get("kind") == "dfa")),
            html.Div(job_status(status), id=ids.DFA_JOB),
            _poll(running and status.get("kind") == "dfa")], className="jobs")]
    return {"side": [_tab(html.Div([*jobs, body]))]}


def _tab(children: Any) -> Any:
    return dcc.Tab(label="DFA", value=TAB_AUTOMATON, children=children)


def _poll(on: bool) -> Any:
    return dcc.Interval(id=ids.DFA_POLL, interval=1000, disabled=not on)


def dfa_job(ctx, trigger: Trigger, _start, _cancel, _poll_n):
    """Start, follow or cancel the background extraction: its status, whether polling
    stops, whether cancel is off, whether start is off, and the tab's body (redrawn once
    the job is done)."""
    from stateseer.app.workflows.jobs import dfa_command
    from stateseer.core.errors import StateseerError

    note: list[Any] = []
    if trigger.id == ids.DFA_START and trigger.value:
        try:
            ctx.jobs.start("dfa", dfa_command(ctx.data.run.path))
        except StateseerError as exc:
            note = [html.Div(str(exc), className="job-status wrong")]
    elif trigger.id == ids.DFA_CANCEL and trigger.value:
        ctx.jobs.cancel()
    status = ctx.jobs.status()
    ours = status.get("kind") == "dfa"
    running = ours and status.get("state") == "running"
    body = no_update
    if ours and status.get("state") == "done":
        body = automaton_panel(ctx.data.run.path, ctx.data.palette)
    return ([*note, *job_status(status)], not running, not running,
            status.get("state") == "running", body)


VIEW = View(name="automaton", layout=layout, tabs=(TAB_AUTOMATON,),
            doc="the exact minimal DFA extracted from a formal-language run, drawn with its "
                "agreement figures; extracted again in the background on request",
            callbacks=(
                Callback(dfa_job, [Output(ids.DFA_JOB, "children"),
                                   Output(ids.DFA_POLL, "disabled"),
                                   Output(ids.DFA_CANCEL, "disabled"),
                                   Output(ids.DFA_START, "disabled"),
                                   Output(ids.DFA_BODY, "children")],
                         [Input(ids.DFA_START, "n_clicks"), Input(ids.DFA_CANCEL, "n_clicks"),
                          Input(ids.DFA_POLL, "n_intervals")],
                         trigger=True, prevent_initial_call=True,
                         when=lambda ctx: ctx.jobs is not None and _shown(ctx)),))
