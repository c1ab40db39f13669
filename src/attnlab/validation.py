"""The one home of attnlab's input contract: every public function checks its
arguments through these helpers, so one bad input gets one kind of error everywhere.

The contract (as PyTorch's, with clearer messages):

* **always, and without a host sync** (metadata only): a tensor argument must be a
  ``torch.Tensor`` (a list or a NumPy array is refused with a ``TypeError`` naming the
  argument, as PyTorch refuses one); its dtype and rank; the shapes fitting together;
  scalar arguments (:func:`real`, :func:`integer`, :func:`flag`): Python or NumPy
  numbers where torch takes them, never a ``bool`` for a number, a string, NaN or
  (unless allowed) ``±inf``;
* **token ids** (:func:`token_ids`) are compared with the vocabulary in every decoding
  path (an embedding lookup would raise an ``IndexError`` from inside torch);
* **tensor values** (NaN or ``±inf`` in an input: :func:`finite`) are scanned only under
  :func:`debug`; otherwise NaN in gives NaN out, as in PyTorch. The promises that do
  not depend on the inputs' values (a fully masked row gives zeros, never NaN) are
  kept by construction (``torch.where``), not by scanning.

Every error names the function and the argument: ``"softmax: temperature must be ..."``.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
import numbers
import operator
import os

import torch

__all__ = [
    "debug",
    "debugging",
    "tensor",
    "floating",
    "finite",
    "same_dtype",
    "real",
    "integer",
    "flag",
    "choice",
    "floating_dtype",
    "nonempty",
    "token_ids",
    "distribution",
    "env_integer",
]

_DEBUG = contextvars.ContextVar(
    "attnlab_debug",
    default=os.environ.get("ATTNLAB_DEBUG", "0").lower() in ("1", "true"),
)


class _Debug(contextlib.AbstractContextManager):
    """Returned by :func:`debug`: already switched on; a ``with`` block switches back."""

    def __init__(self, enabled: bool):
        self.token = _DEBUG.set(enabled)

    def __exit__(self, *exc: object) -> None:
        _DEBUG.reset(self.token)


def debug(enabled: bool = True) -> contextlib.AbstractContextManager:
    """Switch the value scans on (NaN/inf in inputs raise ``ValueError``).

    ``with attnlab.debug(): ...`` scans inside the block only; a bare
    ``attnlab.debug()`` (or ``ATTNLAB_DEBUG=1`` in the environment) switches them on
    for the rest of the run, ``attnlab.debug(False)`` off. Scans cost a host sync per
    tensor; off by default, as in PyTorch (``torch.autograd.set_detect_anomaly`` is
    its counterpart).

    Parameters
    ----------
    enabled : switch the scans on (True) or off (False).

    Returns
    -------
    A context manager, already applied: leaving its ``with`` block restores the
    previous setting.

    Raises
    ------
    TypeError
        ``enabled`` is not a bool.
    """
    return _Debug(flag(enabled, "enabled", "debug"))


def debugging() -> bool:
    """Whether the value scans are on (see :func:`debug`).

    Returns
    -------
    bool, the setting in the current context (thread or task).
    """
    return _DEBUG.get()


def _kind(x: object) -> str:
    mod = type(x).__module__
    return ("numpy." if mod == "numpy" else "") + type(x).__name__


def tensor(
    x: object,
    name: str,
    fn: str,
    *,
    min_dim: int = 0,
    dim: int | None = None,
    optional: bool = False,
) -> torch.Tensor:
    """``x`` itself if it is a tensor of the right rank, else a TypeError/ValueError.

    Lists and NumPy arrays are refused (``torch.as_tensor(x)`` first), as PyTorch's
    functions refuse them; ``optional`` lets ``None`` through."""
    if x is None and optional:
        return x  # type: ignore[return-value]
    if not isinstance(x, torch.Tensor):
        hint = (
            " (convert it with torch.as_tensor first)"
            if isinstance(x, (list, tuple)) or _kind(x).startswith("numpy.")
            else ""
        )
        raise TypeError(f"{fn}: {name} must be a torch.Tensor, got {_kind(x)}{hint}")
    if dim is not None and x.dim() != dim:
        raise ValueError(
            f"{fn}: {name} must have {dim} dimension(s), got shape {tuple(x.shape)}"
        )
    if x.dim() < min_dim:
        raise ValueError(
            f"{fn}: {name} needs at least {min_dim} dimension(s), got shape "
            f"{tuple(x.shape)}"
        )
    return x


def floating(x: object, name: str, fn: str, *, min_dim: int = 0) -> torch.Tensor:
    """A floating-point tensor (float16/bfloat16/float32/float64), else TypeError."""
    t = tensor(x, name, fn, min_dim=min_dim)
    if not t.is_floating_point():
        raise TypeError(f"{fn}: {name} must be a floating-point tensor, got {t.dtype}")
    return t


def finite(x: torch.Tensor, name: str, fn: str, *, neg_inf: bool = False) -> None:
    """Under :func:`debug` only: ValueError if ``x`` holds NaN or ``±inf`` (``-inf``
    allowed with ``neg_inf``, e.g. masked scores). A no-op (no sync) otherwise."""
    if not _DEBUG.get() or not x.is_floating_point() or x.numel() == 0:
        return
    bad = torch.isnan(x) | (torch.isposinf(x) if neg_inf else torch.isinf(x))
    if bool(bad.any()):
        what = "NaN or +inf" if neg_inf else "NaN or inf"
        raise ValueError(f"{fn}: {name} contains {what} (shape {tuple(x.shape)})")


def same_dtype(fn: str, **tensors: torch.Tensor) -> None:
    """TypeError unless all the tensors share one dtype (named in the message)."""
    dtypes = {t.dtype for t in tensors.values()}
    if len(dtypes) > 1:
        got = ", ".join(f"{k} {t.dtype}" for k, t in tensors.items())
        raise TypeError(f"{fn}: {', '.join(tensors)} must share a dtype, got {got}")


def real(
    value: object,
    name: str,
    fn: str,
    *,
    low: float | None = None,
    high: float | None = None,
    open_low: bool = False,
    allow_inf: bool = False,
    optional: bool = False,
) -> float:
    """A real scalar (Python or NumPy; a 0-d tensor too) as a float.

    Refused: bools, strings and other non-numbers (TypeError); NaN, ``±inf`` unless
    ``allow_inf``, and values outside ``[low, high]`` (``(low, high]`` with
    ``open_low``) (ValueError)."""
    if value is None and optional:
        return value  # type: ignore[return-value]
    if isinstance(value, torch.Tensor):
        if value.numel() != 1 or value.dim() > 1:
            raise TypeError(
                f"{fn}: {name} must be a real number, got a tensor of shape "
                f"{tuple(value.shape)}"
            )
        if value.is_complex() or value.dtype == torch.bool:
            raise TypeError(f"{fn}: {name} must be a real number, got {value.dtype}")
        value = value.item()
    if isinstance(value, (bool,)) or type(value).__name__ == "bool_":
        raise TypeError(f"{fn}: {name} must be a real number, not a bool ({value!r})")
    if not isinstance(value, numbers.Real):
        raise TypeError(f"{fn}: {name} must be a real number, got {value!r}")
    v = float(value)
    if math.isnan(v) or (math.isinf(v) and not allow_inf):
        raise ValueError(f"{fn}: {name} must be finite, got {v}")
    if low is not None and (v < low or (open_low and v == low)):
        op = ">" if open_low else ">="
        raise ValueError(f"{fn}: {name} must be {op} {low}, got {v}")
    if high is not None and v > high:
        raise ValueError(f"{fn}: {name} must be <= {high}, got {v}")
    return v


def integer(
    value: object,
    name: str,
    fn: str,
    *,
    low: int | None = None,
    high: int | None = None,
    optional: bool = False,
) -> int:
    """An integer (Python or NumPy int; not a bool, float or string) as an int."""
    if value is None and optional:
        return value  # type: ignore[return-value]
    if isinstance(value, bool) or type(value).__name__ == "bool_":
        raise TypeError(f"{fn}: {name} must be an int, not a bool ({value!r})")
    if isinstance(value, torch.Tensor) and (value.is_floating_point() or value.dim()):
        raise TypeError(f"{fn}: {name} must be an int, got a tensor {value!r}")
    try:
        v = operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        raise TypeError(f"{fn}: {name} must be an int, got {value!r}") from None
    if low is not None and v < low:
        raise ValueError(f"{fn}: {name} must be >= {low}, got {v}")
    if high is not None and v > high:
        raise ValueError(f"{fn}: {name} must be <= {high}, got {v}")
    return v


def flag(value: object, name: str, fn: str) -> bool:
    """A boolean switch (``bool`` or NumPy ``bool_``), else TypeError: ``is_causal=1``
    or ``"yes"`` is refused, as ``F.scaled_dot_product_attention`` refuses them."""
    if isinstance(value, bool):
        return value
    if type(value).__name__ == "bool_":
        return bool(value)
    raise TypeError(f"{fn}: {name} must be True or False, got {value!r}")


def choice(value: object, options: tuple, name: str, fn: str) -> object:
    """``value`` if it is one of ``options`` (strings, or any hashable), else a
    ValueError listing them (a ``TypeError`` for an unhashable value such as a list)."""
    try:
        ok = value in options
    except TypeError:
        ok = False
    if not ok:
        err = TypeError if isinstance(value, (list, dict, set)) else ValueError
        raise err(f"{fn}: {name} must be one of {tuple(options)}, got {value!r}")
    return value


def floating_dtype(
    dtype: object, name: str, fn: str, *, optional: bool = True
) -> torch.dtype:
    """A floating-point ``torch.dtype`` (None with ``optional``: torch's default).

    An integer or bool dtype where floats are computed would round every value to
    0 or 1 (a sinusoid, a weight): TypeError, as is anything that is not a dtype."""
    if dtype is None and optional:
        return torch.get_default_dtype()
    if not isinstance(dtype, torch.dtype):
        raise TypeError(f"{fn}: {name} must be a torch dtype, got {dtype!r}")
    if not dtype.is_floating_point:
        raise TypeError(
            f"{fn}: {name} must be a floating-point dtype (float16, bfloat16, "
            f"float32, float64), got {dtype}: the values would be rounded to integers"
        )
    return dtype


def nonempty(t: torch.Tensor, name: str, fn: str, *, dim: int = -1) -> torch.Tensor:
    """``t`` if it has at least one entry along ``dim`` (metadata only), else a
    ValueError: an empty prompt, a sequence with no token."""
    if t.dim() == 0 or t.shape[dim] == 0:
        raise ValueError(
            f"{fn}: {name} must hold at least one entry along dimension {dim}, got "
            f"shape {tuple(t.shape)}"
        )
    return t


def token_ids(ids: object, vocab_size: int, name: str, fn: str) -> torch.Tensor:
    """Integer token ids, each in ``[0, vocab_size)``: TypeError/ValueError naming the
    argument and the first bad id (an embedding would raise an IndexError)."""
    t = tensor(ids, name, fn)
    if t.is_floating_point() or t.is_complex() or t.dtype == torch.bool:
        raise TypeError(f"{fn}: {name} must be integer token ids, got {t.dtype}")
    if t.numel():
        lo, hi = torch.stack([t.min(), t.max()]).tolist()  # one host sync for both
        if lo < 0 or hi >= vocab_size:
            bad = lo if lo < 0 else hi
            raise ValueError(
                f"{fn}: {name} holds the id {bad}, outside the vocabulary "
                f"[0, {vocab_size})"
            )
    return t


def distribution(
    x: object, name: str, fn: str, *, allow_zero_rows: bool = True
) -> torch.Tensor:
    """Weights along the last dimension: a float tensor whose rows are on the simplex
    (no negative or NaN entry, each row sums to 1 within the dtype's tolerance; with
    ``allow_zero_rows``, an all-zero row, a padded query, is allowed). Logits or
    unnormalised weights raise ValueError. For the analysis tools (it reads values:
    one host sync), never on the hot path."""
    t = floating(x, name, fn, min_dim=1)
    if t.numel() == 0:
        return t
    # loose enough for weights rounded to 16 bits (and then cast up), tight enough
    # for logits and unnormalised weights
    tol = 1e-2 * max(1, t.shape[-1]) ** 0.5
    sums = t.float().sum(-1)
    bad_entry = ~(t >= 0)  # negative or NaN
    bad_row = (sums - 1).abs() > tol
    if allow_zero_rows:
        bad_row &= sums != 0
    flags = torch.stack([bad_entry.any(), bad_row.any()]).tolist()
    if flags[0]:
        raise ValueError(
            f"{fn}: {name} must hold weights (probabilities), but has a negative or "
            f"NaN entry (min {float(t.min())}); pass softmax(logits), not logits"
        )
    if flags[1]:
        raise ValueError(
            f"{fn}: {name} must hold weights whose rows sum to 1 (last dimension), "
            f"got row sums from {float(sums.min()):.4g} to {float(sums.max()):.4g}"
        )
    return t


def env_integer(
    var: str, *, default: int, low: int | None = None, high: int | None = None
) -> int:
    """An integer read from the environment variable ``var`` (unset or empty: ``default``).

    Raises ``ValueError`` naming the variable and what it holds when that is not a
    whole number in ``[low, high]`` (``ATTNLAB_SEED=1.5``, ``=-1``, ``=one``).
    """
    raw = os.environ.get(var, "").strip()
    if raw == "":
        return default
    try:
        v = int(raw, 10)
    except ValueError:
        raise ValueError(
            f"the environment variable {var} must be a whole number, got {raw!r}"
        ) from None
    if (low is not None and v < low) or (high is not None and v > high):
        raise ValueError(
            f"the environment variable {var} must be in [{low}, {high}], got {v}"
        )
    return v
