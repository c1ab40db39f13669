"""The scalar half of the input contract, over every public package (chapters 12-14's
too: ``modern``, ``circuits``, ``models``, ``kvcompress``, ``speculative``,
``distributed``, ``efficient.routing``), their classes' constructors and methods.

The classes of bad input the probes found, one validator each in
:mod:`attnlab.validation`:

* a size annotated ``int`` given a float (``num_layers=2.0``, ``beam_size=2.5``):
  ``TypeError``/``ValueError`` naming it (:func:`~attnlab.validation.integer`);
  a NumPy int is accepted;
* a number annotated ``float`` given NaN or ``inf``: refused naming it; a NumPy
  float (``scale=np.float32(0.5)``) is accepted, a list refused
  (:func:`~attnlab.validation.real`);
* a ``dtype`` where floats are computed given an integer dtype:
  ``TypeError`` (:func:`~attnlab.validation.floating_dtype`);
* an empty prompt: ``ValueError`` (:func:`~attnlab.validation.nonempty`).

Each public callable taking such a parameter has a valid call here (or in
``tests/test_contract.py``'s ``EXAMPLES``, reused) and its valid call's output shape is
asserted; the ones not probed yet are listed in :data:`NOT_PROBED` with the reason, and
:func:`test_every_public_scalar_parameter_is_probed_or_listed` fails for a new one.
"""

from __future__ import annotations

import importlib
import inspect
import math
import pkgutil
import re
import typing
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pytest
import torch
from test_contract import EXAMPLES as TENSOR_EXAMPLES

import attnlab
from attnlab import circuits, decoding, positional, seeding
from attnlab.distributed import ring_bytes_per_rank
from attnlab.modern import Attention, LatentAttention, RoPE, alibi_bias, alibi_slopes

COURSE = ("attnlab.course", "attnlab.check", "attnlab.widgets", "attnlab.grade")


def public_modules() -> list[str]:
    """Every module and package of the library (``pkgutil.walk_packages``), not the
    course's scaffolding, not a private module."""
    names = ["attnlab"]
    for m in pkgutil.walk_packages(attnlab.__path__, "attnlab."):
        last = m.name.rsplit(".", 1)[-1]
        if m.name.startswith(COURSE) or last.startswith("_") or last == "results":
            continue
        names.append(m.name)
    return names


KINDS = {  # annotation (as typing prints it) -> the kind of scalar
    "int": "int",
    "int | None": "int",
    "typing.Optional[int]": "int",
    "float": "float",
    "float | None": "float",
    "typing.Optional[float]": "float",
}


def _kind(annotation) -> str | None:
    text = re.sub(r"<class '(\w+)'>", r"\1", str(annotation))
    if "dtype" in text and "Tensor" not in text:
        return "dtype"
    return KINDS.get(text)


def scalar_params(fn) -> dict[str, str]:
    try:
        hints = typing.get_type_hints(fn)
    except Exception:  # noqa: BLE001 - a forward reference we cannot resolve
        return {}
    out = {}
    for k, v in hints.items():
        kind = _kind(v)
        if k != "return" and kind:
            out[k] = kind
    return out


def public_scalar_callables() -> dict[str, Callable]:
    """``name`` or ``Class.method`` -> the function, for every public callable of
    every public module with a size, number or dtype parameter."""
    out: dict[str, Callable] = {}
    for modname in public_modules():
        mod = importlib.import_module(modname)
        for name in getattr(mod, "__all__", []):
            obj = getattr(mod, name, None)
            if inspect.isclass(obj):
                init = obj.__init__
                if "__init__" in vars(obj) or hasattr(obj, "__dataclass_fields__"):
                    if scalar_params(init):
                        out.setdefault(f"{name}.__init__", init)
                for mname, meth in vars(obj).items():
                    if mname.startswith("_") or not inspect.isfunction(meth):
                        continue
                    if scalar_params(meth):
                        out.setdefault(f"{name}.{mname}", meth)
            elif inspect.isfunction(obj) and scalar_params(obj):
                out.setdefault(name, obj)
    return out


