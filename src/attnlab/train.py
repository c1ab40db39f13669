"""Training: the loop, the loss, the learning-rate schedules and the metrics.

:func:`fit` trains any ``nn.Module`` on any iterable of batches. It prints one plain line
every ``log_every`` steps (readable in a notebook and in a CI log, no extra package),
records the loss history, can evaluate every ``eval_every`` steps and stop early once
a target accuracy is reached.

==========================  ==============================================  ==========
piece                       here                                            paper
==========================  ==============================================  ==========
token loss (+ smoothing)    :func:`token_loss`                              Szegedy 2016
warm-up + cosine / linear   ``fit(schedule=..., warmup=...)``               —
Noam schedule               ``fit(schedule="noam")``, :func:`noam_lr`       Vaswani 2017
==========================  ==============================================  ==========

The seq2seq models of chapters 1 and 7 follow :class:`attnlab.decoding.Seq2SeqModel`
(``logits(batch)``, ``step(src, src_lengths)``, ``pad_id``/``bos_id``/``eos_id``),
which the defaults here use: the loss is :func:`token_loss` of ``model.logits(batch)``,
the evaluation decodes greedily with :func:`attnlab.decoding.greedy_decode`.

Typical use::

    task = attnlab.data.make_task("reversal", lengths=(4, 30))
    hist = attnlab.train.fit(
        model, task.stream(64, seed=0), steps=600, lr=3e-3,
        eval_fn=lambda m: attnlab.train.evaluate(m, task, n=200)["accuracy"],
        target=0.99,
    )
    hist.losses[-1], hist.seconds, hist.stopped_early
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

from . import validation as V
from .data import Batch, Task, Vocab
from .decoding import Seq2SeqModel, greedy_decode
from .devices import num_threads, seed_everything
from .rationales import RationaleData, minibatches

__all__ = [
    "History",
    "fit",
    "token_loss",
    "noam_lr",
    "noam_scheduler",
    "exact_match",
    "greedy_ids",
    "evaluate",
    "accuracy_by_length",
    "fit_classifier",
    "bce_loss",
]


@dataclass
class History:
    """What :func:`fit` did."""

    losses: list = field(default_factory=list)  # training loss at every step
    evals: list = field(default_factory=list)  # (step, value) pairs from eval_fn
    steps: int = 0  # optimisation steps taken
    seconds: float = 0.0  # wall-clock training time, evaluation included
    stopped_early: bool = False  # True if eval_fn reached the target

    def smoothed(self, window: int = 20) -> list[float]:
        """Running mean of the loss over ``window`` steps (for plots)."""
        out, acc = [], 0.0
        for i, x in enumerate(self.losses):
            acc += x
            if i >= window:
                acc -= self.losses[i - window]
            out.append(acc / min(i + 1, window))
        return out


def token_loss(
    logits: torch.Tensor,
    targets: torch.Tensor,
    pad_id: int = Vocab.pad_id,
    label_smoothing: float = 0.0,
) -> torch.Tensor:
    """Mean cross-entropy over the non-padding target tokens, optionally smoothed.

    With ``label_smoothing = eps`` the target puts ``1 - eps`` on the gold token and
    ``eps`` spread uniformly over all V classes (Szegedy et al., 2016)::

        loss = (1 - eps) * (-log p_y) + eps * mean_c(-log p_c)

    logits (..., V), targets (...) -> scalar, averaged over the positions whose target
    is not ``pad_id`` (pass ``pad_id=-100`` to average over all of them).

    Parameters
    ----------
    logits : floating-point tensor ``(..., V)``.
    targets : class ids ``(...)`` (the leading shape of ``logits``).
    pad_id : the target id left out of the mean.
    label_smoothing : ``eps`` in [0, 1).

    Returns
    -------
    scalar tensor, the mean loss over the non-padding targets.

    Raises
    ------
    TypeError
        ``targets`` are not integer ids.
    ValueError
        the shapes do not match, or ``label_smoothing`` is outside [0, 1).
    """
    V.floating(logits, "logits", "token_loss", min_dim=2)
    V.tensor(targets, "targets", "token_loss")
    if (
        targets.is_floating_point()
        or targets.is_complex()
        or targets.dtype == torch.bool
    ):
        raise TypeError(f"token_loss: targets must be class ids, got {targets.dtype}")
    if logits.shape[-1] == 0:
        raise ValueError("token_loss: logits needs at least one class (V >= 1)")
    if logits.dim() < 2 or logits.shape[:-1] != targets.shape:
        raise ValueError(
            f"token_loss expects logits (..., V) and targets (...), e.g. (B, T, V) and "
            f"(B, T); got {tuple(logits.shape)} and {tuple(targets.shape)}"
        )
    if not 0.0 <= label_smoothing < 1.0:
        raise ValueError(f"label_smoothing must be in [0, 1), got {label_smoothing}")
    if not bool((targets != pad_id).any()):
        raise ValueError(f"every target is pad_id={pad_id}: nothing to average")
    n_classes = logits.shape[-1]  # V
    return F.cross_entropy(
        logits.reshape(-1, n_classes),  # (N, V)
        targets.reshape(-1),  # (N,)
        ignore_index=pad_id,
        label_smoothing=label_smoothing,
    )


def noam_lr(step: int, d_model: int, warmup: int = 4000, factor: float = 1.0) -> float:
    """The learning rate of Vaswani et al. (2017), §5.3, at ``step`` (counted from 1)::

        lr = factor * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)

    Linear warm-up for ``warmup`` steps, then decay as ``1/√step``.

    Parameters
    ----------
    step : the optimiser step, counted from 1.
    d_model : the model width, an int >= 1.
    warmup : the warm-up length in steps, >= 1.
    factor : a constant multiplier.

    Returns
    -------
    float, the learning rate at ``step``; its peak is at ``step == warmup``.

    Raises
    ------
    ValueError
        ``step`` or ``warmup`` is < 1, or ``d_model`` is < 1 (TypeError if not an int).
    """
    if step < 1 or warmup < 1:
        raise ValueError(f"step and warmup are counted from 1, got {step}, {warmup}")
    d_model = V.integer(d_model, "d_model", "noam_lr", low=1)
    return factor * d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)


def noam_scheduler(optimizer, d_model: int, warmup: int = 4000, factor: float = 1.0):
    """A ``LambdaLR`` that sets every group's learning rate to :func:`noam_lr`.

    Call ``scheduler.step()`` after each ``optimizer.step()``. The optimizer's own lr
    is overridden (the lambda divides it out). ``fit(schedule="noam")`` uses the same
    curve scaled so that its peak is ``fit``'s ``lr``.

    Parameters
    ----------
    optimizer : a ``torch.optim.Optimizer`` whose groups have an lr > 0.
    d_model, warmup, factor : as in :func:`noam_lr`.

    Returns
    -------
    ``torch.optim.lr_scheduler.LambdaLR``.

    Raises
    ------
    ValueError
        a group's lr is <= 0.
    """
    base = [g["lr"] for g in optimizer.param_groups]
    if any(b <= 0 for b in base):
        raise ValueError(f"the optimizer's lr must be > 0, got {base}")

    def curve(b: float) -> Callable[[int], float]:
        return lambda s: noam_lr(s + 1, d_model, warmup, factor) / b

    lambdas = [curve(b) for b in base]
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lambdas)


def _default_loss(model, batch, label_smoothing: float = 0.0):
    if not hasattr(model, "logits"):
        raise TypeError(
            f"{type(model).__name__} has no .logits(batch) (see "
            "attnlab.decoding.Seq2SeqModel); pass loss_fn=(model, batch) -> loss"
        )
    return token_loss(model.logits(batch), batch.tgt_out, model.pad_id, label_smoothing)


def fit(
    model: nn.Module,
    batches: Iterable,
    loss_fn: Callable | None = None,
    *,
    steps: int = 1000,
    lr: float = 3e-3,
    optimizer: torch.optim.Optimizer | None = None,
    clip: float | None = 1.0,
    schedule: str | None = None,
    warmup: int = 0,
    label_smoothing: float = 0.0,
    eval_fn: Callable[[nn.Module], float] | None = None,
    eval_every: int = 100,
    target: float | None = None,
    log_every: int = 100,
    seed: int | None = 0,
    device=None,
    threads: int | None = 1,
    quiet: bool = False,
) -> History:
    """Train ``model`` for ``steps`` steps on ``batches`` (Adam by default).

    Parameters
    ----------
    model : the module; put in train mode while stepping, eval mode while evaluating.
    batches : any iterable of batches (e.g. :meth:`attnlab.data.Task.stream`); it may
        be shorter than ``steps`` (training then ends early).
    loss_fn : ``(model, batch) -> scalar loss``; default :func:`token_loss` of
        ``model.logits(batch)`` against ``batch.tgt_out`` (a
        :class:`~attnlab.decoding.Seq2SeqModel`).
    steps, lr, optimizer : number of steps; Adam's learning rate unless an optimizer is
        given.
    clip : max global gradient norm (None: no clipping).
    schedule : None (constant learning rate), ``"cosine"`` or ``"linear"`` decay to
        zero at ``steps``, after ``warmup`` steps of linear warm-up; or ``"noam"``
        (warm-up, then ``1/√step`` decay, peaking at ``lr``; see :func:`noam_lr`).
    label_smoothing : passed to the default loss (:func:`token_loss`).
    eval_fn : ``model -> float`` (e.g. exact-match accuracy), run every ``eval_every``
        steps and at the end, under ``torch.no_grad()``.
    target : stop as soon as ``eval_fn`` returns at least this.
    log_every : print one line every ``log_every`` steps (and at the end).
    seed : seeds Python, NumPy and torch before the first step (None: leave as is). The
        model's initial weights come from whatever seed was set when it was built.
    device : move each :class:`~attnlab.data.Batch` there (None: leave where it is).
    threads : torch's CPU threads while training (restored afterwards). One thread is
        fastest for small models, and far faster on a busy machine; None: leave as is.
    quiet : print nothing.

    Returns
    -------
    History with the per-step losses, the evaluations, the steps and the seconds.
    """
    if steps < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")
    if target is not None and eval_fn is None:
        raise ValueError("target needs an eval_fn to compare against")
    if seed is not None:
        seed_everything(seed)
    with num_threads(threads):
        if loss_fn is None:

            def loss_fn(m, b):
                return _default_loss(m, b, label_smoothing)

        opt = optimizer or torch.optim.Adam(model.parameters(), lr=lr)
        sched = _scheduler(opt, schedule, warmup, steps)
        hist = History()
        say = (lambda *a: None) if quiet else (lambda *a: print(*a, flush=True))
        t0 = time.perf_counter()
        last_eval = None

        def run_eval(step):
            assert eval_fn is not None  # only called when given
            model.eval()
            with torch.no_grad():
                value = float(eval_fn(model))
            model.train()
            hist.evals.append((step, value))
            return value

        model.train()
        it = iter(batches)
        for step in range(1, steps + 1):
            try:
                batch = next(it)
            except StopIteration:
                break
            if device is not None and isinstance(batch, Batch):
                batch = batch.to(device)
            loss = loss_fn(model, batch)
            if not torch.isfinite(loss):
                raise FloatingPointError(f"fit: loss is {loss.item()} at step {step}")
            opt.zero_grad(set_to_none=True)
            loss.backward()
            if clip is not None:
                nn.utils.clip_grad_norm_(model.parameters(), clip)
            opt.step()
            sched.step()
            hist.losses.append(loss.item())
            hist.steps = step
            if eval_fn is not None and step % eval_every == 0:
                last_eval = run_eval(step)
            if step % log_every == 0 or step == steps:
                _log(say, step, steps, hist, last_eval, t0)
            if target is not None and last_eval is not None and last_eval >= target:
                hist.stopped_early = step < steps
                if step % log_every:
                    _log(say, step, steps, hist, last_eval, t0)
                say(f"reached target {target:g} at step {step}")
                break
        if eval_fn is not None and (not hist.evals or hist.evals[-1][0] != hist.steps):
            run_eval(hist.steps)
        model.eval()
        hist.seconds = time.perf_counter() - t0
        return hist


def _scheduler(opt, schedule, warmup, steps):
    if schedule not in (None, "cosine", "linear", "noam"):
        raise ValueError(
            f"schedule must be None, 'cosine', 'linear' or 'noam', got {schedule!r}"
        )
    if schedule == "noam" and warmup < 1:
        raise ValueError("schedule='noam' needs warmup >= 1")
    if warmup < 0 or warmup >= steps:
        raise ValueError(f"warmup must be in 0..steps-1={steps - 1}, got {warmup}")

    def factor(i):  # i = steps already taken
        if schedule == "noam":  # noam_lr / its peak at step == warmup
            return noam_lr(i + 1, 1, warmup) / noam_lr(warmup, 1, warmup)
        if i < warmup:
            return (i + 1) / warmup
        if schedule is None:
            return 1.0
        frac = (i - warmup) / max(1, steps - warmup)
        if schedule == "linear":
            return max(0.0, 1.0 - frac)
        return 0.5 * (1.0 + math.cos(math.pi * min(frac, 1.0)))

    return torch.optim.lr_scheduler.LambdaLR(opt, factor)


def _log(say, step, steps, hist, last_eval, t0):
    window = hist.losses[-50:]
    line = f"step {step:>5}/{steps}  loss {sum(window) / len(window):.4f}"
    if last_eval is not None:
        line += f"  eval {last_eval:.3f}"
    say(line + f"  {time.perf_counter() - t0:6.1f} s")


def exact_match(
    pred: torch.Tensor, gold: torch.Tensor, eos_id: int = Vocab.eos_id
) -> torch.Tensor:
    """Per example, is the prediction exactly the target? (B,) bool.

    ``pred (B, T')`` and ``gold (B, T)`` are id sequences that end with ``<eos>``
    (anything after the first ``<eos>`` is ignored; a missing ``<eos>`` is a mismatch
    unless the sequences agree everywhere).
    """
    if pred.dim() != 2 or gold.dim() != 2 or pred.shape[0] != gold.shape[0]:
        raise ValueError(
            f"exact_match expects pred (B, T') and gold (B, T), got "
            f"{tuple(pred.shape)} and {tuple(gold.shape)}"
        )
    out = torch.zeros(pred.shape[0], dtype=torch.bool)
    for b, (p, g) in enumerate(zip(pred.tolist(), gold.tolist())):
        out[b] = _cut(p, eos_id) == _cut(g, eos_id)
    return out


def _cut(ids, eos_id):
    return ids[: ids.index(eos_id) + 1] if eos_id in ids else ids


def greedy_ids(
    model: Seq2SeqModel, batch: Batch, max_len: int | None = None
) -> torch.Tensor:
    """Greedy decoding of ``batch.src`` with :func:`attnlab.decoding.greedy_decode`
    (``max_len`` = gold length + 5): ids (B, T')."""
    if max_len is None:
        max_len = batch.tgt.shape[1] + 5
    step = model.step(batch.src, batch.src_lengths)
    B = batch.src.shape[0]
    ids = model.bos_id, model.eos_id
    return greedy_decode(step, B, *ids, max_len, model.pad_id, batch.src.device)


@torch.no_grad()
def evaluate(
    model,
    task: Task,
    n: int = 200,
    lengths=None,
    seed: int = 1234,
    batch_size: int = 200,
    decode_fn: Callable | None = None,
    device=None,
) -> dict:
    """Exact-match accuracy of greedy decoding on ``n`` fresh examples.

    ``decode_fn(model, batch) -> ids (B, T')`` (default :func:`greedy_ids`). The same
    ``seed`` gives the same test examples, so two models are compared on equal terms.
    Returns ``{"accuracy": float, "n": int}``.
    """
    decode_fn = decode_fn or greedy_ids
    with num_threads(1):  # small models decode fastest on one thread
        return _evaluate(model, task, n, lengths, seed, batch_size, decode_fn, device)


def _evaluate(model, task, n, lengths, seed, batch_size, decode_fn, device):
    was_training = model.training
    model.eval()
    hits, done, i = 0, 0, 0
    while done < n:
        b = min(batch_size, n - done)
        batch = task.batch(b, lengths=lengths, seed=seed + i, device=device)
        pred = decode_fn(model, batch)
        hits += int(exact_match(pred.cpu(), batch.tgt_out.cpu()).sum())
        done, i = done + b, i + 1
    model.train(was_training)
    return {"accuracy": hits / n, "n": n}


def accuracy_by_length(
    model, task: Task, lengths: Iterable[int], n: int = 100, seed: int = 1234, **kw
) -> dict[int, float]:
    """``{length: exact-match accuracy}`` on ``n`` examples of each source length."""
    return {
        L: evaluate(model, task, n=n, lengths=L, seed=seed + 1000 * L, **kw)["accuracy"]
        for L in lengths
    }


# ---------------------------------------------- text classifiers (chapter 11)
def bce_loss(model: nn.Module, batch: RationaleData, idx: torch.Tensor) -> torch.Tensor:
    """Binary cross-entropy of ``model(batch.ids, batch.mask)[0]`` (logits, (B,)) against
    ``batch.labels``: :func:`fit_classifier`'s default ``loss_fn`` (``idx`` unused)."""
    logit = model(batch.ids, batch.mask)[0]  # (B,)
    return F.binary_cross_entropy_with_logits(logit, batch.labels.float())


def fit_classifier(
    model: nn.Module,
    data: RationaleData,
    epochs: int = 3,
    lr: float = 3e-3,
    batch_size: int = 64,
    seed: int = 0,
    loss_fn: Callable | None = None,
) -> History:
    """Train a classifier (:mod:`attnlab.classifiers`) with Adam on :func:`bce_loss`, or
    on ``loss_fn(model, batch, idx)`` (``idx``: the batch's rows in ``data``, to look up
    per-example targets), over :func:`attnlab.rationales.minibatches` of ``data``.

    A thin wrapper of :func:`fit` (one thread, no clipping); returns its ``History``.
    The model's initial weights are whatever it was built with: seed before building it.
    """
    if not isinstance(data, RationaleData):
        raise TypeError(f"data must be a RationaleData, got {type(data).__name__}")
    if epochs < 1 or batch_size < 1:
        raise ValueError(
            f"need epochs >= 1 and batch_size >= 1, got {epochs}, {batch_size}"
        )
    loss = loss_fn or bce_loss
    steps = epochs * -(-len(data) // batch_size)
    return fit(
        model,
        minibatches(data, batch_size, epochs, seed),
        lambda m, b: loss(m, *b),
        steps=steps,
        lr=lr,
        clip=None,
        seed=seed,
        quiet=True,
    )
