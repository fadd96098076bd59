"""Caveman middleware protocol 1.1 under ``/caveman/v1/middleware/`` (docs/sdk.md).

The routes the ``caveman_cloud.middleware`` runtime (and every ``caveman_middleware`` adapter
on top of it) calls: ``GET capabilities``, ``POST optimize``, ``POST retrieve``,
``POST receipts`` and ``POST sessions/delete``.

An optimize request carries tool results ("segments"); each goes through
:meth:`Engine.compress` unchanged, so the original lands in the recovery store under its
``ccr_`` handle. Its replacement is the recovery marker, a ``cmw_`` handle and the engine's
output. A ``cmw_`` handle is ``cmw_`` + the 32 hex digits of the ``ccr_`` handle + 16 hex
digits binding it to the request's scope (an HMAC of the scope and the ``ccr_`` handle under
a key of the Caveman home directory, :mod:`.scopes`), so it maps onto the store with no table
of its own, a handle read under another scope is not found, and none can be made for another
scope without the key. ``retrieve`` pages the original by UTF-8 byte offsets, or answers an
excerpt narrowed by a query (the store's ``retrieve HANDLE QUERY`` view).

The scopes revoked by ``sessions/delete`` are kept beside the key (:mod:`.scopes`): their
handles stop resolving, for every proxy on that directory and after a restart; the originals
stay in the store, which other scopes and tools share. Receipts are validated and
acknowledged, not stored.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import re

from aiohttp import web

from .scopes import Unusable
from .sdk import MIDDLEWARE_PREFIX, State, Unavailable, dumps, loads, utf8

log = logging.getLogger("caveman_engine.proxy")

PROTOCOL = {"min": 1, "max": 1}
FEATURES = ("http_status_v2", "revision_tolerant", "tolerant_reader")
FEATURES_HEADER = "Caveman-Middleware-Features"
TRANSFORM_ID = "caveman-engine.compress"
SEGMENT_KINDS = ("tool_result", "artifact")
MARKER_PREFIX = "[caveman: shortened; exact original via caveman_retrieve handle="
LIMITS = {
    "deadline_ms": 5000,
    "retrieve_deadline_ms": 5000,
    # a plan is smaller than its request, and the client reads at most 4 MiB of response
    "request_bytes": 3 << 20,
    "segment_bytes": 1 << 20,
    "page_bytes": 256 << 10,
    "max_segments": 256,
    "max_manifest_items": 4096,
    "receipt_bytes": 16384,
}
MIN_PAGE = 4  # the longest UTF-8 character
MAX_QUERY = 1024

_TOKEN = re.compile(r"[A-Za-z0-9._:/-]{1,256}")
_HANDLE = re.compile(r"cmw_([a-f0-9]{32})([a-f0-9]{16})")
_MAX_SAFE = 2**53 - 1


def _version() -> str:
    from .. import __version__

    return __version__


def runtime_build() -> str:
    return f"caveman-engine/{_version()}"


def policy_revision() -> str:
    return f"caveman-engine-{_version()}"


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class Refused(Exception):
    """An error answer: HTTP status, protocol reason code, one-line message."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def _token(value) -> bool:
    return isinstance(value, str) and _TOKEN.fullmatch(value) is not None


def _safe(value) -> bool:
    return type(value) is int and 0 <= value <= _MAX_SAFE


def scope_of(doc: dict) -> tuple[str, str, str, str]:
    scope = doc.get("scope")
    if not isinstance(scope, dict):
        raise Refused(400, "invalid_scope", "'scope' must be an object.")
    values = tuple(scope.get(k) for k in ("namespace", "session_id", "branch_id", "cache_epoch"))
    if not all(_token(v) for v in values):
        raise Refused(400, "invalid_scope",
                      "scope namespace, session_id, branch_id and cache_epoch must be tokens.")
    return values


