"""attnlab — the one shared implementation behind the attention course.

Every chapter of the book imports this package; every from-scratch idea in a chapter is
asserted equal to the code here, and the code here is tested against PyTorch and the
``entmax`` package. Shape legend: B batch, H heads, T queries, S keys/values, D model
width, Dh head width. Masks: boolean ``True`` = may attend.

Each module's public names (its ``__all__``) are re-exported here, so chapters write
``attnlab.sparsemax(x)`` or ``attnlab.MultiHeadAttention(...)``.

Differences from PyTorch and ``entmax`` under the same names (everything else, argument
order and defaults included, is theirs):

* boolean masks: ``True`` = may attend everywhere (as ``F.scaled_dot_product_attention``);
  ``nn.MultiheadAttention`` and ``nn.Transformer*`` read ``True`` as blocked. Float masks
  are added to the scores in both and never flipped; ``MultiHeadAttention`` refuses a 0/1
  float mask and warns (``MaskConventionWarning``) on a boolean mask with a row that
  blocks every key;
* ``scaled_dot_product_attention`` returns ``(out, weights)``; a query with no key gets
  zeros (so does ``F.scaled_dot_product_attention``; ``nn.MultiheadAttention`` gives NaN);
  NaN/inf inputs and a non-finite ``scale`` raise;
* ``softmax``/``Softmax`` give zeros on all ``-inf`` rows (PyTorch: NaN) and raise on
  NaN/+inf; ``argmax`` returns one-hot weights;
* ``is_causal`` is a mask of its own in attnlab's MultiHeadAttention and layers (combined
  with any other mask); in PyTorch's it is a hint that needs the mask too;
* ``entmax_bisect`` picks its iterations from the dtype (``n_iter=None``) and always
  renormalises; ``alpha = 1`` is softmax exactly (entmax 1.3 returns uniform weights
  there: its bisection does not work at alpha = 1, as its docstring warns).
"""

from __future__ import annotations

from . import (
    classifiers,  # the J&W classifier and a small Transformer (chapter 11)
    data,
    efficient,
    explain,  # rollout, flow and the tests of the debate (Part IV)
    mappings,
    masking,
    modern,  # the attention layer of a 2026 LLM (chapter 13)
    pretrained,  # all-MiniLM-L6-v2 on our own layers (Part IV)
    scoring,
    seq2seq,
    toys,
    train,
)
from .attention import *  # noqa: F403
from .decoding import *  # noqa: F403
from .devices import *  # noqa: F403
from .efficient import *  # noqa: F403
from .kvcache import *  # noqa: F403
from .mappings import *  # noqa: F403
from .masking import *  # noqa: F403
from .multihead import *  # noqa: F403
from .notebook import *  # noqa: F403
from .positional import *  # noqa: F403
from .structured import *  # noqa: F403
from .train import noam_lr, noam_scheduler, token_loss
from .transformer import *  # noqa: F403

__version__ = "0.1.0"

# Loaded on first use, so that ``import attnlab`` loads the library only: the course's
# scaffolding (``attnlab.course``; its old names ``attnlab.check``, ``attnlab.widgets``,
# ``attnlab.grade``) and matplotlib (``attnlab.plotting``).
_LAZY = ("check", "course", "grade", "plotting", "widgets")


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
