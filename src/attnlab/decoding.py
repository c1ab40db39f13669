"""Decoding and the training tricks of the Transformer recipe.

The seed slides' "other tricks" for training a Transformer, the ones that are code:

==========================  ===============================================  ==========
trick                       here                                             paper
==========================  ===============================================  ==========
label smoothing             :func:`label_smoothed_loss`                      Szegedy 2016
learning-rate warm-up       :func:`noam_lr`, :func:`noam_scheduler`          Vaswani 2017
beam search + length pen.   :func:`beam_search`, :func:`length_penalty`      Wu 2016
greedy decoding             :func:`greedy_decode`                            —
==========================  ===============================================  ==========

Decoders here do not know about models: they call ``step(prefix) -> log-probs``, a
function from the tokens so far ``prefix (N, t)`` (starting with ``<bos>``) to the
log-probabilities of the next token ``(N, V)``. A model wraps itself in such a function
(:meth:`attnlab.Seq2SeqTransformer.greedy` / ``.beam``); a hand-written table works too.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

__all__ = [
    "greedy_decode",
    "beam_search",
    "length_penalty",
    "label_smoothed_loss",
    "noam_lr",
    "noam_scheduler",
]

Step = Callable[[torch.Tensor], torch.Tensor]  # prefix (N, t) -> log-probs (N, V)


@torch.no_grad()
def greedy_decode(
    step: Step, batch_size: int, bos_id: int, eos_id: int, max_len: int = 50,
    pad_id: int = 0, device=None,
) -> torch.Tensor:  # fmt: skip
    """Pick the most probable next token, ``max_len`` times or until every row ends.

    Returns the generated ids ``(B, T')`` without ``<bos>``: each row ends with
    ``<eos>`` (if it was produced) followed by ``pad_id``.
    """
    if max_len < 1:
        raise ValueError(f"max_len must be >= 1, got {max_len}")
    ids = torch.full((batch_size, 1), bos_id, dtype=torch.long, device=device)  # (B, 1)
    done = torch.zeros(batch_size, dtype=torch.bool, device=device)  # (B,)
    for _ in range(max_len):
        nxt = step(ids).argmax(-1)  # (B, t) -> (B, V) -> (B,)
        nxt = nxt.masked_fill(done, pad_id)  # finished rows only pad
        ids = torch.cat([ids, nxt[:, None]], dim=1)  # (B, t + 1)
        done |= nxt == eos_id
        if bool(done.all()):
            break
    return ids[:, 1:]  # drop <bos>


def length_penalty(length: int, alpha: float) -> float:
    """GNMT's ``lp(Y) = ((5 + |Y|) / 6) ** alpha`` (Wu et al., 2016).

    Beam search ranks finished hypotheses by ``log P(Y) / lp(Y)``: with ``alpha = 0``
    the raw log-probability, which favours short outputs (every token costs some
    log-probability); larger ``alpha`` forgives length.
    """
    return ((5.0 + length) / 6.0) ** alpha


@torch.no_grad()
def beam_search(
    step: Step, bos_id: int, eos_id: int, beam_size: int = 4, max_len: int = 50,
    alpha: float = 0.6, device=None,
) -> list[tuple[list[int], float]]:  # fmt: skip
    """Beam search for one input: keep the ``beam_size`` best prefixes at each step.

    At each step every live prefix is extended by every token; of the extensions, the
    best ``beam_size`` by total log-probability stay live. An extension by ``<eos>``
    that ranks among the best ``beam_size`` is *finished*, with score
    ``log P(Y) / length_penalty(|Y|, alpha)``; the ``beam_size`` best finished ones are
    kept. The search stops when even the best live prefix, scored at its current
    length, cannot beat the worst kept finished hypothesis, or after ``max_len``
    tokens (the live prefixes then count as finished). With ``beam_size=1`` this is
    exactly greedy decoding.

    Returns
    -------
    list of ``(ids, score)``, best first (at most ``beam_size``); ``ids`` excludes
    ``<bos>`` and ends with ``<eos>`` when the hypothesis finished.
    """
    if beam_size < 1 or max_len < 1:
        raise ValueError(
            f"need beam_size >= 1 and max_len >= 1, got {beam_size}, {max_len}"
        )
    beams = torch.full((1, 1), bos_id, dtype=torch.long, device=device)  # (K, t)
    beam_lp = torch.zeros(1, dtype=torch.float64, device=device)  # (K,) log P(prefix)
    finished: list[tuple[list[int], float]] = []

    def keep_best(hyps):
        return sorted(hyps, key=lambda h: -h[1])[:beam_size]

    for t in range(1, max_len + 1):  # t = length of the hypotheses made at this step
        logp = step(beams).double()  # (K, t) -> (K, V)
        V = logp.shape[-1]
        cand = (beam_lp[:, None] + logp).flatten()  # (K * V,) log P(prefix + token)
        top_lp, top_idx = cand.topk(min(2 * beam_size, cand.numel()))
        keep_rows, keep_tok, keep_lp = [], [], []
        for rank, (lp, idx) in enumerate(zip(top_lp.tolist(), top_idx.tolist())):
            row, tok = divmod(idx, V)
            if tok == eos_id:
                if rank < beam_size:  # a finished hypothesis must rank among the best
                    seq = beams[row, 1:].tolist() + [tok]
                    finished.append((seq, lp / length_penalty(t, alpha)))
            elif len(keep_rows) < beam_size:
                keep_rows.append(row), keep_tok.append(tok), keep_lp.append(lp)
        finished = keep_best(finished)
        if not keep_rows:
            break
        best_live = max(keep_lp) / length_penalty(t, alpha)
        if len(finished) == beam_size and finished[-1][1] >= best_live:
            break  # no live prefix is likely to make the list any more
        rows = torch.tensor(keep_rows, device=beams.device)
        toks = torch.tensor(keep_tok, device=beams.device)[:, None]  # (K, 1)
        beams = torch.cat([beams[rows], toks], dim=1)  # (K, t + 1)
        beam_lp = torch.tensor(keep_lp, dtype=torch.float64, device=beams.device)
    else:  # ran out of length: the live prefixes are candidates too
        for seq, lp in zip(beams[:, 1:].tolist(), beam_lp.tolist()):
            finished.append((seq, lp / length_penalty(len(seq), alpha)))
    return keep_best(finished)


def label_smoothed_loss(
    logits: torch.Tensor,
    target: torch.Tensor,
    eps: float = 0.1,
    ignore_index: int = -100,
) -> torch.Tensor:
    """Cross-entropy against a smoothed target: ``(1 - eps)`` on the gold token and
    ``eps`` spread uniformly over all V classes (Szegedy et al., 2016)::

        loss = (1 - eps) * (-log p_y) + eps * mean_c(-log p_c)

    averaged over the positions whose target is not ``ignore_index``. Equal to
    ``F.cross_entropy(..., label_smoothing=eps, ignore_index=...)``.
    logits (..., V), target (...) -> scalar.
    """
    if logits.shape[:-1] != target.shape:
        raise ValueError(
            f"logits (..., V) and target (...) disagree: {tuple(logits.shape)} vs "
            f"{tuple(target.shape)}"
        )
    if not 0.0 <= eps < 1.0:
        raise ValueError(f"eps must be in [0, 1), got {eps}")
    keep = target != ignore_index  # (...)
    if not bool(keep.any()):
        raise ValueError("every target is ignore_index: nothing to average")
    logp = logits.float().log_softmax(-1)  # (..., V)
    gold = torch.where(keep, target, 0)[..., None]  # (..., 1)
    nll = -logp.gather(-1, gold).squeeze(-1)  # (...)
    smooth = -logp.mean(-1)  # (...)
    loss = (1.0 - eps) * nll + eps * smooth  # (...)
    return loss[keep].mean().to(logits.dtype)


def noam_lr(step: int, d_model: int, warmup: int = 4000, factor: float = 1.0) -> float:
    """The learning rate of Vaswani et al. (2017), §5.3, at ``step`` (counted from 1)::

        lr = factor * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)

    Linear warm-up for ``warmup`` steps, then decay as ``1/√step``.
    """
    if step < 1 or warmup < 1:
        raise ValueError(f"step and warmup are counted from 1, got {step}, {warmup}")
    return factor * d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)


def noam_scheduler(optimizer, d_model: int, warmup: int = 4000, factor: float = 1.0):
    """A ``LambdaLR`` that sets every group's learning rate to :func:`noam_lr`.

    Call ``scheduler.step()`` after each ``optimizer.step()``. The optimizer's own lr
    is overridden (the lambda divides it out).
    """
    base = [g["lr"] for g in optimizer.param_groups]
    if any(b <= 0 for b in base):
        raise ValueError(f"the optimizer's lr must be > 0, got {base}")
    lambdas = [
        (lambda s, b=b: noam_lr(s + 1, d_model, warmup, factor) / b) for b in base
    ]
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lambdas)
