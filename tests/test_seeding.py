"""ATTNLAB_SEED: one knob moves every live-training seed, and only that knob does."""

import random
import re
from pathlib import Path

import numpy as np
import pytest
import torch

import attnlab
from attnlab import seeding
from attnlab.data import dates

ROOT = Path(__file__).resolve().parents[1]


def _first_batch(seed=0):
    return next(dates.DateTask().stream(8, seed=seed)).src


def test_default_run_uses_the_seeds_as_written():
    assert seeding.seed_shift() == 0
    assert seeding.live_seed(7) == 7
    assert attnlab.seed_everything(3) == 3
    a = torch.rand(4)
    torch.manual_seed(3)
    torch.testing.assert_close(a, torch.rand(4), rtol=0, atol=0)
    # the data streams are those of random.Random(seed), as before the knob existed
    assert seeding.python_rng(5).random() == random.Random(5).random()


def test_shift_moves_every_seed_by_a_thousand(monkeypatch):
    unshifted = _first_batch()
    monkeypatch.setenv("ATTNLAB_SEED", "2")
    assert seeding.live_seed(7) == 2007
    assert attnlab.seed_everything(3) == 2003
    a = torch.rand(4)
    torch.manual_seed(2003)
    torch.testing.assert_close(a, torch.rand(4), rtol=0, atol=0)
    g = seeding.generator(1)
    torch.testing.assert_close(
        torch.rand(3, generator=g),
        torch.rand(3, generator=torch.Generator().manual_seed(2001)),
        rtol=0,
        atol=0,
    )
    assert seeding.numpy_rng(1).random() == np.random.default_rng(2001).random()
    shifted = _first_batch()
    assert not torch.equal(shifted, unshifted)  # other batches ...
    monkeypatch.setenv("ATTNLAB_SEED", "0")
    assert torch.equal(_first_batch(2000), shifted)  # ... exactly those of seed 2000
    assert "ATTNLAB_SEED=2" not in seeding.describe()


def test_shift_reaches_the_library_training_functions(monkeypatch):
    from attnlab.rationales import rationale_task

    base = rationale_task("focus", "train", n=8, seed=0).ids
    monkeypatch.setenv("ATTNLAB_SEED", "1")
    moved = rationale_task("focus", "train", n=8, seed=0).ids
    assert not torch.equal(base, moved)
    assert "s + 1000" in seeding.describe()


def test_explicit_shift_overrides_the_environment(monkeypatch):
    monkeypatch.setenv("ATTNLAB_SEED", "3")
    assert seeding.live_seed(4, shift=0) == 4
    assert seeding.live_seed(4) == 3004


@pytest.mark.parametrize("raw", ["1.5", "-1", "one", "0x2"])
def test_bad_environment_value_names_the_variable(monkeypatch, raw):
    monkeypatch.setenv("ATTNLAB_SEED", raw)
    with pytest.raises(ValueError, match="ATTNLAB_SEED"):
        seeding.seed_shift()


def test_bad_seeds_are_refused():
    with pytest.raises(TypeError, match="seed"):
        seeding.live_seed(1.0)
    with pytest.raises(ValueError, match="seed"):
        seeding.live_seed(-1)
    with pytest.raises(ValueError, match="past"):
        seeding.live_seed(2**32 - 10, shift=1)


def test_result_files_are_never_written_from_a_shifted_run(monkeypatch):
    assert "machine" in attnlab.devices.run_meta()
    monkeypatch.setenv("ATTNLAB_SEED", "1")
    with pytest.raises(RuntimeError, match="ATTNLAB_SEED"):
        attnlab.devices.run_meta()


# Random state is made in one place. Exempt: the exercise checks' fixed test cases and
# the widgets' and twins' demo inputs (their seeds must not move: seeding.py says why).
_RNG = re.compile(
    r"\.manual_seed\(|random\.Random\(|default_rng\(|np\.random\.seed\(|random\.seed\("
)
_EXEMPT = ("seeding.py", "check.py", "widgets.py", "twins.py", "check_core.py")


def _code_lines(text):
    in_doc = False
    for line in text.splitlines():
        s = line.strip()
        if s.count('"""') == 1:
            in_doc = not in_doc
            continue
        if not in_doc and not s.startswith("#"):
            yield line


def test_library_makes_random_state_only_through_seeding():
    offenders = []
    for path in sorted((ROOT / "src" / "attnlab").rglob("*.py")):
        if path.name in _EXEMPT or "course" in path.parts and "twin" in path.parts:
            continue
        for line in _code_lines(path.read_text()):
            if _RNG.search(line):
                offenders.append(f"{path.relative_to(ROOT)}: {line.strip()}")
    assert not offenders, "seed through attnlab.seeding:\n" + "\n".join(offenders)


def test_chapters_seed_live_training_through_the_library():
    import json

    offenders = []
    for nb in sorted((ROOT / "chapters").glob("*.ipynb")):
        cells = json.loads(nb.read_text())["cells"]
        for i, cell in enumerate(cells):
            if cell["cell_type"] != "code":
                continue
            for line in "".join(cell["source"]).splitlines():
                if re.search(r"torch\.manual_seed\(|np\.random\.seed\(", line):
                    offenders.append(f"{nb.name} cell {i}: {line.strip()}")
    assert not offenders, "use attnlab.manual_seed (or seed_everything):\n" + "\n".join(
        offenders
    )
