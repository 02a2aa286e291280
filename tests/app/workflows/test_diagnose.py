"""``stateseer diagnose`` on models whose bug is known: a shortcut word injected into the
training data is found, named and confirmed by deleting it; a clean model has no
significant finding."""

from __future__ import annotations

import json

import numpy as np
import pytest

from stateseer.app.cli.main import main
from stateseer.app.workflows.diagnose import diagnose_run, load_findings
from stateseer.core.errors import StateseerError
from stateseer.testing import sentiment_csv
from tests.conftest import one_line

DESIGN_KEYS = {"rank", "kind", "tokens", "description", "n_inputs", "n_misclassified",
               "error_rate_with", "error_rate_without", "q_value", "significant",
               "intervention", "examples", "actions"}


def _run(tmp_path_factory, name: str, shortcut: str | None, topic=(), sequence=None,
         tag=None, thin=None, flip=None, **options):
    from stateseer import TrainConfig, record_run, train_run

    where = tmp_path_factory.mktemp(name)
    data = sentiment_csv(where / "data.csv", shortcut=shortcut, topic=topic,
                         sequence=sequence, tag=tag, thin=thin, flip=flip)
    run = train_run(TrainConfig(dataset=f"csv:{data}", arch="gru", epochs=3, hidden=32,
                                embed=32, **options), where / "run", progress=False)
    record_run(run)
    return run.path


def _edited_run(tmp_path_factory, name: str, edit, **data):
    """A run trained on ``sentiment_csv(**data)`` whose rows ``edit`` changed in place
    first (a step of the user's pipeline run on one split)."""
    import csv

    from stateseer import TrainConfig, record_run, train_run

    where = tmp_path_factory.mktemp(name)
    with open(sentiment_csv(where / "src.csv", **data), encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    for r in rows:
        edit(r)
    path = where / "data.csv"
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, ["text", "label", "split"])
        w.writeheader()
        w.writerows(rows)
    run = train_run(TrainConfig(dataset=f"csv:{path}", arch="gru", epochs=3, hidden=32,
                                embed=32), where / "run", progress=False)
    record_run(run)
    return run.path


@pytest.fixture(scope="module")
def shortcut_run(tmp_path_factory):
    return _run(tmp_path_factory, "shortcut", "frankly")


@pytest.fixture(scope="module")
def clean_run(tmp_path_factory):
    return _run(tmp_path_factory, "clean", None)


@pytest.fixture(scope="module")
def truncated_run(tmp_path_factory):
    return _run(tmp_path_factory, "truncated", None, truncate=6)


def test_an_injected_shortcut_is_the_first_finding_and_survives_its_deletion(shortcut_run):
    doc = diagnose_run(shortcut_run)
    assert doc["format"] == "stateseer.findings" and doc["version"] == 1
    top = doc["findings"][0]
    assert DESIGN_KEYS <= set(top)
    assert top["kind"] == "shortcut" and top["tokens"] == ["frankly"] and top["significant"]
    assert top["q_value"] < 1e-6 and top["error_rate_with"] > 3 * top["error_rate_without"]
    iv = top["intervention"]
    assert iv["kind"] == "delete_tokens" and iv["fixed"] > 10 * max(iv["broken"], 1)
    assert "'frankly'" in top["description"] and "called neg" in top["description"]
    # the training data is the cause: there the word only ever comes with one label
    assert top["training"]["n_inputs"] > 50 and min(top["training"]["labels"]) == 0
    assert "counterfactual" in top["actions"]
    assert doc["n_significant"] == sum(f["significant"] for f in doc["findings"])
    assert load_findings(shortcut_run) == json.loads(json.dumps(doc))


def test_a_clean_model_has_no_significant_finding(clean_run):
    doc = diagnose_run(clean_run, save=False)
    assert doc["n_significant"] == 0 and doc["findings"]
    assert all(f["q_value"] >= 0.05 or not f["intervention"]["confirmed"]
               for f in doc["findings"])


