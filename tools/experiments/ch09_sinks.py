"""Chapter 9's attention-sink experiment: does a small causal LM park attention on its
first token, and does a rolling window need that token kept (StreamingLLM)?

    OMP_NUM_THREADS=1 .venv/bin/python tools/experiments/ch09_sinks.py   # 427 CPU s here

Writes ``src/attnlab/results/ch09_sinks.json``, which chapter 9 loads and plots. One
thing changes at a time:

* text: a synthetic, seeded character-level language, so the run needs no download and
  reproduces exactly. A *story* introduces three names (random 3-5-letter strings) and
  then tells sentences about them from a few templates ("ana gave bo a cup."), so a
  model gains by copying names from earlier in the story. Training stories and held-out
  stories come from different generator seeds, and every held-out story introduces a
  name that no training story uses (names are drawn from disjoint halves of the name
  space): the two sets are disjoint by construction.
* model: ``attnlab.TransformerLM``, 2 layers, D = 64, 4 heads, FFN 256, pre-LN, no
  dropout, **no position encoding** (``positional="none"``): a causal model still
  learns order from the mask, and without positions a rolling cache needs no
  re-indexing, so a mask over the whole stream computes exactly what decoding with that
  cache computes (each layer's cached keys were computed with their own window);
* training: full causal attention on windows of ``TRAIN_LEN`` tokens, each starting
  with ``<bos>`` at the beginning of a story (of ``N_STORIES`` fixed training stories),
  Adam (lr 3e-3), ``STEPS`` steps, batches of 32; seeds 0, 1, 2 (weights and batch
  stream);
* measured on held-out streams of ``EVAL_LEN`` tokens (several stories in a row after
  one ``<bos>``), per position, the cross-entropy of the next token under four masks of
  the same model: ``full`` causal attention, a rolling ``window`` of ``WINDOW`` tokens,
  ``window + sinks`` (the first ``N_SINK`` tokens kept and ``WINDOW - N_SINK`` recent
  ones: the same cache size), and ``recompute`` (the text from scratch for each
  position: the last ``WINDOW`` tokens after a fresh ``<bos>``, StreamingLLM's oracle);
  and the attention that queries at positions >= 16 of training-length windows give to
  position 0, per layer and head, against the uniform share 1 / (t + 1).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

import attnlab
from attnlab.devices import run_meta
from attnlab.serving import streaming_mask
from attnlab.transformer import capture_attention

OUT = Path(__file__).resolve().parents[2] / "src/attnlab/results/ch09_sinks.json"
TRAIN_LEN, EVAL_LEN, WINDOW, N_SINK = 64, 256, 32, 4
STEPS, BATCH, LR, SEEDS = 1500, 32, 3e-3, (0, 1, 2)
N_EVAL = 32  # held-out streams
N_STORIES = 20000  # training stories
CHARS = " .abcdefghijklmnopqrstuvwxyz"
PAD, BOS = 0, 1
VOCAB = 2 + len(CHARS)
OBJECTS = ("cup", "book", "key", "map", "hat", "coin", "lamp", "box")
VERBS = ("met", "saw", "called", "helped", "found")


def _name(gen: torch.Generator, held_out: bool) -> str:
    """A random name; held-out names start with a letter of m..z, training names a..l."""
    first = "mnopqrstuvwxyz" if held_out else "abcdefghijkl"
    n = 3 + int(torch.randint(0, 3, (1,), generator=gen))
    letters = [first[int(torch.randint(0, len(first), (1,), generator=gen))]]
    letters += [
        CHARS[2 + int(torch.randint(0, 26, (1,), generator=gen))] for _ in range(n - 1)
    ]
    return "".join(letters)


def story(gen: torch.Generator, held_out: bool) -> str:
    """Three names, then 4-7 sentences about them from templates."""
    names = [_name(gen, held_out and i == 0) for i in range(3)]

    def pick(seq):
        return seq[int(torch.randint(0, len(seq), (1,), generator=gen))]

    out = [f"{names[0]} and {names[1]} and {names[2]} ."]
    for _ in range(4 + int(torch.randint(0, 4, (1,), generator=gen))):
        a, b = pick(names), pick(names)
        if int(torch.randint(0, 2, (1,), generator=gen)):
            out.append(f"{a} gave {b} a {pick(OBJECTS)} .")
        else:
            out.append(f"{a} {pick(VERBS)} {b} .")
    return " ".join(out) + " "


def encode(text: str) -> list[int]:
    return [2 + CHARS.index(c) for c in text]


def stream(gen: torch.Generator, length: int, held_out: bool) -> torch.Tensor:
    """``<bos>`` then stories in a row, cut to ``length`` tokens."""
    ids = [BOS]
    while len(ids) < length:
        ids += encode(story(gen, held_out))
    return torch.tensor(ids[:length])


def model(seed: int) -> attnlab.TransformerLM:
    torch.manual_seed(seed)
    cfg = attnlab.TransformerConfig(
        tgt_vocab=VOCAB,
        d_model=64,
        n_heads=4,
        d_ff=256,
        n_decoder_layers=2,
        dropout=0.0,
        norm_first=True,
        activation="gelu",
        positional="none",
        max_len=EVAL_LEN,
        pad_id=PAD,
        bos_id=BOS,
        scale_embeddings=False,
    )
    return attnlab.TransformerLM(cfg)


def logits(lm, ids: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """(B, T, V); ``mask`` (T, T) bool, True = may attend (None: causal)."""
    x = lm.embed(ids)
    if mask is None:
        return lm.out(lm.blocks(x, is_causal=True))
    return lm.out(lm.blocks(x, mask=mask))


def training_stories(n: int = N_STORIES) -> list[list[int]]:
    """The training text: ``n`` stories from generator seed 1000, encoded."""
    gen = torch.Generator().manual_seed(1000)
    return [encode(story(gen, False)) for _ in range(n)]


def batch(stories: list[list[int]], gen: torch.Generator) -> torch.Tensor:
    """(BATCH, TRAIN_LEN + 1): ``<bos>`` and the stories from a random one onwards."""
    rows = []
    for i in torch.randint(0, len(stories), (BATCH,), generator=gen).tolist():
        ids = [BOS]
        while len(ids) < TRAIN_LEN + 1:
            ids += stories[i % len(stories)]
            i += 1
        rows.append(ids[: TRAIN_LEN + 1])
    return torch.tensor(rows)


def train(seed: int, steps: int = STEPS) -> tuple[attnlab.TransformerLM, list[float]]:
    lm = model(seed)
    opt = torch.optim.Adam(lm.parameters(), lr=LR)
    stories = training_stories()
    gen = torch.Generator().manual_seed(seed)  # the batch stream
    losses = []
    for _ in range(steps):
        ids = batch(stories, gen)
        out = logits(lm, ids[:, :-1], None)  # (B, T, V)
        loss = F.cross_entropy(out.reshape(-1, VOCAB), ids[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return lm.eval(), losses


@torch.no_grad()
def evaluate(lm) -> dict:
    gen = torch.Generator().manual_seed(99)  # held-out text, the same for every seed
    ids = torch.stack([stream(gen, EVAL_LEN + 1, True) for _ in range(N_EVAL)])
    x, y = ids[:, :-1], ids[:, 1:]  # (N, T)
    T = EVAL_LEN
    masks = {
        "full": None,
        "window": streaming_mask(T, WINDOW),
        "window + sinks": streaming_mask(T, WINDOW - N_SINK, n_sink=N_SINK),
    }
    per_pos = {}
    for name, mask in masks.items():
        out = logits(lm, x, mask)  # (N, T, V)
        ce = F.cross_entropy(out.transpose(1, 2), y, reduction="none")  # (N, T)
        per_pos[name] = ce.mean(0).tolist()
    # recompute: for position t, <bos> + the last WINDOW - 1 tokens, read the last one
    rec = []
    for t in range(T):
        lo = max(1, t - WINDOW + 2)
        ctx = torch.cat([torch.full((N_EVAL, 1), BOS), x[:, lo : t + 1]], 1)
        ctx = x[:, : t + 1] if lo == 1 else ctx  # the stream's own <bos> is in view
        out = logits(lm, ctx, None)[:, -1]  # (N, V)
        rec.append(F.cross_entropy(out, y[:, t]).item())
    per_pos["recompute"] = rec
    # attention on position 0 in training-length windows
    win = x[:, :TRAIN_LEN]
    layers = [layer.self_attn for layer in lm.blocks.layers]
    with capture_attention({"self": layers}) as got:
        logits(lm, win, None)
    t = torch.arange(TRAIN_LEN)
    share = []
    for w in got["self"]:  # (N, H, T, T)
        share.append(w[:, :, 16:, 0].mean((0, 2)).tolist())  # per head
    uniform = (1.0 / (t[16:] + 1)).mean().item()
    return {"per_position": per_pos, "sink_share": share, "uniform_share": uniform}


def run_seed(seed: int, steps: int = STEPS) -> dict:
    t0 = time.process_time()
    lm, losses = train(seed, steps)
    ev = evaluate(lm)
    late = slice(2 * WINDOW, EVAL_LEN)  # positions where the window has evicted <bos>
    mean = {k: sum(v[late]) / len(v[late]) for k, v in ev["per_position"].items()}
    return {
        "seed": seed,
        "steps": steps,
        "final_train_loss": sum(losses[-50:]) / 50,
        "train_loss": losses[:: max(1, steps // 100)],
        "late_loss": mean,
        **ev,
        "cpu_s": round(time.process_time() - t0, 1),
    }


def main(argv=None) -> None:
    torch.set_num_threads(1)
    runs = []
    for seed in SEEDS:
        r = run_seed(seed)
        runs.append(r)
        print(
            f"seed {seed}: train {r['final_train_loss']:.3f} | late loss "
            + "  ".join(f"{k} {v:.3f}" for k, v in r["late_loss"].items())
            + f" | share on token 0 {[[round(s, 2) for s in h] for h in r['sink_share']]}"
            f" (uniform {r['uniform_share']:.3f}) | {r['cpu_s']} CPU s",
            flush=True,
        )
    meta = dict(
        train_len=TRAIN_LEN,
        eval_len=EVAL_LEN,
        window=WINDOW,
        n_sink=N_SINK,
        steps=STEPS,
        batch=BATCH,
        lr=LR,
        seeds=list(SEEDS),
        n_eval=N_EVAL,
        vocab=VOCAB,
        late_from=2 * WINDOW,
        model="TransformerLM: 2 layers, D=64, 4 heads, FFN 256, pre-LN, GELU, "
        "no dropout, no position encoding",
        **run_meta(),  # machine, torch, python, date
        threads=1,
        cpu_s=round(sum(r["cpu_s"] for r in runs), 1),
    )
    OUT.write_text(json.dumps({"meta": meta, "runs": runs}, indent=0) + "\n")
    print("wrote", OUT)


if __name__ == "__main__":
    main(sys.argv[1:])
