"""attnlab — the one shared implementation behind the attention course.

Every chapter of the book imports this package; every from-scratch idea in a chapter is
asserted equal to the code here, and the code here is tested against PyTorch and the
``entmax`` package. Shape legend: B batch, H heads, T queries, S keys/values, D model
width, Dh head width. Masks: boolean ``True`` = may attend.

Each module's public names (its ``__all__``) are re-exported here, so chapters write
``attnlab.sparsemax(x)`` or ``attnlab.MultiHeadAttention(...)``.

The input contract (one module, :mod:`attnlab.validation`, checks it everywhere):

* always, with no host sync (metadata only): a tensor argument must be a
  ``torch.Tensor`` (a list or a NumPy array raises ``TypeError`` naming the argument,
  as in PyTorch); dtypes, ranks and shapes; scalar arguments (``scale``,
  ``temperature``, sizes, ``is_causal``) take Python or NumPy numbers where torch does
  and refuse bools-for-numbers, strings, NaN and (unless meaningful) ``inf``;
* token ids are checked against the vocabulary in every decoding path;
* NaN or ``inf`` in an input gives NaN out, as in PyTorch; ``attnlab.debug()`` (or
  ``ATTNLAB_DEBUG=1``) switches on the value scans that raise ``ValueError`` instead;
* the no-NaN promises are kept by construction (``torch.where``), not by scanning:
  a query whose every key is masked gets zero weights and a zero output;
* a mask the caller passes to ``MultiHeadAttention`` is checked once per call for the
  convention mistakes below (one host sync per mask; a model's own masks, built inside
  :func:`derived_masks`, are not scanned); ``need_weights=False`` runs
  ``F.scaled_dot_product_attention`` and never builds the weights.

Differences from PyTorch and ``entmax`` under the same names (everything else, argument
order and defaults included, is theirs):

* boolean masks: ``True`` = may attend everywhere (as ``F.scaled_dot_product_attention``);
  ``nn.MultiheadAttention`` and ``nn.Transformer*`` read ``True`` as blocked. Float masks
  are added to the scores in both and never flipped; ``MultiHeadAttention`` refuses a 0/1
  float mask and warns (``MaskConventionWarning``) on a boolean mask with a row that
  blocks every key;
* ``scaled_dot_product_attention`` returns ``(out, weights)``; a query with no key gets
  zeros (so does ``F.scaled_dot_product_attention``; ``nn.MultiheadAttention`` gives NaN);
  ``is_causal`` with T = 0 or S = 0, and head width 0, give what PyTorch's gives;
* ``softmax``/``Softmax`` give zeros on all ``-inf`` rows (PyTorch: NaN) and are exact
  at any temperature > 0 (a tensor temperature receives its gradient); ``argmax``
  returns one-hot weights;
* ``is_causal``, one rule per PyTorch counterpart: in ``MultiHeadAttention``, the
  Transformer layers and stacks, ``flash_attention``, ``sliding_window_attention`` and
  ``band_mask``, ``is_causal=True`` is the top-left causal mask (query ``i`` sees keys
  ``0..i``, as :func:`causal_mask`), ANDed with every other mask passed with it
  (``nn.MultiheadAttention`` and ``nn.Transformer*`` read it as a hint that the mask
  they are given is causal, so wherever PyTorch returns a result the AND gives that
  result; where ``nn.MultiheadAttention`` refuses ``is_causal=True`` without
  ``attn_mask``, attnlab builds the mask). ``scaled_dot_product_attention`` keeps
  ``F.scaled_dot_product_attention``'s rule: an ``attn_mask`` together with
  ``is_causal=True`` is a ``ValueError`` (merge them with :func:`combine_masks`);
* ``entmax_bisect`` picks its iterations from the dtype (``n_iter=None``) and always
  renormalises; ``alpha = 1`` is softmax exactly (entmax 1.3 returns uniform weights
  there: its bisection does not work at alpha = 1, as its docstring warns). Double
  backward of every mapping matches finite differences.

The top-level namespace: see ``__all__`` below (the ground-floor library modules' public
names, the training helpers, the debug switch and the subpackages).
"""

from __future__ import annotations

from . import (
    circuits,  # induction heads in an attention-only Transformer (chapter 12)
    classifiers,  # the J&W classifier and a small Transformer (chapter 11)
    data,
    efficient,
    explain,  # rollout, flow and the tests of the debate (Part IV)
    mappings,
    masking,
    modern,  # the attention layer of a 2026 LLM (chapter 13)
    pretrained,  # all-MiniLM-L6-v2 on our own layers (Part IV)
    scoring,
    seeding,  # ATTNLAB_SEED: every live-training seed through one place
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
from .seeding import *  # noqa: F403
from .structured import *  # noqa: F403
from .train import noam_lr, noam_scheduler, token_loss
from .transformer import *  # noqa: F403
from .validation import debug, debugging

__version__ = "0.2.0"

# The top-level namespace (the rule): every public name of the ground-floor library
# modules imported with * above (attention, decoding, devices, efficient, kvcache,
# mappings, masking, multihead, notebook, positional, seeding, structured, transformer),
# the three training helpers, the debug switch, and the subpackages by name. Everything
# else is reached through its subpackage (``attnlab.explain.jsd``,
# ``attnlab.scoring.AdditiveScore``, ``attnlab.gated...``); the course's scaffolding
# is ``attnlab.course`` (loaded lazily).
import importlib as _importlib  # noqa: E402

_STAR = (
    "attention",
    "decoding",
    "devices",
    "efficient",
    "kvcache",
    "mappings",
    "masking",
    "multihead",
    "notebook",
    "positional",
    "structured",
    "transformer",
)
__all__ = sorted(
    {
        *(
            name
            for module in _STAR
            for name in _importlib.import_module(f"{__name__}.{module}").__all__
        ),
        "noam_lr",
        "noam_scheduler",
        "token_loss",
        "debug",
        "debugging",
        "classifiers",
        "data",
        "efficient",
        "explain",
        "mappings",
        "masking",
        "pretrained",
        "scoring",
        "seq2seq",
        "toys",
        "train",
    }
)

# Loaded on first use, so that ``import attnlab`` loads the library only: the course's
# scaffolding (``attnlab.course``; its old names ``attnlab.check``, ``attnlab.widgets``,
# ``attnlab.grade``) and matplotlib (``attnlab.plotting``).
_LAZY = ("check", "course", "grade", "plotting", "widgets")


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
