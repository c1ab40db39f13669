"""Decoding: every loop that turns a model into output tokens lives here.

==========================  ===============================================  ==========
decoder                     here                                             paper
==========================  ===============================================  ==========
greedy decoding             :func:`greedy_decode` (optionally with weights)  —
beam search + length pen.   :func:`beam_search`, :func:`length_penalty`      Wu 2016
sampling / continuation     :func:`generate`                                 —
==========================  ===============================================  ==========

Decoders do not know about models. They call a *step*: a function from the tokens so
far ``prefix (N, t)`` (starting with ``<bos>``) to the log-probabilities of the next
token ``(N, V)`` — or ``(log-probs (N, V), weights (N, S))`` when the caller asks for
the attention weights. A model makes such a step for a batch of sources with
``model.step(src, src_lengths)`` (the :class:`Seq2SeqModel` protocol); a hand-written
probability table works too (the tests drive beam search with one).

A step may keep state between calls (an RNN's hidden state; later a key/value cache):
the decoders call it once per new token, with the prefix one token longer each time.
If it has a ``reorder(rows)`` method, :func:`beam_search` calls it whenever the beams
are re-selected (``rows (K,)`` are the indices of the surviving prefixes), so the state
follows its prefix. A stateless step needs neither.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, runtime_checkable

import torch

from . import validation as V

__all__ = [
    "Step",
    "Seq2SeqModel",
    "greedy_decode",
    "beam_search",
    "length_penalty",
    "generate",
]

Step = Callable[[torch.Tensor], torch.Tensor]  # prefix (N, t) -> log-probs (N, V)


@runtime_checkable
class Seq2SeqModel(Protocol):
    """What :func:`attnlab.train.fit`, :func:`attnlab.train.evaluate` and the decoders
    rely on. :class:`attnlab.seq2seq.Seq2Seq` and :class:`attnlab.Seq2SeqTransformer`
    follow it.

    * ``pad_id``, ``bos_id``, ``eos_id``: the special token ids of the target side.
    * ``logits(batch) -> (B, T, V)``: teacher-forced next-token logits of an
      :class:`attnlab.data.Batch` (``fit`` takes the token loss of these).
    * ``step(src (B, S), src_lengths (B,) or None) -> Step``: a decoding step for these
      sources (see the module docstring); with ``weights=True`` it returns
      ``(log-probs, weights)``.
    """

    pad_id: int
    bos_id: int
    eos_id: int

    def logits(self, batch) -> torch.Tensor: ...

    def step(self, src, src_lengths=None, weights: bool = False) -> Step: ...


@torch.no_grad()
def greedy_decode(
    step: Step,
    batch_size: int,
    bos_id: int,
    eos_id: int,
    max_len: int = 50,
    pad_id: int = 0,
    device: torch.device | str | None = None,
    *,
    return_weights: bool = False,
):
    """Pick the most probable next token, ``max_len`` times or until every row ends.

    Returns the generated ids ``(B, T')`` without ``<bos>``: each row ends with
    ``<eos>`` (if it was produced) followed by ``pad_id``. With ``return_weights=True``
    the step must return ``(log-probs, weights (B, S))`` and the result is ``(ids,
    weights (B, T', S))``: where each output token looked, zeros after ``<eos>``.

    Parameters
    ----------
    step : ``prefix (B, t) -> log-probs (B, V)`` (or ``(log-probs, weights)`` with
        ``return_weights``).
    batch_size : the number of rows B.
    bos_id, eos_id, pad_id : the special tokens' ids.
    max_len : the most tokens to generate, an int >= 1.
    device : where the ids are built.
    return_weights : keyword only; also return where each token looked.

    Returns
    -------
    ids : ``(B, T')`` long tensor, ``T' <= max_len``; with ``return_weights`` the pair
        ``(ids, weights (B, T', S))``.

    Raises
    ------
    ValueError
        ``max_len`` is < 1.
    """
    fn = "greedy_decode"
    batch_size = V.integer(batch_size, "batch_size", fn, low=0)
    max_len = V.integer(max_len, "max_len", fn, low=1)
    for name, tok in (("bos_id", bos_id), ("eos_id", eos_id), ("pad_id", pad_id)):
        V.integer(tok, name, fn, low=0)
    return_weights = V.flag(return_weights, "return_weights", fn)
    ids = torch.full((batch_size, 1), bos_id, dtype=torch.long, device=device)  # (B, 1)
    done = torch.zeros(batch_size, dtype=torch.bool, device=device)  # (B,)
    weights = []
    for _ in range(max_len):
        out = step(ids)  # (B, t) -> (B, V), or ((B, V), (B, S))
        if return_weights:
            out, w = out
            weights.append(w.masked_fill(done[:, None], 0.0))  # (B, S)
        nxt = out.argmax(-1).masked_fill(done, pad_id)  # (B,); finished rows only pad
        ids = torch.cat([ids, nxt[:, None]], dim=1)  # (B, t + 1)
        done |= nxt == eos_id
        if bool(done.all()):
            break
    if return_weights:
        return ids[:, 1:], torch.stack(weights, dim=1)  # (B, T'), (B, T', S)
    return ids[:, 1:]  # drop <bos>


def length_penalty(length: int, alpha: float) -> float:
    """GNMT's ``lp(Y) = ((5 + |Y|) / 6) ** alpha`` (Wu et al., 2016).

    Beam search ranks finished hypotheses by ``log P(Y) / lp(Y)``: with ``alpha = 0``
    the raw log-probability, which favours short outputs (every token costs some
    log-probability); larger ``alpha`` forgives length.

    Parameters
    ----------
    length : ``|Y|``, the number of tokens, an int >= 0.
    alpha : the exponent, a finite number.

    Returns
    -------
    float, ``lp(Y) >= 1`` for ``alpha >= 0``.

    Raises
    ------
    TypeError
        ``length`` is not an int, or ``alpha`` not a number.
    ValueError
        ``length`` is negative, or ``alpha`` is not finite.
    """
    length = V.integer(length, "length", "length_penalty", low=0)
    alpha = V.real(alpha, "alpha", "length_penalty")
    return ((5.0 + length) / 6.0) ** alpha


@torch.no_grad()
def beam_search(
    step: Step,
    bos_id: int,
    eos_id: int,
    beam_size: int = 4,
    max_len: int = 50,
    alpha: float = 0.6,
    device: torch.device | str | None = None,
) -> list[tuple[list[int], float]]:
    """Beam search for one input: keep the ``beam_size`` best prefixes at each step.

    At each step every live prefix is extended by every token; of the extensions, the
    best ``beam_size`` by total log-probability stay live. An extension by ``<eos>``
    that ranks among the best ``beam_size`` is *finished*, with score
    ``log P(Y) / length_penalty(|Y|, alpha)``; the ``beam_size`` best finished ones are
    kept. The search stops when even the best live prefix, scored at its current
    length, cannot beat the worst kept finished hypothesis, or after ``max_len``
    tokens (the live prefixes then count as finished). With ``beam_size=1`` this is
    exactly greedy decoding. A stateful ``step`` is told the surviving rows through
    its ``reorder(rows)`` method, if it has one.

    Returns
    -------
    list of ``(ids, score)``, best first (at most ``beam_size``); ``ids`` excludes
    ``<bos>`` and ends with ``<eos>`` when the hypothesis finished.

    Parameters
    ----------
    step : ``prefix (N, t) -> log-probs (N, V)`` for N live prefixes of one input.
    bos_id, eos_id : the special tokens' ids.
    beam_size : the number of prefixes kept, an int >= 1.
    max_len : the most tokens to generate, an int >= 1.
    alpha : the length penalty's exponent (:func:`length_penalty`).
    device : where the ids are built.
    """
    fn = "beam_search"
    beam_size = V.integer(beam_size, "beam_size", fn, low=1)
    max_len = V.integer(max_len, "max_len", fn, low=1)
    V.integer(bos_id, "bos_id", fn, low=0)
    V.integer(eos_id, "eos_id", fn, low=0)
    alpha = V.real(alpha, "alpha", fn)
    reorder = getattr(step, "reorder", None)
    beams = torch.full((1, 1), bos_id, dtype=torch.long, device=device)  # (K, t)
    beam_lp = torch.zeros(1, dtype=torch.float64, device=device)  # (K,) log P(prefix)
    finished: list[tuple[list[int], float]] = []

    def keep_best(hyps):
        return sorted(hyps, key=lambda h: -h[1])[:beam_size]

    for t in range(1, max_len + 1):  # t = length of the hypotheses made at this step
        logp = step(beams).double()  # (K, t) -> (K, V)
        n_vocab = logp.shape[-1]
        cand = (beam_lp[:, None] + logp).flatten()  # (K * V,) log P(prefix + token)
        top_lp, top_idx = cand.topk(min(2 * beam_size, cand.numel()))
        keep_rows: list[int] = []
        keep_tok: list[int] = []
        keep_lp: list[float] = []
        for rank, (lp, idx) in enumerate(zip(top_lp.tolist(), top_idx.tolist())):
            row, tok = divmod(idx, n_vocab)
            if tok == eos_id:
                if rank < beam_size:  # a finished hypothesis must rank among the best
                    seq = beams[row, 1:].tolist() + [tok]
                    finished.append((seq, lp / length_penalty(t, alpha)))
            elif len(keep_rows) < beam_size:
                keep_rows.append(row)
                keep_tok.append(tok)
                keep_lp.append(lp)
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
        if reorder is not None:
            reorder(rows)  # the step's state follows its prefix
    else:  # ran out of length: the live prefixes are candidates too
        for seq, lp in zip(beams[:, 1:].tolist(), beam_lp.tolist()):
            finished.append((seq, lp / length_penalty(len(seq), alpha)))
    return keep_best(finished)


@torch.no_grad()
def generate(
    step: Step,
    prompt: torch.Tensor,
    n_new: int,
    temperature: float = 0.0,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Append ``n_new`` tokens to ``prompt (B, T0)``: greedy at temperature 0, else
    sampled from ``softmax(log-probs / temperature)``. No ``<eos>`` handling: a
    language model's continuation. Returns ``(B, T0 + n_new)``.

    Parameters
    ----------
    step : ``prefix (B, t) -> log-probs (B, V)``.
    prompt : token ids ``(B, T0)``.
    n_new : how many tokens to append, an int >= 0.
    temperature : 0 (greedy) or a finite number > 0.
    generator : the random generator for sampling.

    Returns
    -------
    long tensor ``(B, T0 + n_new)``: the prompt followed by the new tokens.

    Raises
    ------
    ValueError
        ``prompt`` is not 2-D, ``n_new`` is negative, or ``temperature`` is negative or
        not finite.
    """
    fn = "generate"
    n_new = V.integer(n_new, "n_new", fn, low=0)
    temperature = V.real(temperature, "temperature", fn, low=0.0)  # 0 = greedy
    V.tensor(prompt, "prompt", fn)
    if prompt.dim() != 2:
        shape = (
            tuple(prompt.shape) if isinstance(prompt, torch.Tensor) else type(prompt)
        )
        raise ValueError(
            f"prompt must be token ids (B, T0), got {shape}; add a batch dimension "
            "with prompt[None]"
        )
    if prompt.is_floating_point() or prompt.dtype == torch.bool:
        raise TypeError(f"prompt must be integer token ids, got {prompt.dtype}")
    V.nonempty(prompt, "prompt (B, T0)", fn)  # a step needs a prefix to extend
    ids = prompt  # (B, T0)
    for _ in range(n_new):
        logp = step(ids)  # (B, t) -> (B, V)
        if temperature <= 0:
            nxt = logp.argmax(-1, keepdim=True)  # (B, 1)
        else:
            p = (logp / temperature).softmax(-1)  # (B, V)
            nxt = torch.multinomial(p, 1, generator=generator)  # (B, 1)
        ids = torch.cat([ids, nxt], dim=1)  # (B, t + 1)
    return ids