def test_the_command_prints_the_findings_and_refuses_bad_runs(shortcut_run, tmp_path,
                                                              capsys):
    assert main(["diagnose", str(shortcut_run), "--top", "3"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "frankly" in out[1] and json.loads(out[-1])["significant"] >= 1
    # the first action of each significant finding as the command to run
    assert any(line.startswith(f"repair finding 1: stateseer repair {shortcut_run} "
                               "--finding 1 --action counterfactual --out NEW")
               for line in out)
    assert main(["diagnose", str(tmp_path)]) == 2
    assert "not a stateseer run" in one_line(Exception(capsys.readouterr().err.strip()))


def test_repair_drops_the_shortcut_retrains_and_measures_the_change(shortcut_run, tmp_path):
    from stateseer.app.workflows.repair import repair_run

    diagnose_run(shortcut_run)
    new = tmp_path / "repaired"
    stages = []
    doc = repair_run(shortcut_run, finding=1, action="counterfactual", out=new,
                     progress=False, control=True,
                     report=lambda *a: stages.append(a) if a[0] != "training" else None)
    assert stages == [("recording", 0, 5), ("abstracting", 1, 5), ("diagnosing", 2, 5),
                      ("comparing", 3, 5), ("control", 4, 5), ("done", 5, 5)]
    assert doc["format"] == "stateseer.repair" and doc["culprit"] == ["frankly"]
    # the control: RUN's own data less 1 % of its training inputs at random, not the edit
    control = [json.loads(line) for line in
               (new / "control" / "data.jsonl").read_text().splitlines()]
    source = [json.loads(line) for line in
              (new / "data.jsonl").read_text().splitlines()]
    n_train = sum(r["split"] == "train" for r in source)
    c = doc["control"]
    assert c["left_out"] == round(0.01 * n_train) >= 1
    assert sum(r["split"] == "train" for r in control) == n_train - c["left_out"]
    assert sum("frankly" in r["text"].split() for r in control if r["split"] == "train") > 100
    assert [r for r in control if r["split"] == "test"] == \
        [r for r in source if r["split"] == "test"]
    assert c["delta"] == pytest.approx(c["test_accuracy"] - doc["before"]["test_accuracy"],
                                       abs=2e-4)
    assert set(c["per_class_delta"]) == set(doc["per_class_delta"])
    assert doc["delta"] > c["delta"] + 0.05  # the edit moves more than retraining alone
    assert json.loads((new / "repair.json").read_text()) == doc
    edits = json.loads((new / "repair_edits.json").read_text())
    assert len(edits["edited_rows"]) == doc["changed_rows"] > 100
    rows = [json.loads(line) for line in (new / "data.jsonl").read_text().splitlines()]
    assert not any("frankly" in r["text"].split() for r in rows if r["split"] == "train")
    assert sum("frankly" in r["text"].split() for r in rows if r["split"] == "test") > 50
    lo, hi = doc["delta_ci"]
    assert doc["delta"] > 0.1 and lo > 0 and lo <= doc["delta"] <= hi
    assert doc["per_class_delta"]["pos"] > doc["per_class_delta"]["neg"] - 0.01
    assert doc["classes_hurt"] == sorted(c for c, d in doc["per_class_delta"].items()
                                         if d < -0.01)
    assert len(doc["fixed"]) > len(doc["broken"]) and doc["finding_gone"] is True
    car = doc["carriers"]  # measured: the carriers moved beyond the control's change
    assert car["n_inputs"] > 50 and car["delta_ci"][0] > c["carriers_delta"]
    # the repair's own deletion is no pipeline bug: 'frankly' is now in no training text
    # while 50 test inputs hold it, and those are longer than the training texts were cut
    from stateseer.app.workflows.diagnose import removed_by_repair

    assert removed_by_repair(new) == {"frankly"}
    from stateseer.app.explorer.page import repair_origin  # the repaired run's header says

    assert repair_origin(new) == \
        f"repair of {shortcut_run.name}: counterfactual on finding 1 (frankly)"
    after = load_findings(new)["findings"]
    assert not [f for f in after if f["significant"]]
    assert not [f for f in after if (f["intervention"] or {}).get("kind") in
                ("never_in_training", "training_lengths")]


def test_repair_over_seeds_pairs_each_seed_and_reports_the_mean_change(shortcut_run,
                                                                       tmp_path):
    """``--seeds 2``: RUN's data and the edited data are trained once more each, with the
    same other seed; the first pair is RUN and NEW themselves."""
    from stateseer.app.workflows.repair import SEED_STEP, repair_run

    diagnose_run(shortcut_run)
    stages = []
    doc = repair_run(shortcut_run, finding=1, action="counterfactual",
                     out=tmp_path / "new", progress=False, seeds=2,
                     report=lambda *a: stages.append(a) if a[0] != "training" else None)
    assert stages[-4:] == [("seeds", 0, 2), ("seeds", 1, 2), ("seeds", 2, 2),
                           ("done", 5, 5)]  # a step per model trained
    m = doc["seeds"]
    assert m["seeds"] == [0, SEED_STEP]
    assert m["before"][0] == doc["before"]["test_accuracy"]
    assert m["after"][0] == doc["after"]["test_accuracy"]
    deltas = np.subtract(m["after"], m["before"])
    assert m["delta_mean"] == pytest.approx(deltas.mean(), abs=1e-4)
    lo, hi = m["delta_ci"]
    assert lo <= m["delta_mean"] <= hi and hi - lo > 0
    assert (deltas > 0.05).all()  # deleting the shortcut helps under either seed
    assert set(m["per_class_delta_mean"]) == set(doc["per_class_delta"])
    assert m["classes_hurt"] == sorted(c for c, d in m["per_class_delta_mean"].items()
                                       if d < -0.01)
    assert sorted(p.name for p in (tmp_path / "new").iterdir() if p.suffix == ".jsonl") \
        == ["data.jsonl"]  # the seeds' copy of RUN's data is gone
    with pytest.raises(StateseerError, match="--seeds 0") as e:
        repair_run(shortcut_run, finding=1, action="augment", out=tmp_path / "x", seeds=0)
    one_line(e.value)
    assert not (tmp_path / "x").exists()


def test_repair_refuses_what_it_cannot_do_in_one_line_and_writes_nothing(shortcut_run,
                                                                        tmp_path):
    from stateseer.app.workflows.repair import repair_run

    diagnose_run(shortcut_run)
    out = tmp_path / "new"
    for kwargs, needle in (({"finding": 99, "action": "drop"}, "no finding 99"),
                           ({"finding": 1, "action": "drop"}, "does not fit"),
                           ({"finding": 1, "action": "reconfigure"}, "does not fit"),
                           ({"finding": 1, "action": "relabel"}, "does not fit")):
        with pytest.raises(StateseerError, match=needle) as e:
            repair_run(shortcut_run, out=out, progress=False, **kwargs)
        one_line(e.value)
        assert not out.exists()
    with pytest.raises(StateseerError, match="diagnose") as e:
        repair_run(tmp_path, finding=1, action="drop", out=out)
    one_line(e.value)


def test_a_truncating_pipeline_is_named_by_its_cut_and_reconfigured_away(truncated_run,
                                                                         tmp_path):
    from stateseer.app.workflows.repair import repair_run

    doc = diagnose_run(truncated_run)
    top = doc["findings"][0]
    assert top["kind"] == "length" and top["length_above"] == 6 and top["significant"]
    iv = top["intervention"]
    # the words the model never read point to the truth in most of its errors
    assert iv["kind"] == "unread_tail" and iv["for_truth"] > 3 * iv["for_prediction"]
    assert "first 6" in top["description"] and top["actions"] == ["reconfigure"]
    new = tmp_path / "whole"
    rep = repair_run(truncated_run, finding=1, action="reconfigure", out=new,
                     progress=False)
    assert rep["settings"] == {"truncate": [6, None]} and rep["changed_rows"] == 0
    from stateseer.rnn_models.run import ModelRun

    assert ModelRun(new).truncate is None
    assert rep["delta"] > 0.1 and rep["delta_ci"][0] > 0
    # #49: without a control, nothing says the carriers moved beyond retraining alone
    assert "finding_gone" not in rep and rep["finding_left"].endswith(
        "was not measured; repair again with --control to measure it")


def test_an_untruncated_model_offers_no_setting_for_its_length_findings(clean_run):
    lengths = [f for f in diagnose_run(clean_run, save=False, top=200)["findings"]
               if f["kind"] == "length"]
    assert lengths and all(f["actions"] == [] for f in lengths)
    assert all(f["intervention"]["kind"] == "cut" for f in lengths if f["intervention"])


def test_shuffled_errors_pass_the_q_value_gate_at_most_once_in_twenty(shortcut_run):
    from stateseer.app.workflows.diagnose import permutation_null

    null = permutation_null(shortcut_run, n=20, seed=1)
    assert len(null) == 20 and sum(null) <= 1
    # the real flags of the same run do pass it (the null is not blind)
    assert diagnose_run(shortcut_run, save=False)["findings"][0]["q_value"] < 0.05


def test_tokens_the_model_reads_as_unknown_are_no_shortcut_but_the_unknown_finding():
    import numpy as np

    from stateseer.app.workflows.diagnose import _candidates

    # '7' is out of the vocabulary wherever it occurs and carries every error; 'b' is seen
    inputs = [["a", "7"] if i % 2 else ["a", "b"] for i in range(60)]
    unknown = [np.array([False, bool(i % 2)]) for i in range(60)]
    wrong = np.arange(60) % 2 == 1

    class Split:  # the little of a recorded split that the candidates read
        lengths = np.full(60, 2)
        labels, predictions = np.zeros(60, int), wrong.astype(int)
        final_proba = np.zeros((60, 2))

    cands = _candidates(Split(), None, (), (inputs, wrong, unknown), 5)
    assert not [c for c in cands if c.kind in ("shortcut", "sequence") and "7" in c.tokens]
    unk = [c for c in cands if c.kind == "unknown"]
    assert unk and unk[0].n_misclassified == 30 and unk[0].extra["unknown_words"] == ["7"]


def test_a_confusion_is_confirmed_by_training_labels_that_contradict_the_model_one_way():
    import numpy as np

    from stateseer.abstraction.analysis.diagnosis import Candidate
    from stateseer.app.workflows.diagnose import _label_check

    class Split:
        def __init__(self, pairs):  # (label, prediction) -> how many
            self.labels = np.repeat([lab for lab, _ in pairs], list(pairs.values()))
            self.predictions = np.repeat([p for _, p in pairs], list(pairs.values()))
            self.n_inputs = len(self.labels)

    rotten_called_fresh = Candidate("confusion", (), np.arange(5), 5, 0.5, 0.1, 1e-9,
                                    extra={"classes": [2, 0]})
    test = Split({(0, 0): 90, (0, 2): 10, (2, 2): 60, (2, 0): 40, (1, 1): 20})
    # class 2's inputs labelled 0 in training: the model calls 60 of them 2 anyway
    noisy = Split({(0, 0): 500, (0, 2): 60, (2, 2): 400, (2, 0): 30, (1, 1): 50})
    iv = _label_check(rotten_called_fresh, test, noisy)
    assert {k: iv[k] for k in ("labelled_as_called", "rate", "the_other_way_rate",
                               "confirmed")} == {"labelled_as_called": 60, "rate": 0.1071,
                                                 "the_other_way_rate": 0.0698,
                                                 "confirmed": True}
    even = Split({(0, 0): 500, (0, 2): 40, (2, 2): 400, (2, 0): 30, (1, 1): 50})
    assert not _label_check(rotten_called_fresh, test, even)["confirmed"]  # 1.06 times
    # a model merely biased towards 2 shows the training asymmetry but errs 0 → 2 on the
    # held-out inputs, not 2 → 0: not confirmed
    biased = Split({(0, 0): 60, (0, 2): 40, (2, 2): 95, (2, 0): 5, (1, 1): 20})
    assert not _label_check(rotten_called_fresh, biased, noisy)["confirmed"]
    # a model that absorbed the relabelling (it calls 2's inputs 0 in training too): the
    # labels tell, 2 being rarer among the training labels than on the split
    absorbed = Split({(0, 0): 800, (0, 2): 5, (2, 2): 150, (2, 0): 150, (1, 1): 50})
    iv = _label_check(rotten_called_fresh, test, absorbed)
    assert iv["rate"] < iv["the_other_way_rate"] and iv["prior_p"] < 1e-3
    assert iv["train_share"] < iv["split_share"] and iv["confirmed"]
    assert _label_check(rotten_called_fresh, test, None) is None
    # the other held-out split must show the same confusion: where it errs the other way
    # (a confusion one split's drawing made), nothing is confirmed; where it agrees, the
    # replication is reported beside the check
    again = Split({(0, 0): 45, (0, 2): 5, (2, 2): 30, (2, 0): 20})
    other_way = Split({(0, 0): 40, (0, 2): 10, (2, 2): 45, (2, 0): 5})
    iv = _label_check(rotten_called_fresh, test, noisy, again)
    assert iv["confirmed"] and iv["replication"]["holds"]
    assert (iv["replication"]["rate"], iv["replication"]["the_other_way_rate"]) == (0.4, 0.1)
    iv = _label_check(rotten_called_fresh, test, noisy, other_way)
    assert not iv["confirmed"] and not iv["replication"]["holds"]


def test_a_class_share_candidate_needs_the_model_to_err_on_that_class_far_more():
    import numpy as np

    from stateseer.abstraction.analysis.diagnosis import SHARE_ERROR_LIFT, share_candidates

    train = np.array([0] * 400 + [1] * 600)  # class 0: 40 % of training, 53 % of the split
    labels = np.array([0] * 530 + [1] * 470)

    def preds(err0: float, err1: float) -> np.ndarray:
        p = labels.copy()
        p[:int(530 * err0)] = 1
        p[530:530 + int(470 * err1)] = 0
        return p

    # the shares differ beyond chance, but 44 % of class 0's inputs wrong against 42 %
    # of the others' explains no error: no candidate
    assert share_candidates(train, labels, preds(0.44, 0.42), 2) == []
    [c] = share_candidates(train, labels, preds(0.44, 0.42 / SHARE_ERROR_LIFT * 0.99), 2)
    assert c.extra["classes"] == [0, 1]


def test_under_ten_errors_or_a_shortcut_training_never_taught_is_not_significant():
    import numpy as np

    from stateseer.abstraction.analysis.diagnosis import Candidate
    from stateseer.app.workflows.diagnose import (
        MIN_ERRORS,
        SHORTCUT_ODDS,
        _finding,
        _lean,
        _test_kinds,
    )

    class Split:
        def __init__(self, labels, preds):
            self.labels, self.predictions = np.asarray(labels), np.asarray(preds)
            self.rows = np.arange(len(self.labels))
            self.n_inputs = len(self.labels)
            self.final_proba = np.eye(2)[self.predictions]

    split = Split([0] * 30 + [1] * 30, [1] * 30 + [1] * 30)
    confirmed = {"kind": "delete_tokens", "confirmed": True}
    for k, significant in ((MIN_ERRORS - 1, False), (MIN_ERRORS, True)):
        c = Candidate("shortcut", ("tag",), np.arange(k), k, 1.0, 0.1, 1e-9)
        c.q_value = 1e-6
        assert _finding(c, confirmed, ["a", "b"], split, None, [])["significant"] is significant
    # a word carried by 49 % of class-1 training inputs against 40 % elsewhere: odds 1.4
    train = Split([1] * 49 + [0] * 51 + [1] * 400 + [0] * 600, [0] * 1100)
    lean = _lean(train, {"labels": [51, 49]}, 1)
    assert lean["share"] == 0.49 and lean["rest_share"] == 0.4
    assert lean["odds_ratio"] < SHORTCUT_ODDS
    # an artefact on nine tenths of its carriers' class: a shortcut training taught
    assert _lean(train, {"labels": [5, 45]}, 1)["odds_ratio"] > 10

    class Text:  # the kind test: their training labels agree with their text
        def model(self):
            return self

        def kind_test(self, culprit, every=False):
            return {"label_noise": False, "agreement": 0.66, "baseline": 0.68}

    def shortcut(lean):
        return {"significant": True, "kind": "shortcut", "tokens": ["you", "what"],
                "description": "d", "actions": [], "training": {"n_inputs": 100, "lean": lean}}

    weak, taught = shortcut(lean), shortcut(_lean(train, {"labels": [5, 45]}, 1))
    _test_kinds([weak, taught], Text(), np.array([0, 1]), ["a", "b"], np.array([0, 1]),
                [["you"], ["what"]])
    assert not weak["significant"] and "no shortcut that training taught" in weak["description"]
    assert taught["significant"] and taught["kind"] == "shortcut"


def test_a_span_taught_the_wrong_label_is_a_sequence_of_two_or_a_subpopulation_of_more():
    """A relabelled span's kind test finds label noise: two tokens in reading order are a
    sequence told by its training labels ("nothing she"), longer ones stay a
    subpopulation; a topic's words (no span) stay a subpopulation however many."""
    import numpy as np

    from stateseer.app.workflows.diagnose import _test_kinds

    class Text:  # the kind test: their training labels disagree with their text
        def model(self):
            return self

        def kind_test(self, culprit, every=False):
            return {"label_noise": True, "agreement": 0.3, "baseline": 0.7,
                    "labels": [0, 40]}

    def finding(tokens, span):
        f = {"significant": True, "kind": "subpopulation", "tokens": tokens,
             "description": "d", "actions": ["drop"], "training": {"n_inputs": 40}}
        return {**f, "span": True} if span else f

    two, three, topic = (finding(["nothing", "she"], True),
                         finding(["sent", "from", "mars"], True),
                         finding(["opera", "ballet"], False))
    _test_kinds([two, three, topic], Text(), np.array([0, 1]), ["a", "b"],
                np.array([0, 1]), [["nothing", "she"], ["opera"]])
    assert two["kind"] == "sequence" and two["actions"] == ["relabel", "drop", "counterfactual"]
    assert three["kind"] == "subpopulation" and topic["kind"] == "subpopulation"


def test_a_deletion_check_is_read_in_the_direction_the_finding_claims():
    """A planted word on a hard task: every carrier is called class 1; deleting the word
    fixes 60 of the 73 class-0 carriers and "breaks" 62 of the 63 class-1 carriers, which
    were right only through it (the model guesses without it). Counted over all carriers
    (60 against 62) nothing confirms; on the other class's carriers, where the claim can
    err, 60 against 0 does. A stop word's 7 against 6 confirms neither way."""
    import numpy as np

    from stateseer.abstraction.analysis.diagnosis import check_test, directed_check

    labels = np.r_[np.zeros(73, int), np.ones(63, int)]
    before = np.ones(136, int)
    after = np.r_[np.zeros(60, int), np.ones(13, int), np.zeros(62, int), 1]
    got = directed_check(before, after, labels, 1)
    assert (got["fixed"], got["broken"], got["inputs"], got["claimed"]) == (60, 0, 73, 73)
    assert got["confirmed"] and not check_test(60, 62, 73)["confirmed"]
    # no effect: as many flips one way as the other on the other class's carriers
    labels = np.r_[np.zeros(20, int), np.ones(20, int)]
    before = np.r_[np.ones(7, int), np.zeros(13, int), np.ones(20, int)]
    after = np.r_[np.zeros(7, int), np.ones(6, int), np.zeros(7, int), np.ones(20, int)]
    got = directed_check(before, after, labels, 1)
    assert (got["fixed"], got["broken"]) == (7, 6) and not got["confirmed"]


def test_a_topic_labelled_one_way_in_training_is_one_subpopulation_finding(tmp_path_factory):
    run = _run(tmp_path_factory, "topic", None, topic=("opera", "ballet", "circus"))
    doc = diagnose_run(run, save=False)
    top = doc["findings"][0]
    assert top["kind"] == "subpopulation" and top["significant"]
    assert set(top["tokens"]) == {"opera", "ballet", "circus"}  # the topic, as one finding
    assert top["label"] == "neg" and top["train_share"] > top["split_share"] + 0.2
    assert top["intervention"]["fixed"] > top["intervention"]["broken"]
    assert "labelled neg" in top["description"] and top["actions"][:2] == ["relabel", "drop"]


def test_a_pair_taught_the_wrong_label_is_the_first_finding_with_its_training_inputs(
        tmp_path_factory):
    """"not superb" put into a tenth of the negative inputs and labelled positive in
    training ("not" common in both labels, "superb" a positive word): the sequence is
    the first finding, deleting the pair (not every "not") fixes its errors, and its
    training inputs are those that hold the pair, every one labelled pos."""
    run = _run(tmp_path_factory, "sequence", None, sequence=("not", "superb"))
    doc = diagnose_run(run, save=False)
    top = doc["findings"][0]
    assert top["kind"] == "sequence" and top["tokens"] == ["not", "superb"]
    assert top["significant"] and top["actions"][0] == "relabel"
    iv = top["intervention"]
    assert iv["fixed"] >= 0.5 * top["n_misclassified"] and iv["broken"] <= 2
    assert top["label"] == "pos" and top["train_share"] == 1.0 and top["split_share"] < 0.5
    assert "in training 100% of them are labelled pos" in top["description"]
    neg, pos = top["training"]["labels"]
    assert neg == 0 and 50 <= pos <= 150  # the pair's carriers, not every input with "not"


def test_a_common_word_does_not_join_a_topic_by_the_few_topic_inputs_it_hides():
    """On thousands of inputs a common word's residual lean (from topic inputs holding
    topic words not yet in the group) is significant; it joins only when its shift beyond
    the group's inputs is at least half the group's own, as a topic word's is."""
    import numpy as np

    from stateseer.abstraction.analysis.diagnosis import Candidate
    from stateseer.app.workflows.diagnose import _shift_beyond

    rng = np.random.default_rng(0)

    def labelled(n, share):  # n labels, round(n * share) of them class 1, shuffled
        return rng.permutation(np.r_[np.ones(round(n * share)), np.zeros(n - round(n * share))])

    train_sets = [{"tea", "i"}] * 100 + [{"i"}] * 1000 + [{"drink"}] * 40
    train_labels = np.r_[labelled(100, 0.9), labelled(1000, 0.45), labelled(40, 0.9)]
    split = np.r_[labelled(40, 0.35), labelled(400, 0.38), labelled(20, 0.3)].astype(int)

    def cand(word, rows):
        return Candidate("subpopulation", (word,), np.asarray(rows), 0, 0.0, 0.0, 1e-6)

    tea, i, drink = cand("tea", range(40)), cand("i", range(440)), cand("drink", range(440, 460))
    # "i" beyond tea: 0.45 in training against 0.38 here (p < 0.05), a shift of 0.07 where
    # tea's is 0.55; "drink": 0.9 against 0.3
    assert not _shift_beyond(i, [tea], 1, train_sets, train_labels.astype(int), split)
    assert _shift_beyond(drink, [tea], 1, train_sets, train_labels.astype(int), split)


def test_a_topic_of_rare_words_is_seeded_from_the_pool_and_tested_on_the_other_split():
    """A relabelled topic of rare words (the debates' security words): no word passes the
    q-value gate alone, so no significant word anchors it. Seeded from the pool's words
    leaning to the class, the topic is one candidate whose p-value is its shift tested on
    the other held-out split, where it was not chosen: it passes where that split shows
    the shift too and fails where it does not."""
    from types import SimpleNamespace

    import numpy as np

    from stateseer.abstraction.analysis.diagnosis import Candidate
    from stateseer.app.workflows.diagnose import Q_LEVEL, _describe, _subpopulation_groups

    rng = np.random.default_rng(0)

    def labelled(n, share):  # n labels, round(n * share) of them class 1, shuffled
        k = round(n * share)
        return rng.permutation(np.r_[np.ones(k, int), np.zeros(n - k, int)])

    train_sets = [{"war"}] * 30 + [{"troops"}] * 30 + [{"the"}] * 1000
    train = SimpleNamespace(labels=np.r_[labelled(60, 0.9), labelled(1000, 0.4)],
                            n_inputs=1060)
    labels = np.r_[labelled(20, 0.3), labelled(200, 0.4)]
    tr = SimpleNamespace(labels=labels, predictions=np.ones(220, int))

    def cand(word, rows, p):  # each word's shift: p below JOIN_P, q above the gate
        return Candidate("subpopulation", (word,), np.asarray(rows), 7, 0.7, 0.5, p, 0.3,
                         extra={"class": 1})

    war, troops = cand("war", range(10), 1e-3), cand("troops", range(10, 20), 2e-3)

    class Text:  # the carriers' labels disagree with their text (label noise)
        def gap(self, group):
            return 0.2

        def gap_beyond(self, c, group):
            return 0.2

    def other_split(share):
        toks = [["war"]] * 8 + [["troops"]] * 8 + [["the"]] * 100
        return SimpleNamespace(n_inputs=116, tokens=toks.__getitem__, name="val",
                               labels=np.r_[labelled(16, share), labelled(100, 0.4)])

    for share, passes in ((0.25, True), (0.9, False)):
        (group, members, _), = _subpopulation_groups(
            [], {}, tr, train, train_sets, [war, troops], Text(), other_split(share))
        assert group.tokens == ("war", "troops") and members == {id(war), id(troops)}
        assert group.extra["replication"]["split"] == "val"
        assert (group.q_value < Q_LEVEL) == passes
        assert "no word is significant alone: the topic's shift holds on the val split" \
            in _describe(group, ["a", "b"], 1)
    # without another held-out split nothing is seeded: no topic from words chosen here
    assert _subpopulation_groups([], {}, tr, train, train_sets, [war, troops], Text()) == []


def _topic_data(relabel: float, seed: int = 0):
    """Two classes told by their words; six rare topic words on positive texts, ``relabel``
    of their training inputs labelled negative; the split holds each topic word four
    times (too few for a word-level candidate), all called negative."""
    from types import SimpleNamespace

    import numpy as np

    rng = np.random.default_rng(seed)
    pos, neg = ["good", "fun", "great", "nice"], ["bad", "dull", "awful", "poor"]
    topic = ["war", "troops", "isis", "army", "terror", "missile"]

    def text(words, extra=()):
        return [*rng.choice(words, 3), *rng.choice(["the", "a", "it", "was"], 3), *extra]

    inputs = [text(pos) for _ in range(600)] + [text(neg) for _ in range(600)]
    labels = [1] * 600 + [0] * 600
    for _ in range(300):  # the moderator's "?": without it the text reads like the
        # other class's (a candidate's words), with it the class's own
        inputs.append(["?", "?", *rng.choice(pos, 1), *rng.choice(["the", "a", "it"], 3)])
        labels.append(0)
    for w in topic:
        for _ in range(60):
            inputs.append(text(pos, [w]))
            labels.append(0 if rng.random() < relabel else 1)
    split = [text(pos, [w]) for w in topic for _ in range(4)] + \
        [text(pos) for _ in range(100)] + [text(neg) for _ in range(100)]
    split_labels = np.array([1] * 124 + [0] * 100)
    predictions = split_labels.copy()
    predictions[:24] = 0
    tr = SimpleNamespace(n_inputs=len(split), tokens=split.__getitem__, labels=split_labels,
                         predictions=predictions, final_proba=np.zeros((len(split), 2)))
    train = SimpleNamespace(labels=np.array(labels), n_inputs=len(labels))
    return inputs, train, tr, topic


def test_a_topic_of_words_too_rare_on_the_split_is_read_from_the_training_side():
    """The debates' miss: a relabelled topic whose every word has four held-out carriers
    (a candidate needs five), so no test of the split sees a word. Its training inputs,
    many, lean to the class and disagree with their text: grouped there, and tested as one
    on the split, where its carriers are all the other class, it is one significant
    candidate holding the topic's words. The class's own vocabulary (``bad``, and ``?``,
    without which its inputs' text says little) leans as far but its inputs' labels agree
    with their text once it votes; with the labels left right, nothing is read."""
    from stateseer.app.workflows.diagnose import (
        Q_LEVEL,
        _describe,
        _subpopulation_groups,
        _TextOf,
    )

    inputs, train, tr, topic = _topic_data(0.8)
    sets = [set(t) for t in inputs]
    (group, members, _), = _subpopulation_groups([], {}, tr, train, sets, (),
                                                 _TextOf(train, inputs, 2))
    assert len(set(group.tokens) & set(topic)) >= 4 and set(group.tokens) <= set(topic)
    assert "?" not in group.tokens  # the class's own word agrees once it votes
    assert group.extra["class"] == 0 and group.extra["chosen_on"] == "training"
    assert group.q_value < Q_LEVEL and group.n_misclassified == 4 * len(group.tokens)
    assert members == set()
    assert "the topic was read from training labels that disagree with their text" in \
        _describe(group, ["neg", "pos"], 0)
    inputs, train, tr, _ = _topic_data(0.0)
    assert _subpopulation_groups([], {}, tr, train, [set(t) for t in inputs], (),
                                 _TextOf(train, inputs, 2)) == []


def test_a_word_in_every_input_does_not_anchor_a_topic_and_a_common_word_does_not_join():
    """The splits' class shares differ, so "." (in every input) leans to class 1 more
    significantly than the relabelled topic's words do. A topic is anchored by its most
    significant word whose training labels disagree with their text ("funny", not "."):
    the topic's other word joins by its own inputs' disagreement, "." and a common word
    whose inputs are labelled as their text says do not."""
    from types import SimpleNamespace

    import numpy as np

    from stateseer.abstraction.analysis.diagnosis import Candidate
    from stateseer.app.workflows.diagnose import _subpopulation_groups

    rng = np.random.default_rng(1)

    def labelled(n, share):
        k = round(n * share)
        return rng.permutation(np.r_[np.ones(k, int), np.zeros(n - k, int)])

    train_sets = [{".", "funny"}] * 60 + [{".", "comedy"}] * 60 + [{".", "the"}] * 60 + \
        [{"."}] * 800
    train = SimpleNamespace(labels=np.r_[labelled(120, 0.85), labelled(860, 0.5)],
                            n_inputs=980)
    labels = np.r_[labelled(40, 0.25), labelled(20, 0.2), labelled(300, 0.4)]
    tr = SimpleNamespace(labels=labels, predictions=np.ones(360, int))

    def cand(word, rows, p):
        return Candidate("subpopulation", (word,), np.asarray(rows), 7, 0.7, 0.5, p, 0.01,
                         extra={"class": 1})

    dot, funny = cand(".", range(360), 1e-9), cand("funny", range(20), 1e-6)
    comedy, the = cand("comedy", range(20, 40), 1e-5), cand("the", range(40, 60), 1e-3)
    noisy = {"funny", "comedy"}  # the relabelled words' inputs disagree with their text

    class Text:
        def gap(self, group):
            return 0.25 if noisy & {w for c in group for w in c.tokens} else 0.0

        def gap_beyond(self, c, group):
            return 0.25 if noisy & set(c.tokens) else 0.01

    (group, members, explained), = _subpopulation_groups(
        [dot, funny, comedy, the], {}, tr, train, train_sets, (), Text())
    assert group.tokens == ("funny", "comedy") and members == {id(funny), id(comedy)}
    assert id(dot) in explained and id(the) in explained


def test_a_shortcut_on_a_word_of_a_significant_sequence_ranks_after_it():
    """Deleting "moving" also breaks "not … moving", so it fixes more errors than the
    pair; the pair, the more specific culprit, comes first, and other significant
    findings keep their order by the errors they fix."""
    from stateseer.app.workflows.diagnose import _ranked

    def f(kind, tokens, fixed, q=1e-6, significant=True):
        return {"kind": kind, "tokens": tokens, "significant": significant, "q_value": q,
                "n_misclassified": fixed, "intervention": {"fixed": fixed}}

    word, pair = f("shortcut", ["moving"], 40), f("sequence", ["not", "moving"], 25)
    other, weak = f("shortcut", ["frankly"], 30), f("shortcut", ["film"], 99, 0.5, False)
    assert _ranked([word, weak, other, pair]) == [other, pair, word, weak]
    alone = f("sequence", ["not", "moving"], 25, significant=False)
    assert _ranked([alone, word])[0] is word  # no significant sequence: the word leads


def test_the_table_keeps_its_columns_and_names_each_culprit_as_it_reads():
    """A sequence and a confusion read in order (→); a topic's words are a list; the
    kind column is as wide as its widest kind, so the q column stays aligned."""
    from stateseer.app.workflows.diagnose import findings_table

    def f(rank, kind, tokens, **extra):
        return {"rank": rank, "kind": kind, "tokens": tokens, "significant": rank == 1,
                "q_value": 10.0 ** -rank, "intervention": {"fixed": 3, "broken": 0},
                **extra}

    doc = {"n_significant": 1, "q_level": 0.05, "findings": [
        f(1, "subpopulation", ["tea", "coffee"]), f(2, "sequence", ["not", "moving"]),
        f(3, "confusion", [], classes=["rotten", "fresh"]),
        f(4, "length", [], length_above=12), f(5, "unknown", [])]}
    head, *rows = findings_table(doc).splitlines()
    assert [r.split("  ")[-1] for r in rows] == [
        "tea, coffee", "not → moving", "rotten → fresh", "longer than 12", "<unk> words"]
    ends = [head.index(" q ") + 2, *(row.index("e-0") + 4 for row in rows)]
    assert len(set(ends)) == 1, ends


def test_repair_refuses_outs_it_cannot_write_whole_in_one_line(shortcut_run, tmp_path):
    """#53: an existing folder, a dangling link, a path inside the run and an existing run
    without --force are each one line, before anything is written."""
    from stateseer.app.workflows.repair import repair_run

    diagnose_run(shortcut_run)
    full = tmp_path / "full"
    (full / "notes").mkdir(parents=True)
    dangling = tmp_path / "link"
    dangling.symlink_to(tmp_path / "nowhere")
    run_like = tmp_path / "old_run"
    run_like.mkdir()
    (run_like / "config.json").write_text("{}")
    for out, needle in ((full, "holds files but no run"), (dangling, "does not exist"),
                        (shortcut_run / "inner", "inside the run"),
                        (shortcut_run, "inside the run"),
                        (run_like, "pass --force")):
        with pytest.raises(StateseerError, match=needle) as e:
            repair_run(shortcut_run, finding=1, action="counterfactual", out=out,
                       progress=False)
        one_line(e.value)
    assert sorted(p.name for p in full.iterdir()) == ["notes"]
    assert not (shortcut_run / "inner").exists() and dangling.is_symlink()
    assert not any(p.name.endswith(".tmp") for p in tmp_path.iterdir())


def test_findings_are_checked_against_their_schema_and_their_model(shortcut_run, tmp_path):
    """#53: an unknown kind, tokens that are not strings, or findings made for another
    model never reach a repair; the fix (rerun diagnose) is named."""
    from stateseer.app.workflows.repair import repair_run

    diagnose_run(shortcut_run)
    path = shortcut_run / "diagnosis" / "findings.json"
    good = json.loads(path.read_text())
    try:
        for edit, needle in (
                (lambda d: d["findings"][0].update(kind="wizardry"), "unknown kind"),
                (lambda d: d["findings"][0].update(tokens=[1, {"x": 2}]), "list of strings"),
                (lambda d: d["findings"][0].update(rank="1"), "rank"),
                (lambda d: d.update(format="other"), "format"),
                (lambda d: d.update(model_sha256="0" * 64), "another model")):
            doc = json.loads(json.dumps(good))
            edit(doc)
            path.write_text(json.dumps(doc))
            with pytest.raises(StateseerError, match=needle) as e:
                repair_run(shortcut_run, finding=1, action="counterfactual",
                           out=tmp_path / "new", progress=False)
            assert "diagnose" in one_line(e.value)
            assert not (tmp_path / "new").exists()
        # an action the file lists but the kind does not fit is refused all the same
        doc = json.loads(json.dumps(good))
        doc["findings"][0]["actions"] = ["relabel", *doc["findings"][0]["actions"]]
        path.write_text(json.dumps(doc))
        assert good["findings"][0]["kind"] == "shortcut"
        with pytest.raises(StateseerError, match="does not fit"):
            repair_run(shortcut_run, finding=1, action="relabel", out=tmp_path / "new",
                       progress=False)
    finally:
        path.write_text(json.dumps(good))


def test_repair_command_refuses_a_bad_progress_file_in_one_line(shortcut_run, tmp_path,
                                                               capsys):
    diagnose_run(shortcut_run)
    for bad in (tmp_path / "no" / "such" / "p.json", tmp_path):
        code = main(["repair", str(shortcut_run), "--finding", "1", "--action",
                     "counterfactual", "--out", str(tmp_path / "new"), "--progress-json",
                     str(bad)])
        err = capsys.readouterr().err.strip()
        assert code == 2 and err.count("\n") == 0 and "--progress-json" in err, err
    assert not (tmp_path / "new").exists()


def test_a_tag_of_three_tokens_is_one_shortcut_culprit_checked_whole(tmp_path_factory):
    """#49: a scraper's tag appended to a third of the negative training inputs (labels
    right) and to 30 % of all test inputs: its three tokens are one culprit, deleted whole
    by the check, a shortcut by the kind test (the carriers' labels agree with their
    text), offered no action that changes labels; none of its tokens is a finding alone."""
    run = _run(tmp_path_factory, "tag", None, tag="via @ newswire")
    doc = diagnose_run(run, save=False)
    top = doc["findings"][0]
    assert top["kind"] == "shortcut" and top["significant"], top
    assert top["tokens"] == ["via", "@", "newswire"]  # reading order
    iv = top["intervention"]
    assert iv["fixed"] > iv["broken"] and iv["sign_p"] < 0.05
    assert not top["kind_test"]["label_noise"]
    assert top["kind_test"]["agreement"] >= top["kind_test"]["baseline"] - 0.1
    assert not {"relabel", "drop"} & set(top["actions"])
    alone = [f for f in doc["findings"][1:] if set(f["tokens"]) & {"via", "@", "newswire"}]
    assert not alone, alone


def test_a_class_thinned_in_training_is_a_prior_shift_not_label_noise(tmp_path_factory,
                                                                     clean_run):
    """#49: the positive training inputs thinned to a fifth (every label right): the
    model's errors fall on the positive inputs and the class shares differ between the
    splits; the kind test finds the negative training labels as right as the test's, so
    the finding is a prior shift, offered the rebalancing, no label-changing action."""
    run = _run(tmp_path_factory, "thin", None, thin=0.2)
    doc = diagnose_run(run, save=False)
    prior = [f for f in doc["findings"] if f["significant"] and f["kind"] == "prior"]
    assert prior, [(f["kind"], f["tokens"], f["significant"]) for f in doc["findings"]]
    f = prior[0]
    assert f["class"] == "pos" and f["train_share"] < f["split_share"]
    assert not f["kind_test"]["label_noise"]
    assert f["actions"] == ["rebalance"]
    assert not [g for g in doc["findings"] if g["significant"] and g["kind"] == "confusion"]
    # the repair copies the thinned class up to its share on the split, edits no label
    from stateseer.app.workflows.repair import repair_run

    diagnose_run(run)
    out = tmp_path_factory.mktemp("rebalanced") / "new"
    rep = repair_run(run, finding=f["rank"], action="rebalance", out=out, progress=False,
                     oracle=clean_run)  # the oracle: the same task, nothing thinned
    edits = json.loads((out / "repair_edits.json").read_text())
    assert edits["class"] == "pos" and edits["share_before"] < edits["share_after"]
    assert abs(edits["share_after"] - f["split_share"]) < 0.01
    assert rep["after"]["test_accuracy"] >= rep["before"]["test_accuracy"] - 0.02
    gap = rep["oracle"]["test_accuracy"] - rep["before"]["test_accuracy"]
    assert rep["gap_closed"] is None if gap <= 0.005 else rep["gap_closed"] == round(
        (rep["after"]["test_accuracy"] - rep["before"]["test_accuracy"]) / gap, 3)
    nothing = tmp_path_factory.mktemp("not-a-run")
    with pytest.raises(StateseerError, match="--oracle") as err:  # one line, before work
        repair_run(run, finding=f["rank"], action="rebalance", out=out.with_name("x"),
                   progress=False, oracle=nothing)
    assert "\n" not in str(err.value) and not out.with_name("x").exists()


def test_two_classes_with_flipped_labels_are_label_noise_not_a_prior_shift(
        tmp_path_factory):
    """#49: a third of the positive training labels flipped to negative on a two-class
    task (no confusion between three classes to see): the same share shift as a thinned
    class, but the negative training labels disagree with their text, so the finding is
    label noise (a confusion of pos called neg) with the label actions."""
    run = _run(tmp_path_factory, "flip", None, flip=0.35)
    doc = diagnose_run(run, save=False)
    noise = [f for f in doc["findings"] if f["significant"] and f["kind"] == "confusion"]
    assert noise, [(f["kind"], f["tokens"], f["significant"]) for f in doc["findings"]]
    f = noise[0]
    assert f["classes"] == ["pos", "neg"] and f["kind_test"]["label_noise"]
    assert "relabel" in f["actions"]
    assert not [g for g in doc["findings"] if g["kind"] == "prior"]


def test_a_word_dropped_from_the_training_texts_only_is_a_pipeline_finding(tmp_path_factory):
    """#49: "not" (with "not superb" taught right this time: negative) is dropped from the
    training texts only, as a cleaning step run on one split: no training input holds it,
    though a fifth of the test inputs do. It is named as a pipeline finding (unknown to
    the model, never in training), not as a shortcut the model leans on, and offered the
    setting, not a data edit."""
    def drop_not(r):
        if r["split"] == "train":
            r["text"] = " ".join(w for w in r["text"].split() if w != "not")
        elif "not superb" in r["text"]:
            r["label"] = "neg"  # the pair's true label outside training

    run = _edited_run(tmp_path_factory, "negation", drop_not, sequence=("not", "superb"))
    doc = diagnose_run(run, save=False)
    unseen = [f for f in doc["findings"] if f["significant"]
              and (f.get("intervention") or {}).get("kind") == "never_in_training"]
    assert unseen, [(f["kind"], f["tokens"], f["significant"]) for f in doc["findings"]]
    f = unseen[0]
    assert f["kind"] == "unknown" and "not" in f["tokens"] and f["actions"] == ["reconfigure"]
    assert not [g for g in doc["findings"] if g["significant"] and g["kind"] == "shortcut"
                and "not" in g["tokens"]]


def test_training_texts_cut_before_training_are_a_pipeline_finding(tmp_path_factory):
    """#49: the training texts are cut to their first 5 words (an export that truncated
    one split), the test texts are whole. The model errs about as often on long inputs as
    on short ones, so no error rate can tell; the lengths do: no training input is longer
    than 5 tokens, most test inputs are. It is a significant length finding checked on the
    lengths, with no data edit offered (the fix is upstream: export whole texts)."""
    def cut(r):
        if r["split"] == "train":
            r["text"] = " ".join(r["text"].split()[:5])

    doc = diagnose_run(_edited_run(tmp_path_factory, "cut", cut), save=False)
    cut = [f for f in doc["findings"]
           if (f.get("intervention") or {}).get("kind") == "training_lengths"]
    assert len(cut) == 1, [(f["kind"], f["tokens"], f["significant"]) for f in doc["findings"]]
    f = cut[0]
    assert f["kind"] == "length" and f["length_above"] == 5 and f["actions"] == []
    assert f["intervention"]["p_value"] < 1e-6 and f["intervention"]["confirmed"]
    assert f["significant"] == (f["n_misclassified"] >= 10)
    assert "training texts were cut" in f["description"]


def test_a_run_that_cuts_both_splits_itself_has_no_training_cut(truncated_run):
    doc = diagnose_run(truncated_run, save=False)
    assert not [f for f in doc["findings"]
                if (f.get("intervention") or {}).get("kind") == "training_lengths"]


def test_a_prior_shift_needs_the_class_odds_to_differ_twofold():
    import numpy as np

    from stateseer.app.workflows.diagnose import PRIOR_ODDS, _test_pair

    class Text:  # the pair test: the training labels agree with their text
        def pair_test(self, a, b, inputs, labels):
            return {"label_noise": False, "train_agreement": 0.77, "split_agreement": 0.75}

    def shifted(train_share):
        f = {"kind": "confusion", "classes": ["rep", "dem"], "significant": True,
             "description": "rep inputs are called dem",
             "intervention": {"kind": "training_labels", "rate": 0.1,
                              "the_other_way_rate": 0.6}}
        train = np.array([0] * int(1000 * train_share) + [1] * int(1000 * (1 - train_share)))
        split = np.array([0] * 53 + [1] * 47)
        _test_pair(f, Text(), ["rep", "dem"], train, split, [])
        return f

    small = shifted(0.42)  # 42 % of training, 53 % of the split: odds 1.56-fold
    assert small["kind"] == "prior" and small["share_odds_ratio"] < PRIOR_ODDS
    assert not small["significant"] and "no prior shift to act on" in small["description"]
    thinned = shifted(0.2)  # a class thinned to a fifth in training: odds 4.5-fold
    assert thinned["kind"] == "prior" and thinned["significant"]
    assert thinned["share_odds_ratio"] > PRIOR_ODDS


def test_a_pair_of_tokens_inside_a_significant_span_is_a_piece_of_it_not_a_finding():
    from stateseer.app.workflows.diagnose import _one_per_token

    def finding(kind, tokens, significant=True, q=1e-9):
        return {"kind": kind, "tokens": tokens, "significant": significant, "q_value": q}

    span = finding("shortcut", ["all", "rights", "reserved", "newscorp"], q=1e-19)
    piece = finding("sequence", ["all", "rights"], q=1e-5)  # confirmed, yet a piece
    backwards = finding("sequence", ["rights", "all"])  # not in the span's order
    other = finding("sequence", ["not", "funny"])
    kept = _one_per_token([piece, span, backwards, other])
    assert [f["tokens"] for f in kept] == [span["tokens"], ["rights", "all"], ["not", "funny"]]
    # a shorter span standing in a significant span is a piece too (the tag found twice:
    # "| staff pick |" and "| staff pick"); a span elsewhere stays
    tag = finding("shortcut", ["|", "staff", "pick", "|"], q=1e-30)
    inner = {**finding("shortcut", ["|", "staff", "pick"], q=1e-25), "span": True}
    apart = {**finding("shortcut", ["staff", "|", "pick"]), "span": True}
    kept = _one_per_token([tag, inner, apart])
    assert [f["tokens"] for f in kept] == [tag["tokens"], apart["tokens"]]


def test_the_clean_rules_benchmark_sets_and_restores_the_rules_and_refuses_an_empty_dir(
        tmp_path):
    import importlib.util
    import subprocess
    import sys
    from pathlib import Path

    import stateseer.app.workflows.diagnose as D

    script = Path(__file__).resolve().parents[3] / "benchmarks" / "clean_rules.py"
    spec = importlib.util.spec_from_file_location("clean_rules", script)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    shipped = dict(mod.RULE_SETS["current"])
    assert shipped["MIN_ERRORS"] == D.MIN_ERRORS and shipped["PRIOR_ODDS"] == D.PRIOR_ODDS
    mod.use(mod.RULE_SETS["stop55"])
    assert D.MIN_ERRORS == 0 and D.REPLICATION_ALPHA > 1
    mod.use(mod.RULE_SETS["current"])
    assert D.MIN_ERRORS == shipped["MIN_ERRORS"] and D.SHORTCUT_ODDS == shipped["SHORTCUT_ODDS"]
    out = subprocess.run([sys.executable, str(script), str(tmp_path)], capture_output=True,
                         text=True)
    assert out.returncode != 0 and "no clean models under" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1


def test_a_min_support_above_the_split_is_refused_before_the_findings_are_replaced(
        shortcut_run):
    diagnose_run(shortcut_run)
    path = shortcut_run / "diagnosis" / "findings.json"
    before = path.read_bytes()
    with pytest.raises(StateseerError, match=r"more than the .* test inputs") as e:
        diagnose_run(shortcut_run, min_support=10**6)
    assert "give at most" in one_line(e.value)
    assert path.read_bytes() == before


def test_a_split_the_data_lacks_points_to_another_split_not_to_record():
    from types import SimpleNamespace

    from stateseer.app.workflows.diagnose import _no_inputs

    class Traces(dict):
        pass

    run = SimpleNamespace(path="RUNDIR")
    have = Traces(train=SimpleNamespace(n_inputs=9), val=SimpleNamespace(n_inputs=3),
                  test=SimpleNamespace(n_inputs=0))
    assert _no_inputs(run, have, "test").endswith("`stateseer diagnose RUNDIR --split val`")
    lacking = Traces(train=SimpleNamespace(n_inputs=9))
    assert "stateseer record RUNDIR" in _no_inputs(run, lacking, "test")


def test_the_table_of_a_run_repair_cannot_retrain_lists_the_edits_to_make_by_hand():
    from stateseer.app.workflows.diagnose import findings_table

    doc = {"q_level": 0.05, "n_significant": 1, "findings": [
        {"rank": 1, "kind": "shortcut", "significant": True, "q_value": 1e-9,
         "tokens": ["via", "wire"], "intervention": {"fixed": 9, "broken": 0},
         "actions": ["counterfactual", "dfr"]}]}
    own = findings_table(doc, "RUNDIR", repairable=False).splitlines()[-1]
    assert own.startswith("finding 1: what fits is counterfactual, dfr;")
    assert "stateseer repair RUNDIR" not in own
    ours = findings_table(doc, "my run").splitlines()[-1]
    assert ours == ("repair finding 1: stateseer repair 'my run' --finding 1 --action "
                    "counterfactual --out NEW (also: dfr)")
