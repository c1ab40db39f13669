"""Chapter 14's widget: speculative decoding of the shipped LMs, live.

:func:`speculative_demo` is the plain function (the tests call it);
:func:`speculative_widget` wraps it with sliders for k, the temperature and the seed.
"""

from __future__ import annotations

import torch

__all__ = ["speculative_demo", "speculative_widget"]


def speculative_demo(
    k: int = 4,
    temperature: float = 1.0,
    seed: int = 0,
    new_tokens: int = 60,
    prompt_seed: int = 11,
    show: bool = True,
) -> dict:
    """Generate ``new_tokens`` after a held-out prompt with the shipped target and
    draft; print the text with each target pass's tokens in brackets (``[ab|c]``: a
    and b were drafted and kept, c came from the target) and the statistics."""
    from ...data import stories
    from ...models import load_lm
    from ...speculative import speculative_generate

    target, draft = load_lm("target"), load_lm("draft")
    prompt = stories.heldout_prompts(1, 48, seed=prompt_seed)[0]
    out, stats = speculative_generate(
        target,
        draft,
        prompt,
        new_tokens,
        k,
        temperature,
        torch.Generator().manual_seed(seed),
    )
    pieces, i = [], 0
    for _kk, j in stats["rounds"]:
        chunk = stories.decode(out[i : i + j + 1])
        pieces.append(f"[{chunk[:j]}|{chunk[j:]}]")
        i += j + 1
    if show:
        print("prompt: …" + stories.decode(prompt[-30:]))
        print("output: " + "".join(pieces))
        print(
            f"k = {k}, temperature {temperature:g}: {stats['target_passes']} target "
            f"passes for {new_tokens} tokens, {stats['tokens_per_pass']:.2f} tokens per "
            f"pass, α = {stats['alpha']:.2f}, accepted {stats['accepted']} of "
            f"{stats['drafted']} draft tokens"
        )
    return stats


def speculative_widget():
    """Sliders for k, the temperature and the seed."""
    from ipywidgets import Dropdown, IntSlider, interactive

    return interactive(
        lambda k, temperature, seed: speculative_demo(k, temperature, seed) and None,
        k=IntSlider(value=4, min=1, max=10),
        temperature=Dropdown(options=[1.0, 0.7, 0.0], value=1.0),
        seed=IntSlider(value=0, min=0, max=20),
    )
