"""Chapter 14, Serving and long context: the course's scaffolding for it.

``check.py`` (its exercise checks; the eviction exercise's check is in
``check_cache.py``, re-exported there), ``widgets.py`` (speculative decoding on the shipped
LMs, live), ``twins.py`` (one round of speculative decoding in the browser; script
``speculative.js``).
"""
