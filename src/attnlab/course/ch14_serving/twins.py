"""Chapter 14's static twin: one round of speculative decoding, in the browser.

:func:`speculative_twin` embeds, for a few held-out prompts and two temperatures, the
shipped draft model's proposal of ``K_MAX`` tokens with its distributions ``q_1..q_K``
and the shipped target's ``p_1..p_{K+1}`` after each drafted prefix (computed here
with :mod:`attnlab.models`). The browser runs the verification rule for the first ``k``
of them with its seeded uniforms (``attnlabTwin.uniforms(seed, k + 1)``: ``k`` for the
acceptances, one for the last token) and reads out what was accepted, the round's α
and tokens per pass. The browser check compares every readout with
:func:`attnlab.speculative.verify_with_uniforms` fed the same uniforms
(``attnlab.course.twin.rng.uniforms``).
"""

from __future__ import annotations

import torch

from ...data import stories
from ...speculative import verify_with_uniforms
from ..twin import Range, Readout, Select, Twin, TwinCheck, register_check, rng

__all__ = ["speculative_twin", "round_data", "K_MAX"]

K_MAX, PROMPT_LEN = 8, 60
TEMPERATURES = ("1", "0")


@torch.no_grad()
def round_data(target, draft, ids: torch.Tensor, temperature: float, seed: int = 0):
    """The draft's ``K_MAX`` proposals after ``ids`` (T,) and both models'
    distributions: ``{"x": [K], "q": [K][V], "p": [K+1][V]}`` (in units of 1e-4, rounded: integers keep the page light; both the page and the reference normalise each row)."""
    g = torch.Generator().manual_seed(seed)
    ctx = ids.tolist()
    xs, qs = [], []
    for _ in range(K_MAX):
        logits = draft(torch.tensor([ctx + xs]))[0, -1]  # (V,)
        if temperature == 0:
            q = torch.nn.functional.one_hot(logits.argmax(), logits.shape[0]).double()
        else:
            q = torch.softmax(logits.double() / temperature, -1)
        xs.append(int(torch.multinomial(q, 1, generator=g)))
        qs.append(q)
    logits = target(torch.tensor([ctx + xs]))[0, len(ctx) - 1 :]  # (K+1, V)
    if temperature == 0:
        p = torch.nn.functional.one_hot(logits.argmax(-1), logits.shape[-1]).double()
    else:
        p = torch.softmax(logits.double() / temperature, -1)
    return {
        "x": xs,
        "q": [[round(float(v) * 10_000) for v in row] for row in qs],
        "p": [[round(float(v) * 10_000) for v in row] for row in p],
    }


CUES = (" . ", " gave ", " to the ")  # the next token starts a name, a name, a place


def _prompts() -> list[torch.Tensor]:
    """Held-out prompts cut right after each of :data:`CUES` (at least
    ``PROMPT_LEN`` characters in): what follows is hard for the draft, or easy."""
    ids = stories.heldout_prompts(1, 400, seed=7)[0]
    text = stories.decode(ids)
    out = []
    for cue in CUES:
        at = text.index(cue, PROMPT_LEN) + len(cue)
        out.append(ids[:at])
    return out


def speculative_twin() -> Twin:
    """Chapter 14: one round: the prompt, the temperature, k and the random seed."""
    from ...models import load_lm

    target, draft = load_lm("target"), load_lm("draft")
    prompts = _prompts()
    rounds = {}
    for i in range(len(CUES)):
        for t in TEMPERATURES:
            rounds[f"{i}/{t}"] = round_data(target, draft, prompts[i], float(t), seed=i)
    chars = ["|"] + list(stories.CHARS)
    return Twin(
        "speculative",
        "Speculative decoding: one target pass verifies k draft tokens",
        controls=[
            Select(
                "prompt",
                "held-out prompt ending in",
                tuple((str(i), repr(c.strip() + " ")) for i, c in enumerate(CUES)),
                "0",
            ),
            Select("temperature", "temperature", TEMPERATURES, "1"),
            Range("k", "draft tokens k", 1, K_MAX, 1, 4),
            Range("seed", "random seed", 0, 99, 1, 0),
        ],
        readouts=[
            Readout("accepted", "draft tokens accepted"),
            Readout("emitted", "tokens from this target pass"),
            Readout("text", "emitted text"),
            Readout("alpha", "α of this round (mean Σ min(p, q))"),
            Readout("expected", "expected tokens for this draft"),
            Readout("formula", "(1 − α^(k+1)) / (1 − α)"),
        ],
        data={
            "chars": chars,
            "k_max": K_MAX,
            "contexts": [stories.decode(p[-36:]) for p in prompts],
            "rounds": rounds,
        },
        note="The shipped draft model (2 layers, width 32) proposed the tokens after a "
        "held-out story; the target (3 layers, width 96) scored all of them in one "
        "pass. Each draft token is kept with probability min(1, p/q) (green), the first "
        "rejected one (red) is replaced by a sample from max(0, p − q), and when all k "
        "are kept the target adds a bonus token (blue). Bars: p (target) and q (draft) "
        "of each drafted token. At temperature 0 both models are greedy: a token is "
        "kept exactly when the target's argmax agrees.",
    )


def _reference(settings: dict, data: dict) -> dict:
    k, seed = int(settings["k"]), int(settings["seed"])
    r = data["rounds"][f"{settings['prompt']}/{settings['temperature']}"]
    p = torch.tensor(r["p"][: k + 1], dtype=torch.float64)  # (k+1, V), units of 1e-4
    q = torch.tensor(r["q"][:k], dtype=torch.float64)  # (k, V)
    p, q = p / p.sum(-1, keepdim=True), q / q.sum(-1, keepdim=True)  # as the page
    x = torch.tensor(r["x"][:k])
    u = torch.tensor(rng.uniforms(seed, k + 1))
    tokens, j = verify_with_uniforms(p[None], q[None], x[None], u[None, :k], u[k:])
    n = int(j[0])
    emitted = tokens[0, : n + 1].tolist()
    pn, qn = p / p.sum(-1, keepdim=True), q / q.sum(-1, keepdim=True)
    beta = torch.minimum(pn[:k], qn).sum(-1)  # (k,)
    alpha = float(beta.mean())
    px = pn[:k].gather(-1, x[:, None])[:, 0]
    qx = qn.gather(-1, x[:, None])[:, 0]
    a = torch.where(qx > 0, (px / qx.clamp_min(1e-300)).clamp(max=1), (px > 0).double())
    expected = 1 + float(torch.cumprod(a, 0).sum())
    formula = k + 1.0 if alpha >= 1 else (1 - alpha ** (k + 1)) / (1 - alpha)
    return {
        "accepted": n,
        "emitted": n + 1,
        "text": "".join(data["chars"][i] for i in emitted),
        "alpha": alpha,
        "expected": expected,
        "formula": formula,
    }


register_check(
    "speculative",
    TwinCheck(
        cases=[
            {"prompt": "0", "temperature": "1", "k": 4, "seed": 0},
            {"prompt": "1", "temperature": "1", "k": 8, "seed": 3},
            {"prompt": "2", "temperature": "1", "k": 1, "seed": 11},
            {"prompt": "0", "temperature": "0", "k": 8, "seed": 0},
            {"prompt": "2", "temperature": "0", "k": 5, "seed": 42},
            {"prompt": "1", "temperature": "1", "k": 6, "seed": 77},
        ],
        reference=_reference,
        default_tol=1e-9,
    ),
)
