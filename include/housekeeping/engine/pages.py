"""Offline HTML pages (the storage report, the what-if report): the Jinja environment and matplotlib charts
inlined as SVG, so a page opens from disk with no JavaScript and no CDN."""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Any

from housekeeping.core.timeutil import format_duration_ms
from housekeeping.engine.report import human_bytes


def pyplot() -> Any:
    """matplotlib's pyplot on the file-only backend, with text kept as text in the SVG."""
    import logging

    import matplotlib

    # Its font-cache and font-matching messages would fill a report task's log.
    logging.getLogger("matplotlib").setLevel(logging.WARNING)

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update({"svg.fonttype": "none", "font.size": 9})
    return plt


def bytes_formatter() -> Any:
    from matplotlib.ticker import FuncFormatter

    return FuncFormatter(lambda value, _position=None: human_bytes(value))


def svg(figure: Any) -> str:
    """The figure as inline SVG (no XML prolog or doctype); the figure is closed."""
    buffer = io.StringIO()
    figure.savefig(buffer, format="svg", bbox_inches="tight")
    pyplot().close(figure)
    text = buffer.getvalue()
    return text[text.index("<svg") :]


def byte_hours(value: float) -> str:
    """Byte-hours as a person reads them: the bytes held for one hour that add up to them ("3.2 GiB·h")."""
    return f"{human_bytes(value)}·h"


def render(template: Path, out_dir: Path, **context: Any) -> str:
    """A page from its template (beside the module that writes the page), with ``human`` (bytes) and ``relative``
    (a path from the page's directory) filters; undefined names are errors."""
    from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape

    env = Environment(
        loader=FileSystemLoader(str(template.parent)),
        undefined=StrictUndefined,
        autoescape=select_autoescape(["html", "j2"]),
    )
    env.filters["human"] = human_bytes
    env.filters["byte_hours"] = byte_hours
    env.filters["duration"] = lambda seconds: format_duration_ms(int(seconds * 1000))
    env.filters["relative"] = lambda path: os.path.relpath(path, out_dir) if path else None
    return env.get_template(template.name).render(**context)
