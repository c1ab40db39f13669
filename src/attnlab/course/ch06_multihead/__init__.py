"""Chapter 6, Multi-head attention: the course's scaffolding for it.

``check.py`` (its exercise checks), ``widgets.py`` (its ipywidgets), ``twins.py`` and
``slides_bug.js`` (its static twin: which positions each head sees).
"""
