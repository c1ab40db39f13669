"""attnlab.models: the shipped LMs load (from the source tree and from a built
wheel), their cached forward equals the full forward, the KV cache can be read,
edited and rolled back, and their text's held-out split is disjoint by construction."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import torch

from attnlab.data import stories
from attnlab.models import KVCache, load_lm, per_token_loss
from attnlab.modern import Attention
from attnlab.modern.lab import TinyLM

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def target():
    return load_lm("target")


def test_shipped_models_load_and_predict_heldout_text(target):
    draft = load_lm("draft")
    res = json.loads((ROOT / "src/attnlab/results/ch14_lm.json").read_text())
    for name, lm in (("target", target), ("draft", draft)):
        assert isinstance(lm, TinyLM) and not lm.training
        assert lm.vocab_size == stories.VOCAB
        assert (
            sum(p.numel() for p in lm.parameters()) == res["models"][name]["parameters"]
        )
        assert all(
            isinstance(a, Attention) and a.rope is not None
            for a in lm.attention_layers()
        )
    assert (
        target.attention_layers()[0].num_kv_heads
        < target.attention_layers()[0].num_heads
    )
    held = stories.heldout_prompts(8, 128, seed=5)
    lt, ld = per_token_loss(target, held).mean(), per_token_loss(draft, held).mean()
    uniform = torch.log(torch.tensor(float(stories.VOCAB)))
    assert lt < ld < uniform  # the target is the better model; both learned the text
    assert float(lt) < 0.6 * float(uniform)
    for path in (ROOT / "src/attnlab/models").glob("*.safetensors"):
        assert 20_000 < path.stat().st_size < 5_000_000
    with pytest.raises(ValueError, match="name"):
        load_lm("big")


def test_heldout_text_is_disjoint_from_training():
    g = torch.Generator().manual_seed(0)
    for split, letters in (("train", "abcdefghijkl"), ("heldout", "mnopqrstuvwxyz")):
        for _ in range(200):
            s = stories.story(g, split)
            names = s.split(" . ")[0].split(" and ")
            assert len(names) == 3 and all(n[0] in letters for n in names)
            assert set(s.split()) - stories.TEMPLATE_WORDS == set(names)
    text = stories.decode(stories.heldout_prompts(2, 64, seed=0)[0])
    assert (
        text[0] == "|"
        and stories.encode(text[1:])
        == stories.heldout_prompts(2, 64, seed=0)[0, 1:].tolist()
    )
    with pytest.raises(ValueError, match="split"):
        stories.story(g, "test")
    with pytest.raises(ValueError, match="character"):
        stories.encode("Bob")


def test_cached_decoding_equals_full_forward(target):
    ids = stories.heldout_prompts(2, 24, seed=1)  # (2, 24)
    full = target(ids)
    cache = KVCache.for_model(target)
    steps = [target(ids[:, :10], cache)]
    for t in range(10, 24):
        logits, w = target(ids[:, t : t + 1], cache, return_weights=True)
        steps.append(logits)
        assert len(w) == 3 and w[0].shape == (2, 6, 1, t + 1)
        torch.testing.assert_close(w[1].sum(-1), torch.ones(2, 6, 1))
    torch.testing.assert_close(torch.cat(steps, 1), full, atol=1e-5, rtol=1e-5)
    assert cache.seen == 24 and cache.keys(0).shape == (2, 2, 24, 16)
    assert cache.nbytes() == 3 * 2 * (2 * 2 * 24 * 16) * 4


def test_cache_edits(target):
    ids = stories.heldout_prompts(1, 20, seed=2)
    cache = KVCache.for_model(target)
    target(ids[:, :16], cache)
    # keep the first 4 and the last 8 entries of layer 0 (window + sinks)
    idx = torch.cat((torch.arange(4), torch.arange(8, 16)))
    cache.keep(0, idx)
    assert cache.positions(0).tolist() == idx.tolist() and cache.length(1) == 16
    _, w = target(ids[:, 16:17], cache, return_weights=True)
    assert w[0].shape[-1] == 13 and w[1].shape[-1] == 17
    assert cache.positions(0)[-1] == 16  # the new token sits at its own position
    # an evicted cache equals a full forward with the matching mask: evicting nothing
    # but replacing keys/values with themselves changes nothing
    c2 = KVCache.for_model(target)
    target(ids[:, :16], c2)
    ref = target(ids[:, 16:17], c2.clone())
    c2.replace(0, c2.keys(0).clone(), c2.values(0).clone(), c2.positions(0).clone())
    torch.testing.assert_close(target(ids[:, 16:17], c2), ref)
    cache.rollback(3)
    assert cache.seen == 14 and cache.positions(0).tolist() == [
        0,
        1,
        2,
        3,
        8,
        9,
        10,
        11,
        12,
        13,
    ]
    with pytest.raises(ValueError, match="n"):
        cache.rollback(15)
    with pytest.raises(ValueError, match="positions"):
        c2.replace(0, c2.keys(0), c2.values(0), c2.positions(0) + 100)
    with pytest.raises(ValueError, match="values"):
        c2.replace(0, c2.keys(0), c2.values(0)[:, :, :3], c2.positions(0))
    with pytest.raises(ValueError, match="index"):
        c2.keep(0, torch.tensor([99]))
    with pytest.raises(ValueError, match="layer"):
        c2.keys(3)
    with pytest.raises(ValueError, match="ids"):
        target(torch.tensor([[0, 29]]))
    with pytest.raises(TypeError, match="cache"):
        target(ids, cache=[])


def test_model_loads_from_the_built_wheel(tmp_path):
    """The weights are package data: build the wheel offline, unzip it and load both
    models from there in a fresh interpreter (as Colab's pip install would)."""
    proj = tmp_path / "proj"  # a copy: the build writes build/ and *.egg-info
    proj.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, proj / name)
    shutil.copytree(
        ROOT / "src" / "attnlab",
        proj / "src" / "attnlab",
        ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"),
    )
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "-q",
            "-w",
            str(tmp_path / "dist"),
            str(proj),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (wheel,) = (tmp_path / "dist").glob("attnlab-*.whl")
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        z.extractall(site)
    assert "attnlab/models/target.safetensors" in names
    assert "attnlab/models/MODEL_CARD.md" in names
    code = (
        "import attnlab, attnlab.models as m; "
        f"assert attnlab.__file__.startswith({str(site)!r}), attnlab.__file__; "
        "lm = m.load_lm('target'); d = m.load_lm('draft'); "
        "print(type(lm).__name__, lm.vocab_size)"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(site)
    out = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["CausalLM", "29"]
