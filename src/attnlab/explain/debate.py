"""The tests of the attention-as-explanation debate: Jain & Wallace (2019), Wiegreffe &
Pinter (2019), Serrano & Smith (2019), Pruthi et al. (2020)."""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

from .. import validation as V
from ..classifiers import AttentionClassifier, accuracy_f1
from ..mappings.basic import upcast
from ..seeding import generator, manual_seed
from ..train import fit_classifier
from .importance import jsd


# --------------------------------------------------------- Jain & Wallace (2019)
def _check_decoder_args(h, weights, mask) -> None:
    if weights.dim() != 2 or mask.shape != weights.shape or mask.dtype != torch.bool:
        raise ValueError(
            f"need weights (B, T) and a boolean mask of that shape, got "
            f"{tuple(weights.shape)} and {tuple(mask.shape)} {mask.dtype}"
        )
    if h.shape[:2] != weights.shape:
        raise ValueError(
            f"h must be (B, T, ...) like weights {tuple(weights.shape)}, got {tuple(h.shape)}"
        )


@torch.no_grad()
def permutation_test(
    decode: Callable,
    h: torch.Tensor,
    weights: torch.Tensor,
    mask: torch.Tensor,
    n_perm: int = 100,
    seed: int = 0,
) -> torch.Tensor:
    """J&W (2019, §4.2.1): shuffle the attention weights, keep everything else; (B,).

    Per example, the median over ``n_perm`` random permutations of the weights among
    its real tokens of ``|sigmoid(decode(h, w_perm)) - sigmoid(decode(h, w))|``. A
    small value means the output does not care *which* token gets which weight.
    """
    _check_decoder_args(h, weights, mask)
    if n_perm < 1:
        raise ValueError(f"n_perm must be >= 1, got {n_perm}")
    g = generator(seed)
    B, T = weights.shape
    y = torch.sigmoid(decode(h, weights))  # (B,)
    real = torch.argsort((~mask).int(), dim=1, stable=True)  # real positions first
    diffs = []
    for _ in range(n_perm):
        keys = torch.rand(B, T, generator=g).to(weights.device).masked_fill(~mask, 2.0)
        shuffled = torch.argsort(keys, dim=1)  # the real positions, shuffled, first
        w = torch.zeros_like(weights).scatter(1, real, weights.gather(1, shuffled))
        diffs.append((torch.sigmoid(decode(h, w)) - y).abs())
    return torch.stack(diffs, 1).median(1).values  # (B, n_perm) -> (B,)


def adversarial_attention(
    decode: Callable,
    h: torch.Tensor,
    weights: torch.Tensor,
    mask: torch.Tensor,
    eps: float = 0.01,
    k: int = 4,
    steps: int = 300,
    lr: float = 0.05,
    penalty: float = 500.0,
    seed: int = 0,
):
    """J&W (2019, §4.2.2): the most different attention that leaves the output alone.

    Searches, per example, ``max JSD(w', w)`` subject to ``|sigmoid(decode(h, w')) -
    sigmoid(decode(h, w))| <= eps``, the relaxation of J&W's code: Adam on the logits
    of ``k`` candidate distributions (started from uniform plus N(0, 3²) noise), loss
    ``-JSD + penalty * relu(|Δŷ| - eps)``, ``h`` fixed. (J&W also reward diversity
    among their candidates and run 500 steps at lr 0.01.) Returns ``(best (B, T),
    max_jsd (B,), dy (B,))``: of the final candidates *within eps*, the one farthest
    from ``w`` (``w`` itself, JSD 0, where none is), its JSD (at most ln 2) and its
    ``|Δŷ|``, which is therefore always <= eps.
    """
    _check_decoder_args(h, weights, mask)
    if not eps >= 0:
        raise ValueError(f"eps must be >= 0, got {eps}")
    if k < 1 or steps < 0:
        raise ValueError(f"need k >= 1 and steps >= 0, got k={k}, steps={steps}")
    g = generator(seed)
    h, w0 = h.detach(), weights.detach()
    with torch.no_grad():
        y0 = torch.sigmoid(decode(h, w0))  # (B,)
    B, T = w0.shape
    noise = 3 * torch.randn(B, k, T, generator=g, dtype=w0.dtype).to(w0.device)
    logits = noise.requires_grad_(True)  # (B, k, T)
    mk = mask[:, None].expand(B, k, T)
    hk = h[:, None].expand(B, k, *h.shape[1:]).reshape(B * k, *h.shape[1:])
    opt = torch.optim.Adam([logits], lr=lr)

    def candidates():
        w = torch.softmax(logits.masked_fill(~mk, float("-inf")), -1)  # (B, k, T)
        y = torch.sigmoid(decode(hk, w.reshape(B * k, T))).view(B, k)
        return w, (y - y0[:, None]).abs(), jsd(w, w0[:, None])

    for _ in range(steps):
        w, dy, div = candidates()
        loss = (-div + penalty * F.relu(dy - eps)).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
    with torch.no_grad():
        w, dy, div = candidates()
        ok = dy <= eps  # (B, k) feasible candidates
        best = div.masked_fill(~ok, -1.0).argmax(1)  # (B,)
        feasible = ok.any(1)
        rows = torch.arange(B, device=w.device)
        chosen = torch.where(feasible[:, None], w[rows, best], w0)
        max_jsd = torch.where(feasible, div[rows, best], 0.0)
        dy_best = torch.where(feasible, dy[rows, best], 0.0)
    return chosen, max_jsd, dy_best


