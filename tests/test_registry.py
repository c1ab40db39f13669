"""attnlab.registry: one pattern for the "by name" tables, one error for an unknown name."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import attnlab
from attnlab import positional, rationales, scoring
from attnlab.course.ch03_mappings import widgets as ch03_widgets
from attnlab.data import dates
from attnlab.registry import Registry, UnknownName
from attnlab.structured import by_name
from attnlab.transformer import layers


def test_register_get_names_and_the_error():
    r: Registry[int] = Registry("colour", {"red": 1})
    assert r.register("green", 2) == 2

    @r.register("blue")
    def blue() -> int:
        return 3

    assert r.get("red") == 1 and r["green"] == 2 and r.get("blue") is blue
    assert r.names() == ("red", "green", "blue") and list(r) == list(r.names())
    assert "red" in r and "pink" not in r and [] not in r and len(r) == 3
    with pytest.raises(UnknownName) as err:
        r.get("pink")
    assert str(err.value) == "unknown colour 'pink'; choose one of red, green, blue"
    assert isinstance(err.value, ValueError) and isinstance(err.value, KeyError)
    with pytest.raises(KeyError, match="unknown colour 'pink'"):  # as a dict would
        r["pink"]
    with pytest.raises(ValueError, match=r"unknown colour \[\]"):  # unhashable
        r.get([])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="'red' is registered already"):
        r.register("red", 4)
    with pytest.raises(TypeError, match="non-empty strings"):
        r.register("", 5)
    with_else = Registry("activation", {"relu": F.relu}, otherwise="a callable")
    with pytest.raises(ValueError, match=r"choose one of relu, or a callable$"):
        with_else.get("tanh")


# (registry, the function that reads it, a bad call, the names the error lists)
WRAPPERS = [
    (
        scoring.SCORERS,
        lambda: scoring.get_scorer("cosine"),
        "unknown scorer 'cosine'; choose one of dot, scaled_dot, bilinear, additive, mlp",
    ),
    (
        positional.POSITIONAL_ENCODINGS,
        lambda: attnlab.get_positional("rope", 8),
        "unknown positional encoding 'rope'; choose one of sinusoidal, learned, none",
    ),
    (
        by_name.MAPPINGS,
        lambda: attnlab.get_mapping("entmax"),
        "unknown mapping 'entmax'; choose one of softmax, sparsemax, entmax15, "
        "fusedmax, gumbel, reinforce, structured",
    ),
    (
        layers.ACTIVATIONS,
        lambda: attnlab.TransformerEncoderLayer(8, 2, 16, activation="tanh"),
        "unknown activation 'tanh'; choose one of relu, gelu, or a callable",
    ),
    (
        dates.TASKS,
        lambda: attnlab.data.make_task("copy"),
        "unknown task 'copy'; choose one of reversal, date",
    ),
    (
        rationales.RATIONALE_TASKS,
        lambda: rationales.rationale_task("sentiment"),
        "unknown rationale task 'sentiment'; choose one of focus, count",
    ),
    (
        ch03_widgets.MAPPING_FUNCTIONS,
        lambda: ch03_widgets.apply_mapping(torch.zeros(3), "entmax15"),
        "unknown mapping 'entmax15'; choose one of softmax, sparsemax, entmax, "
        "fusedmax, argmax, sigmoid",
    ),
]


@pytest.mark.parametrize("registry, call, message", WRAPPERS)
def test_each_by_name_function_reads_its_registry(registry, call, message):
    assert isinstance(registry, Registry)
    with pytest.raises(ValueError) as err:
        call()
    assert str(err.value) == message
    assert all(name in str(err.value) for name in registry.names())


def test_old_names_stay_and_agree_with_the_registries():
    assert attnlab.structured.MAPPING_NAMES == by_name.MAPPINGS.names()
    assert attnlab.seq2seq.MAPPINGS == tuple(
        n for n in by_name.MAPPINGS.names() if n != "reinforce"
    )
    assert ch03_widgets.MAPPINGS == list(ch03_widgets.MAPPING_FUNCTIONS.names())
    assert sorted(attnlab.data.TASKS) == ["date", "reversal"]
    x = torch.ones(2, 3, 8)
    assert attnlab.get_positional("none", 8)(x) is x  # identity: no order information
    assert type(scoring.get_scorer("additive", 4, 6)) is scoring.AdditiveScore
    assert layers.ACTIVATIONS.get("gelu") is F.gelu
