"""Chapter 13's context-extension experiment: passkey retrieval beyond the training
length, with and without the short fine-tuning that PI and YaRN prescribe.

    OMP_NUM_THREADS=1 nice .venv/bin/python tools/experiments/ch13_passkey.py

(or ``--seed S --part P`` for one positional encoding of one seed into a part file,
then ``--merge``, so that the pieces can run as parallel processes). Writes ``src/attnlab/results/ch13_passkey.json``.

Task (``attnlab.modern.lab.passkey``): random tokens, somewhere a marker followed by
the passkey, and at the end a query whose target is the passkey. The model is
``TinyLM`` with 2 layers, width 64, 2 heads of width 32 (16 rotary pairs, so that PI,
NTK and YaRN rescale the pairs differently) and no MLP, trained at length 32.
Evaluation at 1x uses the marker anywhere; at 2x and 4x the marker sits more than
32 positions before the query, so the answer lies beyond the training length.

What changes, one thing at a time, per seed (the seed sets the weights and the batch
stream; evaluation batches come from seeds ``EVAL_SEED_OFFSET`` + factor, a stream
training never draws from):

1. ``trained``: RoPE, ALiBi and NoPE models trained alike at length 32 (same steps,
   batch, learning rate, clipping); accuracy at every factor.
2. ``zero_shot``: the RoPE model with its frequencies rescaled for factor 4 (PI,
   NTK-aware, YaRN with original length 32) and no training; ``none`` is the RoPE
   model as trained.
3. ``fine_tuned``: each of the four, fine-tuned ``FT_STEPS`` steps at length 128
   (4x, the scaling's target length; a fresh Adam, ``FT_LR``, the same batches for
   the four); accuracy at every factor, and at 4x after ``FT_CHECKS`` steps.
"""

from __future__ import annotations

import copy
import json
import sys
import time
from pathlib import Path

import torch

from attnlab.devices import run_meta
from attnlab.modern.lab import (
    EVAL_SEED_OFFSET,
    TinyLM,
    accuracy,
    passkey,
    train_lm,
    with_rope_scaling,
)

OUT = Path(__file__).resolve().parents[2] / "src/attnlab/results/ch13_passkey.json"
SEEDS = (0, 1, 2)
VOCAB = 32  # passkeys and noise; + marker + query
TRAIN_LEN, SCALE, FACTORS = 32, 4, (1, 2, 4)
D_MODEL, N_LAYERS, N_HEADS = 64, 2, 2  # heads of width 32: 16 rotary pairs
STEPS, BATCH, LR = 500, 64, 3e-3
FT_STEPS, FT_BATCH, FT_LR, FT_CHECKS = 40, 16, 1e-3, (10, 20, 40)
N_EVAL = 256
POSITIONALS = ("rope", "alibi", "none")
SCALINGS = {
    "none": None,
    "PI": {"type": "linear", "factor": float(SCALE)},
    "NTK": {"type": "ntk", "factor": float(SCALE)},
    "YaRN": {
        "type": "yarn",
        "factor": float(SCALE),
        "original_max_position": TRAIN_LEN,
    },
}


def eval_sets() -> dict[int, tuple]:
    """Held-out batches per factor: the marker anywhere at 1x, beyond 32 back else."""
    return {
        f: passkey(
            N_EVAL,
            TRAIN_LEN * f,
            vocab=VOCAB,
            far=0 if f == 1 else TRAIN_LEN,
            seed=EVAL_SEED_OFFSET + f,
        )
        for f in FACTORS
    }


def model(positional: str) -> TinyLM:
    return TinyLM(
        VOCAB + 2, D_MODEL, N_LAYERS, N_HEADS, positional=positional, mlp=False
    )


