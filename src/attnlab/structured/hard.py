"""Hard attention: Gumbel-softmax straight-through and REINFORCE samples of one key."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .. import mappings as M
from ..mappings.basic import check_dim, check_float


# ------------------------------------------------------------------ hard attention
def _dead_rows(scores: torch.Tensor) -> torch.Tensor:
    """(..., 1) True where every score of the row is -inf (a fully masked query)."""
    return ~(scores > float("-inf")).any(dim=-1, keepdim=True)


def _check_scores(scores, name):
    check_dim(scores, -1, name)
    check_float(scores, name)
    if bool(torch.isnan(scores).any() | (scores == float("inf")).any()):
        raise ValueError(f"{name}: scores contain NaN or +inf ({tuple(scores.shape)})")


class GumbelSoftmax(nn.Module):
    """Hard attention trained with straight-through Gumbel-softmax.

    Training mode: ``F.gumbel_softmax(scores / 1, tau, hard=True)`` along the last dim:
    the forward value is a one-hot sample from ``softmax(scores)`` (the Gumbel-max
    trick), the gradient is that of the relaxed sample ``softmax((scores + g) / tau)``.
    ``hard=False`` returns the relaxed sample itself. Evaluation mode: the one-hot
    argmax (the most likely key), no sampling. ``tau`` can be changed between steps
    (annealing).
    """

    def __init__(self, tau: float = 1.0, hard: bool = True):
        super().__init__()
        if not tau > 0:
            raise ValueError(f"GumbelSoftmax: tau must be > 0, got {tau}")
        self.tau, self.hard = tau, hard

    def forward(self, scores: torch.Tensor) -> torch.Tensor:
        _check_scores(scores, "GumbelSoftmax")
        if scores.numel() == 0:  # no key or no row: nothing to sample
            return torch.zeros_like(scores)
        dead = _dead_rows(scores)  # (..., 1)
        safe = scores.masked_fill(dead, 0.0)  # a dead row would give NaN
        if self.training:
            w = F.gumbel_softmax(safe, tau=self.tau, hard=self.hard, dim=-1)
        else:
            w = M.argmax(safe)
        return w.masked_fill(dead, 0.0)  # (..., S)

    def extra_repr(self) -> str:
        return f"tau={self.tau}, hard={self.hard}"


class ReinforceSample(nn.Module):
    """Hard attention trained with REINFORCE (the score-function estimator).

    ``forward(scores)`` samples one key per row from ``softmax(scores)`` (training
    mode; the argmax in evaluation mode) and returns it one-hot, with no gradient. It
    keeps the sample's ``log_prob`` and the distribution's ``entropy`` (shape ``(...)``
    = the scores' shape without the last dim). After computing a per-sample reward
    (e.g. minus the per-example loss, any shape broadcastable to ``log_prob``), add
    ``surrogate(reward)`` to the loss:

    ``-(reward - b) * log_prob - entropy_bonus * entropy`` (averaged),

    whose gradient is the REINFORCE estimate of ``-∇ E[reward]`` with baseline ``b``,
    an exponential moving average of past rewards (``momentum``), plus an entropy bonus
    that keeps exploring (Xu et al., 2015 use both).
    """

    baseline: torch.Tensor  # buffers
    initialised: torch.Tensor

    def __init__(self, momentum: float = 0.9, entropy_bonus: float = 0.01):
        super().__init__()
        if not 0.0 <= momentum < 1.0:
            raise ValueError(
                f"ReinforceSample: momentum must be in [0, 1), got {momentum}"
            )
        self.momentum, self.entropy_bonus = momentum, entropy_bonus
        self.register_buffer("baseline", torch.zeros(()))
        self.register_buffer("initialised", torch.zeros((), dtype=torch.bool))
        self.log_prob: torch.Tensor | None = None
        self.entropy: torch.Tensor | None = None
        self._live: torch.Tensor | None = None

    def forward(self, scores: torch.Tensor) -> torch.Tensor:
        _check_scores(scores, "ReinforceSample")
        if scores.numel() == 0:  # no key or no row: nothing to sample
            return torch.zeros_like(scores)
        dead = _dead_rows(scores)  # (..., 1)
        safe = scores.masked_fill(dead, 0.0)
        dist = torch.distributions.Categorical(logits=safe)
        idx = dist.sample() if self.training else safe.argmax(dim=-1)  # (...)
        self.log_prob = dist.log_prob(idx)  # (...)
        self.entropy = dist.entropy()  # (...)
        self._live = ~dead[..., 0]  # (...)
        w = F.one_hot(idx, scores.shape[-1]).to(scores.dtype)  # (..., S)
        return w.masked_fill(dead, 0.0)

    def surrogate(self, reward: torch.Tensor) -> torch.Tensor:
        """The loss term whose gradient is the REINFORCE estimate (updates the baseline).

        ``reward`` is treated as a constant (detached); call once per forward pass.
        """
        if self.log_prob is None:
            raise RuntimeError("ReinforceSample.surrogate: call forward first")
        assert self.entropy is not None and self._live is not None  # set with log_prob
        reward = reward.detach()
        try:
            reward = reward.expand_as(self.log_prob)
        except RuntimeError:
            raise ValueError(
                f"ReinforceSample.surrogate: reward of shape {tuple(reward.shape)} "
                f"does not broadcast to the samples' shape {tuple(self.log_prob.shape)}"
            ) from None
        live = self._live.to(reward.dtype)
        n = live.sum().clamp(min=1)
        mean_r = (reward * live).sum() / n
        if not bool(self.initialised):
            self.baseline.fill_(float(mean_r))
            self.initialised.fill_(True)
        adv = reward - self.baseline  # advantage, computed with the *old* baseline
        term = -(adv * self.log_prob) - self.entropy_bonus * self.entropy
        with torch.no_grad():
            m = self.momentum
            self.baseline.mul_(m).add_((1 - m) * mean_r)
        return (term * live).sum() / n

    def extra_repr(self) -> str:
        return f"momentum={self.momentum}, entropy_bonus={self.entropy_bonus}"
