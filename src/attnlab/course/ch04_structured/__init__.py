"""Chapter 4, Soft, hard and structured attention: the course's scaffolding for it.

``check.py`` (its exercise checks), ``widgets.py`` (its ipywidgets), ``twins.py`` (its static twins; scripts ``alignment_lab.js``).
"""
