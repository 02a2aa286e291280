"""Tests for stateseer.rnn_models.tokenizers: the word/char/space tokenisers and the Vocab."""

from __future__ import annotations

import json

import numpy as np
import pytest

from stateseer.core.errors import DataError, StateseerError
from stateseer.rnn_models.tokenizers import PAD, TOKENIZERS, UNK, Vocab, get_tokenizer, tokenize


def one_line(excinfo: pytest.ExceptionInfo) -> str:
    """The message of a raised user-facing error; asserts it is a single, non-empty line."""
    msg = str(excinfo.value)
    assert msg.strip(), "error message is empty"
    assert "\n" not in msg, f"error message is not one line: {msg!r}"
    return msg


# ----------------------------------------------------------------------------- tokenisers
class TestWordTokenizer:
    word = staticmethod(get_tokenizer("word"))

    def test_docstring_example(self):
        assert self.word("Isn't it great!") == ["isn't", "it", "great", "!"]

    def test_lower_cases(self):
        assert self.word("GREAT Movie") == ["great", "movie"]

    def test_splits_punctuation_into_single_marks(self):
        assert self.word("Hello, world... (really)?") == [
            "hello",
            ",",
            "world",
            ".",
            ".",
            ".",
            "(",
            "really",
            ")",
            "?",
        ]

    @pytest.mark.parametrize(
        ("text", "expected"),
        [
            ("isn't", ["isn't"]),
            ("Don't stop", ["don't", "stop"]),
            ("don’t", ["don’t"]),  # typographic apostrophe
            ("it's the film's end", ["it's", "the", "film's", "end"]),
        ],
    )
    def test_keeps_contractions(self, text, expected):
        assert self.word(text) == expected

    def test_quotes_around_a_word_are_split_off(self):
        assert self.word("'quoted'") == ["'", "quoted", "'"]

    def test_numbers_and_hyphens(self):
        assert self.word("self-made 3.5 stars in 2024") == [
            "self",
            "-",
            "made",
            "3",
            ".",
            "5",
            "stars",
            "in",
            "2024",
        ]

    def test_whitespace_only_and_empty_give_no_tokens(self):
        assert self.word("") == []
        assert self.word("  \t\n ") == []

    def test_non_ascii_letters_stay_inside_words(self):
        assert self.word("Crème brûlée, café") == ["crème", "brûlée", ",", "café"]


class TestCharTokenizer:
    char = staticmethod(get_tokenizer("char"))

    def test_one_token_per_character(self):
        assert self.char("0101") == ["0", "1", "0", "1"]

    def test_keeps_case_and_whitespace(self):
        assert self.char("A b") == ["A", " ", "b"]

    def test_parens(self):
        assert self.char("(())") == ["(", "(", ")", ")"]

    def test_empty(self):
        assert self.char("") == []


class TestSpaceTokenizer:
    space = staticmethod(get_tokenizer("space"))

    def test_splits_on_any_whitespace_only(self):
        assert self.space("0 1\t1\n0") == ["0", "1", "1", "0"]

    def test_keeps_case_and_punctuation(self):
        assert self.space("Hello, World!  ") == ["Hello,", "World!"]

    def test_empty(self):
        assert self.space("") == []
        assert self.space("   ") == []


def test_tokenizer_names():
    assert set(TOKENIZERS) == {"word", "char", "space"}
    for name, fn in TOKENIZERS.items():
        assert get_tokenizer(name) is fn


def test_tokenize_applies_named_tokenizer_to_every_text():
    texts = ["Ab c", "", "x!"]
    assert tokenize(texts, "word") == [["ab", "c"], [], ["x", "!"]]
    assert tokenize(texts, "char") == [["A", "b", " ", "c"], [], ["x", "!"]]
    assert tokenize(texts, "space") == [["Ab", "c"], [], ["x!"]]
    assert tokenize(texts) == tokenize(texts, "word")  # word is the default


def test_tokenize_accepts_a_generator():
    assert tokenize((t for t in ["a b", "c"]), "space") == [["a", "b"], ["c"]]


