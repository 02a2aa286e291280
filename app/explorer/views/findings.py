"""The Findings tab: why the model errs (``stateseer diagnose``), first of the side tabs.

Each finding shows its culprit in the words a developer reads, its evidence (inputs,
error rate with and without, q-value), what intervening with the model did (deleting the
culprit fixed F misclassifications and broke B), the training inputs that carry the
same culprit with their labels, the repairs that fit it, and example inputs: a click
opens the input's trace. A run not yet diagnosed says how to diagnose it.

In the explorer (not in study mode) each repair is a button: it starts ``stateseer repair``
as a background job (:class:`~stateseer.app.workflows.jobs.JobRunner`) with a progress
bar and a cancel button while the page stays usable; when it ends, the comparison of the
two runs appears above the findings (accuracy with its interval, per class, the inputs
fixed and broken, which open their traces).
"""

from __future__ import annotations

import shlex
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
from dash import ALL, Input, Output, State, dcc, html, no_update

from stateseer.app.explorer import ids
from stateseer.app.explorer.view import Callback, Trigger, View, select_outputs
from stateseer.app.selection import EMPTY, apply_event, to_query
from stateseer.app.workflows.diagnose import load_findings
from stateseer.core import layout as run_layout

__all__ = ["VIEW", "finding_card", "findings_panel", "job_panel", "open_example",
           "repair_job", "repair_result"]


def _culprit(f: dict[str, Any]) -> str:
    if f["tokens"]:
        if f["kind"] == "sequence":
            return " … ".join(f["tokens"])
        # a span's tokens travel together, in reading order; a topic's words are a set
        return " ".join(f["tokens"]) if f["kind"] == "shortcut" else ", ".join(f["tokens"])
    if f["kind"] == "length":
        return f"longer than {f.get('length_above')} tokens"
    if f["kind"] == "confusion":
        return " → ".join(f.get("classes", ()))
    if f["kind"] == "prior":
        return (f"{f.get('class')}: {f.get('train_share', 0):.0%} of training, "
                f"{f.get('split_share', 0):.0%} here")
    return ", ".join(f.get("unknown_words", ())[:5]) or "—"


def _kind_test(kt: dict[str, Any]) -> str:
    """How the finding's kind was tested (:class:`~stateseer.abstraction.analysis.
    diagnosis.TextLabels`)."""
    if "train_agreement" in kt:  # a confusion or a prior shift (TextLabels.pair_test)
        verdict = ("label noise: the training labels disagree with their text"
                   if kt["label_noise"] else "no label noise: the training labels are as "
                   "right as this split's")
        return (f"kind, tested: {kt['train_agreement']:.0%} of the training inputs labelled "
                f"as the prediction are labelled as their text says, against "
                f"{kt['split_agreement']:.0%} here — {verdict}")
    if "agreement" not in kt:
        return "kind: no training inputs to test it on"
    verdict = ("label noise: their labels disagree with their text" if kt["label_noise"]
               else "a shortcut: their labels are right, the model leans on the culprit")
    return (f"kind, tested: {kt['agreement']:.0%} of the {kt['carriers']} training inputs "
            f"carrying it are labelled as the rest of their text says, against "
            f"{kt['baseline']:.0%} of the others of their classes — {verdict}")