def cmw_handle(st: State, scope: tuple[str, ...], ccr: str) -> str:
    """The scope-bound ``cmw_`` handle of a ``ccr_`` handle (``ccr_`` + 32 hex digits)."""
    return "cmw_" + ccr[4:] + st.scopes.tag(scope, ccr)


def ccr_handle(st: State, scope: tuple[str, ...], handle: str) -> str | None:
    """The ``ccr_`` handle behind a ``cmw_`` handle, or None when it was not issued for
    this scope."""
    m = _HANDLE.fullmatch(handle)
    if m is None:
        return None
    ccr = "ccr_" + m.group(1)
    return ccr if hmac.compare_digest(cmw_handle(st, scope, ccr), handle) else None


# -- routing


async def handle(proxy, st: State, request: web.BaseRequest, rid: str,
                 trace: str) -> web.StreamResponse:
    name = request.rel_url.path[len(MIDDLEWARE_PREFIX):]
    asked = {f.strip() for f in request.headers.get(FEATURES_HEADER, "").split(",")}
    headers = proxy._base_headers(rid, trace)
    headers[FEATURES_HEADER] = ", ".join(f for f in FEATURES if f in asked) or "none"

    def answer(status: int, value) -> web.Response:
        return web.Response(status=status, body=dumps(value), content_type="application/json",
                            headers=headers)

    def refuse(exc: Refused) -> web.Response:
        return answer(exc.status, {"error": {"type": "caveman_middleware_error",
                                             "code": exc.code, "message": exc.message,
                                             "request_id": rid}})

    routes = {"capabilities": ("GET", _capabilities), "optimize": ("POST", _optimize),
              "retrieve": ("POST", _retrieve), "receipts": ("POST", _receipt),
              "sessions/delete": ("POST", _delete)}
    route = routes.get(name)
    if route is None:
        return refuse(Refused(404, "not_found", f"No middleware route {name!r}; protocol 1.1 "
                              f"has {', '.join(routes)}."))
    method, work = route
    if request.method != method and not (method == "GET" and request.method == "HEAD"):
        return refuse(Refused(405, "invalid_request", f"{name} takes {method}."))
    body = b""
    if method == "POST":
        try:
            body = await proxy._read_body(request)
        except TimeoutError:
            resp = refuse(Refused(408, "request_timeout", "The request body did not arrive "
                                  f"within {proxy.config.body_timeout:g} s."))
            return await proxy._answer_and_close(request, resp)
        if body is None or len(body) > LIMITS["request_bytes"]:
            resp = refuse(Refused(413, "payload_limit",
                                  f"Request body exceeds {LIMITS['request_bytes']} bytes."))
            if body is None:
                resp.force_close()
            return resp
    try:
        status, value = await asyncio.to_thread(work, st, body)
    except Refused as exc:
        return refuse(exc)
    except Unavailable as exc:
        return refuse(Refused(503, "recovery_unavailable",
                              f"Cannot open the recovery store: {exc}"))
    except Unusable as exc:
        log.warning("proxy: middleware %s: %s", name, exc)
        return refuse(Refused(503, "recovery_unavailable", f"Cannot bind handles: {exc}"))
    except Exception as exc:  # never a traceback to the client
        log.warning("proxy: middleware %s failed: %r", name, exc)
        return refuse(Refused(500, "runtime_unavailable",
                              f"middleware {name} failed: {type(exc).__name__}."))
    return answer(status, value)


def _document(body: bytes) -> dict:
    try:
        doc = loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise Refused(400, "invalid_request", "The body is not JSON.") from None
    if not isinstance(doc, dict):
        raise Refused(400, "invalid_request", "The body is not a JSON object.")
    if type(doc.get("schema_version")) is not int or doc["schema_version"] != 1:
        raise Refused(400, "unsupported_version", "schema_version must be 1.")
    return doc


def _persistent(engine) -> bool:
    from ..store import MEMORY

    return engine.store is not None and engine.store.path != MEMORY


# -- GET capabilities


