"""Which condition a new participant gets (pure; the log stores the choice once).

The study log calls :func:`choose_condition` inside the transaction that registers the
participant, so concurrent arrivals are counted one after another and a participant who
reloads the page keeps the condition stored the first time.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

from stateseer.app.study.designs import schedule
from stateseer.app.study.spec import ORDER_SEP, Assignment

__all__ = ["choose_condition"]


def choose_condition(rule: Assignment, conditions: Sequence[str], pid: str,
                     counts: Mapping[str, int]) -> tuple[str, str]:
    """The condition for a participant who has none yet, and the method that chose it.

    Parameters
    ----------
    rule : Assignment
        The study's assignment rule.
    conditions : sequence of str
        Condition names in the order of the study file.
    pid : str
        The participant id.
    counts : mapping of str to int
        Participants already in each condition.

    Returns
    -------
    condition, method : str, str
        ``method`` is ``"preassigned"`` for ids listed in the study file. For ``latin``
        the condition is the participant's order of conditions joined by ``>``: the row
        of the Williams design for their arrival number (the participants so far).

    Examples
    --------
    >>> from stateseer.app.study.spec import Assignment
    >>> choose_condition(Assignment(), ["full", "baseline"], "P03", {"full": 1})
    ('baseline', 'counterbalanced')
    >>> choose_condition(Assignment(method="random", seed=7), ["a", "b"], "P01", {}) == \\
    ...     choose_condition(Assignment(method="random", seed=7), ["a", "b"], "P01", {"a": 9})
    True
    >>> choose_condition(Assignment(method="latin"), ["full", "baseline"], "P02", {"x": 1})
    ('baseline>full', 'latin')
    """
    if rule.method == "latin":
        order = schedule(sum(counts.values()), list(conditions))
        return ORDER_SEP.join(c for c, _ in order), "latin"
    if pid in rule.participants:
        return rule.participants[pid], "preassigned"
    if rule.method == "fixed":
        return str(rule.condition), "fixed"
    if rule.method == "random":
        # seeded by (seed, id): reproducible, and independent of the order of arrival
        return random.Random(f"{rule.seed}:{pid}").choice(list(conditions)), "random"
    fewest = min(counts.get(c, 0) for c in conditions)
    return next(c for c in conditions if counts.get(c, 0) == fewest), "counterbalanced"
