"""The course's scaffolding: what the chapters need and a user of the library does not.

The library (``attnlab.*`` outside this folder) never imports from here. The map::

    attnlab/course/
      __init__.py        this map
      _compat.py         the old names: attnlab.check.*, attnlab.widgets.*, attnlab.grade.*
      check_core.py      run_check, Case, CheckFailed, forbid tripwires (every check uses it)
      check_diagnose.py  the hints a failing check prints (constant output, swapped args...)
      exercises.py       a notebook's exercises, read from its cells (grader, editions)
      twin/              the static twins' runtime: __init__.py (Twin, controls, checks),
                         core.js (the browser side), rng.py (seeded numbers shared with JS)
      chNN_topic/        everything of chapter NN, one folder per chapter:
        check.py           its exercise checks (attnlab.check.<name>), FORBIDDEN
        widgets.py         its ipywidgets: plain functions of plain values + sliders
        twins.py, *.js     its static twins and their scripts (not every chapter has some)
      (the grader lives in the repository's grader/: attnlab_grade, alias attnlab.grade)

Chapters: ch01_seq2seq, ch02_recipe, ch03_mappings, ch04_structured,
ch05_self_attention, ch06_multihead, ch07_transformer, ch08_fast_attention,
ch09_subquadratic, ch10_pretrained, ch11_explanation.
"""
