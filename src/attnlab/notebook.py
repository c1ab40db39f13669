"""What the first (hidden) cell of every chapter calls: seeds and plotting defaults."""

from __future__ import annotations

import math

import torch

from .devices import device
from .seeding import describe, seed_everything, seed_shift

__all__ = ["setup_notebook", "glue"]


def setup_notebook(seed: int = 0) -> torch.device:
    """Seed everything, set plot defaults, and return the device chapters should use.

    Also sets torch's print options (4 digits, no scientific notation) and
    matplotlib's figure size, dpi and font sizes for the book.

    Parameters
    ----------
    seed : passed to :func:`attnlab.seed_everything`, which moves it by
        ``1000 * k`` under ``ATTNLAB_SEED=k`` (:mod:`attnlab.seeding`); such a run
        prints which seeds it uses.

    Returns
    -------
    torch.device, :func:`attnlab.device`'s choice.

    Raises
    ------
    TypeError, ValueError
        As :func:`attnlab.seed_everything` for a bad ``seed`` (before anything is set).
    """
    import matplotlib as mpl

    seed_everything(seed)  # with ATTNLAB_SEED=k: seed + 1000 k (attnlab.seeding)
    if seed_shift():
        print(describe())  # another trajectory than the book's: the page says so
    torch.set_printoptions(precision=4, sci_mode=False)
    mpl.rcParams.update(
        {
            # 100 dpi: matplotlib's 10-pt text is 13.9 px; the site never shows a
            # figure below 0.68 of its natural width (tools/site_polish.py), so that
            # text stays >= 9 CSS px on a phone. Widths <= 6.5 in (STYLE.md).
            "figure.dpi": 100,
            "savefig.dpi": 100,
            "figure.figsize": (6, 3.5),
            "font.size": 10,
            "legend.fontsize": 10,
            "xtick.labelsize": 10,
            "ytick.labelsize": 10,
            "axes.spines.top": False,
            "axes.spines.right": False,
        }
    )
    return device()


def glue(name: str, value, display: bool = False):
    """Make ``value`` quotable in the page's prose as ``{glue:text}`name```.

    Numbers in a chapter's text come from the run, never typed by hand: a code cell
    calls ``attnlab.glue("acc", acc)`` and the markdown writes
    ``{glue:text}`acc:.1%``` (any Python format spec after the colon). Under the book
    build this is myst-nb's ``glue``; where myst-nb is not installed (Colab, a bare
    Jupyter) it does nothing unless ``display`` is true, when it shows the value.
    Returns ``value`` so a cell can glue and use it in one line.

    A NumPy scalar or a one-element tensor is glued as the plain Python number it
    holds: myst-nb formats ``{glue:text}`` from the value's ``repr``, and
    ``np.float64(0.34)`` cannot take a format spec.

    Parameters
    ----------
    name : the key the markdown quotes (``{glue:text}`name```), unique in the page.
    value : any value; a NumPy scalar or a one-element tensor is glued as a number.
    display : also show the value in the cell's output.

    Returns
    -------
    ``value`` itself, unchanged.
    """
    shown = _plain_number(value)
    if shown is None or (isinstance(shown, float) and not math.isfinite(shown)):
        raise ValueError(
            f"glue({name!r}): {shown!r} is not a value to print (a missing or NaN "
            "number must stop the build, never reach the page)"
        )
    try:
        from myst_nb import glue as _myst_glue
    except ImportError:
        if display:
            from IPython.display import display as _show

            _show(value)
        return value
    _myst_glue(name, shown, display=display)
    return value


def _plain_number(value):
    """``value`` as a Python number if it is a NumPy scalar or a 1-element tensor."""
    if isinstance(value, torch.Tensor):
        return value.item() if value.numel() == 1 else value
    item = getattr(value, "item", None)
    if type(value).__module__ == "numpy" and getattr(value, "ndim", 1) == 0 and item:
        return item()
    return value
