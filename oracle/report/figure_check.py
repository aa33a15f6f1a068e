"""Whether a figure prints in a paper, and the layout step that makes it: its print width, text
size, fonts, what reaches off the canvas and which texts collide (`print_problems`), the tick
labels thinned to fit (`thin_tick_labels`), and the lettered panels a figure draws against what
its caption says of them (`drawn_panels`, `caption_panel_problems`; `save_figure` records the
panels in the PDF's metadata, `pdf_facts` reads them back). Used by `oracle.report.figures`."""

from __future__ import annotations

import re
import textwrap
import zlib
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass

import matplotlib.text
from matplotlib.backend_bases import RendererBase
from matplotlib.figure import Figure

from oracle.errors import OracleError

@dataclass(frozen=True)
class PrintWidths:
    """The print widths (inches) a figure is drawn at: `page_in`, the venue's text width (a
    full-width figure), and `column_in`, one column of a two-column venue. The defaults are a
    two-column journal's (a 6.5 in single-column \\textwidth takes the 6.8 in figure at 96%, text
    >= 7.7 pt); the paper under reproduction is ICLR (5.5 in): config ``figures`` sets them."""

    page_in: float = 6.8
    column_in: float = 3.3

    def __post_init__(self) -> None:
        if not (0 < self.column_in <= self.page_in):
            raise OracleError(f"config figures: column_width_in = {self.column_in:g} in must be > 0 and at most "
                              f"width_in = {self.page_in:g} in")

    @classmethod
    def from_config(cls, figures: Mapping) -> PrintWidths:
        """The widths of config ``figures`` (``width_in``, ``column_width_in``; a key left out keeps
        its default)."""
        try:
            page, column = float(figures.get("width_in", cls.page_in)), float(figures.get("column_width_in", cls.column_in))
        except (TypeError, ValueError) as e:
            raise OracleError(f"config figures: width_in/column_width_in must be numbers (inches): {dict(figures)}") from e
        return cls(page, column)


#: The widths figures are drawn and checked at now (`print_widths`); a figure job sets them from
#: its config (`use_print_widths`) before drawing. Read at call time, never imported by value.
_CURRENT = PrintWidths()


def print_widths() -> PrintWidths:
    """The print widths figures are drawn at now (`use_print_widths` sets them)."""
    return _CURRENT


@contextmanager
def use_print_widths(widths: PrintWidths) -> Iterator[PrintWidths]:
    """Draw and check figures at `widths` inside the ``with`` block (restored after it): a figure
    job's ``with use_print_widths(PrintWidths.from_config(params.figures)):``."""
    global _CURRENT
    before, _CURRENT = _CURRENT, widths
    try:
        yield widths
    finally:
        _CURRENT = before


#: The smallest text (points) a figure may print at its print width: journals ask 7-8 pt.
MIN_TEXT_PT = 8.0


def pdf_facts(pdf: bytes) -> dict:
    """What a saved figure prints as, read from its PDF bytes (as matplotlib writes them: one
    page, Flate streams): ``{"width_in", "height_in"}`` (MediaBox, inches), ``"text_pt"`` (sorted
    sizes of every text run, points, from the content streams' ``Tf`` operators) and
    ``"font_types"`` (the ``/Subtype`` of every font object, e.g. ``Type3``, ``TrueType``,
    ``Type0``)."""
    box = re.search(rb"/MediaBox\s*\[\s*([-\d.]+)\s+([-\d.]+)\s+([-\d.]+)\s+([-\d.]+)\s*\]", pdf)
    if box is None:
        raise OracleError("pdf_facts: no /MediaBox: not a matplotlib PDF")
    x0, y0, x1, y1 = (float(v) for v in box.groups())
    sizes = []
    for stream in re.findall(rb"stream\r?\n(.*?)\r?\nendstream", pdf, flags=re.S):
        try:
            text = zlib.decompress(stream)
        except zlib.error:
            text = stream
        sizes += [float(v) for v in re.findall(rb"/\S+\s+([\d.]+)\s+Tf\b", text)]
    fonts = re.findall(rb"/Type\s*/Font\s*/Subtype\s*/(\w+)|/Subtype\s*/(\w+)\s*/Type\s*/Font", pdf)
    return {"width_in": (x1 - x0) / 72.0, "height_in": (y1 - y0) / 72.0, "text_pt": sorted(sizes),
            "font_types": sorted({(a or b).decode() for a, b in fonts}), "panels": _pdf_panels(pdf)}


