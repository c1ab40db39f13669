"""Key-value lookup: the task where hard attention is natural (chapter 4).

Each example is a small dictionary of ``n_pairs`` (key, value) symbols with distinct
keys, and a query that is one of the keys; the answer is that key's value. Exactly one
position holds the answer, so a one-hot (hard) alignment is the right one, and we can
compare three ways to train the scores ``<E_q q, E_k k_i> / sqrt(d)``:

* ``"soft"``: softmax weights, exact gradients (Bahdanau-style soft attention);
* ``"gumbel"``: a one-hot sample, straight-through Gumbel-softmax gradients;
* ``"reinforce"``: a one-hot sample, REINFORCE with a moving-average baseline.

(:mod:`attnlab.structured` holds the two hard estimators.) :func:`train_lookup`
trains one estimator and records test accuracy (argmax alignment) along the way;
:func:`grad_variance` measures how noisy an estimator's gradient of the scoring
parameters is over fresh minibatches and samples.

Held-out examples are those a fixed hash of the example puts in the test split
(:func:`is_test`); training batches never contain them. The test set is ``n_test`` of
them, drawn once.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

from . import mappings as M
from .attention import attend
from .devices import num_threads
from .seeding import generator, manual_seed
from .structured import GumbelSoftmax, ReinforceSample

__all__ = [
    "ESTIMATORS",
    "LookupConfig",
    "is_test",
    "lookup_batch",
    "LookupNet",
    "lookup_loss",
    "train_lookup",
    "grad_variance",
]

ESTIMATORS = ("soft", "gumbel", "reinforce")
TEST_SEED = 10_007  # the test set's generator seed; training streams use seed + step


@dataclass
class LookupConfig:
    """Sizes and training settings of the lookup experiment (CPU seconds)."""

    n_symbols: int = 32  # vocabulary of keys and values
    n_pairs: int = 12  # (key, value) pairs per example, distinct keys
    d: int = 32  # embedding size
    batch: int = 64  # training batch size
    lr: float = 3e-3  # Adam's learning rate
    steps: int = 400  # training steps
    tau: tuple = (2.0, 0.5)  # Gumbel temperature: start, floor (decays 0.995 / step)
    entropy_bonus: float = 0.01  # REINFORCE's entropy bonus
    eval_every: int = 25  # steps between test evaluations
    n_test: int = 1000  # test examples (fixed)

    def __post_init__(self):
        if not 1 <= self.n_pairs <= self.n_symbols:
            raise ValueError(
                f"n_pairs must be in 1..n_symbols={self.n_symbols}, got {self.n_pairs}"
            )
        for name in ("d", "batch", "steps", "eval_every", "n_test"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")


def is_test(keys: torch.Tensor, values: torch.Tensor, query: torch.Tensor):
    """(b,) bool: does an example belong to the held-out split? (a fixed hash, 1 in 8)"""
    h = keys.sum(-1) * 31 + values.sum(-1) * 17 + query * 7  # (b,)
    return h % 8 == 0


def lookup_batch(
    cfg: LookupConfig,
    b: int,
    generator: torch.Generator | None = None,
    split: str = "train",
):
    """``keys (b, P), values (b, P), query (b,), answer (b,)``, P = ``cfg.n_pairs``.

    ``split="train"`` keeps only examples with ``is_test`` False, ``"test"`` only those
    with it True: the two splits are disjoint by construction.
    """
    if split not in ("train", "test"):
        raise ValueError(f"split must be 'train' or 'test', got {split!r}")
    parts, have = [], 0
    while have < b:
        n = 2 * b if split == "train" else 10 * b
        keys = torch.argsort(torch.rand(n, cfg.n_symbols, generator=generator), dim=-1)
        keys = keys[:, : cfg.n_pairs]  # (n, P): distinct keys per example
        values = torch.randint(0, cfg.n_symbols, (n, cfg.n_pairs), generator=generator)
        j = torch.randint(0, cfg.n_pairs, (n,), generator=generator)  # (n,)
        rows = torch.arange(n)
        ex = keys, values, keys[rows, j], values[rows, j]
        keep = is_test(*ex[:3]) == (split == "test")  # (n,)
        parts.append(tuple(t[keep] for t in ex))
        have += int(keep.sum())
    return tuple(torch.cat(ts)[:b] for ts in zip(*parts))


class LookupNet(nn.Module):
    """Score each key against the query, attend (with ``mapping``), read the value."""

    def __init__(self, cfg: LookupConfig, mapping: nn.Module):
        super().__init__()
        n, d = cfg.n_symbols, cfg.d
        self.eq, self.ek, self.ev = (
            nn.Embedding(n, d),
            nn.Embedding(n, d),
            nn.Embedding(n, d),
        )
        self.out = nn.Linear(d, n)
        self.mapping = mapping
        self.scale = 1 / math.sqrt(d)

    def score_parameters(self) -> list[torch.Tensor]:
        """The parameters that only the attention scores use (their gradient is the
        one the estimators differ on)."""
        return [self.eq.weight, self.ek.weight]

    def forward(self, keys: torch.Tensor, values: torch.Tensor, query: torch.Tensor):
        """-> logits (B, n_symbols), weights (B, P)."""
        q = self.eq(query)[:, None, :]  # (B, 1, d)
        k, v = self.ek(keys), self.ev(values)  # (B, P, d), (B, P, d)
        score = lambda q, k: (q @ k.transpose(-2, -1)) * self.scale  # noqa: E731
        read, w = attend(q, k, v, score=score, mapping=self.mapping)  # (B, 1, d)
        return self.out(read[:, 0]), w[:, 0]  # (B, n_symbols), (B, P)


def _mapping(estimator: str, cfg: LookupConfig) -> nn.Module:
    if estimator == "soft":
        return M.Softmax()
    if estimator == "gumbel":
        return GumbelSoftmax(tau=cfg.tau[0])
    if estimator == "reinforce":
        return ReinforceSample(entropy_bonus=cfg.entropy_bonus)
    raise ValueError(f"estimator must be one of {ESTIMATORS}, got {estimator!r}")


def lookup_loss(net: LookupNet, batch) -> torch.Tensor:
    """Cross-entropy of the answer, plus REINFORCE's surrogate when it samples."""
    keys, values, query, answer = batch
    logits, _ = net(keys, values, query)
    ce = F.cross_entropy(logits, answer, reduction="none")  # (B,)
    loss = ce.mean()
    if isinstance(net.mapping, ReinforceSample) and net.training:
        loss = loss + net.mapping.surrogate(-ce[:, None])  # reward: log-lik. (B, 1)
    return loss


