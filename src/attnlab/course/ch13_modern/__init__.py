"""Chapter 13, The attention layer of a 2026 LLM: the course's scaffolding for it.

``check.py`` (its exercise checks), ``twins.py`` (its static twin; script ``rope.js``).
"""
