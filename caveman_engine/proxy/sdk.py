"""The Caveman runtime protocol on the proxy's port: ``/sdk/v1/*`` (docs/sdk.md).

``POST /sdk/v1/compress`` runs the engine on one payload and answers its report plus the
output; ``POST /sdk/v1/tool-search`` ranks a catalog against a query with the evals' BM25 and
answers the top tools with their token counts. Every other ``/sdk/v1/`` path is a JSON 501
naming the route. ``/caveman/v1/middleware/`` (protocol 1.1) is in :mod:`.middleware`.

Nothing here compresses or ranks by itself: the engine, its token counter and
:mod:`caveman_engine.evals.lexical` do. Blocking work runs in a worker thread.

The engine is the proxy's own when its level needs one; at level ``off`` the proxy has none,
and the first request here opens the default recovery store (``CAVEMAN_CCR_DB`` /
``CAVEMAN_HOME``) once. A store that cannot be opened is a 503 ``cave_ccr_unavailable``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import threading

from aiohttp import web

log = logging.getLogger("caveman_engine.proxy")

SDK_PREFIX = "/sdk/v1/"
MIDDLEWARE_PREFIX = "/caveman/v1/middleware/"
DEFAULT_MAX_TOOLS = 8
# What one tool-search may ask for: the middleware's own manifest limit, and a query (or
# context) far beyond any task description; past them it is a 413, not minutes of a worker.
MAX_TOOLS = 4096
MAX_QUERY_BYTES = 64 * 1024
SERVED = ("/sdk/v1/compress", "/sdk/v1/tool-search")


class Unavailable(Exception):
    """The recovery store cannot be opened (one line, no credentials)."""


class State:
    """What the runtime routes keep per proxy: the engine (opened on first use when the
    proxy has none) and the middleware's handle key and revoked scopes (:mod:`.scopes`)."""

    def __init__(self, proxy) -> None:
        from .scopes import Scopes

        self.proxy = proxy
        self._engine = None
        self._lock = threading.Lock()
        self._warmed = threading.Event()
        self.scopes = Scopes()
        self._model = None  # WordLlama for ranker "embeddings": None unknown, False missing
        self._model_lock = threading.Lock()

    def similarities(self, query: str, texts: list[str]) -> list[float] | None:
        """Cosines of ``query`` against ``texts`` with the semantic grader's WordLlama model
        (loaded once; blocking), or None when wordllama is not installed or cannot load."""
        from ..evals import semantic

        with self._model_lock:
            if self._model is None:
                try:
                    self._model = semantic.load_model() if semantic.available() else False
                except semantic.SemanticUnavailable as exc:
                    log.warning("proxy: tool-search embeddings: %s", exc)
                    self._model = False
        if self._model is False:
            return None
        emb = semantic.Embedder(self._model)  # its cache lives for this request only
        return emb.similarities(semantic.plain_words(query),
                                [semantic.plain_words(t) for t in texts])

    def engine(self, *, counting: bool = True):
        """The engine (blocking: call it from a worker thread). ``counting``: wait until its
        tokenizer is loaded (else the caller only needs the store)."""
        own = self.proxy.rewriter.engine
        if own is not None and own.store is not None:
            return own  # loaded before the proxy listened
        with self._lock:
            if self._engine is None:
                from ..engine import Engine
                from ..store import StoreError, open_store

                try:
                    engine = Engine(open_store())
                except (StoreError, OSError) as exc:
                    raise Unavailable(str(exc)) from None
                self._engine = engine

                # The tokenizer loads beside the request that opened the store (often the
                # middleware's capabilities, whose client waits 500 ms at most for it and the
                # first optimize together); a request that counts waits for this one load
                # instead of starting a second.
                def warm() -> None:
                    try:
                        engine.count(b"warm up")
                    finally:
                        self._warmed.set()

                threading.Thread(target=warm, daemon=True).start()
        if counting:
            self._warmed.wait()
        return self._engine


def state(proxy) -> State:
    found = getattr(proxy, "_runtime_state", None)
    if found is None:
        found = proxy._runtime_state = State(proxy)
    return found


def dumps(value) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"),
                      allow_nan=False).encode("utf-8")


def _not_json(text: str):
    raise ValueError(f"{text} is not JSON")


def loads(body: bytes):
    """Strict JSON of a UTF-8 body (NaN and Infinity refused); ValueError otherwise."""
    return json.loads(body.decode("utf-8"), parse_constant=_not_json)


def utf8(text) -> bytes | None:
    """The UTF-8 bytes of a well-formed string (None for a lone surrogate or a non-string)."""
    if not isinstance(text, str):
        return None
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return None


# -- routing