@pytest.mark.parametrize("name", ["bpe", "Word", "", "chars"])
def test_unknown_tokenizer_is_a_one_line_data_error_listing_choices(name):
    with pytest.raises(DataError) as excinfo:
        get_tokenizer(name)
    msg = one_line(excinfo)
    assert "unknown tokenizer" in msg
    assert repr(name) in msg
    for choice in ("word", "char", "space"):
        assert choice in msg


def test_unknown_tokenizer_through_tokenize():
    with pytest.raises(DataError) as excinfo:
        tokenize(["a"], "nope")
    one_line(excinfo)


def test_data_error_is_a_value_error_and_a_stateseer_error():
    with pytest.raises(ValueError):
        get_tokenizer("nope")
    with pytest.raises(StateseerError):
        get_tokenizer("nope")


# ----------------------------------------------------------------------------- Vocab
CORPUS = [["a", "b", "a"], ["a", "c", "b"], ["d"]]  # a:3 b:2 c:1 d:1


class TestVocabBuild:
    def test_pad_and_unk_are_ids_0_and_1(self):
        v = Vocab.build(CORPUS)
        assert v.tokens[:2] == [PAD, UNK] == ["<pad>", "<unk>"]
        assert (v.pad_id, v.unk_id) == (0, 1)
        assert v.index[PAD] == 0 and v.index[UNK] == 1

    def test_most_frequent_first_ties_alphabetical(self):
        v = Vocab.build(CORPUS)
        assert v.tokens == [PAD, UNK, "a", "b", "c", "d"]
        assert len(v) == 6

    def test_ties_are_broken_alphabetically_not_by_first_appearance(self):
        v = Vocab.build([["z", "y", "x"]])
        assert v.tokens[2:] == ["x", "y", "z"]

    def test_min_freq(self):
        assert Vocab.build(CORPUS, min_freq=2).tokens == [PAD, UNK, "a", "b"]
        assert Vocab.build(CORPUS, min_freq=3).tokens == [PAD, UNK, "a"]
        assert Vocab.build(CORPUS, min_freq=4).tokens == [PAD, UNK]

    def test_max_size_counts_pad_and_unk(self):
        assert Vocab.build(CORPUS, max_size=3).tokens == [PAD, UNK, "a"]
        assert Vocab.build(CORPUS, max_size=4).tokens == [PAD, UNK, "a", "b"]
        assert len(Vocab.build(CORPUS, max_size=100)) == 6

    @pytest.mark.parametrize("max_size", [0, 1, 2])
    def test_tiny_max_size_keeps_only_specials(self, max_size):
        assert Vocab.build(CORPUS, max_size=max_size).tokens == [PAD, UNK]

    def test_min_freq_and_max_size_together(self):
        v = Vocab.build(CORPUS, min_freq=2, max_size=3)
        assert v.tokens == [PAD, UNK, "a"]

    def test_specials_in_the_data_are_not_duplicated(self):
        v = Vocab.build([[PAD, UNK, "a", PAD, UNK]])
        assert v.tokens == [PAD, UNK, "a"]

    def test_empty_corpus(self):
        v = Vocab.build([])
        assert v.tokens == [PAD, UNK]
        assert v.encode(["x"]).tolist() == [1]

    def test_build_accepts_a_generator(self):
        v = Vocab.build(toks for toks in CORPUS)
        assert v.tokens == [PAD, UNK, "a", "b", "c", "d"]

    def test_direct_construction_needs_unk_and_distinct_tokens(self):
        with pytest.raises(DataError) as excinfo:
            Vocab(["a", "b"])
        assert "<unk>" in one_line(excinfo)
        with pytest.raises(DataError) as excinfo:
            Vocab([UNK, "a", "a"])
        assert "'a' twice" in one_line(excinfo)

    def test_any_id_order_with_unk(self):
        v = Vocab(["x", UNK, PAD, "y"])  # a user model's itos: <unk> at 1, <pad> at 2
        assert (v.unk_id, v.pad_id) == (1, 2)
        w = Vocab(["y", "x", UNK])  # no <pad>
        assert (w.unk_id, w.pad_id) == (2, None)
        assert w.encode(["x", "zzz", "y"]).tolist() == [1, 2, 0]
        assert w.is_known(["x", "zzz"]).tolist() == [True, False]


