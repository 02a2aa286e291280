"""The Dash explorer: one module per view, one registry that builds the page.

``context`` (what a run shows, read-only), ``services`` (the model and the nearest-context
index, loaded lazily), ``records`` (the typed trace record), ``query`` (the instance
table's query), ``cache`` (a small LRU), ``palette`` (class colours, 20 distinct),
``ids`` (every component id), ``view`` (what a view declares), ``registry`` (the list of
views), ``page`` (the page's regions), ``views/`` (the views). Importing this package
imports no dash.
"""
