"""Toy translation tasks, generated on the fly: no downloads, deterministic given a seed.

Two tasks share one interface (:class:`Task`):

==============  =======================================  ================================
task            example (source -> target)               alignment
==============  =======================================  ================================
``reversal``    ``c a f e b`` -> ``b e f a c``           anti-diagonal (last in, first out)
``date``        ``22 November 2026`` -> ``2026-11-22``   non-monotone (year, month, day)
==============  =======================================  ================================

Every sequence is a list of string tokens. A :class:`Vocab` maps tokens to ids and
reserves four special tokens with fixed ids: ``<pad>`` 0, ``<bos>`` 1, ``<eos>`` 2 and
``<unk>`` 3. A :class:`Batch` holds padded tensors:

* ``src (B, S)`` source ids, padded with ``<pad>``; ``src_lengths (B,)``;
* ``tgt (B, T + 1)`` target ids ``<bos> y_1 ... y_n <eos>`` padded with ``<pad>``, so
  teacher forcing feeds ``tgt_in = tgt[:, :-1]`` and predicts ``tgt_out = tgt[:, 1:]``.

Typical use (chapters 1 and 7)::

    task = attnlab.data.make_task("reversal", lengths=(3, 24), distinct=True)
    for batch in task.stream(batch_size=64, seed=0):   # endless, reproducible
        ...                                            # bucket=True: one length a batch
    batch = task.batch(64, lengths=20, seed=1)         # one batch, every source length 20
    task.decode(batch.tgt[0])                          # -> "string" (stops at <eos>)
    batch.src_mask                                     # (B, S) True on real tokens

Held-out data is held out by construction. Every calendar date belongs to exactly one
of three splits (``"train"`` 80 %, ``"val"`` 10 %, ``"test"`` 10 %), decided by a fixed
hash of the date itself, so a date seen in training in any of its spellings never
appears in the validation (early-stopping) or test sets::

    dates = make_task("date")                 # split="train": the only dates fit sees
    val, test = dates.with_split("val"), dates.with_split("test")
    fit(model, dates.stream(128, seed=0), eval_fn=lambda m: evaluate(m, val)["accuracy"])
    evaluate(model, test, n=1000, seed=99)

Real language ships with the package too (``DATA_CARD.md`` in this folder: sources,
licences, checksums), read offline:

* :class:`EngFraTask` (:mod:`attnlab.data.tatoeba`): 18,065 short English–French pairs
  from Tatoeba (CC BY 2.0 FR), word tokens, splits disjoint on both sides by
  construction; the same :class:`Task` interface (``stream``, ``batch``, ``encode``),
  plus ``groups()`` for scoring against every reference translation;
* :func:`corpus_bleu` and :func:`corpus_chrf` (:mod:`attnlab.data.metrics`) to score
  translations;
* :func:`load_shakespeare`, :class:`CharVocab` and :func:`char_batches`
  (:mod:`attnlab.data.text`): Tiny Shakespeare (public domain) for character models.

Models trained on these batches follow :class:`attnlab.decoding.Seq2SeqModel`
(``model.logits(batch)``, ``model.step(src, src_lengths)``).
"""

from ..rationales import *  # noqa: F403  (re-exported: attnlab.data.rationale_task)
from ..rationales import __all__ as _rationale_names
from ..vocab import BOS, EOS, PAD, SPECIALS, UNK, Vocab  # noqa: F401
from .dates import (  # noqa: F401
    DATE_SPLITS,
    MONTHS,
    TASKS,
    DateTask,
    date_split,
    make_task,
)
from .metrics import corpus_bleu, corpus_chrf  # noqa: F401
from .recall import RECALL_SPLITS, recall_batch  # noqa: F401
from .tasks import (  # noqa: F401
    Batch,
    ReversalTask,
    Task,
    collate,
)
from .tatoeba import (  # noqa: F401
    EngFraTask,
    eng_fra_split,
    eng_fra_splits,
    load_eng_fra,
)
from .text import CharVocab, char_batches, load_shakespeare  # noqa: F401

__all__ = [
    "PAD",
    "BOS",
    "EOS",
    "UNK",
    "Vocab",
    "Batch",
    "Task",
    "ReversalTask",
    "DateTask",
    "DATE_SPLITS",
    "date_split",
    "make_task",
    "collate",
    "recall_batch",
    "EngFraTask",
    "load_eng_fra",
    "eng_fra_split",
    "eng_fra_splits",
    "corpus_bleu",
    "corpus_chrf",
    "load_shakespeare",
    "CharVocab",
    "char_batches",
]
# Classification tasks with known rationales (chapter 11) live in their own module and
# are re-exported here: attnlab.data.rationale_task("focus", "test").
__all__ += _rationale_names