class TestVocabEncode:
    vocab = Vocab.build(CORPUS, min_freq=2)  # <pad> <unk> a b

    def test_encode_maps_known_tokens_to_their_ids(self):
        ids = self.vocab.encode(["a", "b", "a"])
        assert ids.dtype == np.int64
        assert ids.shape == (3,)
        assert ids.tolist() == [2, 3, 2]

    def test_encode_maps_unknown_tokens_to_unk(self):
        assert self.vocab.encode(["c", "a", "zzz", "A"]).tolist() == [1, 2, 1, 1]

    def test_encode_empty(self):
        ids = self.vocab.encode([])
        assert ids.shape == (0,) and ids.dtype == np.int64

    def test_is_known(self):
        mask = self.vocab.is_known(["a", "c", "b", "zzz"])
        assert mask.dtype == np.bool_
        assert mask.tolist() == [True, False, True, False]
        assert self.vocab.is_known([]).shape == (0,)

    def test_decode_inverts_encode_for_known_tokens(self):
        toks = ["b", "a", "a"]
        assert self.vocab.decode(self.vocab.encode(toks)) == toks
        assert self.vocab.decode(self.vocab.encode(["a", "zzz"])) == ["a", UNK]
        assert self.vocab.decode(np.array([0, 1])) == [PAD, UNK]

    def test_encode_is_consistent_with_tokens(self):
        v = Vocab.build(CORPUS)
        assert v.encode(v.tokens).tolist() == list(range(len(v)))


class TestVocabSaveLoad:
    def test_round_trip(self, tmp_path):
        v = Vocab.build([["héllo", "wörld", "☃", "a", "a"], ["a", '"q"', "\\"]])
        path = tmp_path / "vocab.json"
        v.save(path)
        loaded = Vocab.load(path)
        assert loaded.tokens == v.tokens
        assert loaded.index == v.index
        assert loaded.encode(["☃", "nope"]).tolist() == v.encode(["☃", "nope"]).tolist()

    def test_saved_file_is_json_with_tokens_key(self, tmp_path):
        v = Vocab.build(CORPUS)
        v.save(tmp_path / "vocab.json")
        data = json.loads((tmp_path / "vocab.json").read_text(encoding="utf-8"))
        assert data["tokens"] == v.tokens

    def test_load_accepts_str_path(self, tmp_path):
        v = Vocab.build(CORPUS)
        v.save(str(tmp_path / "v.json"))
        assert Vocab.load(str(tmp_path / "v.json")).tokens == v.tokens

    def test_missing_file(self, tmp_path):
        path = tmp_path / "nope" / "vocab.json"
        with pytest.raises(DataError) as excinfo:
            Vocab.load(path)
        msg = one_line(excinfo)
        assert "not found" in msg
        assert str(path) in msg
        assert "stateseer train" in msg

    @pytest.mark.parametrize(
        "content",
        [
            "{not json",
            "",
            '{"words": ["<pad>", "<unk>"]}',  # wrong key
            '["<pad>", "<unk>", "a"]',  # a list, not an object
            '{"tokens": 5}',  # not a list
            '{"tokens": ["a", "b"]}',  # specials missing
            '{"tokens": ["<unk>", "a", "a"]}',  # a token twice
        ],
    )
    def test_corrupt_file(self, tmp_path, content):
        path = tmp_path / "vocab.json"
        path.write_text(content, encoding="utf-8")
        with pytest.raises(DataError) as excinfo:
            Vocab.load(path)
        msg = one_line(excinfo)
        assert "corrupt" in msg
        assert str(path) in msg

    def test_non_utf8_file_is_corrupt(self, tmp_path):
        path = tmp_path / "vocab.json"
        path.write_bytes(b'{"tokens": ["<pad>", "<unk>", "\xff\xfe"]}')
        with pytest.raises(DataError) as excinfo:
            Vocab.load(path)
        assert "corrupt" in one_line(excinfo)
