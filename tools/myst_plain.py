"""MyST markdown -> plain Jupyter markdown (what Colab, JupyterLab, VS Code and GitHub
render), for the notebook editions (:mod:`tools.editions`).

The chapters are written in MyST for the book: glue roles, citations, sphinx-exercise
boxes, ``literalinclude``, admonitions, cross-references. :func:`render` turns one
markdown cell into CommonMark + ``$``-math with the same content:

* ``{glue:text}`name:.2f``` -> the value from the book's run (:class:`Context.glue`),
  formatted as myst-nb formats it on the page; a value that varies from run to run
  (timings, listed in :data:`tools.editions.VOLATILE_GLUE`) becomes a pointer to the
  output of the cell that measures it instead of a frozen number;
* ``{cite:t}`key``` -> "[Author et al. (Year)](link)", ``{cite:p}`` -> "([Author et al.,
  Year](link))": the link is the entry's DOI, URL or arXiv id, else the site's
  bibliography page;
* an exercise box -> "**Exercise 2.3 · Title** (predict, then measure)" and its body,
  numbered as the site numbers it (:mod:`tools.exercise_numbers`); a solution marker ->
  "**Solution to Exercise 2.3**";
* ``literalinclude`` -> the code itself (``pyobject``, ``start-after``/``end-before``,
  ``lines``, ``dedent``); admonitions -> a bold title and their body; figures -> an
  image and its caption; ``{ref}``/``{numref}``/``{eq}``/``{doc}`` -> text, linked to the
  website where the target is on another page; ``(label)=`` targets and ``%`` comments
  are dropped.

Anything else MyST-only raises :class:`RenderError` naming the cell, so a new construct
fails the tests instead of reaching a student raw. :func:`myst_leftovers` finds what a
rendered text still holds (the tests run it over every edition).
"""

from __future__ import annotations

import ast
import re
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote


class RenderError(ValueError):
    """A MyST construct the renderer does not know, or a reference it cannot resolve."""


# ---------------------------------------------------------------- what is left over
_LEFTOVERS = [
    (re.compile(r"\{[a-zA-Z][\w:.-]*\}`"), "a MyST role"),
    (re.compile(r"^\s*(`{3,}|~{3,}|:{3,})\s*\{[^}\n]*\}", re.M), "a MyST directive"),
    (re.compile(r"^\([\w:.-]+\)=\s*$", re.M), "a MyST target"),
    (re.compile(r"^:[\w-]+:(\s|$)", re.M), "a directive option"),
    (re.compile(r"^%", re.M), "a MyST comment"),
    (re.compile(r"\{\{[^}]*\}\}"), "a MyST substitution"),
]


def myst_leftovers(text: str) -> list[str]:
    """What MyST-only syntax ``text`` still holds ("a MyST role: {cite:p}`x`")."""
    out = []
    for pattern, what in _LEFTOVERS:
        for m in pattern.finditer(text):
            line = text[text.rfind("\n", 0, m.start()) + 1 :].split("\n", 1)[0]
            out.append(f"{what}: {line.strip()[:80]}")
    return out


# ---------------------------------------------------------------- glue values
def format_plain_text(text: str, fmt_spec: str) -> str:
    """myst-nb's formatting of a glued ``text/plain`` value (myst_nb.core.variables)."""
    try:
        value = ast.literal_eval(text)
    except (SyntaxError, ValueError):
        value = text
    if fmt_spec == "":
        return str(value)
    type_char = fmt_spec[-1]
    if type_char == "s":
        value = str(value)
    elif type_char in "bcdoxX":
        value = int(value)
    elif type_char in "eEfFgGn%":
        value = float(value)
    return format(value, fmt_spec)


VOLATILE_TEXT = (
    "*(varies from run to run: see the output of the cell that measures it)*"
)


# ---------------------------------------------------------------- bibliography
@dataclass
class Reference:
    authors: list[str]  # last names
    year: str
    link: str  # DOI/URL/arXiv, or "" (then the site's bibliography page)

    def names(self) -> str:
        a = self.authors
        if not a:
            return "Anon."
        if len(a) == 1:
            return a[0]
        if len(a) == 2:
            return f"{a[0]} and {a[1]}"
        return f"{a[0]} et al."


