"""The input contract, generated from the public API (``attnlab.__all__`` and the
subpackages' ``__all__``; not ``attnlab.course``), driven by the annotations.

Every public callable (function, or ``nn.Module``'s ``forward``) with a parameter
annotated ``torch.Tensor`` must have a valid call in :data:`EXAMPLES` (or a reason in
:data:`NOT_HERE`): a function exported tomorrow fails
:func:`test_every_public_tensor_function_has_an_example` until it is covered. For each
example and each tensor argument, hypothesis draws a bad value (a list, a NumPy array,
the wrong dtype, rank or size, NaN, inf, a non-contiguous or stride-0 view, 16-bit
floats); the call must give the reference's result (the same call on a contiguous
float32 copy) or raise a ``TypeError``/``ValueError`` whose message names the argument.
A list or a NumPy array must always be refused (``TypeError``), as PyTorch refuses one.
Double backward (float64) matches finite differences or raises an explicit error.
Bounded: ``derandomize=True``, a few examples per argument, well under 60 s.
"""

from __future__ import annotations

import importlib
import inspect
import re
import typing
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch import nn

import attnlab
import attnlab.distributed
import attnlab.efficient.routing
import attnlab.gated
import attnlab.kvcompress
import attnlab.lookup
import attnlab.models
import attnlab.modern
import attnlab.random_features
import attnlab.scoring
import attnlab.serving
import attnlab.speculative
from attnlab import circuits, explain

PUBLIC = [
    "attnlab",
    "attnlab.attention",
    "attnlab.decoding",
    "attnlab.efficient",
    "attnlab.explain",
    "attnlab.gated",
    "attnlab.kvcache",
    "attnlab.mappings",
    "attnlab.masking",
    "attnlab.multihead",
    "attnlab.positional",
    "attnlab.random_features",
    "attnlab.scoring",
    "attnlab.serving",
    "attnlab.structured",
    "attnlab.transformer",
    "attnlab.train",
    "attnlab.seq2seq",
    "attnlab.classifiers",
    "attnlab.lookup",
    "attnlab.pretrained",
    "attnlab.models",
    "attnlab.speculative",
    "attnlab.kvcompress",
    "attnlab.distributed",
    "attnlab.modern",  # chapter 13
    "attnlab.circuits",  # chapter 12
    "attnlab.efficient.routing",  # chapter 14
]


def _target(obj):
    if inspect.isclass(obj) and issubclass(obj, nn.Module):
        return obj.forward
    return obj if inspect.isfunction(obj) else None


def tensor_params(fn) -> list[str]:
    """The parameters of ``fn`` annotated with ``torch.Tensor`` (alone or in a union)."""
    hints = typing.get_type_hints(fn)
    return [
        k for k, v in hints.items() if k != "return" and re.search(r"Tensor", str(v))
    ]


def public_tensor_callables() -> dict[str, Callable]:
    out: dict[str, Callable] = {}
    for modname in PUBLIC:
        mod = importlib.import_module(modname)
        for name in mod.__all__:
            obj = getattr(mod, name)
            target = _target(obj)
            if target is None or not tensor_params(target):
                continue
            out.setdefault(name, obj)
    return out


# ------------------------------------------------------------------ valid calls
g = torch.Generator().manual_seed(0)


def rn(*shape, dtype=torch.float32):
    return torch.randn(*shape, generator=g, dtype=dtype)


def probs(*shape):
    return rn(*shape).softmax(-1)


@dataclass
class Call:
    fn: Callable
    kwargs: dict
    diff: list[str] = field(default_factory=list)  # double-backward arguments


def _mha():
    return attnlab.MultiHeadAttention(8, 2).eval()


def _modern():
    torch.manual_seed(0)
    return attnlab.modern.Attention(8, 2, 1, rope=attnlab.modern.RoPE()).eval()


def _latent():
    torch.manual_seed(0)
    return attnlab.modern.LatentAttention(
        8, 2, kv_rank=4, nope_dim=2, rope_dim=2, v_dim=3
    ).eval()


def _induction():
    torch.manual_seed(0)
    cfg = circuits.InductionConfig(vocab_size=7, half=3, d_model=8, n_heads=2)
    return circuits.AttentionOnly(cfg).eval()


def _ids(b, t):
    return torch.randint(0, 7, (b, t), generator=g)


def _shipped_lm():
    return attnlab.models.load_lm("draft")


