"""Widgets for the chapters' experiments, one module per chapter.

Convention: the function that draws an experiment is a plain function of plain values
(``recipe.query_vs_keys(angle=30.0, length=1.0)``) that the tests call directly; the
widget only wires ipywidgets sliders to it with :func:`ipywidgets.interactive`. Nothing
here waits for user input, and importing it never needs a display.
"""
