"""Chapter 8, Fast attention: the course's scaffolding for it.

``check.py`` (its exercise checks), ``widgets.py`` (its ipywidgets), ``twins.py`` (its static twins; scripts ``tile_map.js``).
"""
