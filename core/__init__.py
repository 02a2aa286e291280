"""stateseer's torch-free core: what every layer reads and writes.

=====================  ===========================================================
``errors``             user-facing error types (one line, naming the fix)
``layout``             the run directory's paths, spelled once (:class:`RunLayout`)
``defaults``           defaults several commands share (``N_STATES``)
``version``            ``__version__``, written into every run's provenance
``atomic``             the one crash-safe writer (tmp file, fsync, ``os.replace``)
``reading``            bounded reads of a run's (or an import's) files
``rundir``             :class:`RunDir`: config, metrics, vocabulary of a run directory
``traces``             :class:`Traces`: recorded hidden states, memory-mapped
``imported``           the ``import-traces`` format, checked and converted
``automaton``          :class:`Automaton` base, table :class:`DFA`, :func:`minimize`
``dot``                the one DOT writer (AALpy's ``__start0`` convention)
``csvsafe``            CSV cells a spreadsheet will not run as formulas
``reprs``              how result objects show themselves in a notebook
``engine``             where heavy steps run: this process or a Dask cluster
``heap``               glibc's heap, tuned while large temporary arrays live
=====================  ===========================================================

Nothing here imports torch or dash, and nothing here imports the other layers
(``tests/test_architecture.py`` checks both statically). Import each name from the module
that defines it; this package re-exports nothing. Model loading is
:func:`stateseer.rnn_models.loading.load_model`.
"""
