"""Speculative decoding (Leviathan et al. 2023; Chen et al. 2023), chapter 14.

A small *draft* model proposes ``k`` tokens ``x_1..x_k`` from its distributions
``q_1..q_k``; the *target* scores them all in one pass of ``k + 1`` queries against its
KV cache, giving ``p_1..p_{k+1}``. :func:`verify` accepts ``x_i`` with probability
``min(1, p_i(x_i) / q_i(x_i))`` in order; at the first rejection it samples a
replacement from ``norm(max(0, p_i - q_i))`` and stops; if all ``k`` are accepted it
samples a bonus token from ``p_{k+1}``. Every emitted token is then distributed exactly
as the target's own sample (the chapter measures this), and a pass of the target yields
between 1 and ``k + 1`` tokens: ``(1 - α^(k+1)) / (1 - α)`` on average when each draft
token is accepted with probability α independently.

    tokens = verify(p, q, x, generator)                    # (j + 1,) int64
    new, stats = speculative_generate(target, draft, ids, 64, k=4, temperature=0)
"""

from __future__ import annotations

import torch
from torch.nn import functional as F

from .validation import distribution, floating, integer, real, tensor, token_ids

__all__ = [
    "verify",
    "verify_batch",
    "verify_with_uniforms",
    "speculative_generate",
    "greedy_generate",
]


def _check_generator(generator: object, fn: str) -> None:
    if generator is not None and not isinstance(generator, torch.Generator):
        raise TypeError(
            f"{fn}: generator must be a torch.Generator or None, got "
            f"{type(generator).__name__}"
        )


def _checked(target_probs, draft_probs, draft_tokens, fn: str):
    """The batched arguments checked: p (N, k+1, V), q (N, k, V), x (N, k) int64."""
    p = tensor(target_probs, "target_probs", fn, dim=3)
    q = tensor(draft_probs, "draft_probs", fn, dim=3)
    x = tensor(draft_tokens, "draft_tokens", fn, dim=2)
    N, k1, V = p.shape
    k = k1 - 1
    if k < 1:
        raise ValueError(
            f"{fn}: target_probs must have k + 1 >= 2 rows (k >= 1 draft tokens), "
            f"got {k1}"
        )
    if tuple(q.shape) != (N, k, V):
        raise ValueError(
            f"{fn}: draft_probs must be (k, V) = ({k}, {V}) to match target_probs "
            f"({k1}, {V}), got {tuple(q.shape)[1:]}"
        )
    if tuple(x.shape) != (N, k):
        raise ValueError(
            f"{fn}: draft_tokens must be (k,) = ({k},) to match target_probs, got "
            f"{tuple(x.shape)[1:]}"
        )
    distribution(p, "target_probs", fn, allow_zero_rows=False)
    distribution(q, "draft_probs", fn, allow_zero_rows=False)
    return p, q, token_ids(x, V, "draft_tokens", fn).long()


