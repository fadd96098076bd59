"""``json`` (spec §6.1), method ``elision``: collapse every array longer than 8 elements to
its first 3 and last 2 elements, error-looking elements, statistical anomalies and change-point
seams (plus whatever keepNonRedundant promotes); each dropped run becomes a marker object
``{"__caveman_elided__": N, "__caveman_invariants__"?: …, "__caveman_note__"?: …}``.

Object keys are walked in sorted order (= output order), so the note lands on the first
collapsed run of the serialised output. Subtrees under error-ish keys are kept verbatim; an
array that already holds a marker object is left alone; nothing collapsed → decline.
"""

from __future__ import annotations

import math
import re
from typing import Any

from .. import elision, gotext, jsonio
from . import Compressed

CONTENT_TYPE = "json"
SAFETY_CLASS = "S4"
METHOD = "elision"

MAX_ARRAY = 8
HEAD = 3
TAIL = 2
Z_THRESHOLD = 2.0
Z_MIN_VALUES = 4
SEAM_MIN_POINTS = 8
SEAM_MAX_SPLITS = 8
SEAM_MIN_SHIFT = 2.0  # |mean left - mean right| / the segment's MAD (else its std)

ELIDED_KEY = "__caveman_elided__"
INVARIANTS_KEY = "__caveman_invariants__"
NOTE_KEY = "__caveman_note__"

_ERRORISH_ELEMENT = re.compile(
    r"(?i)\b(error|errors|exception|failed|failure|critical|fatal|crash|panic|abort|timeout"
    r"|denied|rejected)\b",
    re.ASCII,
)
_VERBATIM_KEY = re.compile(
    r"(?i)^(error|errors|message|msg|stack|stacktrace|stack_trace|trace|traceback|exception"
    r"|reason|detail|details|warning|warnings)$",
    re.ASCII,
)


class _State:
    __slots__ = ("collapsed", "noted")

    def __init__(self) -> None:
        self.collapsed = False
        self.noted = False  # the note slot was decided (first collapsed run)


@elision.declines_on_error
def compress(data: bytes) -> Compressed | None:
    if len(data) >= STREAM_MIN_BYTES:
        streamed = _compress_root_array(data)
        if streamed is not _TREE:
            return streamed
    try:
        value = jsonio.loads(data, trailing="go-decoder")
    except (jsonio.JSONError, ValueError, RecursionError):
        return None
    state = _State()
    try:
        out = _walk(value, state)
    except RecursionError:
        return None
    if not state.collapsed:
        return None
    return Compressed(jsonio.dumps(out), method=METHOD)


def _sorted_keys(d: dict) -> list[str]:
    return sorted(d, key=lambda s: s.encode("utf-8", "surrogatepass"))


def _walk(root: Any, state: _State) -> Any:
    """Pre-order walk (arrays are collapsed before their kept elements are visited), iterative
    so that deep documents cannot overflow the stack."""
    # Each frame: (source value, result container, key-or-index in parent container)
    holder: list[Any] = [None]
    stack: list[tuple[Any, Any, Any]] = [(root, holder, 0)]
    while stack:
        v, parent, slot = stack.pop()
        if isinstance(v, dict):
            res: dict[str, Any] = {}
            parent[slot] = res
            keys = _sorted_keys(v)
            # push in reverse so that the first key is processed first
            for k in reversed(keys):
                if _VERBATIM_KEY.match(k):
                    res[k] = v[k]
                else:
                    res[k] = None
                    stack.append((v[k], res, k))
        elif isinstance(v, list):
            items = _collapse(v, state) if len(v) > MAX_ARRAY else None
            if items is None:
                lst: list[Any] = [None] * len(v)
                parent[slot] = lst
                for i in range(len(v) - 1, -1, -1):
                    stack.append((v[i], lst, i))
            else:
                lst = [None] * len(items)
                parent[slot] = lst
                for i in range(len(items) - 1, -1, -1):
                    kind, x = items[i]
                    if kind == "marker":
                        lst[i] = x
                    else:
                        stack.append((v[x], lst, i))
        else:
            parent[slot] = v
    return holder[0]