#: The PDF metadata key `save_figure` records the drawn panels under ("(a) title; (b) title").
_PANELS_KEY = "Keywords"


def _pdf_string(raw: bytes) -> str:
    """A PDF string object's text: a literal ``(...)`` with its escapes, or ``<FEFF...>`` UTF-16BE hex."""
    if raw.startswith(b"<"):
        data = bytes.fromhex(raw[1:-1].decode("ascii"))
    else:
        data = re.sub(rb"\\([0-7]{1,3})", lambda m: bytes([int(m.group(1), 8)]), raw[1:-1])
        data = re.sub(rb"\\(.)", rb"\1", data, flags=re.S)
    return data[2:].decode("utf-16-be") if data[:2] == b"\xfe\xff" else data.decode("latin-1")


def _pdf_panels(pdf: bytes) -> dict[str, str]:
    """The panels `save_figure` recorded in a PDF's metadata: {letter: title without its letter}."""
    m = re.search(rb"/" + _PANELS_KEY.encode() + rb"\s*(\((?:\\.|[^\\)])*\)|<[0-9A-Fa-f]*>)", pdf, flags=re.S)
    return _parse_panels(_pdf_string(m.group(1))) if m else {}


_PANEL = re.compile(r"\(([a-z])\) ?([^;]*)")


def _parse_panels(text: str) -> dict[str, str]:
    return {m.group(1): m.group(2).strip() for m in _PANEL.finditer(text)}


def drawn_panels(fig: Figure) -> dict[str, str]:
    """The lettered panels ``fig`` draws (`panel_letters`): {letter: its title without the letter}."""
    out = {}
    for ax in fig.axes:
        m = re.match(r"\(([a-z])\)\s*(.*)", " ".join(ax.get_title().split())) if ax.get_visible() else None
        if m:
            out[m.group(1)] = m.group(2).replace(";", ",")
    return out


#: Words a caption's description of a panel and the panel's title may share without saying the
#: same thing.
_FILLER = {"with", "against", "over", "from", "each", "every", "than", "that", "this", "their", "mean", "dashed",
           "solid", "nats", "samples", "size", "dataset", "per", "and", "the"}


def _words(text: str) -> set[str]:
    """The content words of `text`, lower case, a plural's "s" dropped ("exponents" is "exponent")."""
    return {w[:-1] if w.endswith("s") and len(w) > 4 else w
            for w in re.findall(r"[a-z]{4,}", text.lower()) if w not in _FILLER}


def caption_panel_problems(caption: str, panels: Mapping[str, str]) -> list[str]:
    """Where a caption and a figure's panels (`drawn_panels`, or `pdf_facts`' ``panels``)
    disagree, one line each: the caption names a panel letter the figure does not draw, or its
    text for a panel ("(d) exponent alpha per architecture") shares no word with that panel's
    title ("floor + epistemic"). A letter is named as "(x)" followed by a space."""
    named = [(m.group(1), m.start()) for m in re.finditer(r"(?:^|(?<=\s))\(([a-z])\)(?=\s)", caption)]
    problems = []
    for i, (letter, at) in enumerate(named):
        if letter not in panels:
            drawn = ", ".join(f"({k})" for k in sorted(panels)) or "no lettered panel"
            problems.append(f"the caption names panel ({letter}); the figure draws {drawn}")
            continue
        end = named[i + 1][1] if i + 1 < len(named) else len(caption)
        said = caption[at:end]
        if panels[letter] and not _words(panels[letter]) & _words(said):
            problems.append(f"the caption's {' '.join(said.split())[:60]!r} does not describe panel ({letter}), "
                            f"titled {panels[letter]!r}")
    return problems


#: Tick labels closer than this (pixels at the canvas' 100 dpi, about 2 pt) read as one ("50100").
TICK_GAP_PX = 3.0


def _overlap(a, b, slack: float = 0.5) -> bool:
    """Two display-space boxes overlap by more than `slack` pixels both ways (a negative slack:
    they come closer than that)."""
    return min(a.x1, b.x1) - max(a.x0, b.x0) > slack and min(a.y1, b.y1) - max(a.y0, b.y0) > slack


def _shown(texts) -> list:
    return [t for t in texts if t.get_visible() and t.get_text().strip()]


