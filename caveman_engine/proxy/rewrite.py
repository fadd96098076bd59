"""The catalog rewrite: one engine compression of the ``tools`` span, stored first, cached.

Levels map to the engine's tool-schema content types; the engine's catalog envelope already
understands Anthropic (``input_schema``), OpenAI Chat Completions (``function.parameters``)
and OpenAI Responses (flat ``parameters``) tools, so every shape goes through the same call:
``Engine.compress(span, type)``. That call runs the compressor, keeps the result only when it
has fewer tokens, and stores the exact original span in the recovery store before returning
(spec §2.6 steps 3–4: a store failure is a pass-through with an error, never an unrecoverable
rewrite). The proxy adds only "strictly shorter in bytes" (the reference's rule) and the splice.

Results are cached by (level, catalog bytes): agents resend the same catalog every turn, so a
repeated catalog costs one dict lookup and one read of the store (in a worker thread: its
original must still be there) and always gets the same bytes (the provider's prompt cache
keeps hitting). Deterministic declines are cached too; store failures are not.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import OrderedDict, deque
from concurrent.futures import ThreadPoolExecutor
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


# Tools that reach the model exactly as the client wrote them: the Caveman middleware's
# recovery tool, whose description and schema its adapters check and measure.
KEPT_TOOLS = frozenset({"caveman_retrieve"})

RECENT = 4
STORE_WORKERS = 4  # threads for the store and the engine; the event loop never waits on them
STORE_BACKLOG = 64  # store calls waiting for a thread at most; past that, forward as sent
STORE_RETRY_SECONDS = 1.0  # after the store failed or was late, rewrites pause this long


@dataclass(frozen=True)
class Rewritten:
    catalog: bytes  # the rewritten tools span (valid JSON, also one level down)
    handle: str  # recovery handle of the original span


class Rewriter:
    """Rewrites catalogs for one level against one engine. Thread-safe; the asyncio entry point
    runs every store call and every cache miss in its own worker threads, so the event loop
    never waits on the tokenizer, SQLite or PostgreSQL, and waits for the store at most
    ``store_timeout`` seconds.

    A cached rewrite is served only after the store was asked, for that request, whether it
    still holds the original (a purge or a wipe may have removed it): a handle we send always
    retrieves. When the store cannot answer in time (an outage), the catalog goes as sent and
    rewrites pause for :data:`STORE_RETRY_SECONDS`."""

    def __init__(self, engine, level: str, *, max_entries: int = 256,
                 max_bytes: int = 64 * 1024 * 1024, store_timeout: float = 2.0) -> None:
        self.engine = engine
        self.level = level
        self.content_type = LEVEL_TYPES.get(level)
        self.lever = LEVER_IDS.get(level)
        self.store_timeout = store_timeout
        self._cache: OrderedDict[bytes, Rewritten | None] = OrderedDict()
        self._cache_bytes = 0
        self._max_entries = max_entries
        self._max_bytes = max_bytes
        self._lock = threading.Lock()
        self._inflight: dict[bytes, asyncio.Future] = {}
        self._pool: ThreadPoolExecutor | None = None
        self._backlog = 0  # store calls submitted and not finished
        self._paused_until = 0.0  # monotonic time before which the store is not asked
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

    def _lookup(self, catalog: bytes) -> tuple[bool, Rewritten | None]:
        """The cache alone (no store call)."""
        with self._lock:
            if catalog not in self._cache:
                return False, None
            self._cache.move_to_end(catalog)
            return True, self._cache[catalog]

    def _forget(self, catalog: bytes, value: Rewritten) -> None:
        with self._lock:
            if self._cache.get(catalog) is value:
                del self._cache[catalog]
                self._cache_bytes -= len(catalog) + len(value.catalog)

    def still_stored(self, catalog: bytes, value: Rewritten) -> bool | None:
        """Whether the store holds ``catalog`` under the handle (False: gone; None: the store
        could not say). Blocking: a worker thread's call."""
        from ..store import NotFound

        try:
            return self.engine.store.get(value.handle) == catalog
        except NotFound:
            return False
        except Exception:  # unreachable, locked, broken: not an answer
            return None

    def cached(self, catalog: bytes) -> tuple[bool, Rewritten | None]:
        """The cache, a rewrite only once the store confirmed its original (blocking)."""
        hit, value = self._lookup(catalog)
        if value is not None and not self.still_stored(catalog, value):
            self._forget(catalog, value)
            return False, None
        return hit, value

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
            if result.error == "cave_ccr_unavailable":
                self._pause()
            return None  # not cached: the store may recover
        out = result.output
        if result.recovery_handle is None or out == catalog or len(out) >= len(catalog):
            self._remember(catalog, None)
            return None
        from .. import jsonio

        # (a name may be spelt with JSON escapes: "caveman\u005fretrieve")
        if KEPT_TOOLS and (b"caveman_retrieve" in catalog or b"\\u" in catalog):
            kept = _keep_tools(catalog, out)
            if kept is None or (kept != out and (
                    len(kept) >= len(catalog) or self.engine.count(kept) >= result.tokens_before)):
                self._remember(catalog, None)
                return None
            out = kept
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

    def _pause(self) -> None:
        if time.monotonic() >= self._paused_until:
            log.warning("proxy: the recovery store did not answer; catalogs go as sent for "
                        "%.0f s", STORE_RETRY_SECONDS)
        self._paused_until = time.monotonic() + STORE_RETRY_SECONDS

    def _submit(self, fn, *args) -> asyncio.Future | None:
        """``fn(*args)`` in a store thread, or None when too many calls already wait."""
        if self._backlog >= STORE_BACKLOG:
            return None
        if self._pool is None:
            self._pool = ThreadPoolExecutor(STORE_WORKERS, thread_name_prefix="caveman-store")
        self._backlog += 1
        fut = asyncio.get_running_loop().run_in_executor(self._pool, fn, *args)
        fut.add_done_callback(self._done)
        return fut

    def _done(self, _fut) -> None:
        self._backlog -= 1

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None

    async def rewrite(self, catalog: bytes) -> Rewritten | None:
        self.seen(catalog)
        hit, value = self._lookup(catalog)
        if hit and value is None:
            return None  # a decline: deterministic, nothing stored to check
        if time.monotonic() < self._paused_until:
            return None
        if hit:
            fut = self._submit(self.still_stored, catalog, value)
            if fut is None:
                return None
            try:
                async with asyncio.timeout(self.store_timeout):
                    ok = await fut
            except TimeoutError:
                ok = None
            if ok:
                return value
            if ok is None:
                self._pause()
                return None
            self._forget(catalog, value)  # purged: made and stored again below
        # A miss runs once in a worker thread, however many requests bring the same new
        # catalog at once; a request that goes away (cancelled) leaves the work to the others.
        fut = self._inflight.get(catalog)
        if fut is None:
            fut = self._submit(self.rewrite_sync, catalog)
            if fut is None:
                return None
            self._inflight[catalog] = fut
            fut.add_done_callback(lambda _f, c=catalog: self._inflight.pop(c, None))
        return await asyncio.shield(fut)


def _keep_tools(original: bytes, rewritten: bytes) -> bytes | None:
    """``rewritten`` with every :data:`KEPT_TOOLS` tool put back as ``original`` spells it,
    byte for byte, at the same place; None when the two arrays do not line up tool for tool
    (then the catalog goes as sent)."""
    from .. import jsonio
    from ..catalog import envelope

    def items(data: bytes):
        text = data.decode("utf-8")
        i = len(text) - len(text.lstrip(" \t\r\n"))
        return text, [(a, b, envelope.iter_tools([v])) for a, b, v in jsonio.array_items(text, i)]

    try:
        src, before = items(original)
        dst, after = items(rewritten)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    if len(before) != len(after):
        return None
    out, last = [], 0
    for (a, b, t), (c, d, u) in zip(before, after):
        name = t[0].name if t else None
        if name != (u[0].name if u else None):
            return None
        if name in KEPT_TOOLS:
            out += [dst[last:c], src[a:b]]
            last = d
    out.append(dst[last:])
    return "".join(out).encode("utf-8")
