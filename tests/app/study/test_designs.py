"""Williams designs: every condition in every position equally often and every ordered
pair of neighbours equally often, for any multiple of the design's size."""

from __future__ import annotations

from collections import Counter
from itertools import pairwise, permutations

import pytest

from stateseer.app.study.designs import schedule, williams


@pytest.mark.parametrize("n", range(1, 9))
@pytest.mark.parametrize("multiple", [1, 3])
def test_positions_and_carry_over_are_balanced(n, multiple):
    conditions = [f"c{i}" for i in range(n)]
    size = len(williams(n))
    assert size == (n if n % 2 == 0 else 2 * n)
    orders = [[c for c, _ in schedule(k, conditions)] for k in range(multiple * size)]
    assert all(sorted(o) == sorted(conditions) for o in orders)  # each does every one
    per_position = Counter((p, c) for o in orders for p, c in enumerate(o))
    assert set(per_position.values()) == {multiple * size // n}
    pairs = Counter((a, b) for o in orders for a, b in pairwise(o))
    if n > 1:
        assert set(pairs) == set(permutations(conditions, 2))
        assert len(set(pairs.values())) == 1  # every ordered pair equally often


def test_task_sets_go_with_positions_and_meet_every_condition_equally():
    conditions, sets = ["full", "baseline", "table"], ["A", "B", "C"]
    blocks = [schedule(k, conditions, sets) for k in range(12)]
    assert all([s for _, s in b] == sets for b in blocks)  # nobody sees a set twice
    met = Counter(pair for b in blocks for pair in b)
    assert set(met.values()) == {12 // 3} and len(met) == 9


def test_a_wrong_number_of_task_sets_or_conditions_is_refused():
    with pytest.raises(ValueError, match="need 2 task sets"):
        schedule(0, ["a", "b"], ["x"])
    with pytest.raises(ValueError, match="at least one condition"):
        williams(0)
