"""Exact DFA extraction from recorded traces (white-box state-abstraction refinement).

The package, one module per stage:

``extracted``    :class:`ExtractedDFA`, the result (an automaton with its exchange format)
``prefix_tree``  step 1: the training prefixes merged into a tree
``refine``       steps 2-4: initial partition, conflict-driven splits, completion
``minimise``     step 5: the minimal class-labelled automaton
``agreement``    the checks against the RNN (and a known grammar)
``extract``      :func:`extract_dfa`, which strings the stages together

For an RNN trained on a formal language, :func:`extract_dfa` turns the hidden states of the
training split into a deterministic, complete, minimal automaton, without running the RNN:

1. **Prefix tree.** Every distinct training prefix (the empty one included) becomes one
   point: its hidden state (``initial_hidden`` for the empty prefix) and the RNN's
   intermediate prediction after it. Equal prefixes share one point, so equal hidden states
   can never land in different abstract states.
2. **Initial abstraction.** One abstract state per predicted class (the default), or
   ``initial_states`` k-means clusters split by predicted class
   (:class:`~stateseer.abstraction.abstractors.kmeans.KMeansAbstractor`); either way no state mixes
   classes.
3. **Refinement.** A transition ``(state, symbol)`` is *in conflict* when the children of
   the state's points on that symbol lie in more than one state. Each conflicting state is
   split along its worst symbol: its points with a child on that symbol are grouped by the
   child's state, every other point joins the group of its nearest grouped point (hidden
   space). Rounds repeat until no conflict is left or ``max_states`` states exist; within a
   round the states with the most conflicting traffic split first, and the last split is
   cut to fit the budget (remaining conflicts are then settled by the majority target).
4. **Completion.** States are labelled with their majority predicted class; every
   ``(state, symbol)`` gets its majority target, and a pair never seen in training takes the
   target that the nearest state (centroid distance) that has seen the symbol goes to. Every
   alphabet symbol occurs in training, so no sink state is needed.
5. **Minimisation.** Moore refinement through
   :func:`stateseer.core.automaton.minimize` (for more than two classes, one
   minimisation per class indicator, then their common refinement),
   states renumbered in breadth-first order from the initial state 0.

The result, an :class:`ExtractedDFA`, is checked against the RNN on the evaluation split:
the traces hold the RNN's prediction after every prefix of every test string, so agreement
needs no torch. When the caller passes the language (``grammar=``, e.g. a built-in grammar
of :mod:`stateseer.rnn_models.formal`) the report also compares the automaton with it on every
string of length at most 12.

Notes
-----
The method assumes that the RNN's hidden states after equivalent prefixes lie closer to
each other than to those of other prefixes of the same predicted class; it needs no
equivalence oracle, but only generalises where the training prefixes cover the language.
On an imperfect RNN, refinement also chases the RNN's isolated mistakes on the training
prefixes, so the state count grows with the budget; agreement with the RNN grows with it.
A symbol never seen in training is not in the alphabet: :meth:`ExtractedDFA.step` refuses
it, and the agreement figures leave the state unchanged on it (``n_unknown_symbols``).

Examples
--------
A hand-made automaton (``extract_dfa`` builds the same kind of object from traces):

>>> import numpy as np
>>> parity = ExtractedDFA(alphabet=("a", "b"), classes=["reject", "accept"],
...                       transitions=np.array([[1, 0], [0, 1]]),
...                       state_class=np.array([1, 0]))
>>> parity.accepts(["", "a", "ab", "aab"]).tolist()
[True, False, False, True]
>>> parity.run("aab")
[0, 1, 0, 0]
>>> print(parity.to_dot().splitlines()[3])
  s0 [label="s0", shape=doublecircle];
"""

from __future__ import annotations

from stateseer.abstraction.automata.dfa.extract import extract_dfa, training_alphabet
from stateseer.abstraction.automata.dfa.extracted import ExtractedDFA

__all__ = ["ExtractedDFA", "extract_dfa", "training_alphabet"]
