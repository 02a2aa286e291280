"""Deprecated: moved to :mod:`app.explorer.views.diagram`."""

from app.explorer.views.diagram import (
                                        LAYOUTS,
                                        diagram_elements,
                                        fixed_positions,
                                        forcing_colors,
                                        stylesheet,
)

__all__ = ["LAYOUTS", "diagram_elements", "fixed_positions", "forcing_colors", "stylesheet"]
