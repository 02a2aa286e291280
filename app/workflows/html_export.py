"""``stateseer export RUN --format html [--input ID]``: one file that opens with no server.

Without ``--input``: the FSM drawn by Graphviz as inline SVG (the drawing's top edges per
state, as the other drawn formats), the headline figures (test accuracy, simulation
fidelity beside chance agreement and Cohen's kappa, forcing), and a card per state
(visits, the prediction mix, entering n-grams by lift, contexts, the strongest
transitions) that a click on the state opens; hovering a state names it. With
``--input ID``: that input's trace, its tokens coloured by the running prediction with
the state strip beneath, the per-token probability chart (inline SVG) and, when the run
has its model, the integrated-gradients attribution strip.

Everything is inlined (SVG, CSS, a few lines of JavaScript that build the cards from an
embedded JSON document with ``textContent``, so no name from the run is ever parsed as
HTML); the page makes no network request. Every string from the run is escaped.
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path
from typing import Any

import numpy as np

from stateseer.abstraction.automata.export import export_data
from stateseer.abstraction.colors import text_color_on
from stateseer.app.workflows.fragments import probability_svg, token_chips
from stateseer.app.workflows.runview import RunView
from stateseer.core.errors import StateseerError

__all__ = ["fsm_html", "trace_html"]

STYLE = """
body{font-family:Helvetica,Arial,sans-serif;margin:16px;color:#222;background:#fafafa}
h1{font-size:20px;margin:0 0 4px}.sub{color:#666;font-size:13px;margin-bottom:10px}
.figs{display:flex;gap:10px;flex-wrap:wrap;margin:8px 0 12px}
.fig{background:#fff;border:1px solid #ddd;border-radius:6px;padding:6px 10px;font-size:13px}
.fig b{font-size:17px;display:block}.wrap{display:flex;gap:14px;align-items:flex-start}
.diagram{background:#fff;border:1px solid #ddd;border-radius:6px;flex:1;overflow:auto}
.diagram svg{max-width:100%;height:auto}.node{cursor:pointer}
.node:hover polygon,.node:hover ellipse{stroke-width:3}
.node.sel polygon,.node.sel ellipse{stroke:#111;stroke-width:4}
.card{width:360px;background:#fff;border:1px solid #ddd;border-radius:6px;padding:10px;
font-size:13px;min-height:120px}.card h4{margin:0 0 6px}.card table{border-collapse:collapse}
.card td,.card th{border-bottom:1px solid #eee;padding:2px 6px;text-align:left}
.mix{display:flex;height:18px;border-radius:3px;overflow:hidden;margin:4px 0 8px}
.mix div{font-size:11px;line-height:18px;padding-left:3px;white-space:nowrap;overflow:hidden}
mark{background:#ffe08a}.tok{display:inline-block;margin:2px;padding:2px 5px;border-radius:4px;
font-size:14px}.st{display:block;font-size:10px;opacity:.75;text-align:center}
.unk{text-decoration:underline dotted}.chart{background:#fff;border:1px solid #ddd;
border-radius:6px;margin-top:10px}.note{color:#666;font-size:12px}
"""

CARD_JS = """
(function(){
const data = JSON.parse(document.getElementById('cards').textContent);
const card = document.getElementById('card');
function el(tag, text, cls){const e=document.createElement(tag);
  if(text!==undefined)e.textContent=text; if(cls)e.className=cls; return e;}
function table(head, rows){const t=el('table');const h=el('tr');
  head.forEach(x=>h.appendChild(el('th',x)));t.appendChild(h);
  rows.forEach(r=>{const tr=el('tr');r.forEach(x=>tr.appendChild(el('td',String(x))));
  t.appendChild(tr);});return t;}
function show(s){const c=data.states[s]; if(!c)return; card.replaceChildren();
  card.appendChild(el('h4', c.title));
  card.appendChild(el('div', c.visits.toLocaleString()+' inputs pass through it'));
  const mix=el('div',undefined,'mix');
  c.mix.forEach(m=>{const d=el('div', m.p>=0.12 ? m.name+' '+Math.round(100*m.p)+'%' : '');
    d.style.width=(100*m.p)+'%'; d.style.background=m.color; d.style.color=m.text;
    mix.appendChild(d);}); card.appendChild(mix);
  if(c.ngrams.length){card.appendChild(el('b','Entering n-grams (by lift)'));
    card.appendChild(table(['n-gram','count','lift'], c.ngrams));}
  if(c.contexts.length){card.appendChild(el('b','Contexts'));const ul=el('ul');
    c.contexts.forEach(x=>{const li=el('li');li.appendChild(el('span',x[0]+' '));
      li.appendChild(el('mark',x[1]));li.appendChild(el('span',' '+x[2]));ul.appendChild(li);});
    card.appendChild(ul);}
  if(c.out.length){card.appendChild(el('b','Strongest transitions'));
    card.appendChild(table(['to','count','tokens'], c.out));}
  document.querySelectorAll('.node').forEach(n=>n.classList.toggle('sel', n.dataset.state==s));
}
document.querySelectorAll('.node').forEach(n=>{const t=n.querySelector('title');
  const m=t && /^s(\\d+)$/.exec(t.textContent.trim()); if(!m)return;
  n.dataset.state=m[1]; n.addEventListener('click',()=>show(m[1]));});
})();
"""


def _page(title: str, body: str, script: str = "") -> str:
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}"
            f"</title><style>{STYLE}</style></head><body>{body}"
            + (f"<script>{script}</script>" if script else "") + "</body></html>")


def _json_script(doc: Any, id_: str) -> str:
    """A JSON data block that no string in it can close (``</`` escaped)."""
    text = json.dumps(doc, ensure_ascii=False).replace("</", "<\\/")
    return f"<script type='application/json' id='{id_}'>{text}</script>"


def _figures(rv: RunView) -> list[tuple[str, str]]:
    m, a = rv.metrics, rv.metrics.get("abstraction", {})
    figs = []
    def num(x: Any) -> bool:
        return isinstance(x, (int, float)) and not isinstance(x, bool)

    if num(m.get("test_accuracy")):
        figs.append(("test accuracy", f"{m['test_accuracy']:.3f}"))
    if num(a.get("simulation_fidelity")):
        chance, kappa = a.get("simulation_chance"), a.get("simulation_kappa")
        told = f"κ {kappa:.2f}" if num(kappa) else "κ undefined: one class predicted"
        figs.append(("simulation fidelity", f"{a['simulation_fidelity']:.3f}"
                     + (f" (chance {chance:.3f}, {told})" if num(chance) else "")))
    if num(a.get("forcing_agreement")):
        figs.append(("forcing agreement", f"{a['forcing_agreement']:.3f}"))
    figs.append(("states", f"{rv.fsm.n_states - 1}"))
    return figs


def _cards(rv: RunView) -> dict[str, Any]:
    """Per state: what the explorer's state card shows, as plain data."""
    fsm, classes = rv.fsm, list(rv.classes)
    patterns = rv.abstraction.patterns or {}
    ngrams, contexts = patterns.get("ngrams", []), patterns.get("contexts", [])
    edges: dict[int, list[dict[str, Any]]] = {}
    for e in fsm.state_edges(3):
        edges.setdefault(int(e["source"]), []).append(e)
    out = {}
    for s in range(fsm.n_states):
        mix = []
        for k, p in enumerate(np.asarray(fsm.prediction[s], float).tolist()):
            color = rv.palette.solid(k) if len(classes) > 2 else \
                rv.palette.mix([float(j == k) for j in range(len(classes))])
            mix.append({"name": classes[k], "p": round(p, 4), "color": color,
                        "text": text_color_on(color)})
        ng = ngrams[s]["lift"][:8] if s < len(ngrams) else []
        ctx = contexts[s][:5] if s < len(contexts) else []
        outs = sorted(edges.get(s, []), key=lambda e: -e["count"])[:6]
        out[str(s)] = {
            "title": "Start state" if s == fsm.initial else f"State {s}",
            "visits": int(fsm.visits[s]), "mix": mix,
            "ngrams": [[r["ngram"], r["count"], round(float(r["lift"]), 1)] for r in ng],
            "contexts": [[" ".join(c["tokens"][:c["focus"]]), c["tokens"][c["focus"]],
                          " ".join(c["tokens"][c["focus"] + 1:])] for c in ctx],
            "out": [[f"s{int(e['target'])}", int(e["count"]),
                     ", ".join(str(t) for t, _ in e["top_tokens"][:3])] for e in outs]}
    return {"states": out}


def _view(run: str | Path | RunView) -> RunView:
    return run if isinstance(run, RunView) else RunView(run)


def fsm_html(run: str | Path | RunView, *, top_k: int | None = None) -> str:
    """The FSM page (see the module notes)."""
    rv = _view(run)
    svg = export_data(rv.fsm, "svg", top_k=top_k)
    svg = svg.decode() if isinstance(svg, bytes) else svg
    svg = svg[svg.index("<svg"):]  # no XML prolog or doctype inside the page
    svg = re.sub(r"<!--.*?-->", "", svg, flags=re.S)
    figs = "".join(f"<div class='fig'>{html.escape(k)}<b>{html.escape(v)}</b></div>"
                   for k, v in _figures(rv))
    body = (f"<h1>{html.escape(rv.name)}</h1><div class='sub'>{html.escape(', '.join(rv.classes))}"
            f" · {rv.fsm.n_states - 1} states · click a state for its card</div>"
            f"<div class='figs'>{figs}</div><div class='wrap'><div class='diagram' "
            f"id='diagram'>{svg}</div><div class='card' id='card'>Click a state in the "
            f"diagram.</div></div>{_json_script(_cards(rv), 'cards')}")
    return _page(f"stateseer · {rv.name}", body, CARD_JS)


def _attribution(rv: RunView, tr: Any) -> list[float] | None:
    """Integrated-gradients attribution of the trace's prediction, or None when the run
    cannot load its model."""
    try:
        from stateseer.rnn_models.attribution import attribute

        model, vocab = rv.run.load_model(), rv.run.vocab()
    except (StateseerError, OSError, ImportError):
        return None
    att = attribute(model, rv.token_ids(tr), list(tr.tokens), unk_id=vocab.unk_id,
                    pad_id=vocab.pad_id)
    return [float(s) for s in np.asarray(att.scores)]


def trace_html(run: str | Path | RunView, input_id: int, *, split: str | None = None,
               attribution: Any = None) -> str:
    """The page of one input's trace (see the module notes).

    Parameters
    ----------
    attribution : callable, optional
        ``attribution(trace) -> scores`` (the explorer passes its cached model's); by
        default the run's model is loaded for it.

    Raises
    ------
    StateseerError
        ``input_id`` is not an instance id of the split (one line).
    """
    rv = _view(run)
    split = split or rv.default_split
    if split not in rv.splits:
        raise StateseerError(f"unknown split {split!r}; choose one of {rv.splits}")
    ids = np.asarray(rv.traces[split].rows)
    where = np.flatnonzero(ids == int(input_id))
    if not len(where):
        raise StateseerError(f"input {input_id} is not in split {split!r}; use an id from "
                             "the explorer table's id column")
    tr = rv.trace_instance(split, int(where[0]))
    classes = list(rv.classes)
    # the initial prediction, then one row per token (none for an empty input)
    proba = np.vstack([np.asarray(tr.initial_proba, float)[None],
                       np.asarray(tr.proba, float).reshape(-1, len(classes))])
    chips = token_chips(tr, classes, palette=rv.palette)
    chart = probability_svg(proba, list(tr.tokens), classes, palette=rv.palette)
    scores = (attribution or (lambda t: _attribution(rv, t)))(tr) if tr.tokens else None
    strip = ""
    if scores is not None:
        top = max(map(abs, scores)) or 1.0
        strip = "<h3>Attribution (integrated gradients, towards the prediction)</h3><div>" + \
            "".join(f"<span class='tok' title='{s:+.4f}' style='background:"
                    f"{_shade(s / top)}'>{html.escape(t)}</span>"
                    for t, s in zip(tr.tokens, scores, strict=True)) + "</div>"
    label = classes[tr.label] if tr.label is not None and tr.label >= 0 else "?"
    body = (f"<h1>Input #{int(input_id)} · {html.escape(rv.name)}</h1><div class='sub'>"
            f"label {html.escape(label)} · predicted {html.escape(classes[tr.prediction])} "
            f"({max(tr.final_proba):.0%}) · split {html.escape(split)} · colour: the running "
            f"prediction; below each token, the abstract state after it</div>"
            f"<div id='trace'>{chips}</div>"
            f"<div class='chart'>{chart}</div>{strip}"
            f"<p class='note'>{html.escape(tr.text)}</p>")
    return _page(f"stateseer · input {int(input_id)}", body)


def _shade(x: float) -> str:
    """Green for evidence towards the prediction, red against, by strength in [-1, 1]."""
    a = min(1.0, abs(x))
    base = (44, 160, 44) if x >= 0 else (214, 39, 40)
    r, g, b = (round(255 + (c - 255) * a) for c in base)
    return f"#{r:02x}{g:02x}{b:02x}"