def _drawn_tick_labels(axis) -> list:
    """The tick labels an axis draws: visible, not empty, at a tick inside its view limits (an
    axis keeps labels of ticks past its ends, which are not drawn)."""
    lo, hi = sorted(axis.get_view_interval())
    tol = 1e-9 * max(abs(lo), abs(hi), 1.0)
    ticks = [*axis.get_major_ticks(), *axis.get_minor_ticks()]
    return [t.label1 for t in ticks if lo - tol <= t.get_loc() <= hi + tol and t.label1.get_visible()
            and t.label1.get_text().strip()]


def collisions(fig: Figure) -> list[str]:
    """Texts of ``fig`` that run into each other, one line each: two tick labels of one axis
    ("10002000"), or a title (an axes' or the figure's, wrapped or not) with another title, a
    tick label or an axis label."""
    renderer = fig.canvas.get_renderer()
    out, titles, others = [], [], []
    for ax in fig.axes:
        if not ax.get_visible():
            continue
        for name, axis in (("x", ax.xaxis), ("y", ax.yaxis)):
            labels = _drawn_tick_labels(axis)
            others += _shown([axis.label, *labels])
            # an oblique label's box is wider than its glyphs: parallel neighbours' boxes overlap though
            # the texts do not, so only upright and vertical labels are compared
            labels = [t for t in labels if t.get_rotation() % 90 == 0]
            boxes = sorted(((t.get_text(), t.get_window_extent(renderer)) for t in labels),
                           key=lambda b: b[1].x0 if name == "x" else b[1].y0)
            for (ta, ba), (tb, bb) in zip(boxes, boxes[1:]):
                if _overlap(ba, bb, -TICK_GAP_PX):
                    out.append(f"{name} tick labels {ta!r} and {tb!r} overlap (axes {ax.get_title()[:30]!r})")
                    break
        titles += _shown([ax.title, ax._left_title, ax._right_title])
    if fig._suptitle is not None:
        titles += _shown([fig._suptitle])
    boxes = [(" ".join(t.get_text().split())[:30], t.get_window_extent(renderer)) for t in titles]
    rest = [(" ".join(t.get_text().split())[:30], t.get_window_extent(renderer)) for t in others]
    for i, (ta, ba) in enumerate(boxes):
        hit = next((tb for tb, bb in [*boxes[i + 1:], *rest] if _overlap(ba, bb)), None)
        if hit is not None:
            out.append(f"title {ta!r} overlaps {hit!r}")
    return list(dict.fromkeys(out))  # panels alike collide alike: each once


def lay_out(fig: Figure) -> RendererBase:
    """Run ``fig``'s draw without painting a pixel and return the renderer it drew with: the
    layout engine places the axes, ticks and texts get their final extents (what the returned
    renderer then measures), exactly as ``fig.canvas.draw()`` would leave them, without the
    rasterisation of every path and glyph (`save_figure` lays a figure out two to five times before
    it saves it: 0.84 of a figure's time, the same bytes, docs/benchmarks.md "A figure laid out
    without painting")."""
    renderer = fig.canvas.get_renderer()
    # matplotlib's own no-op renderer methods, on the canvas' renderer that later measures
    # (Figure.draw_without_rendering makes a renderer of its own)
    with renderer._draw_disabled():
        fig.draw(renderer)
    return renderer


def print_problems(fig: Figure, pdf: bytes) -> list[str]:
    """Why ``fig`` (saved as ``pdf``) would not print in a paper, one line each; empty when it
    would: its width is neither of `print_widths()`, a text is smaller than `MIN_TEXT_PT`, a font
    is embedded as Type 3, something is drawn outside the canvas (it would be cut off: the
    figure is saved at its size, not cropped to its content), or texts collide (`collisions`)."""
    facts = pdf_facts(pdf)
    problems = []
    widths = print_widths()
    if not any(abs(facts["width_in"] - w) < 0.01 for w in (widths.column_in, widths.page_in)):
        problems.append(f"width {facts['width_in']:.2f} in is neither one column ({widths.column_in:g} in) "
                        f"nor the text width ({widths.page_in:g} in)")
    small = [t for t in fig.findobj(matplotlib.text.Text)
             if t.get_visible() and t.get_text().strip() and t.get_fontsize() < MIN_TEXT_PT - 1e-6]
    if small or (facts["text_pt"] and facts["text_pt"][0] < MIN_TEXT_PT - 1e-6):
        named = ", ".join(f"{t.get_text()[:30]!r} {t.get_fontsize():g} pt" for t in small[:4])
        problems.append(f"text smaller than {MIN_TEXT_PT:g} pt ({named or str(min(facts['text_pt'])) + ' pt'})")
    if "Type3" in facts["font_types"]:
        problems.append("a Type 3 font is embedded")
    renderer = fig.canvas.get_renderer()
    inside = fig.get_tightbbox(renderer)
    w, h = fig.get_size_inches()
    slack = 0.03  # inches: antialiasing and line caps reach a hair past the axes' edge
    if inside.x0 < -slack or inside.y0 < -slack or inside.x1 > w + slack or inside.y1 > h + slack:
        problems.append(f"content reaches outside the {w:g} x {h:g} in canvas "
                        f"(x {inside.x0:.2f}..{inside.x1:.2f}, y {inside.y0:.2f}..{inside.y1:.2f} in)")
    return problems + collisions(fig)


