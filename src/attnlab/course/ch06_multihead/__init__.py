"""Chapter 6, Multi-head attention: the course's scaffolding for it.

``check.py`` (its exercise checks), ``widgets.py`` (its ipywidgets).
"""
