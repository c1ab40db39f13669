"""tools/exercise_numbers.py: exercises numbered per chapter ("Exercise 5.2")."""

from tools.exercise_numbers import chapter_number, renumber  # noqa: E402


def test_chapter_number_from_docname():
    assert chapter_number("chapters/05_self_attention") == 5
    assert chapter_number("chapters/01_seq2seq") == 1
    assert chapter_number("11_explain") == 11
    assert chapter_number("chapters/07a_transformer") == "7a"  # a chapter in halves
    assert chapter_number("chapters/07b_transformer_training") == "7b"
    assert chapter_number("index") is None
    assert chapter_number("chapters/bibliography") is None


def test_renumber_restarts_per_chapter_in_page_order():
    # What Sphinx assigns without a numbered toctree: one counter for the whole book.
    fig = {
        "chapters/01_seq2seq": {"exercise": {"ex-a": (1,), "ex-c": (3,), "ex-b": (2,)}},
        "chapters/05_self_attention": {
            "exercise": {"ex-e": (5,), "ex-d": (4,)},
            "figure": {"fig-1": (7,)},
        },
        "index": {"exercise": {"ex-front": (6,)}},
    }
    renumber(fig)
    assert fig["chapters/01_seq2seq"]["exercise"] == {
        "ex-a": (1, 1),
        "ex-b": (1, 2),
        "ex-c": (1, 3),
    }
    assert fig["chapters/05_self_attention"]["exercise"] == {
        "ex-d": (5, 1),
        "ex-e": (5, 2),
    }
    assert fig["chapters/05_self_attention"]["figure"] == {"fig-1": (7,)}  # untouched
    assert fig["index"]["exercise"] == {"ex-front": (6,)}  # no chapter number


def test_renumber_a_chapter_in_halves():
    fig = {"chapters/07a_x": {"exercise": {"ex-b": (9,), "ex-a": (8,)}},
           "chapters/07b_y": {"exercise": {"ex-c": (10,)}}}  # fmt: skip
    renumber(fig)
    assert fig["chapters/07a_x"]["exercise"] == {"ex-a": ("7a", 1), "ex-b": ("7a", 2)}
    assert fig["chapters/07b_y"]["exercise"] == {"ex-c": ("7b", 1)}
    assert ".".join(map(str, ("7a", 1))) == "7a.1"  # how Sphinx writes the number