def _lm():
    cfg = attnlab.TransformerConfig(
        src_vocab=11, tgt_vocab=11, d_model=8, n_heads=2, d_ff=16, dropout=0.0
    )
    return attnlab.TransformerLM(cfg).eval()


B, H, T, S, D = 2, 2, 3, 4, 8
EXAMPLES: dict[str, Callable[[], Call]] = {
    # the recipe
    "attend": lambda: Call(
        attnlab.attend, dict(q=rn(B, T, D), k=rn(B, S, D), v=rn(B, S, 5)), ["q"]
    ),
    "scaled_dot_product_attention": lambda: Call(
        attnlab.scaled_dot_product_attention,
        dict(q=rn(B, H, T, D), k=rn(B, H, S, D), v=rn(B, H, S, 5)),
        ["q", "k", "v"],
    ),
    # chapters 12-14
    "Attention": lambda: Call(_modern(), dict(x=rn(B, T, D))),
    "LatentAttention": lambda: Call(_latent(), dict(x=rn(B, T, D))),
    "RMSNorm": lambda: Call(attnlab.modern.RMSNorm(D), dict(x=rn(B, T, D)), ["x"]),
    "RoPE": lambda: Call(
        attnlab.modern.RoPE(), dict(x=rn(B, H, T, 4), positions=torch.arange(T)), ["x"]
    ),
    "alibi_bias": lambda: Call(
        attnlab.modern.alibi_bias,
        dict(n_heads=H, q_pos=torch.arange(T), k_pos=torch.arange(S)),
    ),
    "AttentionOnly": lambda: Call(_induction(), dict(ids=_ids(B, 5))),
    "copy_losses": lambda: Call(
        circuits.copy_losses,
        dict(logits=rn(2, 7, 7), ids=_ids(2, 7), n=torch.tensor([2, 3])),
    ),
    "copy_masks": lambda: Call(circuits.copy_masks, dict(n=torch.tensor([2, 3]), T=7)),
    "head_scores": lambda: Call(
        circuits.head_scores,
        dict(weights=probs(2, H, 5, 5), ids=_ids(2, 5), kind="previous"),
    ),
    "pattern_mask": lambda: Call(
        circuits.pattern_mask, dict(ids=_ids(2, 5), kind="induction")
    ),
    "split_of": lambda: Call(
        circuits.split_of, dict(ids=_ids(2, 7), n=torch.tensor([2, 3]))
    ),
    "route_blocks": lambda: Call(
        attnlab.efficient.routing.route_blocks,
        dict(q=rn(B, 8, 4), k=rn(B, 8, 4), block_size=4, top_k=1),
    ),
    "MultiHeadAttention": lambda: Call(
        _mha(), dict(query=rn(B, T, D), key=rn(B, S, D), value=rn(B, S, D))
    ),
    "flash_attention": lambda: Call(
        attnlab.flash_attention, dict(q=rn(B, T, D), k=rn(B, S, D), v=rn(B, S, D))
    ),
    "sliding_window_attention": lambda: Call(
        attnlab.sliding_window_attention,
        dict(q=rn(B, T, D), k=rn(B, S, D), v=rn(B, S, D), window=1),
    ),
    "linear_attention": lambda: Call(
        attnlab.linear_attention, dict(q=rn(B, T, D), k=rn(B, S, D), v=rn(B, S, D))
    ),
    "block_routed_attention": lambda: Call(
        attnlab.efficient.block_routed_attention,
        dict(q=rn(B, T, D), k=rn(B, T, D), v=rn(B, T, D), block_size=2, top_k=2),
    ),
    "elu_feature_map": lambda: Call(attnlab.elu_feature_map, dict(x=rn(B, T, D))),
    # mappings
    **{
        name: (lambda name=name: Call(getattr(attnlab, name), dict(x=rn(B, 5)), ["x"]))
        for name in ("softmax", "sparsemax", "entmax15", "normmax_bisect", "sigmoid")
    },
    "argmax": lambda: Call(attnlab.argmax, dict(x=rn(B, 5))),
    "entmax_bisect": lambda: Call(
        attnlab.entmax_bisect, dict(x=rn(B, 5), alpha=torch.tensor(1.5)), ["x"]
    ),
    "fusedmax": lambda: Call(attnlab.fusedmax, dict(x=rn(B, 5)), ["x"]),
    **{
        name: (lambda name=name: Call(getattr(attnlab, name)(), dict(x=rn(B, 5))))
        for name in (
            "Softmax",
            "Sparsemax",
            "Entmax15",
            "EntmaxBisect",
            "Fusedmax",
            "NormmaxBisect",
        )
    },
    # masks
    "to_additive": lambda: Call(attnlab.to_additive, dict(mask=torch.rand(T, S) > 0.3)),
    "apply_mask": lambda: Call(
        attnlab.apply_mask, dict(scores=rn(B, T, S), mask=torch.rand(T, S) > 0.3)
    ),
    "check_mask": lambda: Call(
        attnlab.check_mask, dict(mask=torch.rand(T, S) > 0.3, scores=rn(B, T, S))
    ),
    "fully_masked_rows": lambda: Call(
        attnlab.fully_masked_rows, dict(scores=rn(B, T, S))
    ),
    "warn_if_nothing_attended": lambda: Call(
        attnlab.warn_if_nothing_attended, dict(mask=torch.ones(B, S, dtype=torch.bool))
    ),
    # positions
    "apply_rotary": lambda: Call(attnlab.apply_rotary, dict(x=rn(B, T, D))),
    "SinusoidalPositionalEncoding": lambda: Call(
        attnlab.SinusoidalPositionalEncoding(D), dict(x=rn(B, T, D))
    ),
    "LearnedPositionalEncoding": lambda: Call(
        attnlab.LearnedPositionalEncoding(D, 16), dict(x=rn(B, T, D))
    ),
    # structured
    "linear_chain_log_partition": lambda: Call(
        attnlab.linear_chain_log_partition,
        dict(unary=rn(B, T, 3), transition=rn(3, 3)),
    ),
    "linear_chain_marginals": lambda: Call(
        attnlab.linear_chain_marginals, dict(unary=rn(B, T, 3), transition=rn(3, 3))
    ),
    "segmentation_marginals": lambda: Call(
        attnlab.segmentation_marginals, dict(scores=rn(B, 5), transition=rn(2, 2))
    ),
    # transformer
    "TransformerEncoderLayer": lambda: Call(
        attnlab.TransformerEncoderLayer(D, 2, 16, 0.0).eval(), dict(src=rn(B, T, D))
    ),
    "TransformerDecoderLayer": lambda: Call(
        attnlab.TransformerDecoderLayer(D, 2, 16, 0.0).eval(),
        dict(tgt=rn(B, T, D), memory=rn(B, S, D)),
    ),
    "TransformerEncoder": lambda: Call(
        attnlab.TransformerEncoder(attnlab.TransformerEncoderLayer(D, 2, 16, 0.0), 2),
        dict(src=rn(B, T, D)),
    ),
    "TransformerDecoder": lambda: Call(
        attnlab.TransformerDecoder(attnlab.TransformerDecoderLayer(D, 2, 16, 0.0), 2),
        dict(tgt=rn(B, T, D), memory=rn(B, S, D)),
    ),
    "TransformerLM": lambda: Call(_lm(), dict(ids=torch.randint(0, 11, (B, T)))),
    "Seq2SeqTransformer": lambda: Call(
        attnlab.Seq2SeqTransformer(
            attnlab.TransformerConfig(
                src_vocab=11, tgt_vocab=11, d_model=8, n_heads=2, d_ff=16, dropout=0.0
            )
        ).eval(),
        dict(src=torch.randint(3, 11, (B, S)), tgt_in=torch.randint(3, 11, (B, T))),
    ),
    "padding_mask": lambda: Call(
        attnlab.padding_mask, dict(lengths=torch.tensor([3, 1]), S=4)
    ),
    # scoring
    "dot_score": lambda: Call(
        attnlab.scoring.dot_score, dict(q=rn(B, T, D), k=rn(B, S, D))
    ),
    "scaled_dot_score": lambda: Call(
        attnlab.scoring.scaled_dot_score, dict(q=rn(B, T, D), k=rn(B, S, D))
    ),
    "DotScore": lambda: Call(
        attnlab.scoring.DotScore(), dict(q=rn(B, T, D), k=rn(B, S, D))
    ),
    "ScaledDotScore": lambda: Call(
        attnlab.scoring.ScaledDotScore(), dict(q=rn(B, T, D), k=rn(B, S, D))
    ),
    "BilinearScore": lambda: Call(
        attnlab.scoring.BilinearScore(D, D), dict(q=rn(B, T, D), k=rn(B, S, D))
    ),
    "AdditiveScore": lambda: Call(
        attnlab.scoring.AdditiveScore(D, D, 6), dict(q=rn(B, T, D), k=rn(B, S, D))
    ),
    "MLPScore": lambda: Call(
        attnlab.scoring.MLPScore(D, D, 6), dict(q=rn(B, T, D), k=rn(B, S, D))
    ),
    # explain
    "jsd": lambda: Call(explain.jsd, dict(p=probs(B, 5), q=probs(B, 5))),
    "kendall_tau": lambda: Call(explain.kendall_tau, dict(a=rn(B, 5), b=rn(B, 5))),
    "spearman": lambda: Call(explain.spearman, dict(a=rn(B, 5), b=rn(B, 5))),
    "residual_attention": lambda: Call(
        explain.residual_attention, dict(attentions=[probs(B, H, T, T)] * 2)
    ),
    "attention_rollout": lambda: Call(
        explain.attention_rollout, dict(attentions=[probs(B, H, T, T)] * 2)
    ),
    "deception_penalty": lambda: Call(
        explain.deception_penalty,
        dict(weights=probs(B, 5), impermissible=torch.rand(B, 5) > 0.5),
    ),
    # serving, random features, training
    "repeat_kv": lambda: Call(
        attnlab.serving.repeat_kv, dict(x=rn(B, 1, S, D), n_heads=2)
    ),
    "positive_random_features": lambda: Call(
        attnlab.random_features.positive_random_features,
        dict(x=rn(B, T, D), w=rn(6, D)),
    ),
    "random_feature_attention": lambda: Call(
        attnlab.random_features.random_feature_attention,
        dict(q=rn(B, T, D), k=rn(B, S, D), v=rn(B, S, D), w=rn(6, D)),
    ),
    "token_loss": lambda: Call(
        attnlab.token_loss,
        dict(logits=rn(B, T, 7), targets=torch.randint(1, 7, (B, T))),
    ),
    "gated_linear_attention": lambda: Call(
        attnlab.gated.gated_linear_attention,
        dict(q=rn(B, T, D), k=rn(B, T, D), v=rn(B, T, D), log_gate=-rn(B, T).abs()),
    ),
    # chapter 14: the shipped LM and speculative decoding's rule
    "CausalLM": lambda: Call(_shipped_lm(), dict(ids=torch.randint(0, 29, (B, T)))),
    "per_token_loss": lambda: Call(
        attnlab.models.per_token_loss,
        dict(model=_shipped_lm(), ids=torch.randint(0, 29, (B, T))),
    ),
    # chapter 14: cache compression and ring attention's bytes
    "keep_h2o": lambda: Call(
        attnlab.kvcompress.keep_h2o, dict(scores=rn(B, H, 6).abs(), budget=4, recent=2)
    ),
    "keep_snapkv": lambda: Call(
        attnlab.kvcompress.keep_snapkv,
        dict(obs_weights=probs(B, H, 2, 6), budget=4, pool=3),
    ),
    "keep_tova": lambda: Call(
        attnlab.kvcompress.keep_tova, dict(weights=probs(B, H, 6), budget=4)
    ),
    "quantize": lambda: Call(
        attnlab.kvcompress.quantize, dict(x=rn(B, 6, D), bits=4, per="token")
    ),
    "fake_quantize": lambda: Call(
        attnlab.kvcompress.fake_quantize, dict(x=rn(B, 6, D), bits=4, per="channel")
    ),
    "dequantize": lambda: Call(
        attnlab.kvcompress.dequantize,
        dict(
            codes=torch.randint(0, 16, (B, 6, D), dtype=torch.uint8),
            scale=rn(B, 6, 1).abs() + 0.1,
            zero=rn(B, 6, 1),
        ),
    ),
    "channel_outliers": lambda: Call(
        attnlab.kvcompress.channel_outliers, dict(keys=rn(B, 6, D))
    ),
    "ring_bytes_per_rank": lambda: Call(
        attnlab.distributed.ring_bytes_per_rank,
        dict(k=rn(B, H, 4, D), v=rn(B, H, 4, D), world_size=2),
    ),
    "verify_with_uniforms": lambda: Call(
        attnlab.speculative.verify_with_uniforms,
        dict(
            target_probs=probs(B, 4, 6),
            draft_probs=probs(B, 3, 6),
            draft_tokens=torch.randint(0, 6, (B, 3)),
            u=torch.rand(B, 3, generator=g),
            v=torch.rand(B, generator=g),
        ),
    ),
}
NOT_HERE = {  # reason each public tensor function has no generated example
    "verify": "random; its contract: tests/test_speculative.py",
    "verify_batch": "random; its contract: tests/test_speculative.py",
    "speculative_generate": "random, takes two models; tests/test_speculative.py",
    "greedy_generate": "takes a model; tests/test_speculative.py",
    "evict_decode": "takes a model; tests/test_kvcompress.py",
    "lm_forward": "takes a model; tests/test_kvcompress.py",
    "ring_attention": "spawns processes (gloo); tests/test_ring.py",
    "greedy_decode": "takes a step callable; tests/test_seq2seq.py",
    "beam_search": "takes a step callable; tests/test_seq2seq.py",
    "generate": "takes a step callable; the decoders' ids: tests/test_contract_api.py",
    "generate_with_cache": "needs a model; its ids: tests/test_contract_api.py",
    "combine_masks": "variadic masks; tests/test_masking.py",
    "canonical_mask": "the MHA's own helper, covered through MultiHeadAttention",
    "enumerate_linear_chain": "exponential brute force; tests/test_structured.py",
    "SegmentationAttention": "tests/test_structured.py",
    "GumbelSoftmax": "random; tests/test_structured.py",
    "ReinforceSample": "random; tests/test_structured.py",
    "attention_flow": "scipy max-flow per example (slow); tests/test_explain_flow.py",
    "value_norm_attention": "tests/test_explain_norm.py",
    "residual_norm_attention": "tests/test_explain_residual.py",
    "residual_rollout": "tests/test_explain_residual.py",
    "gradient_importance": "takes a model callable; tests/test_explain.py",
    "leave_one_out": "takes a model callable; tests/test_explain.py",
    "rationale_recall": "tests/test_explain.py",
    "permutation_test": "takes a decoder callable; tests/test_explain.py",
    "adversarial_attention": "trains an adversary; tests/test_explain.py",
    "wp_adversary_loss": "tests/test_explain.py",
    "diagnostic_mlp": "trains a model; tests/test_explain.py",
    "weight_gradient": "takes a decoder callable; tests/test_explain.py",
    "erasure_test": "takes a decoder callable; tests/test_explain.py",
    "Encoder": "the GRU encoder inside Seq2Seq; tests/test_seq2seq.py",
    "Decoder": "the GRU decoder inside Seq2Seq; tests/test_seq2seq.py",
    "Seq2Seq": "ids: tests/test_contract_api.py and tests/test_seq2seq.py",
    "AttentionClassifier": "tests/test_classifiers.py",
    "TransformerClassifier": "tests/test_classifiers.py",
    "masked_softmax": "tests/test_classifiers.py",
    "bce_loss": "takes a model; tests/test_classifiers.py",
    "exact_match": "tests/test_train.py",
    "MiniLM": "needs the packaged weights; tests/test_pretrained.py",
    "eraser_scores": "needs MiniLM's packaged weights; tests/test_pretrained_faithfulness.py",
    "is_test": "tests/test_lookup.py",
    "LookupNet": "tests/test_lookup.py",
    "gated_linear_attention_rnn": "the recurrent form of gated_linear_attention",
    "logit_lens": "takes a model (explain interventions, i35); its own tests",
    "finite": "a validation helper (attnlab.validation)",
    "same_dtype": "a validation helper (attnlab.validation)",
    "distribution": "a validation helper (attnlab.validation)",
}


