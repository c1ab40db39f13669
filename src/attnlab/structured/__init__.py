"""Hard and structured attention: sampled alignments and CRF marginals as weights.

Soft attention (chapters 1-3) maps scores to a point of the simplex and averages the
values. This module holds the two other families of the lecture's "soft / hard /
structured" triad, as drop-in ``mapping`` arguments for :func:`attnlab.attend`:

* **hard attention** picks *one* key (a one-hot weight vector) by sampling from
  ``softmax(scores)`` (Xu et al., 2015). The sample has no gradient, so training needs
  an estimator:

  - :class:`GumbelSoftmax`: straight-through Gumbel-softmax (Jang et al., 2017;
    Maddison et al., 2017): the forward pass is a one-hot sample, the backward pass is
    the gradient of a relaxed sample. It wraps ``torch.nn.functional.gumbel_softmax``.
  - :class:`ReinforceSample`: the score-function estimator (Williams, 1992). The
    forward pass is a one-hot sample; the gradient reaches the scores only through
    :meth:`ReinforceSample.surrogate`, a loss term built from a per-sample reward and
    a moving-average baseline.

* **structured attention** (Kim et al., 2017) treats "attend to position i" as a binary
  variable ``z_i`` and couples neighbours with a linear-chain CRF
  ``p(z) ∝ exp(Σ_i unary[i, z_i] + Σ_i transition[z_{i-1}, z_i])``; the weights are the
  marginals ``p(z_i = 1)``. They are computed as the gradient of the log-partition
  function (:func:`linear_chain_log_partition`, the forward algorithm in log space), so
  autograd gives forward-backward for free, and a second backward pass trains the
  potentials (:func:`linear_chain_marginals`, :class:`SegmentationAttention`).

Fusedmax (Niculae & Blondel, 2017), the sparse structured alternative, is in
:mod:`attnlab.mappings`. :func:`get_mapping` builds any of them by name.

Shapes: B batch, T queries, S keys; in the CRF functions ``n`` positions and ``C``
states. A ``-inf`` score (a masked key) gets weight 0; a fully masked row gets zeros,
never NaN.
"""

from .by_name import (  # noqa: F401
    MAPPING_NAMES,
    get_mapping,
)
from .crf import (  # noqa: F401
    SegmentationAttention,
    enumerate_linear_chain,
    linear_chain_log_partition,
    linear_chain_marginals,
    segmentation_marginals,
)
from .hard import (  # noqa: F401
    GumbelSoftmax,
    ReinforceSample,
)

__all__ = [
    "linear_chain_log_partition",
    "linear_chain_marginals",
    "enumerate_linear_chain",
    "segmentation_marginals",
    "SegmentationAttention",
    "GumbelSoftmax",
    "ReinforceSample",
    "MAPPING_NAMES",
    "get_mapping",
]
