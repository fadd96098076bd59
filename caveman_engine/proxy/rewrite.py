"""The catalog rewrite: one engine compression of the ``tools`` span, stored first, cached.

Levels map to the engine's tool-schema content types; the engine's catalog envelope already
understands Anthropic (``input_schema``), OpenAI Chat Completions (``function.parameters``)
and OpenAI Responses (flat ``parameters``) tools, so every shape goes through the same call:
``Engine.compress(span, type)``. That call runs the compressor, keeps the result only when it
has fewer tokens, and stores the exact original span in the recovery store before returning
(spec §2.6 steps 3–4: a store failure is a pass-through with an error, never an unrecoverable
rewrite). The proxy adds only "strictly shorter in bytes" (the reference's rule) and the splice.

Results are cached by (level, catalog bytes): agents resend the same catalog every turn, so a
repeated catalog costs one dict lookup and always gets the same bytes (the provider's prompt
cache keeps hitting). Deterministic declines are cached too; store failures are not.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import OrderedDict, deque
from dataclasses import dataclass

log = logging.getLogger("caveman_engine.proxy")

# level -> (engine content type, optimisation id = tripwire lever, strip header value)
LEVEL_TYPES = {
    "annotations": "toolschema-annotations",
    "toolschema": "toolschema",
    "toolschema-safe": "toolschema-safe",
    "toolschema-max": "toolschema-max",
}
LEVER_IDS = {
    "annotations": "toolschema-annotation-strip",  # the reference's id
    "toolschema": "toolschema-rewrite",
    "toolschema-safe": "toolschema-safe-rewrite",
    "toolschema-max": "toolschema-max-rewrite",
}
# The ledger's fixed lever order (spec §4.2): ours after the reference's.
LEVER_ORDER = (
    "toolschema-annotation-strip",
    "toolschema-rewrite",
    "toolschema-safe-rewrite",
    "toolschema-max-rewrite",
    "cache-breakpoint-plan",
)


RECENT = 4
# How often a cached rewrite re-checks that its original is still in the store.
STORE_CHECK_SECONDS = 1.0


@dataclass(frozen=True)
class Rewritten:
    catalog: bytes  # the rewritten tools span (valid JSON, also one level down)
    handle: str  # recovery handle of the original span


class Rewriter:
    """Rewrites catalogs for one level against one engine. Thread-safe; the asyncio entry point
    runs cache misses in a worker thread so the event loop never waits on the tokenizer or
    SQLite."""

    def __init__(self, engine, level: str, *, max_entries: int = 256,
                 max_bytes: int = 64 * 1024 * 1024) -> None:
        self.engine = engine
        self.level = level
        self.content_type = LEVEL_TYPES.get(level)
        self.lever = LEVER_IDS.get(level)
        self._cache: OrderedDict[bytes, Rewritten | None] = OrderedDict()
        self._cache_bytes = 0
        self._checked: dict[str, float] = {}  # handle -> when its original was last seen
        self._max_entries = max_entries
        self._max_bytes = max_bytes
        self._lock = threading.Lock()
        self._inflight: dict[bytes, asyncio.Future] = {}
        # the catalogs of the last requests, newest first: catalog.extract() tries them first
        self.recent: deque[bytes] = deque(maxlen=RECENT)
        self.engine_calls = 0  # how many catalogs actually went through the engine

    @property
    def enabled(self) -> bool:
        return self.content_type is not None

    def available(self) -> bool:
        """Spec §2.6 step 1: the compressor for the level is installed and importable."""
        if self.content_type is None:
            return False
        from .. import registry

        return registry.compressor(self.content_type) is not None

    def cached(self, catalog: bytes) -> tuple[bool, Rewritten | None]:
        with self._lock:
            if catalog not in self._cache:
                return False, None
            self._cache.move_to_end(catalog)
            value = self._cache[catalog]
        if value is not None and not self._still_stored(catalog, value):
            with self._lock:
                if self._cache.get(catalog) is value:
                    del self._cache[catalog]
                    self._cache_bytes -= len(catalog) + len(value.catalog)
            return False, None
        return True, value

    def _still_stored(self, catalog: bytes, value: Rewritten) -> bool:
        """A handle we send must retrieve: at most once a second per catalog, check that the
        original is still in the store (someone may have purged or wiped it)."""
        now = time.monotonic()
        if now - self._checked.get(value.handle, -STORE_CHECK_SECONDS) < STORE_CHECK_SECONDS:
            return True
        try:
            ok = self.engine.store.get(value.handle) == catalog
        except Exception:
            ok = False
        if ok:
            self._checked[value.handle] = now
        else:
            self._checked.pop(value.handle, None)
        return ok

    def _remember(self, catalog: bytes, value: Rewritten | None) -> None:
        size = len(catalog) + (len(value.catalog) if value else 0)
        if size > self._max_bytes // 4:
            return
        with self._lock:
            if catalog in self._cache:
                return
            self._cache[catalog] = value
            self._cache_bytes += size
            while self._cache and (
                len(self._cache) > self._max_entries or self._cache_bytes > self._max_bytes
            ):
                k, v = self._cache.popitem(last=False)
                self._cache_bytes -= len(k) + (len(v.catalog) if v else 0)
                if v is not None:
                    self._checked.pop(v.handle, None)

    def rewrite_sync(self, catalog: bytes) -> Rewritten | None:
        """The rewritten span and its handle, or None (fail closed: forward the original)."""
        hit, value = self.cached(catalog)
        if hit:
            return value
        if not self.available():
            return None
        self.engine_calls += 1
        try:
            result = self.engine.compress(catalog, self.content_type)
        except Exception as exc:  # a crashing compressor is a decline here, whatever the mode
            log.warning("proxy: %s rewrite failed, forwarding the original: %s",
                        self.content_type, exc)
            return None
        if result.error is not None:
            log.warning("proxy: cannot store the original catalog (%s), forwarding it "
                        "unchanged: %s", result.error, result.error_detail)
            return None  # not cached: the store may recover
        out = result.output
        if result.recovery_handle is None or out == catalog or len(out) >= len(catalog):
            self._remember(catalog, None)
            return None
        from .. import jsonio

        # Checked once here, one level down (as it will sit in the body): every splice of it
        # relies on this instead of parsing the spliced body again.
        if not jsonio.valid(b"[" + out + b"]"):
            log.warning("proxy: %s produced invalid JSON; forwarding the original",
                        self.content_type)
            self._remember(catalog, None)
            return None
        value = Rewritten(out, result.recovery_handle)
        self._remember(catalog, value)
        return value

    def seen(self, catalog: bytes) -> None:
        recent = self.recent
        if not recent or recent[0] != catalog:
            try:
                recent.remove(catalog)
            except ValueError:
                pass
            recent.appendleft(catalog)

    async def rewrite(self, catalog: bytes) -> Rewritten | None:
        self.seen(catalog)
        hit, value = self.cached(catalog)
        if hit:
            return value
        # A miss runs once in a worker thread, however many requests bring the same new
        # catalog at once; a request that goes away (cancelled) leaves the work to the others.
        fut = self._inflight.get(catalog)
        if fut is None:
            fut = asyncio.get_running_loop().run_in_executor(None, self.rewrite_sync, catalog)
            self._inflight[catalog] = fut
            fut.add_done_callback(lambda _f, c=catalog: self._inflight.pop(c, None))
        return await asyncio.shield(fut)
