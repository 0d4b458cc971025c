"""reST-flavoured docstring prose -> Markdown, for the reference site.

The docstrings are written for Sphinx-style readers: ``:func:`x```-style roles, double
backtick literals, ``Title::`` before a literal block and simple ``=====  =====`` tables.
Markdown shows all of these raw, so the registry page and the API pages (through
:class:`RestRoles`, a griffe extension) convert them first:

* a role becomes a code span of its target (``~a.b.C`` shows ``C``; ``title <target>``
  shows the title);
* a double-backtick literal becomes a code span;
* a paragraph ending in ``::`` ends in ``:`` (its indented block is code in Markdown too);
* a simple table becomes a Markdown table.

Code blocks (fenced, or after ``::``) and existing code spans are left as they are.
"""

from __future__ import annotations

import re

ROLES = ("func", "meth", "class", "mod", "data", "attr", "exc", "obj", "const", "term", "ref", "doc", "math")
_ROLE = re.compile(r":(?:py:)?(?:" + "|".join(ROLES) + r"):`(?P<body>[^`]+)`")
_DOUBLE = re.compile(r"``(?P<body>[^`](?:.*?[^`])??)``(?!`)")
_TITLED = re.compile(r"^(?P<title>.+?)\s*<(?P<target>[^<>]+)>$")
_BORDER = re.compile(r"^\s*=+(?:\s+=+)+\s*$")


def _span(text: str) -> str:
    """A Markdown code span holding ``text`` exactly (wider fences around backticks)."""
    fence = "`" * (max((len(m) for m in re.findall(r"`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _role(match: re.Match[str]) -> str:
    body = match.group("body").strip()
    titled = _TITLED.match(body)
    if titled:
        return _span(titled.group("title"))
    body = body.lstrip("!")
    if body.startswith("~"):
        body = body[1:].rsplit(".", 1)[-1]
    return _span(body)


_CODE_SPAN = re.compile(r"(`+).+?(?<!`)\1(?!`)")
# Markdown would read these where reST reads plain text: '2**53' (reST needs a space
# before emphasis) and '<name>' (raw HTML to Markdown; an autolink <https://...> is kept)
_INTRAWORD_STAR = re.compile(r"(?<=[\w)\]])\*+(?=[\w(-])")
_TAG_LIKE = re.compile(r"<(?!https?://)(?=[A-Za-z/!])")


def _plain(text: str) -> str:
    return _TAG_LIKE.sub("&lt;", _INTRAWORD_STAR.sub(lambda m: "\\*" * len(m.group(0)), text))


def inline(text: str) -> str:
    """Roles and double-backtick literals of one line (or table cell) as code spans;
    outside code spans, what Markdown alone would misread is escaped."""
    text = _ROLE.sub(_role, text)
    text = _DOUBLE.sub(lambda m: _span(m.group("body")), text)
    out, last = [], 0
    for span in _CODE_SPAN.finditer(text):
        out += [_plain(text[last : span.start()]), span.group(0)]
        last = span.end()
    return "".join([*out, _plain(text[last:])])


def _table(lines: list[str]) -> list[str]:
    """A simple reST table (border, rows, border; optional header border) as Markdown."""
    border = lines[0]
    starts = [m.start() for m in re.finditer(r"=+", border)]
    rows: list[list[str]] = []
    header: list[str] | None = None
    for line in lines[1:]:
        if _BORDER.match(line):
            if header is None and rows and line is not lines[-1]:
                header, rows = rows[0], rows[1:]  # a border after the first row closes a header
            continue
        cells = [line[a:b].strip() for a, b in zip(starts, [*starts[1:], len(line)])]
        if rows and not cells[0]:  # a continuation line: the first column is blank
            rows[-1] = [f"{a} {b}".strip() for a, b in zip(rows[-1], cells)]
        else:
            rows.append(cells)
    head = header or [""] * len(starts)

    def row(cells: list[str]) -> str:
        return "| " + " | ".join(inline(c).replace("|", "\\|") for c in cells) + " |"

    return ["", row(head), "|" + "---|" * len(starts), *[row(r) for r in rows], ""]


# a double-backtick literal broken over lines of one paragraph (no blank line inside)
_SPLIT_LITERAL = re.compile(r"``(?=[^`\s])(?:(?!``|\n[ \t]*\n).)*\n(?:(?!``|\n[ \t]*\n).)*``", re.S)


def _join_split_literals(text: str) -> str:
    return _SPLIT_LITERAL.sub(lambda m: re.sub(r"\s*\n\s*", " ", m.group(0)), text)


def to_markdown(text: str) -> str:
    """The docstring ``text`` as Markdown (see the module docstring)."""
    lines = _join_split_literals(text).split("\n")
    out: list[str] = []
    i = 0
    literal_indent: int | None = None  # inside a block after '::': left as it is
    fence: str | None = None
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        indent = len(line) - len(line.lstrip())
        if fence is not None:
            out.append(line)
            if stripped.startswith(fence):
                fence = None
            i += 1
            continue
        if stripped.startswith(("```", "~~~")):
            fence = stripped[:3]
            out.append(line)
            i += 1
            continue
        if literal_indent is not None:
            if not stripped or indent > literal_indent:
                out.append(line)
                i += 1
                continue
            literal_indent = None
        if _BORDER.match(line):
            end = i + 1
            borders = 1
            while end < len(lines) and lines[end].strip():
                borders += bool(_BORDER.match(lines[end]))
                end += 1
            if borders >= 2:
                out += _table(lines[i:end])
                i = end
                continue
        if stripped.endswith("::"):
            line = line.rstrip()[:-1] if stripped != "::" else ""
            literal_indent = indent
            out.append(inline(line))
            if i + 1 < len(lines) and lines[i + 1].strip():
                out.append("")
            i += 1
            continue
        out.append(inline(line))
        i += 1
    return "\n".join(out)


try:  # the API pages: mkdocstrings loads this file as a griffe extension (mkdocs.yml)
    import griffe
except ImportError:  # pragma: no cover -- only the docs build needs griffe
    griffe = None

if griffe is not None:

    class RestRoles(griffe.Extension):  # type: ignore[misc]
        """Convert every docstring of the API pages (see :func:`to_markdown`)."""

        def on_object(self, *, obj: griffe.Object, **kwargs: object) -> None:
            if obj.docstring is not None:
                obj.docstring.value = to_markdown(obj.docstring.value)