def _latex_to_text(s: str) -> str:
    import codecs

    try:
        import latexcodec  # noqa: F401  (registers the "ulatex" codec; pybtex needs it)

        s = codecs.decode(s, "ulatex")
    except (ImportError, ValueError):
        pass
    return re.sub(r"[{}]", "", s).strip()


_ARXIV = re.compile(r"arXiv[:\s]*(\d{4}\.\d{4,5})", re.I)


def read_bib(path: Path) -> dict[str, Reference]:
    """Author last names, year and a link for every entry of a BibTeX file."""
    from pybtex.database import parse_file

    db = parse_file(str(path))
    refs = {}
    for key, entry in db.entries.items():
        people = entry.persons.get("author", []) or entry.persons.get("editor", [])
        last = [
            _latex_to_text(" ".join(p.prelast_names + p.last_names)) for p in people
        ]
        f = {k.lower(): v for k, v in entry.fields.items()}
        link = ""
        if f.get("doi"):
            doi = re.sub(r"^https?://(dx\.)?doi\.org/", "", f["doi"].strip())
            link = f"https://doi.org/{doi}"
        elif f.get("url"):
            link = f["url"].strip()
        else:
            for name in ("eprint", "journal", "note", "howpublished", "booktitle"):
                m = _ARXIV.search(f.get(name, ""))
                if m or (name == "eprint" and f.get("eprint")):
                    arxiv_id = m.group(1) if m else f["eprint"].strip()
                    link = f"https://arxiv.org/abs/{arxiv_id}"
                    break
        refs[key.lower()] = Reference(last, _latex_to_text(f.get("year", "n.d.")), link)
    return refs


# ---------------------------------------------------------------- context
@dataclass
class Target:
    """Where a label points: its text ("Exercise 5.3") and the page it is on."""

    text: str
    page: str  # "chapters/05_self_attention"


@dataclass
class Context:
    """What rendering one notebook needs."""

    page: str  # this notebook's page, "chapters/03_smoothed_max"
    source_dir: Path  # the folder the notebook lives in (literalinclude paths)
    site_url: str  # the published book, ending in "/"
    glue: dict[str, str] = field(default_factory=dict)  # name -> text/plain
    volatile: set[str] = field(default_factory=set)
    refs: dict[str, Reference] = field(default_factory=dict)
    targets: dict[str, Target] = field(default_factory=dict)  # label -> target
    exercises: dict[str, tuple[str, str]] = field(
        default_factory=dict
    )  # label -> (number, kinds)
    missing_glue: str = "error"  # or "mark": render an unknown name as a pointer
    missing: list[str] = field(default_factory=list)  # glue names not found
    boxes: list[dict] = field(
        default_factory=list
    )  # exercise boxes rendered (label...)

    def page_url(self, page: str, anchor: str = "") -> str:
        return f"{self.site_url}{page}.html" + (f"#{quote(anchor)}" if anchor else "")


# ---------------------------------------------------------------- roles
_ROLE = re.compile(r"\{([a-zA-Z][\w:.-]*)\}`([^`]*)`")
_TEXT_TARGET = re.compile(r"^(.*?)\s*<([^<>]+)>$", re.S)


def _glue(ctx: Context, content: str, role: str) -> str:
    if role in ("glue:text", "glue:md") or role == "glue":
        name, _, fmt = (
            content.partition(":") if role == "glue:text" else (content, "", "")
        )
    else:
        raise RenderError(f"unknown glue role {{{role}}}")
    name = name.strip()
    if "::" in name:
        raise RenderError(f"glue from another page ({name}) is not supported")
    if name in ctx.volatile:
        return VOLATILE_TEXT
    if name not in ctx.glue:
        ctx.missing.append(name)
        if ctx.missing_glue == "error":
            raise RenderError(f"no value for glue {name!r} in the snapshot")
        return VOLATILE_TEXT
    text = format_plain_text(ctx.glue[name], fmt)
    return text.replace("*", r"\*").replace("_", r"\_") if role != "glue:md" else text