# -------------------------------------------------------- Wiegreffe & Pinter (2019)
def wp_adversary(
    base, data, lam: float = 0.1, epochs: int = 3, seed: int = 1, **fit_kwargs
):
    """W&P (2019, §4): *train* a model to predict like ``base`` with other attention.

    Per example the loss is :func:`wp_adversary_loss`, ``TVD(ŷ_adv, ŷ_base) - lam *
    KL(α_adv || α_base)``: the total variation between the two models' output
    distributions (for one probability, ``|ŷ_adv - ŷ_base|``) minus the divergence of
    the adversary's attention from the base model's, in the direction of W&P's code. Unlike J&W's
    per-example search, the adversary is one model, consistent across the data.
    ``base``: an :class:`~attnlab.classifiers.AttentionClassifier`; ``data``: the
    training :class:`~attnlab.data.RationaleData`. Returns the trained adversary (same
    architecture, eval mode).
    """
    if lam < 0:
        raise ValueError(f"lam must be >= 0, got {lam}")
    base.eval()
    with torch.no_grad():
        logit, a_base = base(data.ids, data.mask)  # (N,), (N, T)
    y_base = torch.sigmoid(logit)
    manual_seed(seed)
    adv = base.make_like()

    def loss_fn(model, batch, idx):
        yb, ab = y_base[idx], a_base[idx, : batch.ids.shape[1]]  # (B,), (B, T)
        logit, a = model(batch.ids, batch.mask)
        return wp_adversary_loss(torch.sigmoid(logit), yb, a, ab, lam).mean()

    fit_classifier(adv, data, epochs=epochs, seed=seed, loss_fn=loss_fn, **fit_kwargs)
    return adv.eval()


def wp_adversary_loss(
    y_adv: torch.Tensor,
    y_base: torch.Tensor,
    a_adv: torch.Tensor,
    a_base: torch.Tensor,
    lam: float,
) -> torch.Tensor:
    """W&P's (2019) adversary objective per example, (B,): lower is better.

    ``|y_adv - y_base| - lam * KL(a_adv || a_base)``, with ``KL(a_adv || a_base) =
    sum_t a_adv,t (log a_adv,t - log a_base,t)`` (0 log 0 = 0). The direction is the
    one of W&P's code, ``nn.KLDivLoss()(a_base.log(), a_adv)``: it rewards the
    adversary for piling weight on tokens the base model ignores (the reverse
    direction would reward zeroing the base model's favourite tokens instead).
    ``y_*`` (B,) probabilities of label 1; ``a_*`` (B, T) attention, zero on padding.
    """
    if y_adv.shape != y_base.shape or a_adv.shape != a_base.shape:
        raise ValueError(
            f"need y_adv, y_base (B,) and a_adv, a_base (B, T) of matching shapes, got "
            f"{tuple(y_adv.shape)}, {tuple(y_base.shape)}, {tuple(a_adv.shape)}, "
            f"{tuple(a_base.shape)}"
        )
    tvd = (y_adv - y_base).abs()  # (B,)
    log_ratio = a_adv.clamp_min(1e-30).log() - a_base.clamp_min(1e-30).log()
    kl = torch.where(a_adv > 0, a_adv * log_ratio, 0.0).sum(-1)  # (B,)
    return tvd - lam * kl


def diagnostic_mlp(
    train,
    test,
    w_train: torch.Tensor,
    w_test: torch.Tensor,
    epochs: int = 3,
    seed: int = 1,
    **fit_kwargs,
) -> tuple[float, float]:
    """W&P (2019, §5): a model without context, pooled with *frozen* outside weights.

    Trains an :class:`~attnlab.classifiers.AttentionClassifier` with the ``"average"``
    encoder (each token alone) whose attention is replaced by ``w_train`` (N, T) while
    training and by ``w_test`` when tested. Weights from a model that knew which
    tokens matter should beat uniform weights. Returns the test ``(accuracy, F1)``.
    """
    if w_train.shape != train.ids.shape or w_test.shape != test.ids.shape:
        raise ValueError(
            f"w_train {tuple(w_train.shape)} and w_test {tuple(w_test.shape)} must match "
            f"the data {tuple(train.ids.shape)}, {tuple(test.ids.shape)}"
        )
    manual_seed(seed)
    mlp = AttentionClassifier(len(train.vocab), "average")
    w_train = w_train.detach()

    def loss_fn(model, batch, idx):
        w = w_train[idx, : batch.ids.shape[1]]  # (B, T) frozen weights
        logit = model(batch.ids, batch.mask, weights=w)[0]
        return F.binary_cross_entropy_with_logits(logit, batch.labels.float())

    fit_classifier(mlp, train, epochs=epochs, seed=seed, loss_fn=loss_fn, **fit_kwargs)
    return accuracy_f1(mlp, test, weights=w_test.detach())