def one_part(seed: int, part: str) -> dict:
    """One positional encoding of one seed; ``"rope"`` also runs the scalings and the
    fine-tuning."""
    sets = eval_sets()

    def accs(m) -> list[float]:
        return [accuracy(m, *sets[f]) for f in FACTORS]

    torch.manual_seed(seed)
    base = model(part)
    losses = train_lm(
        base,
        lambda s: passkey(BATCH, TRAIN_LEN, vocab=VOCAB, seed=s),
        steps=STEPS,
        lr=LR,
        seed=seed,
    )
    out: dict = {
        "trained": {"accuracy": accs(base), "final_loss": sum(losses[-50:]) / 50}
    }
    print(seed, part, out["trained"], flush=True)
    if part != "rope":
        return out
    out.update(zero_shot={}, fine_tuned={}, ft_curve={})
    for name, sc in SCALINGS.items():
        m = with_rope_scaling(base, sc) if sc else copy.deepcopy(base)
        out["zero_shot"][name] = accs(m)
        curve: list[float] = []

        def check(step, m=m, curve=curve):
            if step in FT_CHECKS:
                curve.append(accuracy(m, *sets[SCALE]))

        train_lm(
            m,
            lambda s: passkey(FT_BATCH, TRAIN_LEN * SCALE, vocab=VOCAB, seed=s),
            steps=FT_STEPS,
            lr=FT_LR,
            seed=1000 + seed,
            callback=check,
        )
        out["fine_tuned"][name] = accs(m)
        out["ft_curve"][name] = curve
        print(seed, name, out["zero_shot"][name], out["fine_tuned"][name], curve)
    return out


def one_seed(seed: int) -> dict:
    """Every part of one seed: ``trained`` per positional encoding, and the RoPE
    model's ``zero_shot``, ``fine_tuned`` and ``ft_curve`` per scaling."""
    parts = {pos: one_part(seed, pos) for pos in POSITIONALS}
    return _combine(parts)


def _combine(parts: dict) -> dict:
    rope = parts["rope"]
    return {
        "trained": {pos: parts[pos]["trained"] for pos in POSITIONALS if pos in parts},
        **{k: rope[k] for k in ("zero_shot", "fine_tuned", "ft_curve")},
    }


def _meta(cpu: float) -> dict:
    return {
        **run_meta(),
        "script": "tools/experiments/ch13_passkey.py",
        "cpu_seconds": round(cpu),
        "threads": 1,
        "seeds": list(SEEDS),
        "vocab": VOCAB,
        "chance": 1 / VOCAB,
        "train_len": TRAIN_LEN,
        "scale": SCALE,
        "factors": list(FACTORS),
        "far": TRAIN_LEN,
        "model": {
            "d_model": D_MODEL,
            "n_layers": N_LAYERS,
            "n_heads": N_HEADS,
            "head_dim": D_MODEL // N_HEADS,
            "mlp": False,
        },  # fmt: skip
        "train": {"steps": STEPS, "batch": BATCH, "lr": LR, "clip": 1.0},
        "fine_tune": {
            "steps": FT_STEPS,
            "batch": FT_BATCH,
            "lr": FT_LR,
            "length": TRAIN_LEN * SCALE,
            "checks": list(FT_CHECKS),
        },  # fmt: skip
        "n_eval": N_EVAL,
        "scalings": {k: v for k, v in SCALINGS.items()},
    }


def main(argv: list[str]) -> None:
    """No argument: every seed in turn. ``--seed S --part P`` (P a positional
    encoding): one piece into a part file; ``--merge``: the part files into the
    result (so that the pieces can run as parallel processes)."""
    torch.set_num_threads(1)
    if argv[:1] == ["--merge"]:
        runs, cpu = {}, 0.0
        for s in SEEDS:
            parts = {}
            for pos in POSITIONALS:
                f = OUT.with_suffix(f".seed{s}.{pos}.json")
                if pos != "rope" and not f.exists():
                    continue  # a part that was not run: no row (the meta says so)
                got = json.loads(f.read_text())
                parts[pos], cpu = got["result"], cpu + got["cpu_seconds"]
            runs[str(s)] = _combine(parts)
        meta = _meta(cpu)
        meta["positionals_run"] = sorted(
            set.intersection(*(set(r["trained"]) for r in runs.values()))
        )
        OUT.write_text(json.dumps({"meta": meta, "runs": runs}, indent=1) + "\n")
        print(f"wrote {OUT} ({cpu:.0f} CPU s in all)")
        return
    if argv[:1] == ["--seed"]:
        seed, part = int(argv[1]), argv[3]
        t = time.process_time()
        result = one_part(seed, part)
        f = OUT.with_suffix(f".seed{seed}.{part}.json")
        payload = {"result": result, "cpu_seconds": time.process_time() - t}
        f.write_text(json.dumps(payload))
        print(f"wrote {f}")
        return
    t0 = time.process_time()
    runs = {str(s): one_seed(s) for s in SEEDS}
    OUT.write_text(
        json.dumps({"meta": _meta(time.process_time() - t0), "runs": runs}, indent=1)
        + "\n"
    )
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main(sys.argv[1:])
