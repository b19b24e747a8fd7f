"""airlock's chart reader: what a matplotlib figure shows, as data (E2B's "chart" object).

Loaded beside airlock_runner.py (see its "Helper modules"); used by airlock_display.py when a
figure becomes a display result, after the figure was rendered to PNG (so its tick labels are
the ones drawn). Runs inside the sandbox, on the user's own figure objects: it only reads them.

    chart, cut = chart_of(figure, max_points)   # dict or None (a blank figure), whether points were dropped

The shape is E2B's (its code-interpreter SDK's Chart types), so E2B clients read it as they read
E2B's; the reading here is airlock's own:

    {"type": "line" | "scatter" | "bar" | "pie" | "box_and_whisker" | "superchart" | "unknown",
     "title": str | None, "elements": [...]}
    line, scatter, bar, box_and_whisker add "x_label", "y_label", "x_unit", "y_unit" (the text of
      "(...)" or "[...]" in the label, e.g. "Time (s)" -> "s"); for bars and boxes drawn
      horizontally, x is the category axis.
    line and scatter add "x_ticks", "x_tick_labels", "x_scale", and the same for y. A scale is
      "datetime" (a date axis; its ticks are ISO 8601 strings), "categorical" (an axis of
      strings), or matplotlib's own name ("linear", "log", "symlog", "logit", ...).
    line/scatter elements: {"label", "points": [[x, y], ...]} (dates as ISO 8601 strings)
    bar elements: {"label" (the category), "group" (the series' label), "value"}
    pie elements: {"label", "angle" (degrees), "radius"}
    box_and_whisker elements: {"label", "min", "first_quartile", "median", "third_quartile",
      "max", "outliers": [...]}
    superchart (a figure of several axes): "elements" are one chart per axes, "title" the
      figure's suptitle.
    "truncated": true (airlock's) when points were left out to keep the result within its cap.

A figure whose axes hold artists of mixed or unusual kinds (images, fills, text-only) is
"unknown" with no elements; a figure with no data is no chart at all.
"""

import datetime
import math
import re
import sys

_UNIT = re.compile(r"\s\(([^()]*)\)|\[([^\[\]]*)\]")
# Significant digits kept of the values read back from a box's geometry (quartiles, whiskers),
# so that float noise does not show.
_DIGITS = 10


def chart_of(figure, max_points):
    """(chart dict or None, whether points were left out). Never raises for odd figures: the
    caller treats an exception as "no chart" anyway, but the common odd cases return one."""
    axes = [ax for ax in figure.get_axes() if ax.get_visible()]
    if not axes or not any(ax.has_data() for ax in axes):
        return None, False
    budget = _Budget(max_points)
    if len(axes) == 1:
        return _axes_chart(axes[0], budget), budget.cut
    suptitle = figure.get_suptitle() if hasattr(figure, "get_suptitle") else _text_of(
        getattr(figure, "_suptitle", None))
    chart = {"type": "superchart", "title": suptitle or None,
             "elements": [_axes_chart(ax, budget) for ax in axes]}
    if budget.cut:
        chart["truncated"] = True
    return chart, budget.cut


class _Budget:
    """Points left to report across the figure's series."""

    def __init__(self, points):
        self.points = max(0, points)
        self.cut = False

    def take(self, wanted):
        n = min(wanted, self.points)
        self.points -= n
        if n < wanted:
            self.cut = True
        return n


def _text_of(text):
    return text.get_text() if text is not None else ""


def _kind(ax):
    """The chart type of one axes, from the kinds of artists it holds."""
    from matplotlib.collections import PathCollection
    from matplotlib.patches import PathPatch, Rectangle, Wedge

    lines = [line for line in ax.lines if not _is_reference_line(ax, line)]
    collections, patches = list(ax.collections), list(ax.patches)
    if list(ax.images) or list(ax.artists) or list(ax.tables):
        return "unknown"
    if not (lines or collections or patches):
        return "unknown"
    if not collections and not patches:
        return "line"
    if not patches and all(isinstance(c, PathCollection) for c in collections):
        return "scatter"
    if collections:
        return "unknown"
    if all(isinstance(p, Wedge) for p in patches) and not lines:
        return "pie"
    if all(type(p) is Rectangle for p in patches) and _bar_containers(ax) and not lines:
        return "bar"
    if lines and all(isinstance(p, PathPatch) for p in patches):
        return "box_and_whisker"
    return "unknown"