def _capabilities(st: State, _body: bytes):
    try:
        engine = st.engine(counting=False)
        st.scopes.check()  # the handle key is usable
        recovery = True
        persistent = _persistent(engine)
    except (Unavailable, Unusable) as exc:
        if isinstance(exc, Unusable):
            log.warning("proxy: middleware capabilities: %s", exc)
        recovery = persistent = False  # ready() then reports recovery_unavailable
    return 200, {
        "schema_version": 1,
        "protocol": PROTOCOL,
        "runtime_build": runtime_build(),
        "policy_revision": policy_revision(),
        "mode": "compress",
        "features": list(FEATURES),
        "transforms": [{
            "transform_id": TRANSFORM_ID,
            "implementation_version": _version(),
            "eligible_segment_kinds": list(SEGMENT_KINDS),
            "deterministic": True,
            "recovery": "exact_ccr",
        }],
        "limits": LIMITS,
        "persistent": persistent,
        "recovery": recovery,
        "retention_seconds": 0,  # originals stay until the store is purged
    }


# -- POST optimize


def _optimize(st: State, body: bytes):
    doc = _document(body)
    scope = scope_of(doc)
    if st.scopes.revoked(scope):
        raise Refused(410, "deleted", "This scope was deleted (sessions/delete).")
    request_id = doc.get("request_id")
    if not _token(request_id):
        raise Refused(400, "invalid_request", "'request_id' must be a token.")
    segments = doc.get("segments")
    if not isinstance(segments, list) or len(segments) > LIMITS["max_segments"]:
        raise Refused(400, "invalid_request",
                      f"'segments' must be a list of at most {LIMITS['max_segments']}.")
    seen: set[str] = set()
    for s in segments:
        if not isinstance(s, dict) or not _token(s.get("id")) or s["id"] in seen:
            raise Refused(400, "invalid_request", "every segment needs a unique token 'id'.")
        seen.add(s["id"])
        content = utf8(s.get("content"))
        if content is None or not isinstance(s.get("sha256"), str):
            raise Refused(400, "invalid_request", f"segment {s['id']}: 'content' must be text.")
        if sha256_hex(content) != s["sha256"]:
            raise Refused(400, "invalid_request",
                          f"segment {s['id']}: sha256 is not the digest of its content.")
    policy = doc.get("policy")
    transforms = policy.get("transforms") if isinstance(policy, dict) else None
    binding = doc.get("recovery_binding")
    if binding is not None and (not isinstance(binding, dict) or not _token(binding.get("id"))):
        raise Refused(400, "invalid_request", "'recovery_binding' needs a token 'id'.")

    engine = st.engine()
    skipped: list[dict] = []
    replacements: list[dict] = []

    def skip_all(reason: str):
        skipped.extend({"segment_id": s["id"], "reason": reason}
                       for s in segments if s["id"] not in done)

    done: set[str] = set()
    reason = "eligible"
    if doc.get("mode") == "record":
        reason = "record"
    elif not isinstance(transforms, list) or TRANSFORM_ID not in transforms:
        reason = "unknown_capability"
    elif binding is None:
        reason = "recovery_unbound"
    elif not _persistent(engine):
        reason = "recovery_unavailable"
    if reason != "eligible":
        skip_all(reason)
    else:
        credited: set[str] = set()
        for s in segments:
            why, item = _replace(st, engine, scope, s)
            done.add(s["id"])
            if item is None:
                skipped.append({"segment_id": s["id"], "reason": why})
                continue
            item["unique_original"] = item["original_sha256"] not in credited
            credited.add(item["original_sha256"])
            replacements.append(item)
    overhead = 0
    if replacements:
        overhead = engine.count(utf8(binding.get("overhead_text")) or b"")
        saved = sum(r["tokens_before"] - r["tokens_after"] for r in replacements)
        if saved <= overhead:  # the recovery tool would cost more than the replacements save
            skipped.extend({"segment_id": r["segment_id"], "reason": "not_smaller"}
                           for r in replacements)
            replacements = []
            reason = "not_smaller"
    if not replacements and reason == "eligible":
        kinds = {s["reason"] for s in skipped}
        reason = kinds.pop() if len(kinds) == 1 else "not_smaller" if skipped else "no_candidate"
    order = {s["id"]: i for i, s in enumerate(segments)}
    skipped.sort(key=lambda s: order[s["segment_id"]])
    before = sum(r["tokens_before"] for r in replacements)
    after = sum(r["tokens_after"] for r in replacements)
    unique = sum(r["tokens_before"] - r["tokens_after"] for r in replacements
                 if r["unique_original"])
    input_digest = sha256_hex(body)
    set_id = sha256_hex(dumps([input_digest, [[r["segment_id"], r["sha256"]]
                                              for r in replacements]]))
    status = "optimized" if replacements else "record" if reason == "record" else "bypassed"
    return 200, {
        "schema_version": 1,
        "request_id": request_id,
        "input_digest": input_digest,
        "policy_revision": policy_revision(),
        "runtime_build": runtime_build(),
        "replacement_set_id": set_id,
        "status": status,
        "reason": reason,
        "replacements": replacements,
        "skipped": skipped,
        "measurement": {
            "basis": "inferred",
            "scope": "segment",
            "tokenizer": engine.counter.name,
            "tokens_before": before,
            "tokens_after": after,
            "unique_tokens_reduced": unique,
            "recovery_overhead_tokens": overhead,
            "verified_saved_usd": 0,
        },
        "stability": {"provider_bytes": "unobserved", "provider_cache_hits": "unobserved",
                      "native": "unavailable"},
        "recovery": {"available": True, "persistent": _persistent(engine), "expires_at": 0,
                     "binding_id": binding["id"] if binding else None},
    }


