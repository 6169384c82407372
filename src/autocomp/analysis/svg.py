"""The one SVG document wrapper of the report's figures (title, size, font; no scripts)."""

from __future__ import annotations

from collections.abc import Iterable

from autocomp.analysis.escape import escape

FONT = 'font-family="system-ui,sans-serif"'


def svg_document(width: float, height: float, title: str, body: Iterable[str]) -> str:
    """An inline SVG with its title as text and as the accessible label; `body` is SVG markup
    whose data is already escaped."""
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
        f'role="img" aria-label="{escape(title)}" {FONT}>'
        f'<text x="4" y="15" font-size="13" font-weight="bold">{escape(title)}</text>'
        + "".join(body)
        + "</svg>"
    )