def verify_batch(
    target_probs: torch.Tensor,
    draft_probs: torch.Tensor,
    draft_tokens: torch.Tensor,
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`verify` for N independent drafts at once.

    ``target_probs (N, k+1, V)``, ``draft_probs (N, k, V)``, ``draft_tokens (N, k)``.
    Returns ``tokens (N, k+1)`` int64 (the ``j`` accepted draft tokens, then the
    replacement or bonus token, then ``-1`` padding) and ``n_accepted (N,)`` (``j``).
    """
    p, q, x = _checked(target_probs, draft_probs, draft_tokens, "verify")
    _check_generator(generator, "verify")
    N, k = x.shape
    u = torch.rand(N, k, dtype=torch.float64, generator=generator)  # (N, k) in [0, 1)
    v = torch.rand(N, dtype=torch.float64, generator=generator)  # (N,)
    return _rule(p, q, x, u, v)


def verify_with_uniforms(
    target_probs: torch.Tensor,
    draft_probs: torch.Tensor,
    draft_tokens: torch.Tensor,
    u: torch.Tensor,
    v: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The rule of :func:`verify_batch` (same arguments, checked the same way) given
    its uniforms in [0, 1): ``u (N, k)`` decide the acceptances (``x_i`` is kept when
    ``u_i · q_i(x_i) < p_i(x_i)``, i.e. with probability ``min(1, p/q)``), ``v (N,)``
    draws the last token by inverting the cumulative sum of its distribution
    (chapter 14's twin feeds the browser's seeded uniforms here)."""
    fn = "verify_with_uniforms"
    p, q, x = _checked(target_probs, draft_probs, draft_tokens, fn)
    N, k1, V = p.shape
    k = k1 - 1
    u = floating(u, "u", fn)
    v = floating(v, "v", fn)
    if tuple(u.shape) != (N, k) or tuple(v.shape) != (N,):
        raise ValueError(
            f"{fn}: u must be (N, k) = ({N}, {k}) and v (N,) = ({N},), got "
            f"{tuple(u.shape)} and {tuple(v.shape)}"
        )
    for t, name in ((u, "u"), (v, "v")):
        if t.numel() and not bool(((t >= 0) & (t < 1)).all()):
            raise ValueError(f"{fn}: {name} must hold uniforms in [0, 1)")
    return _rule(p, q, x, u.double(), v.double())


def _rule(p, q, x, u, v) -> tuple[torch.Tensor, torch.Tensor]:
    """The rule itself, on checked arguments (float64 uniforms)."""
    N, k1, V = p.shape
    k = k1 - 1
    p = p.double() / p.double().sum(-1, keepdim=True)  # (N, k+1, V)
    q = q.double() / q.double().sum(-1, keepdim=True)  # (N, k, V)
    x = x.long()
    px = p[:, :k].gather(-1, x[..., None])[..., 0]  # (N, k)
    qx = q.gather(-1, x[..., None])[..., 0]  # (N, k)
    # accept with probability min(1, p/q): u < p/q, written without dividing (q may be
    # 0 for a token the draft could not have drawn; p = 0 is always rejected)
    ok = (u * qx < px) | ((px >= qx) & (px > 0))  # (N, k)
    j = ok.long().cumprod(-1).sum(-1)  # (N,) accepted before the first rejection
    rows = torch.arange(N)
    pj = p[rows, j]  # (N, V): p at the first rejection, or p_{k+1}
    qj = torch.cat((q, torch.zeros(N, 1, V, dtype=q.dtype)), 1)[rows, j]  # (N, V)
    resid = (pj - qj).clamp_min(0)  # (N, V); where all were accepted qj = 0: pj
    mass = resid.sum(-1, keepdim=True)  # (N, 1)
    # p = q up to rounding: the residual vanishes, and so does the rejection's
    # probability; sampling p there is the limit
    resid = torch.where(mass > 0, resid, pj)  # (N, V), unnormalised
    cum = resid.cumsum(-1)  # (N, V)
    t = v[:, None].double() * cum[:, -1:]  # (N, 1), in [0, total)
    y = torch.searchsorted(cum, t, right=True)[:, 0]  # first index with cum > t
    last = V - 1 - (resid.flip(-1) > 0).long().argmax(-1)  # (N,) last token with mass
    y = torch.minimum(y, last)  # t rounded up to the total: the last possible token
    tokens = torch.full((N, k + 1), -1, dtype=torch.long)
    pos = torch.arange(k + 1)[None, :]  # (1, k+1)
    xs = torch.cat((x, torch.zeros(N, 1, dtype=torch.long)), 1)  # (N, k+1)
    tokens = torch.where(pos < j[:, None], xs, tokens)
    tokens[rows, j] = y
    return tokens, j


def verify(
    target_probs: torch.Tensor,
    draft_probs: torch.Tensor,
    draft_tokens: torch.Tensor,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """The speculative sampling rule for one draft.

    ``target_probs (k+1, V)``: the target's next-token probabilities after the
    context and after each draft token; ``draft_probs (k, V)``: the draft's, from
    which ``draft_tokens (k,)`` were sampled. Returns the emitted tokens (j + 1,)
    int64: the first ``j`` draft tokens (accepted), then a token sampled from
    ``norm(max(0, p_{j+1} - q_{j+1}))`` (a rejection) or, with ``j = k``, from
    ``target_probs[k]`` (the bonus). Probabilities are checked (rows on the simplex);
    ``generator`` seeds the uniform draws.
    """
    fn = "verify"
    p = tensor(target_probs, "target_probs", fn, dim=2)
    q = tensor(draft_probs, "draft_probs", fn, dim=2)
    x = tensor(draft_tokens, "draft_tokens", fn, dim=1)
    tokens, j = verify_batch(p[None], q[None], x[None], generator)
    return tokens[0, : int(j[0]) + 1]


def _probs(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """(…, V) next-token probabilities; temperature 0 = one-hot argmax."""
    if temperature == 0:
        return F.one_hot(logits.argmax(-1), logits.shape[-1]).double()
    return torch.softmax(logits.double() / temperature, -1)


def _prompt(ids: object, vocab: int, fn: str) -> torch.Tensor:
    t = tensor(ids, "ids", fn)
    if t.dim() == 2 and t.shape[0] == 1:
        t = t[0]
    if t.dim() != 1 or t.shape[0] < 1:
        raise ValueError(
            f"{fn}: ids must be a non-empty prompt (T,) or (1, T), got {tuple(t.shape)}"
        )
    return token_ids(t, vocab, "ids", fn).long()


def _vocab(model: object, name: str, fn: str) -> int:
    v = getattr(model, "vocab_size", None)
    if not isinstance(v, int) or not callable(model):
        raise TypeError(
            f"{fn}: {name} must be an attnlab.models.CausalLM (forward(ids, cache), "
            f"vocab_size), got {type(model).__name__}"
        )
    return v


@torch.no_grad()
def greedy_generate(model, ids: torch.Tensor, max_new_tokens: int) -> torch.Tensor:
    """The model's own greedy continuation, one token per pass with its KV cache:
    (max_new_tokens,) int64."""
    from .models import KVCache

    fn = "greedy_generate"
    V = _vocab(model, "model", fn)
    ids = _prompt(ids, V, fn)
    n = integer(max_new_tokens, "max_new_tokens", fn, low=1)
    cache = KVCache.for_model(model)
    logits = model(ids[None], cache)[0, -1]  # (V,)
    out = []
    for _ in range(n):
        nxt = int(logits.argmax())
        out.append(nxt)
        logits = model(torch.tensor([[nxt]]), cache)[0, -1]  # (V,)
    return torch.tensor(out)


@torch.no_grad()
def speculative_generate(
    target,
    draft,
    ids: torch.Tensor,
    max_new_tokens: int,
    k: int,
    temperature: float = 1.0,
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, dict]:
    """Generate ``max_new_tokens`` tokens after ``ids`` (T,) with draft rounds of
    ``k`` tokens, verified by one target pass of ``k + 1`` queries each.

    ``target``, ``draft``: :class:`attnlab.models.CausalLM` s with one vocabulary.
    ``temperature`` 0 is greedy (the output then equals the target's greedy output).
    Both models keep a :class:`~attnlab.models.KVCache`; after a rejection the
    target's and the draft's caches are rolled back to the accepted prefix.

    Returns ``(tokens (max_new_tokens,) int64, stats)``: ``stats`` holds
    ``target_passes`` (verification passes; the prompt's prefill not counted),
    ``tokens_per_pass``, ``drafted`` and ``accepted`` (draft tokens proposed and
    kept), ``accept_rate`` (accepted / drafted), ``alpha`` (the mean, over the draft
    positions verified up to the first rejection, of ``Σ_x min(p(x), q(x))``, the
    probability that one draft token is accepted: Leviathan et al.'s α, estimated on
    the positions a round reaches, so a larger ``k`` lets later, often easier,
    positions into the mean and the estimate depends on ``k``), ``alpha_first`` (the
    same mean over the first draft position of each round only), ``reached`` and
    ``kept`` (lists of length ``k``: for draft position ``i``, the rounds that verified
    it and the rounds that kept it; ``kept[i] / reached[i]`` is the acceptance rate at
    position ``i`` given that it was reached) and ``rounds`` (per pass: tokens
    drafted, tokens accepted).
    """
    from .models import KVCache

    fn = "speculative_generate"
    V = _vocab(target, "target", fn)
    Vd = _vocab(draft, "draft", fn)
    if V != Vd:
        raise ValueError(f"{fn}: target and draft vocabularies differ ({V} vs {Vd})")
    ids = _prompt(ids, V, fn)
    n_new = integer(max_new_tokens, "max_new_tokens", fn, low=1)
    k = integer(k, "k", fn, low=1)
    temperature = real(temperature, "temperature", fn, low=0)
    _check_generator(generator, fn)

    tc, dc = KVCache.for_model(target), KVCache.for_model(draft)
    if ids.shape[0] > 1:
        target(ids[None, :-1], tc)  # prefill; the last prompt token stays pending
        draft(ids[None, :-1], dc)
    t_pending = [int(ids[-1])]  # fed to the target at the next pass
    d_pending = [int(ids[-1])]  # fed to the draft before its next proposal
    out: list[int] = []
    rounds, betas, firsts = [], [], []
    reached, kept = [0] * k, [0] * k
    while len(out) < n_new:
        kk = min(k, n_new - len(out))
        xs, qs = [], []
        feed = d_pending
        for _ in range(kk):
            logits = draft(torch.tensor([feed]), dc)[0, -1]  # (V,)
            q = _probs(logits, temperature)  # (V,)
            x = int(torch.multinomial(q, 1, generator=generator))
            xs.append(x)
            qs.append(q)
            feed = [x]
        block = torch.tensor([t_pending + xs])  # (1, kk + 1)
        p = _probs(target(block, tc)[0, -(kk + 1) :], temperature)  # (kk + 1, V)
        q = torch.stack(qs)  # (kk, V)
        emitted = verify(p, q, torch.tensor(xs), generator)
        j = emitted.shape[0] - 1
        tried = min(j + 1, kk)
        beta = torch.minimum(p[:tried], q[:tried]).sum(-1).tolist()  # (tried,)
        betas += beta
        firsts.append(beta[0])
        for i in range(tried):
            reached[i] += 1
            kept[i] += i < j
        rounds.append((kk, j))
        out += emitted.tolist()
        # target cache: pending + all kk drafts were fed; keep pending + accepted
        tc.rollback(kk - j)
        # draft cache: pending + x_1..x_{kk-1} were fed
        if j == kk:
            d_pending = [xs[-1], int(emitted[-1])]
        else:
            dc.rollback(kk - 1 - j)
            d_pending = [int(emitted[-1])]
        t_pending = [int(emitted[-1])]
    drafted = sum(r[0] for r in rounds)
    accepted = sum(r[1] for r in rounds)
    passes = len(rounds)
    stats = {
        "target_passes": passes,
        "tokens_per_pass": min(len(out), n_new) / passes,
        "drafted": drafted,
        "accepted": accepted,
        "accept_rate": accepted / drafted,
        "alpha": sum(betas) / len(betas),
        "alpha_first": sum(firsts) / len(firsts),
        "reached": reached,
        "kept": kept,
        "rounds": rounds,
    }
    return torch.tensor(out[:n_new]), stats