def _intervention(iv: dict[str, Any] | None, kind: str = "") -> str:
    if not iv:
        return ("not checked (no recorded training split to read the labels of)"
                if kind == "confusion"
                else "not checked with the model (not among the most significant)")
    if iv["kind"] == "delete_tokens":
        sign = f" (sign test p = {iv['sign_p']:.1e})" if "sign_p" in iv else ""
        if "inputs_other_classes" in iv:  # read in the direction the finding claims
            return (f"deleting it fixes {iv['fixed']} misclassification"
                    f"{'' if iv['fixed'] == 1 else 's'} and breaks {iv['broken']} of the "
                    f"{iv['inputs_other_classes']} inputs of the other classes{sign}; over "
                    f"all {iv['inputs']} inputs it fixes {iv['fixed_all']} and breaks "
                    f"{iv['broken_all']}")
        return (f"deleting it fixes {iv['fixed']} misclassification"
                f"{'' if iv['fixed'] == 1 else 's'} and breaks {iv['broken']} of "
                f"{iv['inputs']} inputs{sign}")
    if iv["kind"] == "cut":
        return (f"cutting the inputs after {iv['after_tokens']} tokens leaves "
                f"{iv['unchanged']:.0%} of the predictions unchanged")
    if iv["kind"] == "unread_tail":
        return (f"of {iv['inputs']} errors, the words after token {iv['after_tokens']} that "
                f"the model never read favour the true class in {iv['for_truth']} and the "
                f"prediction in {iv['for_prediction']}")
    if iv["kind"] == "never_in_training":
        words = ", ".join(f"{w} ({k})" for w, k in list(iv["tokens"].items())[:5])
        return (f"no training input holds {words}, though this split's inputs hold them "
                f"that often (chance {iv['p_value']:.1e}): the splits were processed "
                "differently")
    if iv["kind"] == "training_lengths":
        return (f"no training input is longer than {iv['training_max']} tokens, while "
                f"{iv['inputs']} of this split's are (chance {iv['p_value']:.1e} were the "
                "splits drawn alike): the training texts were cut")
    if iv["kind"] == "training_text":
        verdict = ("their labels are wrong" if iv.get("confirmed") else
                   "not beyond chance: no sign that their labels are wrong")
        return (f"in training, {iv['agreement']:.0%} of the {iv['inputs']} inputs carrying it "
                f"are labelled as the rest of their text says, against {iv['baseline']:.0%} "
                f"of the others of their classes (p = {iv['p_value']:.1e}): {verdict}")
    if iv["kind"] == "training_labels":
        return (f"in training, {iv['labelled_as_called']} inputs labelled as the "
                f"prediction ({iv['rate']:.0%}) are called the true class by the model, "
                f"against {iv['the_other_way_rate']:.0%} the other way round; the true "
                f"class is {iv.get('train_share', 0):.0%} of the training labels and "
                f"{iv.get('split_share', 0):.0%} here")
    lift = f" ({iv['lift']:.1f}× the label's own frequency)" if iv.get("lift") else ""
    return (f"in training, {iv['inputs']} inputs hold these words, "
            f"{iv['purity']:.0%} of them with the word's usual label{lift}")


#: the ``finding`` of an example button that opens a *training* input (and of the
#: training inputs a finished repair edited): ``train-RANK``, ``train-edit``
TRAIN = "train"


def _example_buttons(iids: Any, rows_of: dict[int, int], finding: Any, limit: int = 8
                     ) -> list[Any]:
    """Buttons that open the inputs ``iids`` (those the split's traces hold)."""
    return [html.Button(f"#{iid}", id=ids.finding_example(finding, rows_of[iid]), n_clicks=0,
                        title="open this input's trace")
            for iid in list(iids)[:limit] if iid in rows_of]


def finding_card(f: dict[str, Any], classes: list[str], rows_of: dict[int, int],
                 can_repair: bool = False, train_rows: dict[int, int] | None = None,
                 run: str | None = "RUN") -> html.Div:
    """One finding as a card (plain data in, components out; text only, so every string
    the run brings is escaped by React). ``can_repair``: each fitting repair is a button;
    ``train_rows`` (the training split's input ids to rows): the training inputs that carry
    the culprit are buttons too; ``run``: the run's directory, as the command to repair a
    finding that is not significant names it (None: no repairs at all, a study's page,
    whose participants read findings but repair nothing)."""
    badge = html.Span("significant" if f["significant"] else "not significant",
                      className="badge " + ("sig" if f["significant"] else "muted"))
    tr = f.get("training") or {}
    labels = tr.get("labels") or []
    training = (f"training inputs carrying it: {tr['n_inputs']} ("
                + ", ".join(f"{classes[k]} {n}" for k, n in enumerate(labels) if n) + ")"
                ) if tr.get("n_inputs") else ""
    examples = _example_buttons(f.get("examples", ()), rows_of, f["rank"])
    carriers = _example_buttons(tr.get("examples", ()), train_rows or {},
                                f"{TRAIN}-{f['rank']}")
    return html.Div([
        html.Div([html.B(f"{f['rank']}. {f['kind']}: "), html.Code(_culprit(f)), " ", badge]),
        html.P(f["description"]),
        html.P(f"q = {f['q_value']:.1e}; error rate {f['error_rate_with']:.0%} with, "
               f"{f['error_rate_without']:.0%} without; "
               f"{_intervention(f.get('intervention'), f['kind'])}", className="muted"),
        html.P(training, className="muted") if training else None,
        html.P(_kind_test(f["kind_test"]), className="muted") if f.get("kind_test") else None,
        html.Div(["examples: ", *examples] if examples else [], className="examples"),
        html.Div(["in training: ", *carriers] if carriers else [],
                 className="examples training"),
        _repairs(f, can_repair, run) if run is not None else None,
    ], className="finding")