def test_every_public_tensor_function_has_an_example():
    missing = sorted(
        n for n in public_tensor_callables() if n not in EXAMPLES and n not in NOT_HERE
    )
    assert not missing, f"exported with a tensor argument but not covered: {missing}"
    stale = sorted(set(EXAMPLES) - set(public_tensor_callables()))
    assert not stale, f"examples of names that are not public any more: {stale}"


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_the_valid_call_works(name):
    call = EXAMPLES[name]()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        call.fn(**call.kwargs)


# -------------------------------------------------------------- the bad values
def _noncontig(t):
    out = torch.empty(*t.shape, 2, dtype=t.dtype)[..., 0]  # every other element
    out.copy_(t)
    return out


def _stride0(t):
    return t.reshape(-1)[:1].reshape((1,) * t.dim()).expand(t.shape)  # one value


def _with(t, value, index):
    t = t.clone()
    if t.numel():
        t.view(-1)[index % t.numel()] = value
    return t


def _other_dtype(t):
    if t.is_floating_point():
        return t.to(torch.int64)
    if t.dtype == torch.bool:
        return t.to(torch.int64)
    return t.to(torch.float32)


# name -> (how to make it, what must happen): "type" = TypeError naming the argument;
# "same" = the reference's result (same call on a contiguous float32 copy) or an
# error naming it; "any" = any result without NaN leaking where none came in, or an
# error naming it; "nan" = NaN allowed out (NaN in -> NaN out), or an error naming it
MUTATIONS: dict[str, tuple[Callable, str]] = {
    "list": (lambda t, i: t.tolist(), "type"),
    "ndarray": (lambda t, i: t.numpy(), "type"),
    "string": (lambda t, i: "0.5", "type"),
    "dtype": (lambda t, i: _other_dtype(t), "any"),
    "rank-": (lambda t, i: t[0] if t.dim() else t, "any"),
    "rank+": (lambda t, i: t[None], "any"),
    "scalar": (lambda t, i: torch.tensor(0.5), "any"),
    "empty": (lambda t, i: t[..., :0] if t.dim() else t, "any"),
    "nan": (
        lambda t, i: _with(t, float("nan"), i) if t.is_floating_point() else t,
        "nan",
    ),
    "inf": (
        lambda t, i: _with(t, float("inf"), i) if t.is_floating_point() else t,
        "nan",
    ),
    "noncontiguous": (lambda t, i: _noncontig(t), "same"),
    "stride0": (lambda t, i: _stride0(t), "same"),
    "float16": (lambda t, i: t.half() if t.is_floating_point() else t, "same16"),
    "bfloat16": (lambda t, i: t.bfloat16() if t.is_floating_point() else t, "same16"),
}


