"""stateseer's explorer: Dash views, study mode and the ``stateseer`` command line.

Importing ``app`` is cheap; Dash is imported only by the modules that build the UI.
"""

__all__: list[str] = []
