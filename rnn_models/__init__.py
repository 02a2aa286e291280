"""stateseer's model side: tokenisers, data sets, RNN classifiers, training and traces.

Importing the package is cheap and does not import torch. The public names are
:mod:`stateseer`'s (``from stateseer import TrainConfig, train_run, record_run``); the
modules here are named for what they hold. The file formats that ``abstraction`` reads
(errors, the run directory, traces, automata, the atomic writer, DOT, the engine) live in
the torch-free :mod:`stateseer.core` layer, which imports nothing else of
this package; a run directory with its model is :class:`stateseer.rnn_models.run.ModelRun`.
"""
