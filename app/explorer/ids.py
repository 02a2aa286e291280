"""Every component id of the explorer, in one place.

The values are the page's DOM ids (browser tests and benchmarks address them, e.g.
``#selection``, ``#diagram``, ``#table``, ``#trace-chart``): change a value only
together with everything outside this package that addresses it. Components created
many times (one per token, pattern, row) get their ids from the functions at the end,
which take ``dash.ALL`` for a callback that listens to every one.
"""

from __future__ import annotations

from typing import Any

from stateseer.abstraction.automata.export import EXPORT_FORMATS

# -- stores shared by the views (the page's per-user state) ------------------------------
URL = "url"
SELECTION = "selection"
ACTIVE_TRACE = "active-trace"
HOVER_STATE = "hover-state"
STEP = "step"
FORCED = "forced"
PINNED = "pinned"
DOWNLOAD = "download"

# -- diagram ------------------------------------------------------------------------------
DIAGRAM_PANEL = "diagram-panel"
DIAGRAM = "diagram"
TOPK = "topk"
MINCOUNT = "mincount"
LOOPS = "loops"
LAYOUT = "layout"
COLOR_BY = "color-by"
COLOR_NOTE = "color-note"
CLEAR = "clear"
EDGE_INFO = "edge-info"
FSM_DOWNLOAD = "fsm-download"  # the diagram's own: a table download at once is not lost

# -- side panel: tabs of the card, the patterns and the run comparison -------------------
SIDE_TABS = "side-tabs"
TAB_FINDINGS = "findings"
FINDINGS = "findings-list"
REPAIR_JOB = "repair-job"  # the running repair: progress, status, then its comparison
REPAIR_POLL = "repair-poll"
REPAIR_CANCEL = "repair-cancel"
REPAIR_CONTROL = "repair-control"  # also train `repair --control`'s model
SWEEP_START = "sweep-start"  # the sweep tab's background `stateseer sweep`
SWEEP_CANCEL = "sweep-cancel"
FORCE_START = "force-start"  # the same tab's background `stateseer force`
SWEEP_POLL = "sweep-poll"
SWEEP_JOB = "sweep-job"
SWEEP_BODY = "sweep-body"
DFA_START = "dfa-start"  # the automaton tab's background `stateseer extract-dfa`
DFA_CANCEL = "dfa-cancel"
DFA_POLL = "dfa-poll"
DFA_JOB = "dfa-job"
DFA_BODY = "dfa-body"
TAB_CARD = "card"
TAB_INFLUENTIAL = "influential"
TAB_BUGGY = "buggy"
TAB_COMPARE = "compare"
STATE_CARD = "state-card"
CARD_KEY = "card-key"
INFLUENTIAL = "influential"
BUGGY = "buggy"
COMPARE_PANEL = "compare-panel"

# -- instance table -------------------------------------------------------------------------
TABLE_PANEL = "table-panel"
TABLE = "table"
TABLE_KEY = "table-key"
TABLE_MARK = "table-mark"
SPLIT = "split"
SEARCH = "search"
REGEX = "regex"
F_LABEL = "f-label"
F_PRED = "f-pred"
F_CORRECT = "f-correct"
FILTER_CHIPS = "filter-chips"
TABLE_MESSAGE = "table-message"
DL_TABLE = "dl-table"

# -- trace panel: input box, pin/edit, trace text, attribution, forcing, chart -------------
TRACE_PANEL = "trace-panel"
INPUT_BOX = "input-box"
NEW_TEXT = "new-text"
TRACE_BTN = "trace-btn"
COMPARE_MODE = "compare-mode"
INPUT_MESSAGE = "input-message"
EDIT_BTN = "edit-btn"
PIN_BTN = "pin-btn"
PIN_INFO = "pin-info"
TRACE_TITLE = "trace-title"
TRACE_TOKENS = "trace-tokens"
ATTRIBUTION_PANEL = "attribution-panel"
ATTR_METHOD = "attr-method"
ATTR_TARGET = "attr-target"
ATTR_LEVEL = "attr-level"
ATTR_BASELINE = "attr-baseline"
ATTR_REGEX = "attr-regex"
ATTR_INTENSITY = "attr-intensity"
ATTR_STRIP = "attr-strip"
ATTR_NOTE = "attr-note"
FORCING_PANEL = "forcing-panel"
FORCE_ALL = "force-all"
FORCE_STEP = "force-step"
FORCE_CLEAR = "force-clear"
FORCE_NOTE = "force-note"
TRACE_CHART_BOX = "trace-chart-box"
TRACE_CHART = "trace-chart"
DL_FIGURE = "dl-figure"

