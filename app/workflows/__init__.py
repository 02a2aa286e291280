"""Workflows: the steps that glue the engine packages together, apart from the explorer.

``abstraction`` never imports torch and ``rnn_models`` knows nothing of abstract states;
what needs both, or strings several engine steps into one task, lives here as plain
functions over a run directory. The command line (:mod:`stateseer.app.cli`) and the Dash explorer
call them; none of them imports Dash.

``forcing``    state forcing: centroids, the forcing figures, one forced trace
``contexts``   the nearest-training-context index, nearest contexts, the 2-D projection
``prepare``    train, record, abstract, force and index a run unless already done (demo)
``sweep``      fidelity against the number of states, and the ``auto`` choice
``exports``    FSM/DFA/traces exports of a run
``dfa``        deterministic automaton extraction of a run
``comparison`` two runs on the same data compared
"""