# ------------------------------------------------------------------ valid calls
@dataclass
class Call:
    fn: Callable
    kwargs: dict
    shape: tuple | None = None  # the output's shape (the first tensor's)
    allow_inf: set[str] = field(default_factory=set)  # inf is meaningful here


def rn(*shape, dtype=torch.float32):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(0), dtype=dtype)


def _step(prefix):  # (B, t) -> (B, V): a fixed next-token distribution
    return torch.log_softmax(torch.arange(5.0).expand(prefix.shape[0], 5), -1)


D, H = 8, 2
EXAMPLES: dict[str, Callable[[], Call]] = {
    # chapter 13: the 2026 attention layer
    "Attention.__init__": lambda: Call(
        lambda **kw: Attention(**kw)(rn(2, 3, D)),
        dict(
            embed_dim=D,
            num_heads=H,
            num_kv_heads=1,
            softcap=2.0,
            window=2,
            scale=0.5,
            norm_eps=1e-6,
            head_dim=4,
        ),
        (2, 3, D),
    ),  # fmt: skip
    "LatentAttention.__init__": lambda: Call(
        lambda **kw: LatentAttention(**kw)(rn(2, 3, D)),
        dict(
            embed_dim=D,
            num_heads=H,
            kv_rank=4,
            q_rank=6,
            nope_dim=2,
            rope_dim=2,
            v_dim=3,
            scale=0.5,
            norm_eps=1e-6,
        ),
        (2, 3, D),
    ),  # fmt: skip
    "RoPE.__init__": lambda: Call(
        lambda **kw: RoPE(**kw)(rn(1, 2, 3, 4), torch.arange(3)),
        dict(base=10000.0, fraction=1.0),
        (1, 2, 3, 4),
    ),
    "RoPE.rotary_dim": lambda: Call(RoPE().rotary_dim, dict(d_head=8)),
    "RoPE.cos_sin": lambda: Call(
        RoPE().cos_sin,
        dict(positions=torch.arange(3), d_head=8, dtype=torch.float32),
        (3, 4),
    ),
    "RoPE.frequencies": lambda: Call(
        RoPE().frequencies,
        dict(d=8, device=torch.device("cpu"), dtype=torch.float32, length=0),
        (4,),
    ),
    "RoPE.angles": lambda: Call(
        RoPE().angles, dict(positions=torch.arange(3), d=8, dtype=torch.float64), (3, 4)
    ),
    "rope_frequencies": lambda: Call(
        attnlab.modern.rope_frequencies, dict(d=8, base=100.0, length=0), (4,)
    ),
    "alibi_slopes": lambda: Call(alibi_slopes, dict(n_heads=3), (3,)),
    "alibi_bias": lambda: Call(
        alibi_bias,
        dict(n_heads=2, q_pos=torch.arange(3), k_pos=torch.arange(4)),
        (2, 3, 4),
    ),
    # chapter 12: circuits
    "repeated_tokens": lambda: Call(
        circuits.repeated_tokens,
        dict(n_seqs=3, half=4, vocab_size=7, min_half=2),
        (3, 9),
    ),
    "InductionConfig.__init__": lambda: Call(
        lambda **kw: circuits.AttentionOnly(circuits.InductionConfig(**kw))(
            torch.zeros(2, 5, dtype=torch.long)
        ),
        dict(
            vocab_size=7,
            half=3,
            d_model=8,
            n_heads=2,
            n_layers=2,
            steps=3,
            batch=2,
            lr=1e-3,
            eval_every=1,
            n_eval=2,
        ),
        (2, 5, 7),
    ),  # fmt: skip
    "RMSNorm.__init__": lambda: Call(
        lambda **kw: attnlab.modern.RMSNorm(**kw)(rn(2, 3)),
        dict(dim=3, eps=1e-6),
        (2, 3),
    ),
    "copy_masks": lambda: Call(
        circuits.copy_masks, dict(n=torch.tensor([2, 3]), T=7), (2, 6)
    ),
    # positions
    "get_positional": lambda: Call(
        lambda **kw: positional.get_positional(**kw)(rn(2, 3, 6)),
        dict(kind="sinusoidal", d_model=6, max_len=8),
        (2, 3, 6),
    ),
    "sinusoidal_encoding": lambda: Call(
        positional.sinusoidal_encoding,
        dict(n_positions=5, d_model=6, base=100.0, dtype=torch.float32),
        (5, 6),
    ),
    "relative_shift_matrix": lambda: Call(
        positional.relative_shift_matrix,
        dict(k=2, d_model=6, base=100.0, dtype=torch.float32),
        (6, 6),
    ),
    "apply_rotary": lambda: Call(
        positional.apply_rotary, dict(x=rn(2, 3, 4), offset=1, base=100.0), (2, 3, 4)
    ),
    "SinusoidalPositionalEncoding.__init__": lambda: Call(
        lambda **kw: positional.SinusoidalPositionalEncoding(**kw)(rn(2, 3, 6)),
        dict(d_model=6, max_len=8, base=100.0),
        (2, 3, 6),
    ),
    "SinusoidalPositionalEncoding.table": lambda: Call(
        positional.SinusoidalPositionalEncoding(6, 8).table,
        dict(n_positions=4, like=rn(1)),
        (4, 6),
    ),
    "SinusoidalPositionalEncoding.forward": lambda: Call(
        positional.SinusoidalPositionalEncoding(6, 8).forward,
        dict(x=rn(2, 3, 6), offset=2),
        (2, 3, 6),
    ),
    "LearnedPositionalEncoding.forward": lambda: Call(
        positional.LearnedPositionalEncoding(6, 8).forward,
        dict(x=rn(2, 3, 6), offset=2),
        (2, 3, 6),
    ),
    "LearnedPositionalEncoding.__init__": lambda: Call(
        lambda **kw: positional.LearnedPositionalEncoding(**kw)(rn(2, 3, 6)),
        dict(d_model=6, max_len=8),
        (2, 3, 6),
    ),
    # decoding
    "generate": lambda: Call(
        decoding.generate,
        dict(
            step=_step,
            prompt=torch.zeros(2, 1, dtype=torch.long),
            n_new=3,
            temperature=0.0,
        ),
        (2, 4),
    ),  # fmt: skip
    "greedy_decode": lambda: Call(
        decoding.greedy_decode,
        dict(step=_step, batch_size=2, bos_id=0, eos_id=9, max_len=3, pad_id=0),
        (2, 3),
    ),
    "beam_search": lambda: Call(
        decoding.beam_search,
        dict(step=_step, bos_id=0, eos_id=4, beam_size=2, max_len=3, alpha=0.6),
    ),
    "length_penalty": lambda: Call(decoding.length_penalty, dict(length=3, alpha=0.6)),
    # masks and the rest of the core
    "causal_mask": lambda: Call(attnlab.causal_mask, dict(T=3, S=4), (3, 4)),
    "band_mask": lambda: Call(attnlab.band_mask, dict(T=3, S=4, window=1), (3, 4)),
    "padding_mask": lambda: Call(
        attnlab.padding_mask, dict(lengths=[1, 3], S=4), (2, 4)
    ),
    "streaming_mask": lambda: Call(
        attnlab.masking.streaming_mask, dict(T=4, window=2, n_sink=1), (4, 4)
    ),
    "ring_bytes_per_rank": lambda: Call(
        ring_bytes_per_rank, dict(k=rn(1, 4, 2), v=rn(1, 4, 2), world_size=2)
    ),
    # ATTNLAB_SEED's home: every seed and shift an int (a NumPy int too), never 2.5
    "live_seed": lambda: Call(
        lambda **kw: torch.tensor(seeding.live_seed(**kw)), dict(seed=3, shift=1), ()
    ),
    "manual_seed": lambda: Call(
        lambda **kw: torch.tensor(seeding.manual_seed(**kw)), dict(seed=3, shift=1), ()
    ),
    "seed_everything": lambda: Call(
        lambda **kw: torch.tensor(seeding.seed_everything(**kw)),
        dict(seed=3, shift=1),
        (),
    ),
    "generator": lambda: Call(
        lambda **kw: torch.rand(2, generator=seeding.generator(**kw)),
        dict(seed=3, shift=1),
        (2,),
    ),
    "numpy_rng": lambda: Call(
        lambda **kw: torch.tensor(seeding.numpy_rng(**kw).random()),
        dict(seed=3, shift=1),
        (),
    ),
    "python_rng": lambda: Call(
        lambda **kw: torch.tensor(seeding.python_rng(**kw).random()),
        dict(seed=3, shift=1),
        (),
    ),
    "MultiHeadAttention.__init__": lambda: Call(
        lambda **kw: attnlab.MultiHeadAttention(**kw)(
            rn(2, 3, 8), rn(2, 3, 8), rn(2, 3, 8)
        )[0],
        dict(d_model=8, n_heads=2, dropout=0.0, kdim=8, vdim=8),
        (2, 3, 8),
    ),  # fmt: skip
}

