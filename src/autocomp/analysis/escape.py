"""The one escaping function for everything that reaches HTML, SVG or LaTeX from data: file
names, captions, vocabulary words, model names, run.json fields. Nothing from a table or a file
is written into a page or a .tex file without passing through `escape`."""

from __future__ import annotations

import html
import re

_LATEX = {
    "\\": r"\textbackslash{}",
    "{": r"\{",
    "}": r"\}",
    "$": r"\$",
    "&": r"\&",
    "#": r"\#",
    "^": r"\textasciicircum{}",
    "_": r"\_",
    "%": r"\%",
    "~": r"\textasciitilde{}",
    "<": r"\textless{}",
    ">": r"\textgreater{}",
}
_LATEX_RE = re.compile("|".join(re.escape(k) for k in _LATEX))
FORMATS = ("html", "latex", "id")


def escape(value: object, fmt: str = "html") -> str:
    """`value` as text that is inert in `fmt`:
    - html: element content and quoted attribute values, in HTML and inline SVG (& < > " ');
    - latex: every LaTeX special character as its literal (no command can be injected);
    - id: an HTML id / URL fragment made of [A-Za-z0-9_-] only.
    None becomes the empty string."""
    text = "" if value is None else str(value)
    if fmt == "html":
        return html.escape(text, quote=True)
    if fmt == "latex":
        return _LATEX_RE.sub(lambda m: _LATEX[m.group(0)], text)
    if fmt == "id":
        return re.sub(r"[^A-Za-z0-9_-]", "-", text) or "-"
    raise ValueError(f"unknown escape format {fmt!r}; one of {FORMATS}")
