"""The trace as text: the input's tokens coloured by the prediction after each, its
abstract state under every token, prediction flips, the selected pattern's steps, and a
compared trace's strip with the steps where the two paths differ.

A click on a token selects that step (for the nearest contexts and forcing) and marks its
state on the diagram.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from dash import ALL, Input, Output, State, html, no_update

from stateseer.abstraction.colors import ClassColors, text_color_on
from stateseer.app.explorer import ids
from stateseer.app.explorer.view import Callback, Trigger, View, js
from stateseer.app.explorer.views.core import active_of, visible_token
from stateseer.app.workflows.records import TraceRecord

__all__ = ["VIEW", "click_token", "culprit_positions", "flips", "pattern_steps", "show_trace",
           "state_differences", "strip_legend", "token_strip", "trace_title"]

PROMPT = "Select a row or type an input to see its trace."


def flips(trace: TraceRecord) -> list[int]:
    """Token positions (0-based) after which the predicted class differs from before."""
    p = np.asarray(trace.proba)
    if len(p) == 0:
        return []
    pred = np.concatenate([[int(np.argmax(trace.initial_proba))], p.argmax(1)])
    return [int(t) for t in np.flatnonzero(pred[1:] != pred[:-1])]


def pattern_steps(states: Sequence[int], pattern: Sequence[int]) -> list[int]:
    """Positions in ``states`` that belong to an occurrence of ``pattern``.

    A pattern is a sequence of distinct consecutive states of a *collapsed* path: staying
    in a state for several steps is one occurrence of that state. Every occurrence is
    marked, with all the steps it spans.

    Parameters
    ----------
    states : sequence of int, shape (n_tokens + 1,)
        A trace's states, the initial state first.
    pattern : sequence of int

    Returns
    -------
    list of int
        Sorted positions (indices into ``states``).

    Examples
    --------
    >>> pattern_steps([0, 3, 3, 5, 2, 3, 5], [3, 5])
    [1, 2, 3, 5, 6]
    """
    ps, out = list(pattern), set()
    if not ps:
        return []
    for t in range(len(states)):
        seq: list[int] = []
        j = t
        while j < len(states) and len(seq) < len(ps):
            if not seq or states[j] != seq[-1]:
                seq.append(states[j])
            if seq != ps[: len(seq)]:
                break
            j += 1
        if seq == ps:
            out.update(range(t, j))
    return sorted(out)


def state_differences(a: Sequence[int], b: Sequence[int]) -> list[int]:
    """Token positions (0-based) after which two paths (initial state first) differ.

    >>> state_differences([0, 1, 2, 3], [0, 1, 4, 3])
    [1]
    """
    return [t - 1 for t, (x, y) in enumerate(zip(a, b, strict=False)) if x != y and t > 0]


def culprit_positions(tokens: Sequence[str], culprit: Sequence[str]) -> list[int]:
    """Where a finding's culprit stands in ``tokens``: a span of several tokens where it
    stands whole (its common words elsewhere are not it), else every token of it (a
    word, a sequence's two words, a topic's words).

    >>> culprit_positions("sent from my phone , from my heart".split(),
    ...                   ["sent", "from", "my", "phone"])
    [0, 1, 2, 3]
    >>> culprit_positions("not at all good".split(), ["not", "good"])
    [0, 3]
    """
    want = [str(t) for t in culprit]
    n = len(want)
    if n >= 2:
        whole = [j for j in range(len(tokens) - n + 1) if list(tokens[j:j + n]) == want]
        if whole:
            return sorted({j + k for j in whole for k in range(n)})
    wanted = set(want)
    return [t for t, tok in enumerate(tokens) if tok in wanted]


def token_strip(trace: TraceRecord, classes: Sequence[str], *,
                highlight: Sequence[int] = (), pattern_steps: Sequence[int] = (),
                id_type: str = ids.TOKEN_TYPE,
                palette: ClassColors | None = None, culprit: Sequence[int] = ()
                ) -> html.Div:
    """Tokens as coloured chips with their abstract state underneath (``culprit``: the
    positions of an opened finding's culprit, marked).

    ``id_type`` names the chips' pattern-matching ids (``{"type": id_type, "index": t}``);
    a second strip on the page needs another one, or clicks would read the wrong chip.

    Every string is passed to Dash as text (never as HTML), so texts from the data set or
    the input box cannot inject markup.
    """
    tokens, proba, states = trace.tokens, trace.proba, trace.states
    # a record without states (study conditions without state views): no state anywhere
    st = (lambda t: [html.Span(str(states[t]), className="st" + (
        " st-pattern" if t and t in pat else ""))]) if trace.has_states else (lambda t: [])
    flip_at = set(flips(trace))
    pat = set(pattern_steps)
    pal = palette or ClassColors(len(classes))
    start_color = pal.mix(trace.initial_proba)
    chips = [html.Div([
        html.Span("⟨start⟩", className="tok tok-start",
                  style={"background": start_color, "color": text_color_on(start_color)}),
        *st(0)],
        className="chip", title="initial state (before any token)" if trace.has_states
        else "start (before any token)")]
    for t, tok in enumerate(tokens):
        color = pal.mix(proba[t])
        cls = ["tok"]
        if not trace.known[t]:
            cls.append("unknown")
        if t in flip_at:
            cls.append("flip")
        if t in highlight:
            cls.append("hl")
        if t in culprit:
            cls.append("culprit")
        pcls = classes[int(np.argmax(proba[t]))]
        title = (f"token {t + 1}: {tok!r}{' (unknown word)' if not trace.known[t] else ''}"
                 + (f" → state {states[t + 1]}" if trace.has_states else "")
                 + f"; P({pcls}) = {max(proba[t]):.3f}"
                 + ("; prediction flips here" if t in flip_at else ""))
        chips.append(html.Div([
            html.Span(visible_token(tok), className=" ".join(cls),
                      style={"background": color, "color": text_color_on(color)}),
            *st(t + 1)],
            className="chip", title=title, id=ids.token(t, id_type), n_clicks=0))
    return html.Div(chips, className="token-strip")


def trace_title(ctx, tr: TraceRecord) -> list[Any]:
    """``#id predicted X · label Y ✓ · FSM alone ends in state s (Z)``; for traces
    imported without probabilities, ``#id label Y · FSM alone ends in state s`` (no
    prediction to show or to judge)."""
    classes = ctx.data.classes
    if not getattr(ctx.data, "has_predictions", True):
        head: list[Any] = [html.B(f"#{tr.id} " if tr.id is not None else "typed input ")]
        if tr.label is not None:
            head.append(f"label {classes[tr.label]}")
        if tr.simulated:
            head.append(html.Span(f" · FSM alone ends in state {tr.simulated[-1]}",
                                  className="fsm-final"))
        return head
    head = [html.B(f"#{tr.id} " if tr.id is not None else "typed input "),
            f"predicted {classes[tr.prediction]}"]
    if tr.label is not None:
        ok = tr.label == tr.prediction
        head += [f" · label {classes[tr.label]} ",
                 html.Span("✓" if ok else "✗ misclassified", className="ok" if ok else "wrong")]
    if not tr.simulated:
        return head
    sim_final = tr.simulated[-1]
    head.append(html.Span(f" · FSM alone ends in state {sim_final} "
                          f"({classes[int(ctx.data.fsm.labels[sim_final])]})",
                          className="fsm-final"))
    return head


def _compare_note(ctx, cmp_: TraceRecord, diff: list[int]) -> html.Div:
    classes = ctx.data.classes
    who = (f"run {cmp_.run} (its states renamed to the matched states here)" if cmp_.run
           else f"#{cmp_.id}" if cmp_.id is not None else "the typed input")
    where = ", ".join(str(t + 1) for t in diff[:12]) + ("…" if len(diff) > 12 else "")
    return html.Div(["compared with ", html.B(who),
                     f": abstract states differ after {len(diff)} token(s)"
                     + (f" (at {where})" if diff else ""),
                     html.Span(f" · predicts {classes[cmp_.prediction]}")],
                    className="compare-note")


def layout(ctx, initial: dict[str, Any]) -> dict[str, Any]:
    return {"trace": [html.Div(id=ids.TRACE_TITLE, className="trace-title"),
                      html.Div(id=ids.TRACE_TOKENS)]}


def show_trace(ctx, active, sel, culprit=None):
    """The title and the token strip(s) of the trace on display; ``culprit`` (the
    ``finding-culprit`` store) marks a finding's culprit on the input it was opened for."""
    tr, cmp_ = active_of(active)
    if tr is None:
        return html.P(PROMPT, className="muted"), None
    pattern = (sel or {}).get("pattern")
    marked = pattern_steps(tr.states, pattern["states"]) if pattern else []
    classes = ctx.data.classes
    if cmp_ is None:
        at = culprit_positions(tr.tokens, culprit["tokens"]) if isinstance(culprit, dict) \
            and culprit.get("tokens") and (culprit.get("split"), culprit.get("index")) \
            == (tr.split, tr.index) else []
        return trace_title(ctx, tr), [token_strip(tr, classes, pattern_steps=marked,
                                                  palette=ctx.data.palette, culprit=at),
                                      strip_legend(tr, getattr(ctx.data, "has_predictions",
                                                               True), bool(at))]
    diff = state_differences(tr.states, cmp_.states)
    return trace_title(ctx, tr), [
        token_strip(tr, classes, pattern_steps=marked, highlight=diff,
                    palette=ctx.data.palette),
        _compare_note(ctx, cmp_, diff),
        token_strip(cmp_, classes, highlight=diff, id_type=ids.CMP_TOKEN_TYPE,
                    palette=ctx.data.palette)]