def _cite(ctx: Context, content: str, role: str) -> str:
    keys = [k.strip() for k in content.split(",") if k.strip()]
    parts = []
    for key in keys:
        ref = ctx.refs.get(key.lower())
        if ref is None:
            raise RenderError(f"citation key {key!r} is not in references.bib")
        link = ref.link or f"{ctx.site_url}bibliography.html"
        kind = role.split(":")[1] if ":" in role else "p"
        if kind in ("t", "ts"):
            parts.append(f"[{ref.names()} ({ref.year})]({link})")
        elif kind == "author":
            parts.append(f"[{ref.names()}]({link})")
        elif kind == "year":
            parts.append(f"[{ref.year}]({link})")
        elif kind in ("p", "ps", "alp"):
            parts.append(f"[{ref.names()}, {ref.year}]({link})")
        else:
            raise RenderError(f"unknown citation role {{{role}}}")
    kind = role.split(":")[1] if ":" in role else "p"
    if kind in ("p", "ps"):
        return "(" + "; ".join(parts) + ")"
    return (", " if kind in ("author", "year") else "; ").join(parts)


def _ref(ctx: Context, content: str, role: str) -> str:
    m = _TEXT_TARGET.match(content.strip())
    text, label = (m.group(1), m.group(2)) if m else (None, content.strip())
    if role == "doc":
        page = (Path(ctx.page).parent / label).as_posix()
        page = (
            re.sub(r"[^/]+/\.\./", "", page).removesuffix(".ipynb").removesuffix(".md")
        )
        return f"[{text or Path(label).stem}]({ctx.page_url(page)})"
    if role == "eq":
        return f"({text or label})"
    target = ctx.targets.get(label)
    if target is None:
        raise RenderError(f"{{{role}}} to an unknown label {label!r}")
    shown = target.text
    if role == "numref" and text:
        shown = text.replace("%s", target.text.split()[-1]).replace(
            "{number}", target.text.split()[-1]
        )
    elif text:
        shown = f"{text} ({target.text})"
    if target.page == ctx.page:
        return shown
    return f"[{shown}]({ctx.page_url(target.page, label)})"


def _simple_role(ctx: Context, content: str, role: str) -> str:
    if role == "math":
        return f"${content}$"
    if role in ("sub", "sup"):
        return f"<{role}>{content}</{role}>"
    if role in ("abbr", "term", "code", "samp", "kbd", "file", "command", "program"):
        m = _TEXT_TARGET.match(content)
        content = m.group(1) if m and role == "term" else content
        return content if role in ("abbr", "term") else f"`{content}`"
    if role in ("download",):
        m = _TEXT_TARGET.match(content)
        return m.group(1) if m else content
    raise RenderError(f"unknown role {{{role}}}")


def render_roles(text: str, ctx: Context) -> str:
    """Replace every role outside code spans; code spans are kept as they are."""
    out, pos = [], 0
    # inline code spans (`x` or ``x``) not preceded by a role's closing brace
    span = re.compile(r"(?<!\})(`+)(?!`)(.+?)(?<!`)\1(?!`)", re.S)
    while pos < len(text):
        r = _ROLE.search(text, pos)
        c = span.search(text, pos)
        if c and (r is None or c.start() < r.start()):
            out.append(text[pos : c.end()])
            pos = c.end()
            continue
        if r is None:
            out.append(text[pos:])
            break
        out.append(text[pos : r.start()])
        role, content = r.group(1), r.group(2)
        if role.startswith("glue"):
            out.append(_glue(ctx, content, role))
        elif role.startswith("cite"):
            out.append(_cite(ctx, content, role))
        elif role in ("ref", "numref", "eq", "doc", "any"):
            out.append(_ref(ctx, content, "ref" if role == "any" else role))
        else:
            out.append(_simple_role(ctx, content, role))
        pos = r.end()
    return "".join(out)