def _repairs(f: dict[str, Any], can_repair: bool, run: str = "RUN") -> Any:
    """The repairs that fit the finding: buttons where the page may start jobs and the
    finding survived its check (acting on one that did not is acting on noise; the command
    line still does it, for whoever wants to measure that)."""
    actions = list(f.get("actions", ()))
    if not actions:
        return html.P("no repair fits this finding", className="muted")
    if not f["significant"]:
        return html.P(["no repair offered: the finding did not pass its q-value and check ("
                       "to measure one anyway: ",
                       html.Code(f"stateseer repair {shlex.quote(run)} --finding {f['rank']} "
                                 f"--action {actions[0]} --out NEW"), ")"], className="muted")
    if not can_repair:
        return html.P("repairs that fit: " + ", ".join(actions), className="muted")
    return html.Div(["repair: ", *(html.Button(a, id=ids.repair_start(f["rank"], a),
                                               n_clicks=0, className="repair",
                                               title=f"retrain on the training data edited "
                                               f"by {a} and compare")
                                   for a in actions)], className="repairs")


@lru_cache(maxsize=8)
def _rows_of(ctx: Any, split: str) -> dict[int, int]:
    """The split's input ids to their rows in its traces (none for a split the run lacks)."""
    if split not in ctx.data.splits:
        return {}
    rows = np.asarray(ctx.data.traces[split].rows)
    return {int(i): r for r, i in enumerate(rows.tolist())}


def findings_panel(ctx: Any) -> list[Any]:
    """The tab's content for the context's run."""
    doc = load_findings(ctx.data.run.path)
    if doc is None:
        return [html.P(["Not diagnosed yet: ", html.Code(f"stateseer diagnose "
                                                         f"{ctx.data.run.path}"),
                        " names the culprits of the model's errors, each checked by "
                        "intervening with the model."], className="muted")]
    split = doc["split"]
    if split not in ctx.data.splits:
        return [html.P(f"The findings are on split {split!r}, which this run no longer has; "
                       "diagnose it again.", className="muted")]
    n = doc["n_significant"]
    head = html.P(f"{n} significant finding{'' if n == 1 else 's'} on the {split} split "
                  f"({doc['n_misclassified']} of {doc['n_inputs']} inputs misclassified; "
                  f"{doc['n_candidates']} candidates tested, q < {doc['q_level']}, each "
                  "checked with the model).")
    if not doc["n_significant"]:
        head.children += (" None survives: on this split the errors have no single culprit "
                          "these checks can name; the list below is what came closest.")
    rows = _rows_of(ctx, split)
    train_rows = _rows_of(ctx, TRAIN)
    can = _can_repair(ctx)
    note = [] if can or ctx.jobs is None else [html.P(
        "Repairs retrain the model, so they need a run of `stateseer train`; retrain your "
        "own model on edited data yourself.", className="muted")]
    # a page that starts no jobs is a study's: no repair, and no command naming the run
    run = str(ctx.data.run.path) if ctx.jobs is not None else None
    return [head, *note, *(finding_card(f, list(ctx.data.classes), rows, can, train_rows,
                                        run) for f in doc["findings"])]


def _can_repair(ctx: Any) -> bool:
    from stateseer.app.workflows.retraining import training_settings

    return ctx.jobs is not None and training_settings(ctx.data.run) is not None


def job_panel(ctx: Any, status: dict[str, Any]) -> list[Any]:
    """The repair job as the page shows it: nothing when idle; a progress bar while it
    runs; the comparison of the two runs when it is done; the reason when it failed."""
    state = status.get("state", "idle")
    info = status.get("info", {})
    what = f"repair of finding {info.get('finding')} by {info.get('action')}"
    if state == "idle" or status.get("kind", "repair") != "repair":  # another job's
        return []
    if state == "running":
        stage, done, total = status["stage"], status["done"], status["total"]
        return [html.Div(f"{what}: {stage} ({done}/{total}), {status['seconds']:.0f} s",
                         className="job-status"),
                html.Progress(value=str(done), max=str(total), className="job-bar")]
    if state == "cancelled":
        return [html.Div(f"{what}: cancelled", className="job-status muted")]
    if state == "failed":
        return [html.Div(f"{what} failed: {status.get('message', '')}",
                         className="job-status wrong")]
    return repair_result(ctx, info)