@torch.no_grad()
def _accuracy(net, test) -> float:
    was = net.training
    net.eval()
    logits, _ = net(*test[:3])
    net.train(was)
    return float((logits.argmax(-1) == test[3]).float().mean())


@dataclass
class LookupRun:
    """What :func:`train_lookup` returns."""

    estimator: str
    seed: int
    steps: list = field(default_factory=list)  # evaluation steps (0 included)
    accuracy: list = field(default_factory=list)  # test accuracy at those steps
    losses: list = field(default_factory=list)  # training cross-entropy per step
    variance: dict = field(default_factory=dict)  # step -> grad_variance(...) result
    seconds: float = 0.0


def train_lookup(
    estimator: str,
    cfg: LookupConfig | None = None,
    seed: int = 0,
    variance_at: tuple = (),
    draws: int = 8,
) -> LookupRun:
    """Train a :class:`LookupNet` with one estimator; test accuracy every few steps.

    All estimators see the same initial weights and the same training batches for a
    given ``seed``; only the mapping (and REINFORCE's extra loss term) differ. At the
    steps in ``variance_at`` (0 = before training) it also records
    :func:`grad_variance` with ``draws`` draws (its own batches: training is unchanged).
    """
    with num_threads(1):  # a model this small trains fastest on one thread
        return _train(estimator, cfg or LookupConfig(), seed, variance_at, draws)