def strip_legend(tr: TraceRecord, predictions: bool = True, culprit: bool = False
                 ) -> html.Div:
    """What the strip's marks mean, in one muted line: the chips' colour, the outline
    where the prediction turns and the italics of unknown words (only where there are
    any), the numbers under them."""
    parts = ["colour: the prediction after each token"] if predictions else []
    if predictions and flips(tr):
        parts.append("outlined: the prediction turns here")
    if not all(tr.known):
        parts.append("italic: a word the vocabulary does not know")
    if culprit:
        parts.append("yellow bar: the finding's culprit")
    if tr.has_states:
        parts.append("number: the abstract state after the token (blue: the token "
                     "clicked)")
    return html.Div(" · ".join(parts), className="strip-legend muted")


def click_token(ctx, trigger: Trigger, _clicks, active, step=None):
    """A clicked token becomes the selected step, its state marked on the diagram; a new
    trace resets the step (runs in the page: :data:`CLICK_TOKEN_JS`)."""
    if trigger.id == ids.ACTIVE_TRACE:
        return (no_update if step is None else None), no_update
    if not trigger.is_type(ids.TOKEN_TYPE):
        return no_update, no_update
    t = int(trigger.id["index"])
    main, _ = active_of(active)
    state = int(main.states[t + 1]) if main is not None and t + 1 < len(main.states) \
        else no_update
    return t, state


