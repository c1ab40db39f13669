"""Widgets for the chapters' experiments, one module per chapter.

Convention: the function that draws an experiment is a plain function of plain values
(``recipe.query_vs_keys(angle=30.0, length=1.0)``) that the tests call directly; the
widget only wires ipywidgets sliders to it with :func:`ipywidgets.interactive`. Nothing
here waits for user input, and importing it never needs a display.
"""

# The twins that run chapter 1's and chapter 7's trained models register their browser
# checks on import, so every script in twin_js/ has one wherever twins are checked.
from . import twins_live  # noqa: E402, F401
