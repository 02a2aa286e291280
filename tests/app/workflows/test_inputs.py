"""What differs between two runs' inputs, said in one line (stateseer.app.workflows.inputs)."""

from __future__ import annotations

from stateseer.app.workflows.inputs import input_difference


def test_same_inputs_give_no_message():
    assert input_difference("test", ["a", "b"], ["a", "b"]) is None


def test_same_count_names_the_first_differing_input_and_why():
    msg = input_difference("test", ["a", "b", "c"], ["a", "x", "y"],
                           data_a={"name": "rotten_tomatoes", "seed": 0},
                           data_b={"name": "rotten_tomatoes", "seed": 1})
    assert "input 1 is 'b' in the first run but 'x' in the second" in msg
    assert "split seed 0 vs 1" in msg and "\n" not in msg
    assert "(3 vs 3)" not in msg  # never "different inputs (n vs n)"


def test_different_counts_say_both_counts():
    msg = input_difference("val", ["a"] * 1381, ["a"] * 1200,
                           data_a={"name": "csv:a.csv"}, data_b={"name": "csv:b.csv"})
    assert "different numbers of val inputs (1,381 vs 1,200)" in msg
    assert "data set 'csv:a.csv' vs 'csv:b.csv'" in msg


def test_long_texts_are_shortened():
    msg = input_difference("test", ["x" * 500], ["y" * 500])
    assert len(msg) < 300