# The public callables with a scalar parameter that this file does not probe yet, each
# with its reason: the list may only shrink (a new public function needs a valid call
# above, or a line here saying why not).
NOT_PROBED_PREFIXES = {
    "mappings, train losses and schedules, data streams, explain, kvcompress, models, "
    "speculative, serving, structured, scoring, transformer, seq2seq, classifiers, "
    "lookup, rationales, pretrained, notebook, devices, kernels, validation": (
        "attnlab.mappings", "attnlab.train", "attnlab.data", "attnlab.explain",
        "attnlab.kvcompress", "attnlab.models", "attnlab.speculative",
        "attnlab.serving", "attnlab.structured", "attnlab.scoring",
        "attnlab.transformer", "attnlab.seq2seq", "attnlab.classifiers",
        "attnlab.lookup", "attnlab.rationales", "attnlab.pretrained",
        "attnlab.notebook", "attnlab.devices", "attnlab.kernels",
        "attnlab.validation", "attnlab.random_features", "attnlab.gated",
        "attnlab.efficient", "attnlab.kvcache", "attnlab.modern.lab",
        "attnlab.modern.hf", "attnlab.toys", "attnlab.plotting", "attnlab.vocab",
        "attnlab.registry",
    ),
}  # fmt: skip
NOT_PROBED_REASON = next(iter(NOT_PROBED_PREFIXES))
NOT_PROBED = {  # single names in the modules probed above
    "ring_attention": "spawns processes; its scalars: tests/test_ring.py",
    "train_induction": "trains a model; InductionConfig's sizes are probed above",
    "canonical_mask": "the MHA's own helper (its dtype is the scores'), through MHA",
    "combine_masks": "variadic masks; tests/test_masking.py",
}