def _train(estimator, cfg, seed, variance_at, draws):
    manual_seed(seed)  # ATTNLAB_SEED moves every seed here (attnlab.seeding)
    net = LookupNet(cfg, _mapping(estimator, cfg))
    opt = torch.optim.Adam(net.parameters(), lr=cfg.lr)
    test = lookup_batch(cfg, cfg.n_test, generator(TEST_SEED), split="test")
    gen = generator(seed)  # training batches
    manual_seed(seed + 1)  # sampling noise
    run = LookupRun(estimator, seed)
    run.steps.append(0)
    run.accuracy.append(_accuracy(net, test))

    def record(step):
        if step in variance_at:
            state = torch.random.get_rng_state()
            run.variance[step] = grad_variance(estimator, cfg, draws, seed, net=net)
            torch.random.set_rng_state(state)

    t0 = time.perf_counter()
    record(0)
    net.train()
    for step in range(1, cfg.steps + 1):
        if isinstance(net.mapping, GumbelSoftmax):
            net.mapping.tau = max(cfg.tau[1], cfg.tau[0] * 0.995**step)
        batch = lookup_batch(cfg, cfg.batch, gen)
        loss = lookup_loss(net, batch)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        run.losses.append(loss.item())
        record(step)
        if step % cfg.eval_every == 0 or step == cfg.steps:
            run.steps.append(step)
            run.accuracy.append(_accuracy(net, test))
    run.seconds = time.perf_counter() - t0
    return run


def grad_variance(
    estimator: str,
    cfg: LookupConfig | None = None,
    draws: int = 32,
    seed: int = 0,
    net: LookupNet | None = None,
) -> dict:
    """How noisy is an estimator's gradient of the scoring parameters?

    Takes ``draws`` gradients of the loss with respect to :meth:`LookupNet.score_parameters`
    at the *same* weights (a fresh :class:`LookupNet` from ``seed`` unless ``net`` is
    given), each on a fresh training minibatch and fresh sampling noise. With ``net``
    the estimator is measured as training uses it at that point: Gumbel-ST at the
    mapping's current temperature ``net.mapping.tau``, REINFORCE with the mapping's
    current moving-average baseline (every draw starts from that same baseline; before
    the first training step, when there is none yet, each draw uses its own batch's
    mean reward, as the first training step does). ``net`` itself is left unchanged.
    Returns
    ``{"variance": trace of their covariance (sum over coordinates of the variance),
    "mean_sq": squared norm of their mean, "snr": mean_sq / variance,
    "snr_unbiased": (mean_sq - variance / draws) / variance, "floor": 1 / draws}``.

    The squared norm of a mean of ``draws`` noisy gradients overestimates the squared
    norm of the true mean by ``variance / draws`` on average, so the plain ``snr``
    never falls much below ``1 / draws`` even for pure noise; ``snr_unbiased``
    subtracts that floor (and can be slightly negative when the signal is below it).
    """
    cfg = cfg or LookupConfig()
    if draws < 2:
        raise ValueError(f"draws must be >= 2, got {draws}")
    manual_seed(seed)
    base = LookupNet(cfg, _mapping(estimator, cfg))
    if net is not None:
        if type(net.mapping) is not type(base.mapping):
            raise ValueError(
                f"grad_variance: estimator {estimator!r} needs a "
                f"{type(base.mapping).__name__} mapping, net has "
                f"{type(net.mapping).__name__}"
            )
        base.load_state_dict(net.state_dict())  # weights and REINFORCE's baseline
        mapping, trained = base.mapping, net.mapping
        if isinstance(mapping, GumbelSoftmax) and isinstance(trained, GumbelSoftmax):
            mapping.tau = trained.tau  # a plain attribute, not in the state
    base.train()
    start = {k: t.clone() for k, t in base.mapping.state_dict().items()}
    gen = generator(seed + 99)
    grads = []
    for _ in range(draws):
        base.mapping.load_state_dict(start)  # every draw from the same baseline
        loss = lookup_loss(base, lookup_batch(cfg, cfg.batch, gen))
        g = torch.autograd.grad(loss, base.score_parameters())
        grads.append(torch.cat([t.flatten() for t in g]))
    G = torch.stack(grads)  # (draws, n_params)
    var = float(G.var(dim=0).sum())
    mean_sq = float(G.mean(dim=0).square().sum())
    return {
        "variance": var,
        "mean_sq": mean_sq,
        "snr": mean_sq / var,
        "snr_unbiased": (mean_sq - var / draws) / var,
        "floor": 1.0 / draws,
    }