def _tensors(out) -> list[torch.Tensor]:
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in _tensors(o)]
    return []


def _names(msg: str, arg: str) -> bool:
    return (
        re.search(rf"(?<![A-Za-z0-9_]){re.escape(arg)}(?![A-Za-z0-9_])", msg)
        is not None
    )


def _run(fn, kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with torch.no_grad():
            return fn(**kwargs)


def _check(name: str, arg: str, mutation: str, index: int) -> None:
    call = EXAMPLES[name]()
    good = call.kwargs[arg]
    if isinstance(good, list):  # a list of tensors (rollout): mutate its first one
        make, want = MUTATIONS[mutation]
        bad = [make(good[0], index), *good[1:]]
        if want == "type" and mutation != "string":
            want = "any"  # an element that is a list is the argument's business
    else:
        make, want = MUTATIONS[mutation]
        bad = make(good, index)
        if good.dim() == 0 and mutation in ("list", "ndarray"):
            want = "any"  # a 0-d tensor's tolist() is a Python number: allowed
        if (name, arg) in SEQUENCE_OK and mutation in ("list", "ndarray"):
            want = "any"
    kwargs = {**call.kwargs, arg: bad}
    try:
        out = _run(call.fn, kwargs)
    except (TypeError, ValueError) as e:
        assert _names(str(e), arg), (
            f"{name}({arg}={mutation}): {type(e).__name__} does not name {arg!r}: {e}"
        )
        return
    except Exception as e:  # noqa: BLE001 - anything else is a defect
        pytest.fail(f"{name}({arg}={mutation}): {type(e).__name__} from inside: {e}")
    assert want != "type", f"{name}({arg}={mutation}) accepted a {mutation}"
    if want in ("same", "same16") and isinstance(good, torch.Tensor):
        ref_arg = bad.contiguous()  # the same values, a plain layout
        if want == "same16" and bad.is_floating_point():
            ref_arg = bad.float()  # the same values in float32
        ref = _run(call.fn, {**call.kwargs, arg: ref_arg})
        for a, b in zip(_tensors(out), _tensors(ref)):
            assert a.shape == b.shape, f"{name}({arg}={mutation}): shape {a.shape}"
            if a.is_floating_point():
                tol = 6e-2 if want == "same16" else 1e-5
                torch.testing.assert_close(
                    a.float(), b.float(), atol=tol, rtol=tol, equal_nan=True
                )
    if want != "nan" and name not in NAN_BY_DESIGN:  # no NaN made out of no NaN
        for t in _tensors(out):
            if t.is_floating_point():
                assert not bool(torch.isnan(t).any()), (
                    f"{name}({arg}={mutation}) returned NaN"
                )


SEQUENCE_OK = {  # annotated ``Tensor | Sequence[int]``, as PyTorch's counterparts
    ("padding_mask", "lengths"),  # pack_padded_sequence takes a list of lengths too
    ("kendall_tau", "a"),  # the rank correlations take array-likes, as scipy.stats
    ("kendall_tau", "b"),
    ("spearman", "a"),
    ("spearman", "b"),
}
NAN_BY_DESIGN = {  # documented NaN results
    "kendall_tau": "NaN where the correlation is undefined (a constant ranking)",
    "spearman": "NaN where the correlation is undefined (a constant ranking)",
}

CASES = [
    (name, arg)
    for name in sorted(EXAMPLES)
    for arg, val in EXAMPLES[name]().kwargs.items()
    if isinstance(val, torch.Tensor) or (isinstance(val, list) and val)
]

PROFILE = settings(
    max_examples=6,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)


@pytest.mark.parametrize("name, arg", CASES, ids=[f"{n}-{a}" for n, a in CASES])
def test_every_bad_value_of_every_tensor_argument(name, arg):
    """Each kind of bad value once (the NaN/inf at the first element)."""
    for mutation in MUTATIONS:
        _check(name, arg, mutation, 0)


@pytest.mark.parametrize("name, arg", CASES, ids=[f"{n}-{a}" for n, a in CASES])
@PROFILE
@given(mutation=st.sampled_from(sorted(MUTATIONS)), index=st.integers(0, 50))
def test_bad_tensor_arguments(name, arg, mutation, index):
    """hypothesis: the kind of bad value and where the NaN/inf sits."""
    _check(name, arg, mutation, index)


# --------------------------------------------------------------- double backward
DIFF = [(n, a) for n in sorted(EXAMPLES) for a in EXAMPLES[n]().diff]


@pytest.mark.parametrize("name, arg", DIFF, ids=[f"{n}-{a}" for n, a in DIFF])
def test_double_backward_matches_finite_differences_or_raises(name, arg):
    call = EXAMPLES[name]()
    x = call.kwargs[arg].double().requires_grad_(True)
    others = {
        k: (v.double() if isinstance(v, torch.Tensor) and v.is_floating_point() else v)
        for k, v in call.kwargs.items()
        if k != arg
    }

    def f(x):
        out = call.fn(**others, **{arg: x})
        return out[0] if isinstance(out, tuple) else out

    try:
        ok = torch.autograd.gradgradcheck(f, (x,), raise_exception=False)
    except RuntimeError as e:  # an explicit refusal is allowed, a wrong number not
        assert "differentiable" in str(e) or "double backward" in str(e), str(e)
        return
    assert ok, f"{name}: double backward with respect to {arg} is wrong"


# -------------------------------------------------------- scalars and switches
def test_numpy_scalars_are_accepted_where_torch_takes_them():
    q = rn(1, 3, 4)
    ref = attnlab.scaled_dot_product_attention(q, q, q, scale=0.5)[0]
    for scale in (np.float32(0.5), np.float64(0.5)):
        out = attnlab.scaled_dot_product_attention(q, q, q, scale=scale)[0]
        torch.testing.assert_close(out, ref)
    torch.testing.assert_close(attnlab.softmax(q, dim=np.int64(-1)), q.softmax(-1))
    assert attnlab.causal_mask(np.int64(3)).shape == (3, 3)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), "0.5", True])
def test_bad_scalars_are_refused_with_their_name(bad):
    q = rn(1, 3, 4)
    for fn in (attnlab.scaled_dot_product_attention, attnlab.flash_attention):
        with pytest.raises((TypeError, ValueError), match="scale"):
            fn(q, q, q, scale=bad)
    if bad != float("inf"):  # temperature = inf is allowed: uniform weights
        with pytest.raises((TypeError, ValueError), match="temperature"):
            attnlab.softmax(q, temperature=bad)


@pytest.mark.parametrize("bad", [1, "yes", None, 1.0])
def test_is_causal_must_be_a_bool(bad):
    q = rn(1, 3, 4)
    with pytest.raises(TypeError, match="is_causal"):
        attnlab.scaled_dot_product_attention(q, q, q, is_causal=bad)
    with pytest.raises(TypeError, match="is_causal"):
        _mha()(rn(1, 3, 8), rn(1, 3, 8), rn(1, 3, 8), is_causal=bad)