def _module_of(fn) -> str:
    return getattr(fn, "__module__", "") or ""


def test_every_public_scalar_parameter_is_probed_or_listed():
    found = public_scalar_callables()
    assert len(found) > 100  # the walk reaches the subpackages (it is not vacuous)
    assert {"Attention.__init__", "RoPE.__init__", "repeated_tokens"} <= set(found)
    prefixes = next(iter(NOT_PROBED_PREFIXES.values()))
    missing = sorted(
        n
        for n, fn in found.items()
        if n not in EXAMPLES
        and n not in TENSOR_EXAMPLES
        and n not in NOT_PROBED
        and not any(
            _module_of(fn) == p or _module_of(fn).startswith(p + ".") for p in prefixes
        )
    )
    assert not missing, f"public, takes a scalar, not probed nor listed: {missing}"
    stale = sorted(set(EXAMPLES) - set(found))
    assert not stale, f"examples of names that are not public callables: {stale}"


def _run(fn, kwargs):
    torch.manual_seed(0)  # a constructor's weights, a generator's draws: the same
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with torch.no_grad():
            return fn(**kwargs)


def _first_tensor(out):
    if isinstance(out, torch.Tensor):
        return out
    if isinstance(out, (tuple, list)):
        for o in out:
            t = _first_tensor(o)
            if t is not None:
                return t
    return None


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_the_valid_call_gives_its_shape(name):
    call = EXAMPLES[name]()
    out = _run(call.fn, call.kwargs)
    if call.shape is not None:
        t = _first_tensor(out)
        assert t is not None and tuple(t.shape) == call.shape, (name, out)