def _axes_chart(ax, budget):
    kind = _kind(ax)
    title = ax.get_title() or None
    if kind == "pie":
        return {"type": "pie", "title": title, "elements": _pie_elements(ax)}
    if kind == "unknown":
        return {"type": "unknown", "title": title, "elements": []}
    chart = {"type": kind, "title": title}
    chart.update(_labels(ax))
    if kind in ("line", "scatter"):
        for name, axis, ticks, labels in (("x", ax.xaxis, ax.get_xticks(), ax.get_xticklabels()),
                                          ("y", ax.yaxis, ax.get_yticks(), ax.get_yticklabels())):
            scale = _scale(axis)
            chart[name + "_ticks"] = [_tick_value(t, scale) for t in ticks]
            chart[name + "_tick_labels"] = [label.get_text() for label in labels]
            chart[name + "_scale"] = scale
        xscale, yscale = chart["x_scale"], chart["y_scale"]
        if kind == "line":
            chart["elements"] = _line_elements(ax, budget, xscale, yscale)
        else:
            chart["elements"] = _scatter_elements(ax, budget, xscale, yscale)
        if budget.cut:
            chart["truncated"] = True
    elif kind == "bar":
        chart["elements"], horizontal = _bar_elements(ax)
        if horizontal:
            _swap_axes(chart)
    else:
        chart["elements"], horizontal = _box_elements(ax)
        if horizontal:
            _swap_axes(chart)
    return chart


# ---------------------------------------------------------------------------------------------
# Labels, units, scales and values


def _labels(ax):
    out = {}
    for name, text in (("x", ax.get_xlabel()), ("y", ax.get_ylabel())):
        out[name + "_label"] = text or None
        unit = None
        if text:
            m = _UNIT.search(text)
            if m:
                unit = m.group(1) if m.group(1) is not None else m.group(2)
        out[name + "_unit"] = unit
    return out


def _swap_axes(chart):
    """Horizontal bars or boxes: report the category axis as x, as for vertical ones."""
    for field in ("label", "unit"):
        chart["x_" + field], chart["y_" + field] = chart["y_" + field], chart["x_" + field]


def _converter(axis):
    get = getattr(axis, "get_converter", None)
    return get() if get is not None else getattr(axis, "converter", None)


def _scale(axis):
    module = type(_converter(axis)).__module__
    if module == "matplotlib.dates":
        return "datetime"
    if module == "matplotlib.category":
        return "categorical"
    return axis.get_scale()


def _tick_value(tick, scale):
    if scale == "datetime":
        return _date_text(tick)
    return _number(tick)


def _date_text(number):
    """A matplotlib date number as ISO 8601 text (None when it is not a date)."""
    from matplotlib import dates

    try:
        return dates.num2date(float(number)).isoformat()
    except (ValueError, OverflowError, TypeError):
        return None


def _number(value):
    """value as a JSON number: None for NaN, infinities and what is no number at all."""
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


def _rounded(value):
    value = _number(value)
    return None if value is None else float(f"{value:.{_DIGITS}g}")


def _point(value, scale):
    """One coordinate as given to matplotlib (dates, strings, numbers), in JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, (datetime.date, datetime.time)):  # datetime and pandas' Timestamp too
        try:
            return value.isoformat()
        except ValueError:  # NaT
            return None
    numpy = sys.modules.get("numpy")
    if numpy is not None and isinstance(value, numpy.datetime64):
        return None if numpy.isnat(value) else str(numpy.datetime_as_string(value, unit="s"))
    if numpy is not None and isinstance(value, numpy.str_):
        return str(value)
    if scale == "datetime" and not isinstance(value, bool):
        number = _number(value)
        return None if number is None else _date_text(number)
    return _number(value)


def _tick_labels(axis_ticks, axis_labels):
    """[(position, label text)] of an axis' ticks, as drawn."""
    return [(float(t), label.get_text()) for t, label in zip(axis_ticks, axis_labels)]


def _label_at(position, ticks):
    """The text of the tick at position (a bar's or box's centre); the number itself when no
    tick is there."""
    best = None
    for tick, text in ticks:
        distance = abs(tick - position)
        if best is None or distance < best[0]:
            best = (distance, text)
    if best is not None and best[0] <= 1e-6 * max(1.0, abs(position)):
        return best[1]
    return f"{position:g}"


def _series_label(artist, index, prefix):
    label = artist.get_label()
    if not isinstance(label, str) or not label or label.startswith("_"):
        return f"{prefix} {index}"  # matplotlib's own names (_child0, _nolegend_) say nothing
    return label


# ---------------------------------------------------------------------------------------------
# Elements of each kind


def _is_reference_line(ax, line):
    """axhline/axvline and the like: drawn across the axes (partly in axes coordinates), not data."""
    return not line.get_transform().contains_branch(ax.transData)


def _line_elements(ax, budget, xscale, yscale):
    out = []
    for line in ax.lines:
        if _is_reference_line(ax, line):
            continue
        xs, ys = list(line.get_xdata(orig=True)), list(line.get_ydata(orig=True))
        n = budget.take(min(len(xs), len(ys)))
        element = {"label": _series_label(line, len(out), "Line"),
                   "points": [[_point(xs[i], xscale), _point(ys[i], yscale)] for i in range(n)]}
        if n < min(len(xs), len(ys)):
            element["truncated"] = True
        out.append(element)
    return out


def _scatter_elements(ax, budget, xscale, yscale):
    out = []
    for collection in ax.collections:
        offsets = collection.get_offsets()
        n = budget.take(len(offsets))
        element = {"label": _series_label(collection, len(out), "Series"),
                   "points": [[_point(offsets[i][0], xscale), _point(offsets[i][1], yscale)]
                              for i in range(n)]}
        if n < len(offsets):
            element["truncated"] = True
        out.append(element)
    return out


