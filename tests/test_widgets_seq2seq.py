"""Chapter 1 widget: the plain function returns what it drew; the widget builds."""

from __future__ import annotations

import pytest

import attnlab
from attnlab.course.ch01_seq2seq.widgets import alignment_explorer, alignment_widget
from attnlab.data import DateTask, ReversalTask
from attnlab.seq2seq import Seq2Seq, Seq2SeqConfig


def _model(task, attention="additive"):
    attnlab.seed_everything(0)
    cfg = Seq2SeqConfig(
        len(task.src_vocab),
        len(task.tgt_vocab),
        d_emb=8,
        d_hidden=8,
        attention=attention,
    )
    return Seq2Seq(cfg).eval()


@pytest.mark.parametrize("step", [0, 2, 99])
def test_explorer_row_is_a_distribution_over_the_source(step):
    task = ReversalTask()
    info = alignment_explorer(_model(task), task, "abcde", step)
    assert len(info["weights"]) == 5
    assert sum(info["weights"]) == pytest.approx(1.0, abs=1e-3)
    assert 0 <= info["step"] <= 30 and (step != 99 or info["step"] < 99)
    assert info["focus"] == max(range(5), key=lambda j: info["weights"][j])
    assert info["focus_token"] == "abcde"[info["focus"]]
    assert info["target"] == "edcba" and info["correct"] == (info["output"] == "edcba")


@pytest.mark.slow
def test_explorer_on_an_oracle_like_trained_model():
    """After a short training on reversal, step 0 looks at the last source letter."""
    task = ReversalTask(lengths=(3, 6), distinct=True)
    attnlab.seed_everything(0)
    cfg = Seq2SeqConfig(
        len(task.src_vocab),
        len(task.tgt_vocab),
        d_emb=16,
        d_hidden=32,
        attention="dot",
        style="luong",
    )
    model = Seq2Seq(cfg)
    attnlab.train.fit(
        model,
        task.stream(64, seed=0, bucket=True),
        steps=150,
        lr=2e-2,
        schedule="cosine",
        quiet=True,
    )
    info = alignment_explorer(model, task, "bfkd", 0)
    assert info["output"] == "dkfb" and info["correct"]
    assert info["focus_token"] == "d" and max(info["weights"]) > 0.5


def test_explorer_without_attention_and_date_task():
    task = DateTask()
    info = alignment_explorer(_model(task, None), task, "22 November 2026")
    assert info["weights"] is None and info["target"] == "2026-11-22"
    with pytest.raises(ValueError, match="empty"):
        alignment_explorer(_model(task), task, "   ")


def test_widget_builds():
    task = ReversalTask()
    wid = alignment_widget(_model(task), task, "abc", examples=["xyz", "abc"])
    assert wid.children[0].value == "abc" and wid.children[1].max == 30
    assert list(wid.children[0].options) == ["abc", "xyz"]
    wid.children[0].value = ""  # empty input: the widget prints a message, no exception
    assert wid.kwargs["text"] == ""
    wid.children[1].value = 7
    assert wid.kwargs == {"text": "", "step": 7}