# -------------------------------------------------------------- Serrano & Smith (2019)
def weight_gradient(
    decode: Callable, h: torch.Tensor, weights: torch.Tensor
) -> torch.Tensor:
    """How much each attention weight pushes toward the current decision, (B, T).

    ``d s / d w_t`` with ``s = logit`` where the decision is positive and ``-logit``
    where it is negative: the gradient ranking of Serrano & Smith (2019, §4), erased
    highest first.
    """
    w = weights.detach().requires_grad_(True)
    logit = decode(h.detach(), w)  # (B,)
    sign = torch.where(logit.detach() > 0, 1.0, -1.0)
    (g,) = torch.autograd.grad((sign * logit).sum(), w)
    return g  # (B, T)


@torch.no_grad()
def erasure_test(
    decode: Callable,
    h: torch.Tensor,
    weights: torch.Tensor,
    mask: torch.Tensor,
    order: torch.Tensor,
):
    """S&S (2019, §5): erase attended items, top-ranked first, until the decision flips.

    ``order`` (B, T): a score per item, erased highest first (attention itself, a
    gradient, random numbers). Erasing sets an item's weight to 0 and renormalises
    the rest; ``h`` stays fixed (S&S erase the encoded items, not the words). Returns
    ``(fraction (B,), flipped (B,) bool)``: the fraction of the real items erased when
    the decision first flipped, 1.0 where it never flipped before one item was left.
    """
    _check_decoder_args(h, weights, mask)
    if order.shape != weights.shape:
        raise ValueError(
            f"order {tuple(order.shape)} must match weights {tuple(weights.shape)}"
        )
    B, T = weights.shape
    decision = decode(h, weights) > 0  # (B,)
    ranked = order.masked_fill(~mask, float("-inf")).argsort(
        dim=1, descending=True, stable=True
    )
    n = mask.sum(1)  # (B,)
    frac = torch.ones(B, dtype=torch.float64)
    flipped = torch.zeros(B, dtype=torch.bool)
    keep = mask.clone()
    rows = torch.arange(B)
    for j in range(T - 1):
        live = (j < n - 1) & ~flipped  # always leave at least one item
        if not live.any():
            break
        item = ranked[:, j]  # (B,) the next item to erase
        keep[rows[live], item[live]] = False
        w = weights * keep
        w = w / w.sum(1, keepdim=True).clamp_min(1e-12)  # renormalise what is left
        new = ((decode(h, w) > 0) != decision) & live
        frac[new] = (j + 1) / n[new].double()
        flipped |= new
    return frac, flipped


# ----------------------------------------------------------- Pruthi et al. (2020)
def deception_penalty(
    weights: torch.Tensor, impermissible: torch.Tensor
) -> torch.Tensor:
    """Pruthi et al. (2020, "Learning to deceive"): ``-log(1 - alpha^T m)``, (B,).

    ``weights`` (B, T) attention on the simplex; ``impermissible`` (B, T) bool, the
    tokens the attention should seem to ignore. Zero when no weight is on them,
    growing without bound as all of it is; the mass is capped at ``1 - 1e-6`` so the
    value stays finite. Subtracting ``lam`` times ``log(1 - alpha^T m)`` from a
    model's loss (:func:`deceptive_loss`) trains it to hide those tokens from its
    attention, whether or not it still uses them.
    """
    V.distribution(weights, "weights", "deception_penalty")
    V.tensor(impermissible, "impermissible", "deception_penalty")
    if weights.shape != impermissible.shape or weights.dim() != 2:
        raise ValueError(
            f"weights and impermissible must both be (B, T), got "
            f"{tuple(weights.shape)} and {tuple(impermissible.shape)}"
        )
    if impermissible.dtype != torch.bool:
        raise TypeError(f"impermissible must be boolean, got {impermissible.dtype}")
    # in float32 at least: 1 - 1e-6 rounds to 1 in float16 (and -log 0 = inf)
    w = upcast(weights)
    mass = (w * impermissible).sum(1).clamp(max=1 - 1e-6)  # (B,)
    return (-torch.log1p(-mass)).to(weights.dtype)


def deceptive_loss(lam: float) -> Callable:
    """A ``loss_fn`` for :func:`attnlab.train.fit_classifier` (Pruthi et al. 2020).

    Binary cross-entropy plus ``lam`` times the mean :func:`deception_penalty`, with
    each example's rationale (``batch.rationale``) as the impermissible tokens: the
    model is rewarded for predicting well *and* for keeping its attention off the
    tokens that decide the label.
    """
    if not lam >= 0:
        raise ValueError(f"lam must be >= 0, got {lam}")

    def loss_fn(model, batch, idx):
        logit, weights = model(batch.ids, batch.mask)  # (B,), (B, T)
        bce = F.binary_cross_entropy_with_logits(logit, batch.labels.float())
        return bce + lam * deception_penalty(weights, batch.rationale).mean()

    return loss_fn
