"""Chapter 3, Smoothed max: softmax, sparsemax, entmax: the course's scaffolding for it.

``check.py`` (its exercise checks), ``widgets.py`` (its ipywidgets), ``twins.py`` (its static twins; scripts ``mapping_lab.js``).
"""