def repair_result(ctx: Any, info: dict[str, Any]) -> list[Any]:
    """A finished repair: ``NEW/repair.json`` and the two runs compared."""
    from stateseer.core.errors import StateseerError
    from stateseer.core.reading import load_json

    out = Path(info["out"])
    try:
        doc = load_json(out / run_layout.REPAIR)
    except (OSError, StateseerError):
        return [html.Div(f"the repair ended without {out / run_layout.REPAIR}", className="wrong")]
    lo, hi = doc["delta_ci"]
    rows = _rows_of(ctx, "test")

    def inputs(label: str, which: list[int], cls: str) -> html.Div:
        return html.Div([html.Span(f"{len(which)} {label}", className=cls), ": ",
                         *_example_buttons(which, rows, 0)], className="examples")
    per_class = ", ".join(f"{c} {d:+.1%}" for c, d in doc["per_class_delta"].items())
    return [html.Div([
        html.B(f"Repaired by {doc['action']} (finding {doc['finding']}): "),
        f"test accuracy {doc['before']['test_accuracy']:.3f} → "
        f"{doc['after']['test_accuracy']:.3f} ({doc['delta']:+.3f}, 95 % CI {lo:+.3f} to "
        f"{hi:+.3f}); per class {per_class}; "
        + ("the finding is gone (measured against the control)." if doc.get("finding_gone")
           else f"the finding is not shown gone: {doc.get('finding_left', 'still there')}."),
        *_hurt_line(doc),
        *_control_line(doc.get("control")),
        *_seeds_line(doc.get("seeds")),
        inputs("fixed", doc["fixed"], "ok"), inputs("broken", doc["broken"], "wrong"),
        html.P("(fixed and broken by the repaired model; they open here, in this run, "
               "whose model is the one before the repair: side by side below)",
               className="muted") if doc["fixed"] or doc["broken"] else None,
        *_edits_line(ctx, out),
        html.P(["the new run: ", html.Code(str(out)), "; side by side: ",
                html.Code(f"stateseer serve {out} --compare {ctx.data.run.path}")],
               className="muted")], className="repair-result")]


def _hurt_line(doc: dict[str, Any]) -> list[Any]:
    """The classes that lost more than a point: an alarm only where the loss is beyond
    what retraining alone moves a class (the control's largest move), else said
    plainly as within it."""
    hurt = doc.get("classes_hurt") or []
    if not hurt:
        return []
    lost = ", ".join(f"{c} ({doc['per_class_delta'][c]:+.1%})" for c in hurt)
    c = doc.get("control") or {}
    noise = max(map(abs, (c.get("per_class_delta") or {}).values()), default=None)
    if noise is not None and all(abs(doc["per_class_delta"][k]) <= noise for k in hurt):
        return [html.Div(f"lost more than a point: {lost}, within what retraining alone "
                         f"moves a class (up to {noise:.1%}, the control)", className="muted")]
    return [html.Div(("lost more than a point in this one training (the seeds below read "
                      "it without that training's luck): " if doc.get("seeds") else
                      "lost more than a point: ") + lost, className="wrong")]


#: ``repair_edits.json``'s lists of training rows, and how the page says what was done
_EDITED = (("relabelled_rows", "relabelled"), ("dropped_rows", "left out"),
           ("edited_rows", "with the culprit deleted"),
           ("added_copies_of", "copied (with the culprit, or rebalanced)"),
           ("upweighted_rows", "upweighted (the first model's errors)"))


def _edits_line(ctx: Any, out: Path) -> list[Any]:
    """The training inputs the repair changed (``NEW/repair_edits.json``), the first of
    them as buttons that open their traces in the source run: read them before keeping the
    repair."""
    from stateseer.core.errors import StateseerError
    from stateseer.core.reading import load_json

    try:
        edits = load_json(out / run_layout.REPAIR_EDITS)
    except (OSError, StateseerError):
        return []
    key, verb = next(((k, v) for k, v in _EDITED if k in edits), (None, ""))
    if key is None:  # a setting changed, not the data
        changed = ", ".join(f"{k} {old!r} → {new!r}" for k, (old, new) in
                            (edits.get("settings") or {}).items())
        return [html.Div(f"no training input changed; the setting {changed}",
                         className="muted")] if changed else []
    rows = edits[key]
    to = edits.get("to")
    to = (f" to {to}" if isinstance(to, str) else
          " (" + ", ".join(f"{c} {n}" for c, n in to.items()) + ")" if isinstance(to, dict)
          else "")
    train_rows = _rows_of(ctx, TRAIN)
    return [html.Div([html.Span(f"{len(rows)} training inputs {verb}{to}"), ": ",
                      *_example_buttons(rows, train_rows, f"{TRAIN}-edit")],
                     className="examples edits")]


