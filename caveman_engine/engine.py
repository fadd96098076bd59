"""The compress pipeline (spec §2).

Data flows one way: bytes in → limit → unwrap → forced type or detect → compressor → rewrap →
token check → store original → bytes out + report. A compressor only maps bytes to bytes; this
module decides whether its output is worth emitting and makes sure it is recoverable first.
"""

from __future__ import annotations

import os

from . import gotext, jsonio, registry, wrappers
from .compressors import Compressed, CompressorCrash, strict
from .limits import check_size
from .records import Record
from .store import BudgetExceeded, Store
from .tokens import Counter, make_counter

# `detect` is imported when a type is to be detected, not when it is forced (--type).

ERR_BUDGET = "cave_ccr_budget_exceeded"
ERR_UNAVAILABLE = "cave_ccr_unavailable"


class Result(Record):
    """What :meth:`Engine.compress` returns. ``error`` is ERR_BUDGET / ERR_UNAVAILABLE when
    the original was not stored; ``store_args`` how it was stored (the keyword arguments of
    ``Store.put``, for result reuse; left out of ``==`` and ``repr``). A plain class with the
    ``==`` and ``repr`` of the dataclass it was, which cost start-up time to define."""

    _fields = ("output", "content_type", "tokens_before", "tokens_after", "token_count_basis",
               "ratio", "basis", "recovery_handle", "method", "lossless_to_model", "error",
               "error_detail")

    def __init__(self, output: bytes, content_type: str, tokens_before: int, tokens_after: int,
                 token_count_basis: str, ratio: float = 0.0, basis: str = "inferred",
                 recovery_handle: str | None = None, method: str | None = None,
                 lossless_to_model: bool | None = None, error: str | None = None,
                 error_detail: str | None = None, store_args: dict | None = None) -> None:
        self.output = output
        self.content_type = content_type
        self.tokens_before = tokens_before
        self.tokens_after = tokens_after
        self.token_count_basis = token_count_basis
        self.ratio = ratio
        self.basis = basis
        self.recovery_handle = recovery_handle
        self.method = method
        self.lossless_to_model = lossless_to_model
        self.error = error
        self.error_detail = error_detail
        self.store_args = store_args

    @property
    def transformed(self) -> bool:
        return self.recovery_handle is not None

    def is_clean_passthrough(self, original: bytes) -> bool:
        return (
            self.output == original
            and self.recovery_handle is None
            and self.method is None
            and self.ratio == 0
            and self.tokens_after == self.tokens_before
        )

    def report(self) -> bytes:
        """The one-line JSON report (spec §1.3), fields in the reference's order."""
        fields: dict = {
            "content_type": self.content_type,
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
            "token_count_basis": self.token_count_basis,
            # a Number, not an orjson.Fragment: the same text, and small reports are then
            # written without importing orjson (see jsonio.dumps)
            "ratio": jsonio.Number(jsonio.go_float(self.ratio)),
            "basis": self.basis,
        }
        if self.recovery_handle is not None:
            fields["recovery_handle"] = self.recovery_handle
            fields["method"] = self.method
            fields["lossless_to_model"] = bool(self.lossless_to_model)
        if self.error is not None:
            fields["error"] = self.error
        return jsonio.dumps(fields, sort_keys=False)


def _best_of_json() -> bool:
    return os.environ.get("CAVE_ENGINE_TOON", "").lower() == "best-of"