# -- nearest contexts and the projection -------------------------------------------------
NEAREST_PANEL = "nearest-panel"
NN_K = "nn-k"
NN_WINDOW = "nn-window"
NN_LIST = "nn-list"
PROJECTION_PANEL = "projection-panel"
PROJ_BOX = "proj-box"
PROJ_CHART = "proj-chart"

# -- groups other packages listen to (study mode logs their changes) ----------------------
FILTERS = (SEARCH, REGEX, F_LABEL, F_PRED, F_CORRECT)
DIAGRAM_CONTROLS = (TOPK, MINCOUNT, LOOPS, LAYOUT, COMPARE_MODE)
FSM_DOWNLOADS = tuple(f.name for f in EXPORT_FORMATS.values() if f.label and f.kind != "traces")
"""The export formats the diagram offers as buttons (those the registry gives a label)."""


def download_id(fmt: str) -> str:
    """The id of the diagram's download button for export format ``fmt`` (``dl-svg``)."""
    return f"dl-{fmt}"


DL_FSM_HTML = "dl-html"
"""The diagram's button for the FSM as one self-contained HTML page."""
EXPORTS = {**{download_id(f): f"fsm-{f}" for f in FSM_DOWNLOADS},
           DL_FSM_HTML: "fsm-html", DL_TABLE: "table-csv", DL_FIGURE: "trace-html"}
"""Download buttons -> what they export."""


# -- ids of repeated components (pattern-matching ids: a "type" and an index) ------------
TOKEN_TYPE = "token"
CMP_TOKEN_TYPE = "cmp-token"
PATTERN_TYPE = "pattern"
FINDING_EXAMPLE_TYPE = "finding-example"
#: the culprit of the finding whose example was opened: ``{"split", "index", "tokens"}``
FINDING_CULPRIT = "finding-culprit"
REPAIR_START_TYPE = "repair-start"
CMP_ROW_TYPE = "cmp-row"
NN_ROW_TYPE = "nn-row"
ATTR_SEG_TYPE = "attr-seg"


def token(index: Any, kind: str = TOKEN_TYPE) -> dict[str, Any]:
    """A chip of a token strip; ``kind`` :data:`CMP_TOKEN_TYPE` for the compared strip."""
    return {"type": kind, "index": index}


def finding_example(finding: Any, index: Any) -> dict[str, Any]:
    """An example input of a finding (``finding``: its rank; ``index``: the input's row in
    the findings' split; one input may be an example of several findings)."""
    return {"type": FINDING_EXAMPLE_TYPE, "finding": finding, "index": index}


def repair_start(finding: Any, action: Any) -> dict[str, Any]:
    """The button that repairs finding ``finding`` (its rank) by ``action``."""
    return {"type": REPAIR_START_TYPE, "finding": finding, "action": action}


def pattern(kind: Any, index: Any) -> dict[str, Any]:
    """A pattern's button (``kind`` ``"influential"`` or ``"buggy"``)."""
    return {"type": PATTERN_TYPE, "kind": kind, "index": index}


def cmp_row(index: Any) -> dict[str, Any]:
    """A changed input of the run comparison (``index``: its row in the split)."""
    return {"type": CMP_ROW_TYPE, "index": index}


def nn_row(index: Any, input: Any) -> dict[str, Any]:
    """A nearest training context (``input``: the training input it belongs to)."""
    return {"type": NN_ROW_TYPE, "index": index, "input": input}


def attr_seg(index: Any) -> dict[str, Any]:
    """A segment of the attribution strip."""
    return {"type": ATTR_SEG_TYPE, "index": index}

