"""Chapter 7, The Transformer (the pages 7a, ``chapters/07a_transformer``, and 7b,
``chapters/07b_transformer_training``): the course's scaffolding for both halves.

``check.py`` (its exercise checks), ``widgets.py`` (its ipywidgets), ``twins.py`` (its static twins; scripts ``positional.js``).
"""