class Engine:
    """Compress and retrieve against one store (None: S4 output cannot be stored, so every
    lossy compressor passes through)."""

    def __init__(self, store: Store | None = None, counter: Counter | None = None) -> None:
        self.store = store
        self._counter = counter

    @property
    def counter(self) -> Counter:
        if self._counter is None:
            self._counter = make_counter(_cache_dir(self.store))
        return self._counter

    def count(self, data: bytes) -> int:
        if not data:
            return 0
        counter = self.counter
        try:
            return counter.count(data)
        except Exception:
            if strict():
                raise
            return Counter().count(data)

    # -- compress

    def compress(self, data: bytes, content_type: str | None = None) -> Result:
        check_size(data)
        body, layers = wrappers.unwrap(data)
        forced = content_type if content_type not in (None, "", "auto") else None
        if forced is not None:
            ct = forced
        else:
            from .detect import detect as detect_type

            ct = detect_type(body)
        before = self.count(data)
        passthrough = Result(data, ct, before, before, self.counter.name)

        found = registry.compressor(ct)
        if found is None:
            return passthrough
        module, safety = found
        if safety.requires_ccr and self.store is None:
            return passthrough
        produced = self._run(module, body)
        if produced is None:
            return passthrough
        out = wrappers.rewrap(produced.data, layers)
        if out == data:
            return passthrough
        after = self.count(out)
        if after >= before:
            return passthrough

        method = produced.method or module.CONTENT_TYPE
        lossless = (
            produced.lossless_to_model
            if produced.lossless_to_model is not None
            else safety.reversible
        )
        handle = None
        store_args = None
        if safety.requires_ccr:
            store_args = {"content_type": ct, "compressor": module.CONTENT_TYPE,
                          "tokens_before": before, "tokens_after": after,
                          "metadata": produced.metadata}
            try:
                handle = self.store.put(data, **store_args)
            except BudgetExceeded as exc:
                passthrough.error, passthrough.error_detail = ERR_BUDGET, str(exc)
                return passthrough
            except Exception as exc:  # any store failure: never emit what cannot be recovered
                passthrough.error, passthrough.error_detail = ERR_UNAVAILABLE, str(exc)
                return passthrough
        return Result(
            out,
            ct,
            before,
            after,
            self.counter.name,
            ratio=(before - after) / before,
            recovery_handle=handle,
            method=method,
            lossless_to_model=lossless,
            store_args=store_args,
        )

    def _run(self, module, body: bytes) -> Compressed | None:
        if module.CONTENT_TYPE == "json" and _best_of_json():
            return self._best_of_json(module, body)
        return call_compressor(module, body)

    def _best_of_json(self, json_module, body: bytes) -> Compressed | None:
        """``CAVE_ENGINE_TOON=best-of`` (spec §2.7): TOON first; elision replaces it only when
        strictly smaller; either must have fewer tokens than the input."""
        best: tuple[int, Compressed] | None = None
        limit = self.count(body)
        toon = registry.compressor("toon")
        for module in ([toon[0]] if toon else []) + [json_module]:
            produced = call_compressor(module, body)
            if produced is None:
                continue
            n = self.count(produced.data)
            if n < limit and (best is None or n < best[0]):
                best = (n, produced)
        return best[1] if best else None

    # -- retrieve

    def retrieve(self, handle: str, query: str | None = None) -> bytes:
        if self.store is None:
            from .store import NotFound

            raise NotFound()
        original = self.store.retrieve(handle)
        if query is None or gotext.is_blank(query):
            return original
        try:
            from .narrow import narrow
        except ImportError:
            return original
        return narrow(original, query)


def call_compressor(module, body: bytes) -> Compressed | None:
    """Run a compressor; anything it raises is a decline (in strict mode, a crash)."""
    try:
        produced = module.compress(body)
    except Exception as exc:
        if strict():
            raise CompressorCrash(module.CONTENT_TYPE, exc) from exc
        return None
    if isinstance(produced, (bytes, bytearray)):
        return Compressed(bytes(produced))
    if isinstance(produced, Compressed) and isinstance(produced.data, bytes):
        return produced
    return None


def _cache_dir(store: Store | None) -> str | None:
    """Where the tokenizer's rank cache lives: ``CAVEMAN_CACHE_DIR``, else where the store
    says (beside a SQLite file; the Caveman home for PostgreSQL), else the Caveman home
    directory if it exists. A string (the tokenizer joins paths with ``os.path``): pathlib
    is not imported for it."""
    explicit = os.environ.get("CAVEMAN_CACHE_DIR")
    if explicit:
        return explicit
    if store is not None:
        return store.cache_location()
    home = os.environ.get("CAVEMAN_HOME") or os.path.join(os.path.expanduser("~"), ".caveman")
    return home if os.path.isdir(home) else None


_DEFAULT: Engine | None = None


def default_engine() -> Engine:
    """A process-wide engine on the default store (``caveman_engine.compress`` & co.)."""
    global _DEFAULT
    if _DEFAULT is None:
        from .store import open_store

        _DEFAULT = Engine(open_store())
    return _DEFAULT