def _replace(st: State, engine, scope, s: dict) -> tuple[str, dict | None]:
    """One segment's replacement, or the reason it has none."""
    if s.get("protected") is True:
        return "protected", None
    if s.get("opaque") is True:
        return "opaque_part", None
    if s.get("kind") not in SEGMENT_KINDS:
        return "unsupported_shape", None
    content = s["content"].encode("utf-8")
    if len(content) > LIMITS["segment_bytes"]:
        return "payload_limit", None
    result = engine.compress(content)
    if result.error is not None:
        return "recovery_unavailable", None
    if result.output == content or result.tokens_after >= result.tokens_before:
        return "not_smaller", None
    try:
        shortened = result.output.decode("utf-8")
    except UnicodeDecodeError:
        return "unsupported_shape", None
    handle = result.recovery_handle
    if handle is None:
        # a byte-safe compressor needs no store for itself; a replacement does
        try:
            handle = engine.store.put(content, content_type=result.content_type,
                                      compressor=result.method or result.content_type,
                                      tokens_before=result.tokens_before,
                                      tokens_after=result.tokens_after)
        except Exception as exc:
            log.warning("proxy: middleware cannot store a segment's original: %s", exc)
            return "recovery_unavailable", None
    cmw = cmw_handle(st, scope, handle)
    text = f"{MARKER_PREFIX}{cmw}]\n{shortened}"
    data = text.encode("utf-8")
    if len(data) >= len(content):
        return "not_smaller", None
    tokens_after = engine.count(data)
    if tokens_after >= result.tokens_before:
        return "not_smaller", None
    return "", {
        "segment_id": s["id"],
        "source_id": s.get("source_id") if _token(s.get("source_id")) else s["id"],
        "original_sha256": s["sha256"],
        "transform_id": TRANSFORM_ID,
        "transform_version": _version(),
        "text": text,
        "sha256": sha256_hex(data),
        "tokens_before": result.tokens_before,
        "tokens_after": tokens_after,
        "recovery_handle": cmw,
        "reused": False,
        "unique_original": True,
    }


# -- POST retrieve