def _bar_containers(ax):
    from matplotlib.container import BarContainer

    return [c for c in ax.containers if isinstance(c, BarContainer)]


def _bar_elements(ax):
    """([{label, group, value}], horizontal)."""
    containers = _bar_containers(ax)
    horizontal = any(getattr(c, "orientation", None) == "horizontal" for c in containers)
    if horizontal:
        ticks = _tick_labels(ax.get_yticks(), ax.get_yticklabels())
    else:
        ticks = _tick_labels(ax.get_xticks(), ax.get_xticklabels())
    out = []
    for index, container in enumerate(containers):
        group = _series_label(container, index, "Group")
        values = getattr(container, "datavalues", None)
        for i, rect in enumerate(container.patches):
            if horizontal:
                centre = rect.get_y() + rect.get_height() / 2
                value = rect.get_width()
            else:
                centre = rect.get_x() + rect.get_width() / 2
                value = rect.get_height()
            if values is not None and i < len(values):
                value = values[i]
            out.append({"label": _label_at(centre, ticks), "group": group, "value": _number(value)})
    return out, horizontal


def _pie_elements(ax):
    # pie() computes its fractions in float32: an angle is good to about 1e-5 degrees.
    return [{"label": wedge.get_label(), "angle": round(abs(wedge.theta2 - wedge.theta1), 4),
             "radius": _number(wedge.r)} for wedge in ax.patches]


def _close(a, b):
    return abs(a - b) <= 1e-9 * max(1.0, abs(a), abs(b))


def _box_elements(ax):
    """([{label, min, first_quartile, median, third_quartile, max, outliers}], horizontal).

    A box is a PathPatch spanning the quartiles; its median is the line across it, its
    whiskers the lines leaving its ends along the value axis, its outliers the marker-only
    line in its band (how Axes.bxp draws them)."""
    boxes = []
    for patch in ax.patches:
        extents = patch.get_path().get_extents()
        boxes.append((extents.x0, extents.x1, extents.y0, extents.y1))
    lines = []
    for line in ax.lines:
        xs = [_number(v) for v in line.get_xdata()]
        ys = [_number(v) for v in line.get_ydata()]
        if None in xs or None in ys or not xs:
            continue
        markers_only = str(line.get_linestyle()).lower() in ("none", "", " ")
        lines.append((xs, ys, markers_only))
    horizontal = _boxes_are_horizontal(boxes, lines)
    if horizontal:
        boxes = [(y0, y1, x0, x1) for x0, x1, y0, y1 in boxes]
        lines = [(ys, xs, m) for xs, ys, m in lines]
        ticks = _tick_labels(ax.get_yticks(), ax.get_yticklabels())
    else:
        ticks = _tick_labels(ax.get_xticks(), ax.get_xticklabels())
    out = []
    for lo, hi, q1, q3 in boxes:
        element = {"label": _label_at((lo + hi) / 2, ticks), "min": q1, "first_quartile": q1,
                   "median": None, "third_quartile": q3, "max": q3, "outliers": []}
        for xs, ys, markers_only in lines:
            if not all(lo - 1e-9 <= x <= hi + 1e-9 for x in xs):
                continue
            if markers_only:
                element["outliers"].extend(ys)
            elif _is_whisker(xs, ys, lo, hi, q1, q3):
                if min(ys) < q1:
                    element["min"] = min(ys)
                else:
                    element["max"] = max(ys)
            elif len(ys) == 2 and _close(ys[0], ys[1]) and q1 - 1e-9 <= ys[0] <= q3 + 1e-9 \
                    and _close(min(xs), lo) and _close(max(xs), hi) and element["median"] is None:
                element["median"] = ys[0]  # the line across the whole box
        for key in ("min", "first_quartile", "median", "third_quartile", "max"):
            element[key] = _rounded(element[key]) if element[key] is not None else None
        element["outliers"] = [_rounded(v) for v in element["outliers"]]
        out.append(element)
    return out, horizontal


def _is_whisker(xs, ys, lo, hi, q1, q3):
    """A line along the value axis from one end of the box (lo..hi wide, q1..q3 tall) out."""
    if len(xs) != 2 or not _close(xs[0], xs[1]) or not lo - 1e-9 <= xs[0] <= hi + 1e-9:
        return False
    a, b = ys
    return ((_close(a, q1) and b < q1) or (_close(b, q1) and a < q1)
            or (_close(a, q3) and b > q3) or (_close(b, q3) and a > q3))


def _boxes_are_horizontal(boxes, lines):
    """Whether the boxes are drawn along x (vert=False): their whiskers are then horizontal."""
    for lo, hi, q1, q3 in boxes:
        for xs, ys, markers_only in lines:
            if markers_only or len(xs) != 2:
                continue
            if _is_whisker(xs, ys, lo, hi, q1, q3):
                return False
            if _is_whisker(ys, xs, q1, q3, lo, hi):
                return True
    return False