def _is_marker(x: Any) -> bool:
    return isinstance(x, dict) and ELIDED_KEY in x


def _collapse(arr: list, state: _State, canon: list[str] | None = None,
              paths: dict[str, list[float | None]] | None = None
              ) -> list[tuple[str, Any]] | None:
    """Plan one array: [("elem", index) | ("marker", marker object)], or None to leave it.
    A large root array (:func:`_compress_root_array`) comes with its elements' ``canon`` and
    numeric ``paths`` already taken (and no marker among them), one element at a time."""
    if canon is None:
        if any(_is_marker(x) for x in arr):
            return None
        canon = [jsonio.dumps(x).decode("utf-8", "surrogatepass") for x in arr]
    n = len(arr)
    lengths = [elision.utf8_len(c) for c in canon]
    keep = [i < HEAD or i >= n - TAIL for i in range(n)]
    for i, c in enumerate(canon):
        if not keep[i] and _ERRORISH_ELEMENT.search(c):
            keep[i] = True
    if paths is None:
        paths = _numeric_paths(arr)
    for series in list(paths.values()) + [[float(x) for x in lengths]]:
        for i in _anomalies(series):
            keep[i] = True
    for i in _change_points(paths, lengths):
        keep[i] = True
    keep = elision.keep_non_redundant(canon, keep)
    spans = elision.runs(keep)
    if not spans:
        return None
    out: list[tuple[str, Any]] = []
    pos = 0
    collapsed = False
    for start, end in spans:
        out.extend(("elem", i) for i in range(pos, start))
        pos = end
        count = end - start
        elided = sum(lengths[start:end]) + count  # elements plus their separating commas
        summary = None
        if count >= 2:
            summary = elision.summarize((elision.json_fields(x) for x in arr[start:end]), elided)
        marker: dict[str, Any] = {ELIDED_KEY: count}
        if summary:
            marker[INVARIANTS_KEY] = summary
        marker_bytes = len(jsonio.dumps(marker))
        if not elision.worth_eliding(count, summary, marker_bytes, elided):
            out.extend(("elem", i) for i in range(start, end))
            continue
        if not state.noted:
            state.noted = True
            if elided >= elision.NOTE_MIN_ELIDED:
                marker[NOTE_KEY] = elision.contract_note("elements")
        out.append(("marker", marker))
        collapsed = True
    out.extend(("elem", i) for i in range(pos, n))
    if not collapsed:
        return None
    state.collapsed = True
    return out


# --------------------------------------------------------------------------- large root arrays

# A document of at least this many bytes whose root is an array is read one element at a time
# (:func:`_compress_root_array`); smaller ones, and every other document, as one tree.
STREAM_MIN_BYTES = 1 << 20
_TREE = object()  # "read it as one tree instead"
_ROOT_ARRAY = re.compile(rb"[ \t\n\r]*\[")


class _Elements:
    """The elements of a root array, read again from the source when asked for (only the
    kept ones are, and those of runs whose invariants are summarised): from the decoded text,
    or for an ASCII document from its bytes (offsets are the same), so that the text need
    not stay alive."""

    __slots__ = ("text", "data", "starts", "ends")

    def __init__(self, text: str | None, data: bytes, starts, ends) -> None:
        self.text = text
        self.data = data
        self.starts = starts
        self.ends = ends

    def __len__(self) -> int:
        return len(self.starts)

    def __getitem__(self, i):
        if isinstance(i, slice):  # iterated once (a summary's records): one at a time
            return (self[k] for k in range(*i.indices(len(self.starts))))
        if self.text is not None:
            return jsonio.scan_value(self.text, self.starts[i])[0]
        return jsonio.scan_value(self.data[self.starts[i]:self.ends[i]].decode("ascii"), 0)[0]


