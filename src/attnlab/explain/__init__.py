"""The tools of the "is attention explanation?" debate, each a short function.

Where information flows in a Transformer (Abnar & Zuidema, 2020):

* :func:`attention_rollout`, :func:`attention_flow` — heads averaged, the residual
  added as ``A = 0.5 W + 0.5 I`` (rows renormalised), then the product of the layers
  (rollout) or a max-flow through the layered graph (flow).
* :func:`value_norm_attention` — ``||alpha_ij f(x_j)||``: a weight times the length of
  what it moves (Kobayashi et al., 2020).

How much each input token matters, to compare attention against (Jain & Wallace, 2019):

* :func:`gradient_importance` (gradient × input), :func:`leave_one_out` (delete or
  blank out a token); :func:`kendall_tau` (tau-b) and :func:`spearman` compare two
  rankings, :func:`rationale_recall` compares one with the known rationale.

Tests of attention as an explanation. A *decoder* ``decode(h, weights) -> logit (B,)``
is the part of a model after its attention, with the encoded tokens ``h`` held fixed
(:meth:`attnlab.classifiers.AttentionClassifier.decode`):

* Jain & Wallace (2019): :func:`permutation_test`, :func:`adversarial_attention`
  (max :func:`jsd` to the original weights with the output changed by at most eps);
* Wiegreffe & Pinter (2019): the uniform baseline
  (``AttentionClassifier(attention="uniform")``), :func:`wp_adversary` and
  :func:`wp_adversary_loss` (a model
  *trained* to predict like the base model with different attention),
  :func:`diagnostic_mlp` (frozen weights in a model without context);
* Serrano & Smith (2019): :func:`erasure_test` (erase the top items until the
  decision flips), :func:`weight_gradient` (their gradient ranking);
* Pruthi et al. (2020): :func:`deception_penalty`, :func:`deceptive_loss` (train a
  model to keep its attention off tokens it still uses).

Interventions (:mod:`attnlab.explain.interventions`), hooks on attnlab's modules:
:func:`cache_heads`, :func:`ablate_heads` (zero / mean), :func:`patch_heads` and
:func:`patch_outputs` (activation patching), :func:`knockout` (attention knockout),
:func:`logit_lens`; :func:`attention_modules` lists a model's attention modules.

On a pretrained model (:class:`attnlab.pretrained.MiniLM`, chapters 10-11):
:func:`token_attributions` (eight readings of a sentence's tokens and two deletions,
:mod:`attnlab.explain.attribution`), and a faithfulness panel
(:mod:`attnlab.explain.faithfulness`): :func:`eraser_scores` (ERASER's
comprehensiveness and sufficiency), :func:`norm_rollout`, :func:`randomised_top_layer`;
and a residual-aware rollout (:mod:`attnlab.explain.residual`):
:func:`residual_norm_attention` (what each token adds through one block, its residual
included), :func:`residual_rollout`, :func:`residual_norm_rollout` (on MiniLM).

Shapes: B examples, L layers, H heads, T tokens, E embedding width. Masks are True on
real tokens.
"""

from .attribution import ATTRIBUTION_METHODS, token_attributions
from .debate import (  # noqa: F401
    adversarial_attention,
    deception_penalty,
    deceptive_loss,
    diagnostic_mlp,
    erasure_test,
    permutation_test,
    weight_gradient,
    wp_adversary,
    wp_adversary_loss,
)
from .faithfulness import (
    STOP_WORDS,
    eraser_scores,
    norm_rollout,
    randomised_top_layer,
)
from .importance import (  # noqa: F401
    gradient_importance,
    jsd,
    kendall_tau,
    leave_one_out,
    mean_std,
    rationale_recall,
    spearman,
)
from .interventions import (  # noqa: F401
    ablate_heads,
    attention_modules,
    cache_heads,
    knockout,
    logit_lens,
    patch_heads,
    patch_outputs,
)
from .residual import (
    residual_norm_attention,
    residual_norm_rollout,
    residual_rollout,
)
from .rollout import (  # noqa: F401
    attention_flow,
    attention_rollout,
    residual_attention,
    value_norm_attention,
)

__all__ = [
    "residual_attention",
    "attention_rollout",
    "attention_flow",
    "value_norm_attention",
    "gradient_importance",
    "leave_one_out",
    "kendall_tau",
    "spearman",
    "rationale_recall",
    "jsd",
    "permutation_test",
    "adversarial_attention",
    "wp_adversary",
    "wp_adversary_loss",
    "diagnostic_mlp",
    "weight_gradient",
    "erasure_test",
    "deception_penalty",
    "deceptive_loss",
    "mean_std",
    "attention_modules",
    "cache_heads",
    "ablate_heads",
    "patch_heads",
    "patch_outputs",
    "knockout",
    "logit_lens",
    "ATTRIBUTION_METHODS",
    "token_attributions",
    "STOP_WORDS",
    "eraser_scores",
    "norm_rollout",
    "randomised_top_layer",
    "residual_norm_attention",
    "residual_rollout",
    "residual_norm_rollout",
]
