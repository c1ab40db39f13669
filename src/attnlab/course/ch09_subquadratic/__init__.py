"""Chapter 9, Subquadratic attention: the course's scaffolding for it.

``check.py`` (its exercise checks), ``widgets.py`` (its ipywidgets), ``twins.py`` (its static twins; scripts ``attention_pattern.js``).
"""