def _control_line(control: dict[str, Any] | None) -> list[Any]:
    """``repair --control``'s model, when there is one: what retraining alone moved."""
    if not control:
        return []
    moved = max(map(abs, control["per_class_delta"].values()), default=0.0)
    return [html.Div(
        f"retraining alone (a control: {control['left_out']} random training inputs left "
        f"out, no edit): test accuracy {control['delta']:+.3f}, single classes by up to "
        f"{moved:.1%}; a change no larger than that is what retraining moves",
        className="muted control")]


#: the seeds a repair started with the *over seeds* box trains (``repair --seeds``)
REPAIR_SEEDS = 3


def _seeds_line(seeds: dict[str, Any] | None) -> list[Any]:
    """``repair --seeds``' figures, when there are some: the mean change over the seeds
    with its interval, and the classes that lose more than a point on average."""
    if not seeds:
        return []
    lo, hi = seeds["delta_ci"]
    per_class = ", ".join(f"{c} {d:+.1%}" for c, d in seeds["per_class_delta_mean"].items())
    hurt = seeds["classes_hurt"]
    return [html.Div([
        html.B(f"Over {len(seeds['seeds'])} seeds: "),
        f"test accuracy {np.mean(seeds['before']):.3f} → {np.mean(seeds['after']):.3f} on "
        f"average (mean change {seeds['delta_mean']:+.3f}, 95 % CI {lo:+.3f} to {hi:+.3f}); "
        f"per class {per_class}.",
        html.Div("lost more than a point on average: " + ", ".join(hurt), className="wrong")
        if hurt else html.Div("no class loses more than a point on average.",
                              className="ok")], className="seeds")]


def _control_box(ctx: Any) -> dcc.Checklist:
    """The box that asks for ``repair --control``; hidden until there are findings with
    repair buttons beside it (significant ones with actions that fit)."""
    doc = load_findings(ctx.data.run.path) if _can_repair(ctx) else None
    repairable = doc is not None and any(f["significant"] and f.get("actions")
                                         for f in doc["findings"])
    return dcc.Checklist(id=ids.REPAIR_CONTROL, value=[], options=[
        {"value": "control",
         "label": " with a control: also retrain without a random 1 % of the training "
                  "inputs, no edit (what retraining alone moves; doubles the time)"},
        {"value": "seeds",
         "label": f" over {REPAIR_SEEDS} seeds: train the run's data and the edited data "
                  f"{REPAIR_SEEDS - 1} more times each and read the mean change (one "
                  f"training's change holds its luck; {REPAIR_SEEDS} times the time)"}],
        className="repair-control", style=None if repairable else {"display": "none"})


def layout(ctx, initial: dict[str, Any]) -> dict[str, Any]:
    jobs = []
    if ctx.jobs is not None:
        status = ctx.jobs.status()
        running = status.get("state") == "running"
        jobs = [html.Div([html.Div(job_panel(ctx, status), id=ids.REPAIR_JOB),
                          html.Button("cancel the repair", id=ids.REPAIR_CANCEL, n_clicks=0,
                                      disabled=not running),
                          _control_box(ctx),
                          dcc.Interval(id=ids.REPAIR_POLL, interval=1000,
                                       disabled=not running)], className="jobs")]
    return {"side": dcc.Tab(label="Findings", value=ids.TAB_FINDINGS, children=html.Div(
        [*jobs, html.Div(findings_panel(ctx), id=ids.FINDINGS),
         dcc.Store(id=ids.FINDING_CULPRIT)], className="findings"))}


def repair_job(ctx, trigger: Trigger, _starts, _cancel, _poll, control=None):
    """Start (with ``repair --control`` where the box is ticked), follow or cancel the
    repair job; returns the job panel, whether polling stops, and whether the cancel
    button is off."""
    from stateseer.core.errors import StateseerError

    note = []
    if trigger.is_type(ids.REPAIR_START_TYPE):
        k, action = int(trigger.id["finding"]), str(trigger.id["action"])
        try:
            _start_repair(ctx, k, action, control="control" in (control or ()),
                          seeds=REPAIR_SEEDS if "seeds" in (control or ()) else 1)
        except StateseerError as exc:
            note = [html.Div(str(exc), className="job-status wrong")]
    elif trigger.id == ids.REPAIR_CANCEL and trigger.value:
        _discard(ctx.jobs.cancel())
    status = ctx.jobs.status()
    running = status.get("state") == "running" and status.get("kind") == "repair"
    return [*note, *job_panel(ctx, status)], not running, not running


