"""Chapter 1, Sequence to sequence, with and without attention: the course's scaffolding for it.

``check.py`` (its exercise checks), ``widgets.py`` (its ipywidgets), ``twins.py`` (its static twins; scripts ``attention_maps.js``).
"""