def _compress_root_array(data: bytes):
    """:func:`compress` for a large document whose root is an array, with the same output:
    the elements are read one at a time, keeping of each only its canonical text (which
    keepNonRedundant and the error check need), its numeric leaves and where it starts; the
    document is never held as a tree, nor copied as one. Returns ``_TREE`` when the document
    should go the usual way (not a root array, an escaped surrogate, nesting too deep for
    the C scanner, a marker element) -- that way then decides, byte for byte as before."""
    if data.startswith(jsonio.BOM) or not _ROOT_ARRAY.match(data):
        return _TREE
    from array import array

    text = gotext.decode(data)
    if jsonio.has_surrogate_escape(text):
        return _TREE
    starts, ends = array("q"), array("q")
    canon: list[str] = []
    paths: dict[str, list[float | None]] = {}
    nested = bytearray()  # 1: the element holds an array the walk may collapse
    small: list[Any] = []  # the values themselves while there are at most MAX_ARRAY
    items = jsonio.array_items(text, text.index("["))
    try:
        while True:
            try:
                start, stop_at, x = next(items)
            except StopIteration as stop:
                end = stop.value
                break
            if _is_marker(x):
                return _TREE
            idx = len(starts)
            starts.append(start)
            ends.append(stop_at)
            canon.append(jsonio.dumps(x).decode("utf-8", "surrogatepass"))
            for p, series in _numeric_paths([x]).items():
                have = paths.get(p)
                if have is None:
                    have = paths[p] = []
                if len(have) < idx:
                    have.extend([None] * (idx - len(have)))
                have.append(series[0])
            nested.append(_has_long_array(x))
            if idx <= MAX_ARRAY:
                small.append(x)
            elif small:
                small.clear()
    except RecursionError:
        return _TREE
    except jsonio.JSONError:
        return None
    n = len(starts)
    while end < len(text) and text[end] in gotext.JSON_SPACE:
        end += 1
    if end < len(text) and text[end] not in "]}":
        return None  # trailing data (loads' go-decoder rule)
    state = _State()
    if n <= MAX_ARRAY:
        out = _walk(small, state)
        return Compressed(jsonio.dumps(out), method=METHOD) if state.collapsed else None
    for have in paths.values():
        if len(have) < n:
            have.extend([None] * (n - len(have)))
    # ASCII: every offset into the text is one into the bytes
    elements = _Elements(None if data.isascii() else text, data, starts, ends)
    del text, items
    plan = _collapse(elements, state, canon=canon, paths=paths)
    del paths
    import orjson

    # Each kept element is walked in order (so the note still lands on the first collapsed
    # run) and written at once; an element without a long array is its canonical text.
    out: list[Any] = []
    if plan is not None:
        del canon
        for kind, x in plan:
            if kind == "marker":
                out.append(x)
            else:
                out.append(orjson.Fragment(jsonio.dumps(_walk(elements[x], state))))
        del plan
    else:  # the array stays; only elements holding a long array can change
        changed: dict[int, bytes] = {}
        for i in range(n):
            if nested[i]:
                walked = _walk(elements[i], state)
                if state.collapsed:
                    changed[i] = jsonio.dumps(walked)
        if not state.collapsed:
            return None
        for i in range(n):
            got = changed.get(i)
            out.append(orjson.Fragment(
                got if got is not None else canon[i].encode("utf-8", "surrogatepass")))
    return Compressed(jsonio.dumps(out), method=METHOD)


def _has_long_array(x: Any) -> bool:
    """Whether ``x`` holds (or is) an array longer than MAX_ARRAY: the only thing
    :func:`_walk` may change."""
    stack = [x]
    while stack:
        v = stack.pop()
        if isinstance(v, dict):
            stack.extend(v.values())
        elif isinstance(v, list):
            if len(v) > MAX_ARRAY:
                return True
            stack.extend(v)
    return False


# --------------------------------------------------------------------------- statistics


def _numeric_paths(arr: list) -> dict[str, list[float | None]]:
    """Numeric leaf values of every element by path (None where an element lacks it)."""
    n = len(arr)
    paths: dict[str, list[float | None]] = {}
    for idx, x in enumerate(arr):
        stack: list[tuple[str, Any]] = [("", x)]
        while stack:
            p, v = stack.pop()
            if isinstance(v, dict):
                for k in v:
                    stack.append((p + "." + k if p else k, v[k]))
            elif isinstance(v, list):
                for j, y in enumerate(v):
                    stack.append((f"{p}[{j}]", y))
            elif isinstance(v, jsonio.Number):
                try:
                    f = float(v)
                except (ValueError, OverflowError):
                    continue
                if math.isinf(f) or math.isnan(f):
                    continue
                series = paths.get(p)
                if series is None:
                    series = paths[p] = [None] * n
                series[idx] = f
    return paths