def _discard(status: dict[str, Any]) -> None:
    """A cancelled repair's half-made run folder is removed (the job made it: it did not
    exist when the job started)."""
    import shutil

    out = status.get("info", {}).get("out")
    if status.get("state") == "cancelled" and out and not (Path(out) / run_layout.REPAIR).exists():
        shutil.rmtree(out, ignore_errors=True)
    if status.get("state") == "cancelled" and out:  # the folder repair was building it in
        shutil.rmtree(run_layout.RunLayout.work(Path(out)), ignore_errors=True)


def _start_repair(ctx: Any, k: int, action: str, *, control: bool = False,
                  seeds: int = 1) -> None:
    """Check the request against the run's findings, then start ``stateseer repair``
    (``--control``, ``--seeds`` if asked) into a new sibling run folder."""
    from stateseer.app.workflows.jobs import repair_command
    from stateseer.core.errors import StateseerError

    doc = load_findings(ctx.data.run.path) or {"findings": []}
    f = next((f for f in doc["findings"] if f["rank"] == k), None)
    if f is None or action not in f.get("actions", ()):
        raise StateseerError(f"finding {k} has no repair {action!r}")
    src = Path(ctx.data.run.path).resolve()
    out = src.with_name(f"{src.name}-repair-{k}-{action}")
    n = 2
    while out.exists():
        out, n = src.with_name(f"{src.name}-repair-{k}-{action}-{n}"), n + 1
    ctx.jobs.start("repair", repair_command(src, k, action, out, control=control,
                                            seeds=seeds),
                   info={"finding": k, "action": action, "out": str(out), "control": control,
                         "seeds": seeds})


def open_example(ctx, trigger: Trigger, _clicks, sel):
    """A click on an example input selects it (in the findings' split; a repaired input,
    finding 0, in the test split the repair compares; a training input, ``train-…``, in
    the training split): its trace opens, the finding's culprit marked in it (the
    ``finding-culprit`` store: the input and the culprit's tokens)."""
    if not trigger.is_type(ids.FINDING_EXAMPLE_TYPE):
        return no_update, no_update, no_update
    finding = trigger.id.get("finding")
    doc = load_findings(ctx.data.run.path) or {}
    split = ("test" if finding == 0 else TRAIN if str(finding).startswith(TRAIN)
             else doc.get("split"))
    if split not in ctx.data.splits:
        return no_update, no_update, no_update
    sel = sel or EMPTY
    if sel.get("split") != split:
        sel = apply_event(sel, "split", split)
    new = apply_event(sel, "row", int(trigger.id["index"]))
    culprit = {"split": split, "index": int(trigger.id["index"]),
               "tokens": _culprit_tokens(doc, finding)}
    return new, to_query(new), culprit


def _culprit_tokens(doc: dict[str, Any], finding: Any) -> list[str]:
    """The tokens of finding ``finding`` (its rank, or ``train-RANK`` for its training
    carriers; none for a repaired input's finding 0 or a culprit without tokens)."""
    rank = str(finding).removeprefix(f"{TRAIN}-")
    f = next((f for f in doc.get("findings", ()) if str(f.get("rank")) == rank), None)
    return [str(t) for t in (f or {}).get("tokens") or ()]


VIEW = View(
    name="findings", layout=layout, tabs=(ids.TAB_FINDINGS,),
    callbacks=(
        Callback(open_example, [*select_outputs(), Output(ids.FINDING_CULPRIT, "data")],
                 [Input(ids.finding_example(ALL, ALL), "n_clicks"), State(ids.SELECTION, "data")],
                 trigger=True, prevent_initial_call=True),
        Callback(repair_job, [Output(ids.REPAIR_JOB, "children"),
                              Output(ids.REPAIR_POLL, "disabled"),
                              Output(ids.REPAIR_CANCEL, "disabled")],
                 [Input(ids.repair_start(ALL, ALL), "n_clicks"),
                  Input(ids.REPAIR_CANCEL, "n_clicks"), Input(ids.REPAIR_POLL, "n_intervals"),
                  State(ids.REPAIR_CONTROL, "value")],
                 trigger=True, prevent_initial_call=True, when=lambda ctx: ctx.jobs is not None),
    ))
