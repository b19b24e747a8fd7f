"""airlock's rich display: values as IPython shows them, as mime bundles.

Loaded beside airlock_runner.py (see its "Helper modules"). The runner asks it for the bundle
of a cell's last value and of every figure it shows; user code reaches it through the
`display()` builtin, matplotlib's `plt.show()` (patched by the runner) and the PIL hooks below.

    bundle, cut = bundle_of(value, room)     # {mime: value}, whether something was left out
                                             # (room: .bytes and .values the result may take)
    target = sink.add_display                # where display() sends bundles (set per cell)

A bundle always has "text/plain" (repr()), plus:

* what `_repr_mimebundle_` and the `_repr_*_` methods give (html, markdown, svg, png, jpeg,
  latex, json, javascript, pdf), the former winning for a type both give, as in IPython;
  a method that raises or returns None is left out (repr() errors are the user's and raise);
* a matplotlib Figure: "image/png" and E2B's "e2b/chart" (airlock_charts.py);
* a PIL image: "image/png";
* a pandas DataFrame: E2B's "e2b/data" (its columns as {name: [values]}, JSON-safe: NaN and
  NaT as null, dates as ISO 8601), beside its own "text/html".

Binary values are base64 text; JSON values are embedded. `room` is what the caller can still
take (bytes of the result's line, JSON values of its data): a figure's PNG, a chart's points
and a DataFrame's data are not made past it, and `cut` says so (the runner then reports the
results as truncated).

PIL hooks (installed when PIL's modules are imported, see install_pil_hooks): `image.show()`
displays the image instead of starting a viewer; `image.save(path)` also displays it (what E2B
does), saving to a file-like object does not.
"""

import math
import sys

RICH_REPRS = (
    ("_repr_html_", "text/html"),
    ("_repr_markdown_", "text/markdown"),
    ("_repr_svg_", "image/svg+xml"),
    ("_repr_png_", "image/png"),
    ("_repr_jpeg_", "image/jpeg"),
    ("_repr_latex_", "text/latex"),
    ("_repr_json_", "application/json"),
    ("_repr_javascript_", "application/javascript"),
    ("_repr_pdf_", "application/pdf"),
)

# Where display() sends its bundles: a callable taking make_bundle(room) -> (bundle, cut), set
# by the runner for the cell under way (None: none is, and displays are dropped).
# room has .bytes and .values (airlock_runner.Room).
target = None

_JSON_MAX_DEPTH = 32
# Bytes of JSON a chart point takes at most ("[-1.2345678901234567e+308, ...]," and its share
# of the element), and JSON values (the pair and its two numbers, and some slack for the
# chart's other fields): the chart gets as many points as both leave room for.
_BYTES_PER_POINT = 48
_VALUES_PER_POINT = 4


def display(*objs, include=None, exclude=None, metadata=None, transient=None, display_id=None,
            raw=False, clear=False, **kwargs):
    """Shows each object as a display result of the cell, in order (IPython's display()).

    raw=True: each object is a mime bundle already ({mime: data}). include/exclude: mime types
    to keep or leave out. metadata, transient, display_id and clear are accepted and ignored
    (a cell's results are not updated in place here)."""
    sink = target
    if sink is None:
        return None
    for obj in objs:
        if raw:
            if not isinstance(obj, dict):
                raise TypeError("display(raw=True) takes mime bundles (dicts of mime type to data)")
            sink(lambda room, obj=obj: (_filtered(_raw_bundle(obj), include, exclude), False))
        else:
            sink(lambda room, obj=obj: _filtered_result(bundle_of(obj, room), include, exclude))
    return None


def bundle_of(value, room):
    """(the mime bundle of value, whether something was left out to stay within room bytes)."""
    bundle = {"text/plain": repr(value)}
    if type(value).__module__ == "builtins":
        # int, str, list, dict, ...: no rich repr. Most results; and every check below touches
        # (and so copies, in a warm run) objects of modules the run inherited.
        return bundle, False
    if is_figure(value):
        return figure_bundle(value, room, bundle["text/plain"])
    if _is_pil_image(value):
        png, cut = _bounded_save(lambda f: value.save(f, format="PNG"), room.bytes)
        if png is not None:
            bundle["image/png"] = png
        return bundle, cut
    if isinstance(value, type):
        return bundle, False  # a class: its _repr_*_ are unbound functions
    rich = {}
    data = _call_repr(value, "_repr_mimebundle_", include=None, exclude=None)
    if isinstance(data, dict):
        for mime, item in data.items():
            if isinstance(mime, str) and mime not in rich:
                item = _mime_value(mime, item)
                if item is not None:
                    rich[mime] = item
    for attr, mime in RICH_REPRS:
        if mime not in rich:
            item = _mime_value(mime, _call_repr(value, attr))
            if item is not None:
                rich[mime] = item
    bundle.update(rich)
    cut = False
    if _is_dataframe(value):
        data, cut = _dataframe_data(value, room)
        if data is not None:
            bundle["e2b/data"] = data
    return bundle, cut


