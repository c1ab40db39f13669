"""``python -m attnlab.grade``: the grader's command line (``attnlab-grade``)."""

import runpy

runpy.run_module("attnlab_grade", run_name="__main__", alter_sys=True)
