"""Chapter 5, Self-attention: the course's scaffolding for it.

``check.py`` (its exercise checks), ``widgets.py`` (its ipywidgets), ``twins.py`` (its static twins; scripts ``mask_lab.js``, ``sqrt_dk.js``).
"""