def _names(msg: str, arg: str) -> bool:
    return (
        re.search(rf"(?<![A-Za-z0-9_]){re.escape(arg)}(?![A-Za-z0-9_])", msg)
        is not None
    )


def _refused(name: str, call: Call, arg: str, bad, what: str) -> None:
    try:
        _run(call.fn, {**call.kwargs, arg: bad})
    except (TypeError, ValueError) as e:
        assert _names(str(e), arg), f"{name}({arg}={what}): does not name {arg}: {e}"
        return
    except Exception as e:  # noqa: BLE001 - anything else is a defect
        pytest.fail(f"{name}({arg}={what}): {type(e).__name__} from inside: {e}")
    pytest.fail(f"{name}({arg}={what}) was accepted")


def _accepted(name: str, call: Call, arg: str, good, what: str) -> None:
    try:
        out = _run(call.fn, {**call.kwargs, arg: good})
    except Exception as e:  # noqa: BLE001
        pytest.fail(f"{name}({arg}={what}) refused: {type(e).__name__}: {e}")
    ref = _run(call.fn, call.kwargs)
    a, b = _first_tensor(out), _first_tensor(ref)
    if a is not None and b is not None and a.shape == b.shape:
        torch.testing.assert_close(a, b, msg=f"{name}({arg}={what})")


PROBES = [
    (name, arg, kind)
    for name in sorted(EXAMPLES)
    for arg, kind in scalar_params(
        public_scalar_callables().get(name, lambda: None)
    ).items()
    if arg in EXAMPLES[name]().kwargs
]


def test_the_examples_set_the_scalars_they_probe():
    """Every scalar parameter of an example's callable is in its kwargs (else it
    would go unprobed): a size, a number or a dtype."""
    found = public_scalar_callables()
    unset = [
        f"{n}.{a}"
        for n in EXAMPLES
        for a in scalar_params(found[n])
        if a not in EXAMPLES[n]().kwargs
        and a not in ("device", "generator", "return_weights")
    ]
    assert not unset, unset


@pytest.mark.parametrize(
    "name, arg, kind", PROBES, ids=[f"{n}-{a}" for n, a, _ in PROBES]
)
def test_each_class_of_bad_scalar(name, arg, kind):
    call = EXAMPLES[name]()
    good = call.kwargs[arg]
    if kind == "int":
        _refused(name, call, arg, 2.5, "2.5")
        if isinstance(good, int) and not isinstance(good, bool):
            _refused(name, call, arg, float(good), f"{float(good)}")  # 2.0 too
            _accepted(name, call, arg, np.int64(good), "np.int64")
    elif kind == "float":
        _refused(name, call, arg, float("nan"), "nan")
        if arg not in call.allow_inf:
            _refused(name, call, arg, math.inf, "inf")
        _refused(name, call, arg, [good if good is not None else 0.5], "a list")
        if good is not None:
            _accepted(name, call, arg, np.float32(good), "np.float32")
            _accepted(name, call, arg, np.float64(good), "np.float64")
    elif kind == "dtype":
        _refused(name, call, arg, torch.int64, "torch.int64")
        _refused(name, call, arg, torch.bool, "torch.bool")


def test_an_empty_prompt_is_refused():
    with pytest.raises(ValueError, match="prompt"):
        decoding.generate(_step, torch.zeros(2, 0, dtype=torch.long), 3)