CLICK_TOKEN_JS = js("""
function (_clicks, active, step) {
    const nu = window.dash_clientside.no_update;
    const c = window.dash_clientside.callback_context;
    const id = c.triggered_id;
    if (id === "$active") { return [step === null || step === undefined ? nu : null, nu]; }
    const fired = c.triggered.length ? c.triggered[0].value : null;
    if (!id || typeof id !== "object" || id.type !== "$token" || !fired) { return [nu, nu]; }
    const t = parseInt(id.index, 10);
    const states = active && active.main ? active.main.states : null;
    return [t, states && t + 1 < states.length ? states[t + 1] : nu];
}
""", active=ids.ACTIVE_TRACE, token=ids.TOKEN_TYPE)
""":func:`click_token` in the page (no server round trip)."""


def mark_step(ctx, step, _strip, chips):
    """The chip of the selected step (a clicked token) marked in the strip, the others
    plain (runs in the page: :data:`MARK_STEP_JS`); ``chips``: the strip's chip ids."""
    return ["chip chip-step" if step is not None and c.get("index") == step else "chip"
            for c in chips or []]


MARK_STEP_JS = js("""
function (step, _strip, chips) {
    return (chips || []).map(c => (step !== null && step !== undefined && c.index === step)
                                  ? "chip chip-step" : "chip");
}
""")
""":func:`mark_step` in the page."""

VIEW = View(
    name="trace_text", presets=("baseline",), layout=layout,
    ids=(ids.TRACE_TITLE, ids.TRACE_TOKENS),
    callbacks=(
        Callback(show_trace, [Output(ids.TRACE_TITLE, "children"),
                              Output(ids.TRACE_TOKENS, "children")],
                 [Input(ids.ACTIVE_TRACE, "data"), State(ids.SELECTION, "data"),
                  State(ids.FINDING_CULPRIT, "data")],
                 fuse="trace"),
        Callback(click_token, [Output(ids.STEP, "data"),
                               Output(ids.HOVER_STATE, "data", allow_duplicate=True)],
                 [Input(ids.token(ALL), "n_clicks"), Input(ids.ACTIVE_TRACE, "data"),
                  State(ids.STEP, "data")],
                 trigger=True, prevent_initial_call=True, clientside=CLICK_TOKEN_JS),
        Callback(mark_step, [Output(ids.token(ALL), "className")],
                 [Input(ids.STEP, "data"), Input(ids.TRACE_TOKENS, "children"),
                  State(ids.token(ALL), "id")],
                 prevent_initial_call=True, clientside=MARK_STEP_JS),
    ))
