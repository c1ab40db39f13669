"""Chapter 2, The attention recipe: the course's scaffolding for it.

``check.py`` (its exercise checks), ``widgets.py`` (its ipywidgets), ``twins.py`` (its static twins; scripts ``query_vs_keys.js``).
"""
