"""The ``stateseer`` command line, one module per command group.

``main``         the parser and :func:`~stateseer.app.cli.main.main` (the entry point)
``options``      option types, the registries choices come from, output and bind checks
``models``       train, create, import-traces, record
``abstraction``  abstract, sweep, force, compare, index, extract-dfa, export
``diagnosis``    diagnose, repair
``serving``      demo, serve
``study``        study, study-export, study-analyze, study-template

``python -m stateseer.app.cli`` runs it. Importing the package imports nothing heavy.
"""
