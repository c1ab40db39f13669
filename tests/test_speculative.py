"""attnlab.speculative: the sampling rule is exact (its first token is distributed as
the target's, within the sampling noise of direct draws), greedy speculative decoding
equals the target's greedy output on the shipped LM, the cached block of k + 1 queries
equals a full forward, rollback restores a fresh cache, bad input fails loudly."""

from __future__ import annotations

import pytest
import torch

from attnlab.models import KVCache, load_lm
from attnlab.speculative import (
    greedy_generate,
    speculative_generate,
    verify,
    verify_batch,
)

N = 100_000


def _tv(counts: torch.Tensor, p: torch.Tensor) -> float:
    return 0.5 * float((counts.double() / counts.sum() - p.double()).abs().sum())


def _floor(p: torch.Tensor, n: int, g: torch.Generator, sets: int = 10) -> float:
    """The noise floor: the mean TV to p of ``sets`` sets of n direct draws from p."""
    V = p.shape[-1]
    draws = torch.multinomial(p.double(), n * sets, replacement=True, generator=g)
    return (
        sum(_tv(torch.bincount(d, minlength=V), p) for d in draws.view(sets, n)) / sets
    )


def _first_token_tv(p, q, seed=0):
    """TV of the first emitted token's empirical law (N drafts) to p[0], and the
    noise floor: TV of N direct draws from p[0]."""
    g = torch.Generator().manual_seed(seed)
    k, V = q.shape
    x = torch.multinomial(q, N, replacement=True, generator=g).T  # (N, k)
    tokens, j = verify_batch(
        p.expand(N, k + 1, V), q.expand(N, k, V), x.contiguous(), g
    )
    first = tokens[:, 0]
    tv = _tv(torch.bincount(first, minlength=V), p[0])
    return tv, _floor(p[0], N, g), j


