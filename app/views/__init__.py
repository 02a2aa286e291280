"""Deprecated: the views moved to :mod:`app.explorer.views` (one module per view, with its
layout and callbacks); these modules re-export their helpers until callers have moved."""