def _retrieve(st: State, body: bytes):
    doc = _document(body)
    scope = scope_of(doc)
    handle = doc.get("handle")
    if not isinstance(handle, str) or _HANDLE.fullmatch(handle) is None:
        raise Refused(400, "invalid_request", "'handle' must be cmw_ and 48 hex digits.")
    offset = doc.get("offset", 0)
    limit = doc.get("limit", LIMITS["page_bytes"])
    query = doc.get("query")
    query = "" if query is None else query
    offset, limit = _integral(offset), _integral(limit)
    if not _safe(offset):
        raise Refused(400, "invalid_request", "'offset' must be a non-negative integer.")
    if type(limit) is not int or not MIN_PAGE <= limit <= LIMITS["page_bytes"]:
        raise Refused(400, "invalid_request",
                      f"'limit' must be an integer from {MIN_PAGE} to {LIMITS['page_bytes']}.")
    if not isinstance(query, str) or len(query) > MAX_QUERY:
        raise Refused(400, "invalid_request", f"'query' must be text of at most {MAX_QUERY}.")
    if st.scopes.revoked(scope):
        raise Refused(410, "deleted", "This scope was deleted (sessions/delete).")
    ccr = ccr_handle(st, scope, handle)
    if ccr is None:
        raise Refused(404, "not_found", "No original under this handle in this scope.")
    from ..store import NotFound

    engine = st.engine()
    try:
        original = engine.store.get(ccr)
    except NotFound:
        raise Refused(404, "not_found", "No original under this handle (purged?).") from None
    try:
        original.decode("utf-8")
    except UnicodeDecodeError:
        raise Refused(422, "unsupported_shape", "The original is not UTF-8 text.") from None
    page = {"schema_version": 1, "handle": handle, "source_id": ccr,
            "original_sha256": sha256_hex(original), "total_bytes": len(original),
            "offset": offset}
    if query.strip():
        narrowed = engine.retrieve(ccr, query)
        try:
            text = narrowed[:_boundary(narrowed, limit)].decode("utf-8")
        except UnicodeDecodeError:  # the view is not text: the head of the original instead
            text = original[:_boundary(original, limit)].decode("utf-8")
        page.update(kind="excerpt", text=text, complete=False, next_offset=0)
        return 200, page
    total = len(original)
    if offset > total or (offset < total and _continuation(original[offset])):
        raise Refused(400, "invalid_request",
                      "'offset' must be a character boundary inside the original.")
    end = offset + _boundary(original[offset:], limit)
    page.update(kind="original_page", text=original[offset:end].decode("utf-8"),
                complete=offset == 0 and end == total,
                next_offset=end if end < total else None)
    return 200, page


def _integral(value):
    """A JSON number with no fraction as the integer it is (the client forwards a model's
    ``1000.0`` as written; JSON has one number type); anything else as it came."""
    if type(value) is float and value.is_integer():
        return int(value)
    return value


def _continuation(byte: int) -> bool:
    return byte & 0xC0 == 0x80


def _boundary(data: bytes, limit: int) -> int:
    """The longest head of UTF-8 ``data`` within ``limit`` bytes that ends on a character."""
    if len(data) <= limit:
        return len(data)
    end = limit
    while end > 0 and _continuation(data[end]):
        end -= 1
    return end


# -- POST receipts, sessions/delete


def _receipt(st: State, body: bytes):
    if len(body) > LIMITS["receipt_bytes"]:
        raise Refused(413, "payload_limit", f"A receipt is at most {LIMITS['receipt_bytes']} "
                      "bytes.")
    doc = _document(body)
    scope_of(doc)
    if not isinstance(doc.get("event_kind"), str):
        raise Refused(400, "invalid_request", "'event_kind' must be a string.")
    return 202, {"schema_version": 1, "status": "accepted"}


def _delete(st: State, body: bytes):
    scope = scope_of(_document(body))
    fresh = st.scopes.revoke(scope)
    return 200, {"schema_version": 1, "status": "revoked", "originals_deleted": False,
                 "deleted": {"scopes": int(fresh), "choices": 0, "grants": 0, "originals": 0}}