@pytest.mark.parametrize(
    "case", ["random", "zeros", "q_equals_p", "disjoint", "peaked"]
)
def test_first_token_is_distributed_as_the_target(case):
    g = torch.Generator().manual_seed(1)
    k, V = 3, 12
    p = torch.softmax(2 * torch.randn(k + 1, V, generator=g), -1)
    q = torch.softmax(2 * torch.randn(k, V, generator=g), -1)
    if case == "zeros":  # p and q each put no mass on some tokens
        p[:, :3] = 0
        q[:, 2:6] = 0
    elif case == "q_equals_p":
        q = p[:k].clone()
    elif case == "disjoint":  # every draft token is rejected
        p[:, : V // 2] = 0
        q[:, V // 2 :] = 0
    elif case == "peaked":
        p = torch.softmax(8 * torch.randn(k + 1, V, generator=g), -1)
    p, q = p / p.sum(-1, keepdim=True), q / q.sum(-1, keepdim=True)
    tv, floor, j = _first_token_tv(p, q)
    assert tv < 3 * floor + 1e-3, (tv, floor)
    # the test has power: the draft's own law is far from the target's
    if case not in ("q_equals_p",):
        assert 0.5 * float((q[0] - p[0]).abs().sum()) > 10 * floor
    if case == "q_equals_p":
        assert bool((j == k).all())  # nothing is ever rejected
    if case == "disjoint":
        assert bool((j == 0).all())
    # acceptance of the first draft token: E[min(1, p/q)] = sum min(p, q)
    beta = float(torch.minimum(p[0], q[0]).sum())
    acc = float((j >= 1).double().mean())
    assert abs(acc - beta) < 5 * (beta * (1 - beta) / N) ** 0.5 + 1e-9


def test_second_token_given_acceptance_is_target():
    """Given x_1 accepted, the second emitted token follows p[1] (the target's
    distribution after x_1): rule exact beyond the first position too."""
    g = torch.Generator().manual_seed(2)
    k, V = 2, 6
    p = torch.softmax(torch.randn(k + 1, V, generator=g), -1)
    q = torch.softmax(torch.randn(k, V, generator=g), -1)
    q[0] = p[0]  # x_1 always accepted
    x = torch.multinomial(q, N, replacement=True, generator=g).T
    tokens, j = verify_batch(p.expand(N, 3, V), q.expand(N, 2, V), x.contiguous(), g)
    assert bool((j >= 1).all())
    floor = _floor(p[1], N, g)
    tv = _tv(torch.bincount(tokens[:, 1], minlength=V), p[1])
    assert tv < 3 * floor + 1e-3


def test_verify_one_draft_and_edge_cases():
    g = torch.Generator().manual_seed(0)
    # one-token vocabulary: everything accepted, the bonus is that token
    out = verify(
        torch.ones(3, 1), torch.ones(2, 1), torch.zeros(2, dtype=torch.long), g
    )
    assert out.tolist() == [0, 0, 0]
    # p(x) = 0: always rejected, and the replacement is never x
    p = torch.tensor([[0.0, 0.5, 0.5], [1.0, 0.0, 0.0]])
    q = torch.tensor([[1.0, 0.0, 0.0]])
    for _ in range(50):
        out = verify(p, q, torch.tensor([0]), g)
        assert out.shape == (1,) and int(out[0]) in (1, 2)
    # q(x) = 0 < p(x) (a draft token the draft could not draw): accepted
    out = verify(
        torch.tensor([[0.5, 0.5], [0.0, 1.0]]),
        torch.tensor([[1.0, 0.0]]),
        torch.tensor([1]),
        g,
    )
    assert out.tolist() == [1, 1]
    # accepted prefix equals the draft tokens; length between 1 and k + 1
    p = torch.softmax(torch.randn(5, 7, generator=g), -1)
    q = torch.softmax(torch.randn(4, 7, generator=g), -1)
    x = torch.multinomial(q, 1, generator=g)[:, 0]
    for _ in range(20):
        out = verify(p, q, x, g)
        assert 1 <= out.shape[0] <= 5
        assert out[:-1].tolist() == x[: out.shape[0] - 1].tolist()
    # seeded: the same generator state gives the same tokens
    a = verify(p, q, x, torch.Generator().manual_seed(5))
    b = verify(p, q, x, torch.Generator().manual_seed(5))
    assert torch.equal(a, b)


@pytest.mark.parametrize(
    "args, match, exc",
    [
        (
            (
                torch.ones(2, 3) / 3,
                torch.ones(2, 3) / 3,
                torch.zeros(2, dtype=torch.long),
            ),
            "draft_probs",
            ValueError,
        ),
        (
            (
                torch.ones(3, 3) / 3,
                torch.ones(2, 4) / 4,
                torch.zeros(2, dtype=torch.long),
            ),
            "draft_probs",
            ValueError,
        ),
        (
            (
                torch.ones(3, 3) / 3,
                torch.ones(2, 3) / 3,
                torch.zeros(3, dtype=torch.long),
            ),
            "draft_tokens",
            ValueError,
        ),
        (
            (torch.ones(1, 3) / 3, torch.ones(0, 3), torch.zeros(0, dtype=torch.long)),
            "k >= 1",
            ValueError,
        ),
        (
            (torch.ones(3, 3), torch.ones(2, 3) / 3, torch.zeros(2, dtype=torch.long)),
            "target_probs",
            ValueError,
        ),
        (
            (torch.ones(3, 3) / 3, torch.randn(2, 3), torch.zeros(2, dtype=torch.long)),
            "draft_probs",
            ValueError,
        ),
        (
            (torch.ones(3, 3) / 3, torch.ones(2, 3) / 3, torch.tensor([0, 3])),
            "draft_tokens",
            ValueError,
        ),
        (
            (torch.ones(3, 3) / 3, torch.ones(2, 3) / 3, torch.tensor([0.0, 1.0])),
            "draft_tokens",
            TypeError,
        ),
        (
            ([[1.0]] * 3, torch.ones(2, 1), torch.zeros(2, dtype=torch.long)),
            "target_probs",
            TypeError,
        ),
        (
            (
                torch.full((3, 2), float("nan")),
                torch.ones(2, 2) / 2,
                torch.zeros(2, dtype=torch.long),
            ),
            "target_probs",
            ValueError,
        ),
    ],
)
def test_verify_bad_input(args, match, exc):
    with pytest.raises(exc, match=match):
        verify(*args)
    with pytest.raises(TypeError, match="generator"):
        verify(torch.ones(2, 1), torch.ones(1, 1), torch.zeros(1, dtype=torch.long), 3)


@pytest.fixture(scope="module")
def lms():
    return load_lm("target"), load_lm("draft")


@pytest.fixture(scope="module")
def prompt():
    from attnlab.data.stories import heldout_prompts

    return heldout_prompts(1, 40, seed=0)[0]


@pytest.mark.parametrize("k", [1, 4, 7])
def test_greedy_speculative_equals_target_greedy(lms, prompt, k):
    target, draft = lms
    ref = greedy_generate(target, prompt, 48)
    out, stats = speculative_generate(target, draft, prompt, 48, k, temperature=0)
    assert torch.equal(out, ref)
    assert stats["target_passes"] < 48  # fewer target passes than tokens
    assert 1 <= stats["tokens_per_pass"] <= k + 1
    assert 0 < stats["alpha"] <= 1 and 0 <= stats["accept_rate"] <= 1
    assert sum(r[1] for r in stats["rounds"]) == stats["accepted"]


@pytest.mark.parametrize("k", [1, 3, 6])
def test_acceptance_by_position_counts_the_rounds(lms, prompt, k):
    """reached/kept per draft position, recounted from the rounds (drafted, kept)."""
    target, draft = lms
    _, st = speculative_generate(
        target, draft, prompt, 40, k, 1.0, torch.Generator().manual_seed(k)
    )
    rounds = st["rounds"]
    want_reached = [sum(i < min(j + 1, kk) for kk, j in rounds) for i in range(k)]
    want_kept = [sum(i < j for _, j in rounds) for i in range(k)]
    assert st["reached"] == want_reached and st["kept"] == want_kept
    assert st["reached"][0] == st["target_passes"] and sum(st["kept"]) == st["accepted"]
    assert 0 < st["alpha_first"] <= 1
    if k == 1:  # one position a round: both estimates are the same mean
        assert st["alpha_first"] == pytest.approx(st["alpha"])


def test_draft_equal_to_target_accepts_everything(lms, prompt):
    target, _ = lms
    for temperature in (0, 1.0):
        out, stats = speculative_generate(
            target, target, prompt, 20, 4, temperature, torch.Generator().manual_seed(0)
        )
        assert stats["accept_rate"] == 1.0 and out.shape == (20,)
        assert stats["target_passes"] == 4  # 5 tokens a pass
        assert stats["alpha"] == pytest.approx(1.0, abs=1e-4)


def test_sampling_is_seeded_and_in_vocab(lms, prompt):
    target, draft = lms
    a, sa = speculative_generate(
        target, draft, prompt, 30, 3, 1.0, torch.Generator().manual_seed(3)
    )
    b, sb = speculative_generate(
        target, draft, prompt, 30, 3, 1.0, torch.Generator().manual_seed(3)
    )
    assert torch.equal(a, b) and sa == sb
    assert a.shape == (30,) and int(a.min()) >= 0 and int(a.max()) < target.vocab_size


def test_block_verification_equals_full_forward(lms, prompt):
    target, _ = lms
    ids = prompt[None]  # (1, 40)
    cache = KVCache.for_model(target)
    target(ids[:, :35], cache)
    block = target(ids[:, 35:], cache)  # 5 queries, bottom-right causal
    full = target(ids)
    torch.testing.assert_close(block, full[:, 35:], atol=1e-5, rtol=1e-5)


def test_rollback_leaves_the_cache_equal_to_a_fresh_one(lms, prompt):
    target, _ = lms
    ids = prompt[None]
    fresh = KVCache.for_model(target)
    target(ids[:, :30], fresh)
    cache = KVCache.for_model(target)
    target(ids[:, :30], cache)
    target(ids[:, 30:36], cache)
    cache.rollback(6)
    assert cache.seen == fresh.seen == 30
    for layer in range(len(cache)):
        assert torch.equal(cache.keys(layer), fresh.keys(layer))
        assert torch.equal(cache.values(layer), fresh.values(layer))
        assert torch.equal(cache.positions(layer), fresh.positions(layer))
    torch.testing.assert_close(
        target(ids[:, 30:32], cache), target(ids[:, 30:32], fresh)
    )


@pytest.mark.parametrize(
    "kwargs, match, exc",
    [
        ({"k": 0}, "k", ValueError),
        ({"k": 2.0}, "k", TypeError),
        ({"temperature": -0.5}, "temperature", ValueError),
        ({"temperature": float("nan")}, "temperature", ValueError),
        ({"max_new_tokens": 0}, "max_new_tokens", ValueError),
        ({"ids": torch.tensor([1, 2, 99])}, "ids", ValueError),
        ({"ids": torch.tensor([], dtype=torch.long)}, "ids", ValueError),
        ({"ids": [1, 2]}, "ids", TypeError),
        ({"generator": 0}, "generator", TypeError),
        ({"draft": "draft"}, "draft", TypeError),
    ],
)
def test_generate_bad_input(lms, kwargs, match, exc):
    target, draft = lms
    args = {
        "target": target,
        "draft": draft,
        "ids": torch.tensor([0, 3, 4]),
        "max_new_tokens": 4,
        "k": 2,
        **kwargs,
    }
    with pytest.raises(exc, match=match):
        speculative_generate(**args)


def test_generated_tokens_follow_the_target_end_to_end(lms):
    """speculative_generate at temperature 1: the first two tokens' marginals equal the
    target's (exact, from its logits) within the noise of as many direct draws."""
    target, draft = lms
    from attnlab.data.stories import encode

    prompt = torch.tensor([0, *encode("kit and lo and mab . kit gave lo a cup . ")])
    n = 400  # the draft is far from the target here (TV ~0.8): 400 draws tell
    with torch.no_grad():
        p1 = torch.softmax(target(prompt[None])[0, -1].double(), -1)  # (V,)
        q1 = torch.softmax(draft(prompt[None])[0, -1].double(), -1)
        ext = torch.cat((prompt.expand(29, -1), torch.arange(29)[:, None]), 1)
        p2 = p1 @ torch.softmax(target(ext)[:, -1].double(), -1)  # (V,) marginal
    g = torch.Generator().manual_seed(0)
    out = torch.stack(
        [speculative_generate(target, draft, prompt, 2, 2, 1.0, g)[0] for _ in range(n)]
    )  # (n, 2)
    for i, p in enumerate((p1, p2)):
        floor = _floor(p, n, g, sets=50)
        tv = _tv(torch.bincount(out[:, i], minlength=29), p)
        assert tv < 3 * floor + 0.01, (i, tv, floor)
    assert 0.5 * float((q1 - p1).abs().sum()) > 3 * floor + 0.01  # the draft differs


def _noncontig(t):
    if t.dim() == 0:
        return t
    out = torch.empty(*reversed(t.shape), dtype=t.dtype).permute(
        *reversed(range(t.dim()))
    )
    return out.copy_(t)


MUTATIONS = {  # as tests/test_contract.py: "type" must raise TypeError naming the arg
    "list": (lambda t: t.tolist(), "type"),
    "ndarray": (lambda t: t.numpy(), "type"),
    "string": (lambda t: "0.5", "type"),
    "dtype": (lambda t: t.long() if t.is_floating_point() else t.float(), "any"),
    "rank-": (lambda t: t[0], "any"),
    "rank+": (lambda t: t[None], "any"),
    "scalar": (lambda t: torch.tensor(0.5), "any"),
    "empty": (lambda t: t[..., :0], "any"),
    "nan": (
        lambda t: t.clone().fill_(float("nan")) if t.is_floating_point() else t,
        "any",
    ),
    "inf": (
        lambda t: t.clone().fill_(float("inf")) if t.is_floating_point() else t,
        "any",
    ),
    "noncontiguous": (_noncontig, "same"),
    "stride0": (lambda t: t[..., :1].expand_as(t), "same"),
    "float16": (lambda t: t.half() if t.is_floating_point() else t, "same"),
    "bfloat16": (lambda t: t.bfloat16() if t.is_floating_point() else t, "same"),
}


@pytest.mark.parametrize("arg", ["target_probs", "draft_probs", "draft_tokens"])
@pytest.mark.parametrize("mutation", sorted(MUTATIONS))
def test_verify_contract(arg, mutation):
    """Every bad value of every tensor argument: a TypeError/ValueError naming it, or
    the result of the same call on a plain float32 copy (never another exception)."""
    g = torch.Generator().manual_seed(0)
    good = {
        "target_probs": torch.softmax(torch.randn(4, 6, generator=g), -1),
        "draft_probs": torch.softmax(torch.randn(3, 6, generator=g), -1),
        "draft_tokens": torch.tensor([1, 4, 2]),
    }
    make, want = MUTATIONS[mutation]
    bad = make(good[arg])
    try:
        out = verify(**{**good, arg: bad}, generator=torch.Generator().manual_seed(1))
    except (TypeError, ValueError) as e:
        assert arg in str(e), str(e)
        return
    assert want != "type", f"verify({arg}={mutation}) accepted it"
    if want == "same" and isinstance(bad, torch.Tensor):
        plain = bad.float() if bad.is_floating_point() else bad.contiguous()
        ref = verify(**{**good, arg: plain}, generator=torch.Generator().manual_seed(1))
        assert torch.equal(out, ref)
    assert out.dtype == torch.long and 1 <= out.shape[0] <= 4