# ---------------------------------------------------------------- directives
_OPEN = re.compile(
    r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,}|:{3,})\{(?P<name>[\w:-]+)\}[ \t]*(?P<arg>.*)$"
)
_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>[^`]*)$")
_OPT = re.compile(r"^[ \t]*:([\w-]+):[ \t]*(.*)$")

ADMONITIONS = {
    "note": "Note",
    "important": "Important",
    "warning": "Warning",
    "tip": "Tip",
    "hint": "Hint",
    "caution": "Caution",
    "attention": "Attention",
    "danger": "Danger",
    "error": "Error",
    "seealso": "See also",
}


@dataclass
class Directive:
    name: str
    arg: str
    options: dict[str, str]
    body: str


def _closes(line: str, fence: str) -> bool:
    bare = line.strip()
    return bool(bare) and set(bare) == {fence[0]} and len(bare) >= len(fence)


def _split_directive(lines: list[str], i: int) -> tuple[Directive, int]:
    """The directive opened at ``lines[i]`` and the index after its closing fence."""
    m = _OPEN.match(lines[i])
    fence, j = m.group("fence"), i + 1
    options: dict[str, str] = {}
    # options: ":key: value" lines right after the opening, or a --- yaml block
    if j < len(lines) and lines[j].strip() == "---":
        j += 1
        while j < len(lines) and lines[j].strip() != "---":
            k, _, v = lines[j].partition(":")
            options[k.strip()] = v.strip()
            j += 1
        j += 1
    while j < len(lines):
        o = _OPT.match(lines[j])
        if not o:
            break
        options[o.group(1)] = o.group(2).strip()
        j += 1
    # The body ends at the first line of only the fence's character, at least as long
    # as the opening fence (CommonMark's rule: a nested block uses a shorter fence).
    body = []
    while j < len(lines) and not _closes(lines[j], fence):
        body.append(lines[j])
        j += 1
    if j == len(lines):
        raise RenderError(f"{{{m.group('name')}}} is never closed")
    return Directive(
        m.group("name"), m.group("arg").strip(), options, "\n".join(body)
    ), j + 1


def _python_object(source: str, dotted: str) -> str:
    """The source of a top-level function/class (or ``Class.method``), decorators included."""
    tree = ast.parse(source)
    lines = source.splitlines()
    nodes = tree.body
    node = None
    for part in dotted.split("."):
        node = next(
            (
                n
                for n in nodes
                if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                and n.name == part
            ),
            None,
        )
        if node is None:
            raise RenderError(f"no {dotted} in the included file")
        nodes = node.body
    start = min([node.lineno] + [d.lineno for d in node.decorator_list]) - 1
    return textwrap.dedent("\n".join(lines[start : node.end_lineno]))


def _literalinclude(d: Directive, ctx: Context) -> str:
    path = (ctx.source_dir / d.arg).resolve()
    if not path.is_file():
        raise RenderError(f"literalinclude: {d.arg} does not exist")
    text = path.read_text()
    o = d.options
    if "pyobject" in o:
        text = _python_object(text, o["pyobject"])
    if "start-after" in o:
        head, sep, text = text.partition(o["start-after"])
        if not sep:
            raise RenderError(f"literalinclude: no {o['start-after']!r} in {d.arg}")
        text = text.split("\n", 1)[1] if "\n" in text else ""
    if "end-before" in o:
        text, sep, _ = text.partition(o["end-before"])
        if not sep:
            raise RenderError(f"literalinclude: no {o['end-before']!r} in {d.arg}")
        text = text.rsplit("\n", 1)[0] if "\n" in text else ""
    if "lines" in o:
        keep = []
        all_lines = text.splitlines()
        for part in o["lines"].split(","):
            a, _, b = part.strip().partition("-")
            lo, hi = int(a), int(b) if b else int(a)
            keep += all_lines[lo - 1 : hi]
        text = "\n".join(keep)
    if "dedent" in o:
        n = int(o["dedent"]) if o["dedent"] else None
        text = "\n".join(
            (line[n:] if n is not None else line) for line in text.splitlines()
        )
        if n is None:
            text = textwrap.dedent(text)
    language = o.get("language") or {".py": "python", ".js": "javascript"}.get(
        path.suffix, ""
    )
    fence = "````" if "```" in text else "```"
    block = f"{fence}{language}\n{text.strip(chr(10))}\n{fence}"
    caption = o.get("caption")
    return f"*{caption}*\n\n{block}" if caption else block


def _directive(d: Directive, ctx: Context) -> str:
    name = d.name
    if name == "literalinclude":
        return _literalinclude(d, ctx)
    body = (
        render_markdown(d.body, ctx)
        if name not in ("math", "code-block", "code")
        else d.body
    )
    if name in ("exercise", "exercise-start"):
        label = d.options.get("label", "")
        number, kinds = ctx.exercises.get(label, ("?", ""))
        head = f"**Exercise {number}"
        head += f" · {render_roles(d.arg, ctx)}**" if d.arg else "**"
        head += f" ({kinds})" if kinds else ""
        ctx.boxes.append(
            {
                "label": label,
                "number": number,
                "title": render_roles(d.arg, ctx),
                "classes": d.options.get("class", "").split(),
            }
        )
        return f"{head}\n\n{body}".rstrip()
    if name in ("solution", "solution-start"):
        number = ctx.exercises.get(d.arg.strip(), ("?", ""))[0]
        title = d.options.get("title")
        head = f"**Solution to Exercise {number}**" + (f" · {title}" if title else "")
        return f"{head}\n\n{body}".rstrip()
    if name in ("solution-end", "exercise-end"):
        return body
    if name == "admonition":
        return f"**{render_roles(d.arg, ctx)}**\n\n{body}".rstrip()
    if name in ADMONITIONS:
        title = ADMONITIONS[name]
        return f"**{title}.** {body}".rstrip() if body else f"**{title}.**"
    if name in ("figure", "image"):
        alt = d.options.get("alt", "")
        img = f"![{alt}]({d.arg})"
        return f"{img}\n\n*{body}*" if name == "figure" and body else img
    if name == "math":
        return f"$$\n{body.strip()}\n$$"
    if name in ("code-block", "code"):
        return f"```{d.arg}\n{body}\n```"
    if name in (
        "margin",
        "sidebar",
        "epigraph",
        "pull-quote",
        "topic",
        "div",
        "container",
    ):
        head = f"**{render_roles(d.arg, ctx)}**\n\n" if d.arg else ""
        return f"{head}{body}".rstrip()
    raise RenderError(f"unknown directive {{{name}}}")


def render_markdown(text: str, ctx: Context) -> str:
    """One markdown cell's source, MyST -> plain Jupyter markdown."""
    lines = text.split("\n")
    out: list[str] = []
    chunk: list[str] = []  # plain lines waiting for their roles to be rendered

    def flush():
        if chunk:
            out.append(render_roles("\n".join(chunk), ctx))
            chunk.clear()

    i = 0
    while i < len(lines):
        line = lines[i]
        if _OPEN.match(line):
            flush()
            d, i = _split_directive(lines, i)
            out.append(_directive(d, ctx))
            continue
        f = _FENCE.match(line)
        if f:  # a plain code block: copied as it is
            flush()
            fence, j = f.group("fence"), i + 1
            while j < len(lines) and not _closes(lines[j], fence):
                j += 1
            out.append("\n".join(lines[i : j + 1]))
            i = j + 1
            continue
        if re.match(r"^\([\w:.-]+\)=\s*$", line) or line.startswith("%"):
            i += 1  # a target or a comment: nothing to show
            continue
        if line.strip() == "+++":
            i += 1
            continue
        chunk.append(re.sub(r"^(\$\$.*\$\$)\s*\([\w:.-]+\)\s*$", r"\1", line))
        i += 1
    flush()
    rendered = "\n".join(out)
    return re.sub(r"\n{3,}", "\n\n", rendered).strip("\n")