def figure_bundle(figure, room, text=None):
    """A matplotlib figure as PNG plus its chart; the chart is read after the PNG is drawn (so
    tick labels are the drawn ones) and left out if reading it fails."""
    bundle = {"text/plain": repr(figure) if text is None else text}
    png, cut = _bounded_save(lambda f: figure.savefig(f, format="png", bbox_inches="tight"), room.bytes)
    points = (room.bytes - (len(png) if png is not None else 0)) // _BYTES_PER_POINT
    points = max(0, min(points, room.values // _VALUES_PER_POINT))
    if png is not None:
        bundle["image/png"] = png
    try:
        charts = sys.modules.get("airlock_charts")
        chart, chart_cut = charts.chart_of(figure, points)
    except Exception:  # noqa: BLE001 - an odd figure has no chart; its PNG is what counts
        chart, chart_cut = None, False
    if chart is not None:
        bundle["e2b/chart"] = json_safe(chart)
    return bundle, cut or chart_cut


def is_figure(value):
    figure = sys.modules.get("matplotlib.figure")
    return figure is not None and isinstance(value, figure.Figure)


def _is_pil_image(value):
    image = sys.modules.get("PIL.Image")
    return image is not None and isinstance(value, image.Image)


def _is_dataframe(value):
    pandas = sys.modules.get("pandas")
    frame = getattr(pandas, "DataFrame", None) if pandas is not None else None
    return isinstance(frame, type) and isinstance(value, frame)


def _filtered(bundle, include, exclude):
    if include is not None:
        bundle = {k: v for k, v in bundle.items() if k in include}
    if exclude is not None:
        bundle = {k: v for k, v in bundle.items() if k not in exclude}
    return bundle


def _filtered_result(result, include, exclude):
    bundle, cut = result
    return _filtered(bundle, include, exclude), cut


def _raw_bundle(data):
    out = {}
    for mime, item in data.items():
        if isinstance(mime, str):
            item = _mime_value(mime, item)
            if item is not None:
                out[mime] = item
    return out


def _call_repr(value, attr, **kwargs):
    try:
        method = getattr(value, attr, None)
        if not callable(method):
            return None
        data = method(**kwargs)
        if isinstance(data, tuple) and len(data) == 2:
            data = data[0]  # (data, metadata)
        return data
    except Exception:
        return None


def _mime_value(mime, data):
    """data as it goes on the wire for mime (base64 for bytes), or None if unusable."""
    if data is None:
        return None
    if isinstance(data, (bytes, bytearray)):
        import base64

        return base64.b64encode(bytes(data)).decode("ascii")
    if isinstance(data, str):
        return data
    if "json" in mime and isinstance(data, (dict, list)):
        import json

        try:
            json.dumps(data, allow_nan=False)  # must survive strict JSON encoding
        except (TypeError, ValueError, RecursionError):
            return None
        return data
    return None


class _TooLarge(Exception):
    pass


def _bounded_save(save, room):
    """(base64 text of what save(file) writes, cut): None and True once it would pass room
    bytes of base64, without holding more than that; None and False when save fails."""
    import base64
    import io

    limit = max(0, room) * 3 // 4

    class Bounded(io.BytesIO):
        def write(self, data):
            if self.tell() + len(data) > limit:
                raise _TooLarge()
            return super().write(data)

    buf = Bounded()
    try:
        save(buf)
    except _TooLarge:
        return None, True
    except Exception:  # noqa: BLE001 - a mode PNG cannot hold, a broken figure: no image
        return None, False
    return base64.b64encode(buf.getvalue()).decode("ascii"), False


def _dataframe_data(frame, room):
    """(E2B's "data" of a DataFrame, cut): its columns as {name: [values]}; None and True when
    even two bytes and one JSON value a cell would not fit in room."""
    rows, columns = frame.shape
    cells = rows * max(columns, 1)
    if cells * 2 > room.bytes or cells + columns + 1 > room.values:
        return None, True
    try:
        return json_safe(frame.to_dict(orient="list")), False
    except Exception:  # noqa: BLE001 - a frame pandas cannot turn into a dict has no data
        return None, False


def json_safe(value, depth=0):
    """value made of what strict JSON holds: NaN, infinities and NaT become null, dates ISO 8601
    text, numpy values Python's, mapping keys text, anything else its str()."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if depth >= _JSON_MAX_DEPTH:
        return _safe_str(value)
    if isinstance(value, dict):
        return {_safe_str(k) if not isinstance(k, str) else k: json_safe(v, depth + 1)
                for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v, depth + 1) for v in value]
    tolist = getattr(value, "tolist", None)  # numpy arrays and scalars
    if callable(tolist) and type(value).__module__ == "numpy":
        try:
            return json_safe(tolist(), depth + 1)
        except Exception:  # noqa: BLE001
            return _safe_str(value)
    isoformat = getattr(value, "isoformat", None)  # date, datetime, time, pandas' Timestamp
    if callable(isoformat):
        try:
            if value != value:  # NaT
                return None
            return isoformat()
        except Exception:  # noqa: BLE001
            return _safe_str(value)
    return _safe_str(value)


def _safe_str(value):
    try:
        return str(value)
    except Exception:  # noqa: BLE001
        return "<str() failed>"


# ---------------------------------------------------------------------------------------------
# PIL hooks


# The PIL modules hooked already (the zygote hooks what it preimported: a run then has nothing to do).
hooked = set()


class _ImageViewer:
    """A PIL.ImageShow viewer placed first: image.show() becomes a display result."""

    def show(self, image, **options):
        display(image)
        return 1


def install_pil_hooks(module):
    """Called when PIL.Image or PIL.ImageShow is imported (once per module; the zygote does it
    for what it preimported). Idempotent."""
    name = getattr(module, "__name__", "")
    hooked.add(name)
    if name == "PIL.ImageShow":
        viewers = getattr(module, "_viewers", None)
        if isinstance(viewers, list) and not any(isinstance(v, _ImageViewer) for v in viewers):
            module.register(_ImageViewer(), order=-1)
    elif name == "PIL.Image":
        image_class = getattr(module, "Image", None)
        original = getattr(image_class, "save", None)
        if original is None or getattr(original, "_airlock_hook", False):
            return

        def save(self, fp, format=None, **params):
            if isinstance(fp, str) or hasattr(fp, "__fspath__"):
                display(self)
            return original(self, fp, format, **params)

        save._airlock_hook = True
        save.__doc__ = original.__doc__
        save.__wrapped__ = original
        image_class.save = save