def wrap_titles(fig: Figure, rounds: int = 3) -> None:
    """Wrap each panel title wider than its panel onto more lines at its spaces ("(b) ResNet
    (test): vs exact aleatoric H(p)" over a 2.4 in panel of a 5.5 in figure), so that the titles
    fit their panels by construction at whatever print width the figure is drawn at
    (`print_widths`). Measured after a draw (constrained layout places the axes then); a wrap
    moves the panels, so it measures again, at most `rounds` times. A single word wider than its
    panel is left whole (`print_problems` then names it). `save_figure` calls it."""
    for _ in range(rounds):
        renderer = lay_out(fig)
        wrapped = False
        for ax in fig.axes:
            title = ax.title
            text = title.get_text()
            if not ax.get_visible() or not text.strip():
                continue
            room, wide = ax.bbox.width, title.get_window_extent(renderer).width
            if wide <= room:
                continue
            longest = max(len(line) for line in text.split("\n"))
            chars = max(1, int(longest * room / wide))
            new = "\n".join(textwrap.fill(line, chars, break_long_words=False) for line in text.split("\n"))
            if new != text:
                title.set_text(new)
                wrapped = True
        if not wrapped:
            return


def thin_tick_labels(fig: Figure) -> None:
    """Drop tick labels that would run into their neighbour ("10002000" on a narrow log axis of
    sizes N): per axis, keep the last label and, walking back, every label clear of the one kept
    after it (major and minor alike); the axis keeps those ticks only. `save_figure` calls it, so
    every figure's ticks fit its panels by construction, at whatever width the panels got. Named
    ticks (a FixedFormatter's: architectures, strategies) are left to their figure: a name is
    never dropped."""
    from matplotlib.ticker import FixedFormatter, FixedLocator, NullFormatter

    renderer = lay_out(fig)  # the final layout: constrained layout places the axes on a draw
    thinned = False
    for ax in fig.axes:
        if not ax.get_visible():
            continue
        for name, axis in (("x", ax.xaxis), ("y", ax.yaxis)):
            lo_hi = sorted(axis.get_view_interval())
            for minor in (False, True):
                if isinstance(axis.get_minor_formatter() if minor else axis.get_major_formatter(), FixedFormatter):
                    continue
                ticks = [t for t in (axis.get_minor_ticks() if minor else axis.get_major_ticks())
                         if t.label1.get_visible() and t.label1.get_text().strip()
                         and lo_hi[0] <= t.get_loc() <= lo_hi[1]]
                boxes = sorted(((t.get_loc(), t.label1.get_text(), t.label1.get_window_extent(renderer))
                                for t in ticks), key=lambda b: b[2].x0 if name == "x" else b[2].y0)
                if not any(_overlap(a[2], b[2], -TICK_GAP_PX) for a, b in zip(boxes, boxes[1:])):
                    continue
                kept = [boxes[-1]]
                for b in reversed(boxes[:-1]):
                    if not _overlap(b[2], kept[-1][2], -TICK_GAP_PX):
                        kept.append(b)
                kept.sort(key=lambda b: b[0])
                thinned = True
                if minor:
                    axis.set_minor_formatter(NullFormatter())  # minor labels that collide: none
                    continue
                axis.set_major_locator(FixedLocator([b[0] for b in kept]))
                axis.set_major_formatter(FixedFormatter([b[1] for b in kept]))
    if thinned:  # fewer tick labels can move the constrained layout: place the axes again
        lay_out(fig)
