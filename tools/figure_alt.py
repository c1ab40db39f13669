"""Sphinx extension: every figure of a notebook keeps its alt text on the website.

``attnlab.plotting.show(fig, alt=...)`` displays a PNG whose output metadata carries
``{"image/png": {"alt": "..."}}`` (the form JupyterLab and nbconvert read). myst-nb copies
only ``width`` and ``height`` from an output's metadata onto the image node
(``myst_nb/core/render.py``, ``NbElementRenderer.render_image``), so without this
extension Sphinx writes the image's file name (a sha256) as its alt text. Here
``render_image`` is wrapped: the alt of the output's metadata goes onto the node.

Loaded by ``_config.yml`` (``sphinx.local_extensions``). Images without alt metadata
are left as myst-nb makes them; the browser check (``tools/browser_check.py``) reports
every image whose alt is missing or looks like a file name or hash.
"""

from __future__ import annotations

import re

from sphinx.application import Sphinx

# What an alt text must not be: a file name, a path or a hex digest.
_HASHY = re.compile(r"(^|/)[0-9a-f]{16,}(\.\w+)?$|\.(png|jpe?g|svg|gif)$", re.I)


def alt_of(output_metadata: dict | None, mime_type: str) -> str | None:
    """The alt text an output's metadata gives its image, or None."""
    meta = (output_metadata or {}).get(mime_type) or {}
    alt = meta.get("alt") if isinstance(meta, dict) else None
    if isinstance(alt, str) and alt.strip():
        return " ".join(alt.split())
    return None


def looks_like_a_file_name(alt: str | None) -> bool:
    """True for a missing alt or one that is a file name, a path or a hash."""
    return not alt or not alt.strip() or bool(_HASHY.search(alt.strip()))


def _patch_myst_nb() -> None:
    from myst_nb.core.render import NbElementRenderer

    if getattr(NbElementRenderer.render_image, "_attnlab_alt", False):
        return
    original = NbElementRenderer.render_image

    def render_image(self, data):
        nodes = original(self, data)
        alt = alt_of(data.output_metadata, data.mime_type)
        if alt:
            for node in nodes:
                if node.tagname == "image" and not node.get("alt"):
                    node["alt"] = alt
        return nodes

    render_image._attnlab_alt = True
    NbElementRenderer.render_image = render_image


def setup(app: Sphinx) -> dict:
    _patch_myst_nb()
    return {"parallel_read_safe": True, "parallel_write_safe": True}