async def handle(proxy, request: web.BaseRequest) -> web.StreamResponse:
    """Every request under ``/sdk/v1/`` or ``/caveman/v1/middleware/``."""
    from .server import trace_id, uuid7

    rnd = os.urandom(26)
    rid, trace = uuid7(rnd[:10]), trace_id(request.headers, rnd[10:])
    path = request.rel_url.path
    if path.startswith(MIDDLEWARE_PREFIX):
        from . import middleware

        return await middleware.handle(proxy, state(proxy), request, rid, trace)

    def error(status, code, message):
        return proxy._error(status, code, message, rid, trace)

    if path not in SERVED:
        return error(501, "cave_not_implemented",
                     f"{request.method} {path} is not served by caveman-engine proxy "
                     f"(served: POST {', POST '.join(SERVED)}).")
    if request.method != "POST":
        return error(405, "cave_method_not_allowed", f"{path} takes POST, not {request.method}.")
    try:
        body = await proxy._read_body(request)
    except TimeoutError:
        return await proxy._answer_and_close(request, error(
            408, "cave_request_timeout",
            f"The request body did not arrive within {proxy.config.body_timeout:g} s."))
    if body is None:
        resp = error(413, "cave_request_too_large",
                     f"Request body exceeds {proxy.config.body_cap} bytes.")
        resp.force_close()
        return resp
    try:
        doc = loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return error(400, "cave_invalid_request", "The body is not a JSON object.")
    if not isinstance(doc, dict):
        return error(400, "cave_invalid_request", "The body is not a JSON object.")
    work = _compress if path == "/sdk/v1/compress" else _tool_search
    try:
        status, out = await asyncio.to_thread(work, state(proxy), doc)
    except Unavailable as exc:
        return error(503, "cave_ccr_unavailable", f"Cannot open the recovery store: {exc}")
    except Exception as exc:  # never a traceback to the client
        log.warning("proxy: %s failed: %r", path, exc)
        return error(500, "cave_internal_error", f"{path} failed: {type(exc).__name__}.")
    if status != 200:
        return error(status, out[0], out[1])
    headers = proxy._base_headers(rid, trace)
    return web.Response(status=200, body=out, content_type="application/json",
                        headers=headers)


# -- POST /sdk/v1/compress


def _compress(st: State, doc: dict):
    data = utf8(doc.get("input"))
    if data is None:
        return 400, ("cave_invalid_request", "'input' must be a string of well-formed text.")
    ct = doc.get("content_type")
    if ct is not None and not isinstance(ct, str):
        return 400, ("cave_invalid_request", "'content_type' must be a string.")
    from ..limits import InputTooLarge

    engine = st.engine()
    try:
        result = engine.compress(data, ct)
    except InputTooLarge as exc:
        return 413, ("cave_input_too_large", str(exc))
    output = result.output
    try:
        text = output.decode("utf-8")
    except UnicodeDecodeError:
        # The engine's output is not text the SDK can carry: answer the input unchanged,
        # with the pass-through's report.
        from ..engine import Result

        result = Result(data, result.content_type, result.tokens_before, result.tokens_before,
                        result.token_count_basis)
        text = doc["input"]
    # The report's own bytes (as `caveman-engine compress` writes them), then the output.
    report = result.report()
    return 200, report[:-1] + b',"output":' + dumps(text) + b"}"


# -- POST /sdk/v1/tool-search


def _tool_search(st: State, doc: dict):
    tools = doc.get("tools")
    query = doc.get("query")
    if not isinstance(tools, list) or not all(isinstance(t, dict) for t in tools):
        return 400, ("cave_invalid_request", "'tools' must be a list of tool objects.")
    if len(tools) > MAX_TOOLS:
        return 413, ("cave_request_too_large", f"at most {MAX_TOOLS} tools are ranked at once.")
    context = doc.get("context")
    for name, text in (("query", query), ("context", context)):
        if name == "context" and text is None:
            continue
        data = utf8(text)
        if data is None:
            return 400, ("cave_invalid_request", f"'{name}' must be a string of well-formed "
                                                 "text.")
        if len(data) > MAX_QUERY_BYTES:
            return 413, ("cave_request_too_large",
                         f"'{name}' is over {MAX_QUERY_BYTES} bytes.")
    limit = doc.get("max_tools", DEFAULT_MAX_TOOLS)
    if type(limit) is not int or limit < 1:
        return 400, ("cave_invalid_request", "'max_tools' must be a positive integer.")
    ranker = doc.get("ranker")
    if ranker not in (None, "bm25", "embeddings"):
        return 400, ("cave_unsupported_ranker",
                     f"ranker {ranker!r} is not served here; 'bm25' and 'embeddings' are.")
    session = doc.get("session_id")
    if session is not None and not isinstance(session, str):
        return 400, ("cave_invalid_request", "'session_id' must be a string.")

    from ..catalog import envelope
    from ..evals import lexical

    found = envelope.iter_tools(tools)
    if len(found) != len(tools):
        return 400, ("cave_invalid_request", "every entry of 'tools' needs a name or a schema.")
    text = query if context is None else query + "\n" + context
    method, scores = "bm25", None
    if ranker == "embeddings":
        scores = st.similarities(text, [lexical.tool_text(t) for t in found])
        method = "embeddings" if scores is not None else "bm25"
    if scores is None:
        scores = lexical.bm25(lexical.words(text), [lexical.words(lexical.tool_text(t))
                                                    for t in found])
    # always_load tools first (catalog order), then the best-scoring others, max_tools in all;
    # a tool that shares no word with the query (BM25 0; no positive cosine) is not sent.
    chosen = [i for i, t in enumerate(tools) if t.get("always_load") is True][:limit]
    first = set(chosen)
    ranked = sorted((i for i in range(len(tools)) if i not in first and scores[i] > 0),
                    key=lambda i: -scores[i])
    chosen += ranked[:max(0, limit - len(chosen))]
    sent = [tools[i] for i in chosen]
    try:
        engine = st.engine()
    except Unavailable:  # counting needs no store
        from ..engine import Engine

        engine = Engine(None)
    full_tokens = engine.count(dumps(tools))
    sent_tokens = engine.count(dumps(sent)) if sent else 0
    out = {
        "tools": sent,
        "sent_schema_tokens": min(sent_tokens, full_tokens),
        "full_schema_tokens": full_tokens,
        "deferred_count": len(tools) - len(sent),
        "method": method,
        "token_basis": engine.counter.name,
        "basis": "inferred",
        "scores": [round(scores[i], 6) for i in chosen],  # BM25 or cosine, one per sent tool
    }
    # No session_id in the answer: the proxy keeps no tool sessions, so a later provider
    # request's x-cave-tool-session finds none (the client reads the missing id as "none").
    return 200, dumps(out)
