"""Chapter 11, Is attention explanation?: the course's scaffolding for it.

``check.py`` (its exercise checks), ``widgets.py`` (its ipywidgets), ``twins.py`` (its static twins; scripts ``adversary.js``, ``importance.js``).
"""
