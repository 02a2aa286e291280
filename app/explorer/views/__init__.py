"""The explorer's views, one module each (layout, callbacks, pure helpers, ``VIEW``)."""