def _median(xs: list[float]) -> float:
    s = sorted(xs)
    m = len(s) // 2
    if len(s) % 2:
        return s[m]
    return (s[m - 1] + s[m]) / 2


def _median_mad(xs: list[float]) -> tuple[float, float]:
    """Median and median absolute deviation from it."""
    med = _median(xs)
    return med, _median([abs(v - med) for v in xs])


def _std(xs: list[float]) -> tuple[float, float]:
    """Mean and (population) standard deviation."""
    mean = sum(xs) / len(xs)
    return mean, math.sqrt(sum((v - mean) ** 2 for v in xs) / len(xs))


def _anomalies(series: list[float | None]) -> list[int]:
    """Elements whose robust z, 0.6745 · |v - median| / MAD, is at least 2 (when the MAD is
    0: 0.6745 · |v - mean| / (standard deviation / 0.6745))."""
    vals = [(i, v) for i, v in enumerate(series) if v is not None]
    if len(vals) < Z_MIN_VALUES:
        return []
    xs = [v for _, v in vals]
    centre, scale = _median_mad(xs)
    if scale == 0:
        centre, std = _std(xs)
        if std == 0:
            return []
        scale = std / 0.6745
    return [i for i, v in vals if 0.6745 * abs(v - centre) / scale >= Z_THRESHOLD]


def _change_points(paths: dict[str, list[float | None]], lengths: list[int]) -> list[int]:
    """Seam elements (both sides of every accepted split) of a CUSUM binary segmentation.

    The series is the highest-variance numeric leaf path present in every element (nested
    leaves such as a DevTools node's ``chromeRole.value`` included), else the element
    lengths; none for fewer than 8 points or a constant slope. The largest pending segment
    is examined next (the first queued among equals), only when at least 8 long, until 8
    splits were made. A segment splits after the element where the running sum of deviations
    from its mean peaks, when the means of the two sides differ by at least twice the
    segment's median absolute deviation from its median (its standard deviation when that is
    0): a step between two levels splits, values that alternate or scatter about one level
    do not.
    """
    series: list[float] | None = None
    best_std = -1.0
    for p in sorted(paths):
        vals = paths[p]
        if any(v is None for v in vals):
            continue
        xs = [float(v) for v in vals]  # type: ignore[arg-type]
        std = _std(xs)[1]
        if std > best_std:
            best_std, series = std, xs
    if series is None:
        series = [float(x) for x in lengths]
    n = len(series)
    if n < SEAM_MIN_POINTS or _constant_slope(series):
        return []
    splits: list[int] = []
    pending = [(0, n)]
    while pending and len(splits) < SEAM_MAX_SPLITS:
        j = max(range(len(pending)), key=lambda t: (pending[t][1] - pending[t][0], -t))
        lo, hi = pending.pop(j)
        if hi - lo < SEAM_MIN_POINTS:
            continue
        seg = series[lo:hi]
        seg_mean = sum(seg) / len(seg)
        acc = 0.0
        peak = 0.0
        at = -1
        for k in range(lo, hi - 1):
            acc += series[k] - seg_mean
            if abs(acc) > peak:
                peak, at = abs(acc), k + 1
        if at < 0:
            continue  # a constant segment
        left, right = series[lo:at], series[at:hi]
        shift = abs(sum(left) / len(left) - sum(right) / len(right))
        scale = _median_mad(seg)[1] or _std(seg)[1]
        if shift < SEAM_MIN_SHIFT * scale:
            continue
        splits.append(at)
        pending.append((lo, at))
        pending.append((at, hi))
    out: list[int] = []
    for s in splits:
        out.extend((s - 1, s))
    return out


def _constant_slope(xs: list[float]) -> bool:
    d = xs[1] - xs[0]
    return all(xs[i + 1] - xs[i] == d for i in range(len(xs) - 1))
