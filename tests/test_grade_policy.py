"""The sentry's policies, one rule at a time, away from any kernel (attnlab_grade.policy):
the path rules, the audit-event tables, who may swap a function's code, and which
package a trusted file belongs to."""

from __future__ import annotations

import os

import pytest

from attnlab.grade import policy


@pytest.fixture
def rules(tmp_path):
    pkg = tmp_path / "site" / "attnlab"
    grader = tmp_path / "site" / "attnlab_grade"
    subs = tmp_path / "class"
    for d in (pkg, grader, subs, tmp_path / "home"):
        d.mkdir(parents=True)
    key = pkg / "course" / "ch02" / "check.py"
    key.parent.mkdir(parents=True)
    key.write_text("CASES = []\n")
    (pkg / "attention.py").write_text("def attend(): ...\n")
    guarded = tuple(f"{os.path.realpath(d)}/" for d in (pkg, grader, subs))
    made = policy.path_rules(
        guarded, frozenset({os.path.realpath(key)}), f"{grader}/", os.getpid()
    )
    return tmp_path, made


def test_writes_into_a_guarded_folder_by_any_spelling(rules):
    tmp, (guarded, _, _, _) = rules
    site = tmp / "site"
    assert guarded(site / "attnlab" / "attention.py")
    assert guarded(str(site / "attnlab" / "new.py"))  # a file yet to be made
    assert guarded(f"/{site}/attnlab/x.py")  # a leading "//"
    assert guarded(f"{tmp}/home/../site/attnlab_grade/report.py")  # ".."
    link = tmp / "home" / "link"
    link.symlink_to(tmp / "class")
    assert guarded(link / "bob.ipynb")  # through a symlink
    assert guarded(os.fsencode(f"{site}/attnlab/x.py"))  # bytes
    assert guarded("/proc/self/environ")
    assert not guarded(tmp / "home" / "notes.txt")
    assert not guarded(f"{site}/attnlab2/x.py")  # a prefix of a name is no folder
    assert guarded(object())  # what cannot be resolved is no place to write


def test_a_descriptor_is_where_it_points(rules, tmp_path):
    _, (guarded, _, _, _) = rules
    r, w = os.pipe()
    try:
        assert not guarded(r)  # a pipe: no file
    finally:
        os.close(r)
        os.close(w)
    fd = os.open(tmp_path / "site" / "attnlab" / "attention.py", os.O_RDONLY)
    try:
        assert guarded(fd)
    finally:
        os.close(fd)


def test_the_answer_key_is_the_checks_and_the_grader(rules):
    tmp, (_, answer_key, _, _) = rules
    site = tmp / "site"
    assert answer_key(site / "attnlab" / "course" / "ch02" / "check.py")
    assert answer_key(site / "attnlab_grade" / "masters.json")
    assert not answer_key(site / "attnlab" / "attention.py")  # the library: readable
    assert not answer_key(12345678)  # a descriptor that is not open


def test_proc_reads_a_library_needs_and_no_other(rules):
    _, (_, _, harmless, _) = rules
    assert harmless("/proc/cpuinfo") and harmless("/proc/self/status")
    assert harmless(f"/proc/{os.getpid()}/cgroup")
    assert harmless("/proc/sys/kernel/random/boot_id")
    assert not harmless("/proc/self/environ")
    assert not harmless("/proc/self/mem")
    assert not harmless("/proc/1/status")  # another process
    assert not harmless("/proc/cpuinfo/../../etc/passwd")


def test_what_opens_for_writing():
    *_, writes = policy.path_rules((), frozenset(), "/nowhere/", 1)
    assert writes("w", 0) and writes("r+", 0) and writes("ab", 0) and writes("x", 0)
    assert writes("r", os.O_WRONLY) and writes("r", os.O_CREAT)
    assert not writes("r", os.O_RDONLY) and not writes("rb", None)


def test_who_may_swap_a_functions_code():
    trusted = lambda f: f.startswith("/site/")  # noqa: E731
    blocked = policy.code_swap_rule("/site/attnlab/", "/site/attnlab_grade/", trusted)
    nx = "/site/networkx/utils/decorators.py"
    assert not blocked(nx, nx)  # a library its own function (argmap)
    assert blocked(nx, "/site/numpy/core.py")  # another module's
    assert blocked("/site/attnlab/x.py", "/site/attnlab/x.py")  # the course's
    assert blocked(nx, "/site/attnlab_grade/sentry.py")  # the grader's
    assert blocked("/tmp/ipykernel/123.py", "/tmp/ipykernel/123.py")  # a student
    assert blocked(nx, None)  # no code at all


def test_which_package_a_trusted_file_belongs_to():
    owner = policy.owner_rule(
        "/venv/src/attnlab/", ("/usr/lib/python3.11/", "/venv/site-packages/")
    )
    assert owner("/venv/src/attnlab/mappings/basic.py") == "attnlab"
    assert owner("/usr/lib/python3.11/functools.py") == "functools"
    assert owner("/venv/site-packages/torch/utils/checkpoint.py") == "torch"
    assert owner("/tmp/ipykernel/1.py") == "/tmp/ipykernel/1.py"


def test_the_event_tables():
    assert "sys.settrace" in policy.TAMPER_EVENTS
    assert "gc.get_referrers".startswith(policy.TAMPER_PREFIXES)
    for event in ("os.system", "subprocess.Popen", "os.fork", "os.execv", "os.spawnv"):
        assert policy.is_process_event(event), event
    assert not policy.is_process_event("os.listdir")
    assert policy.PATH_EVENTS["os.symlink"] == 1  # the link, not its target
    assert set(policy.STUDENT_TAMPER_EVENTS) == {"code.__new__", "marshal.loads"}
    assert policy.WINDOW_BUDGET >= 1 << 20
