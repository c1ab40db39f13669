"""Chapter 10, Attention in a pretrained model: the course's scaffolding for it.

``check.py`` (its exercise checks), ``widgets.py`` (its ipywidgets), ``twins.py`` (its static twins; scripts ``head_view.js``).
"""
