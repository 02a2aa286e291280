"""Deprecated: the views moved to :mod:`app.explorer.views` (one module per view, with its
layout and callbacks). ``diagram`` and ``nearest`` re-export their helpers until notebook 01
and tests/app/test_analysis.py have moved; then this package goes."""
