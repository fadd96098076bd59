"""The LLM tool-choice grader: any OpenAI-compatible Chat Completions endpoint.

Each case is one request: the case's chat messages, the catalog as ``tools`` (converted to Chat
Completions tools when it is in another shape), ``tool_choice: "required"`` and temperature 0.
The chosen tool is the name of the first tool call of the first choice (None when the model
answered without one). Plain ``urllib``; no SDK.

Configuration: ``--model`` (or ``CAVEMAN_EVALS_MODEL``), ``CAVEMAN_EVALS_BASE_URL`` (default
``https://api.openai.com/v1``; ``/chat/completions`` is appended), ``CAVEMAN_EVALS_API_KEY``
(sent as a bearer token when set), ``CAVEMAN_EVALS_TIMEOUT`` (seconds, default 60).
"""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request
from typing import Any

DEFAULT_BASE_URL = "https://api.openai.com/v1"
RETRIES = 2  # after the first try, on 429 / 5xx / connection errors


class LLMError(RuntimeError):
    """The endpoint could not be used (one line, for the CLI)."""


def chat_tools(catalog: Any) -> list[dict]:
    """The catalog as Chat Completions tools (name, description, input schema)."""
    from ..catalog import envelope

    out = []
    for t in envelope.iter_tools(catalog):
        c = t.container
        fn: dict[str, Any] = {"name": t.name}
        if isinstance(c.get("description"), str):
            fn["description"] = c["description"]
        schemas = t.schemas()
        fn["parameters"] = schemas[0][1] if schemas else {"type": "object", "properties": {}}
        if t.strict:
            fn["strict"] = True
        out.append({"type": "function", "function": fn})
    return out


class LLMGrader:
    name = "llm"

    def __init__(self, model: str, base_url: str | None = None, api_key: str | None = None,
                 timeout: float | None = None) -> None:
        self.model = model
        base = base_url or os.environ.get("CAVEMAN_EVALS_BASE_URL") or DEFAULT_BASE_URL
        self.url = base.rstrip("/") + "/chat/completions"
        self.api_key = api_key if api_key is not None else os.environ.get("CAVEMAN_EVALS_API_KEY")
        if timeout is None:
            try:
                timeout = float(os.environ.get("CAVEMAN_EVALS_TIMEOUT", "60"))
            except ValueError:
                timeout = 60.0
        self.timeout = timeout

    def request_body(self, case, catalog: Any) -> dict:
        messages = case.messages or [{"role": "user", "content": case.query}]
        return {
            "model": self.model,
            "messages": messages,
            "tools": chat_tools(catalog),
            "tool_choice": "required",
            "temperature": 0,
        }

    def _post(self, body: dict) -> dict:
        data = json.dumps(body, ensure_ascii=False).encode()
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        last = ""
        for attempt in range(RETRIES + 1):
            if attempt:
                time.sleep(min(2.0 ** attempt, 8.0))
            req = urllib.request.Request(self.url, data=data, headers=headers, method="POST")
            try:
                with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                    raw = resp.read()
            except urllib.error.HTTPError as exc:
                detail = exc.read()[:200].decode("utf-8", "replace").replace("\n", " ")
                last = f"HTTP {exc.code} from {self.url}: {detail}"
                if exc.code == 429 or exc.code >= 500:
                    continue
                raise LLMError(last) from None
            except (urllib.error.URLError, OSError) as exc:
                last = f"cannot reach {self.url}: {getattr(exc, 'reason', exc)}"
                continue
            try:
                return json.loads(raw)
            except ValueError:
                raise LLMError(f"{self.url} did not answer JSON") from None
        raise LLMError(last)

    def choose(self, case, catalog: Any) -> str | None:
        reply = self._post(self.request_body(case, catalog))
        try:
            calls = reply["choices"][0]["message"].get("tool_calls") or []
        except (KeyError, IndexError, TypeError, AttributeError):
            raise LLMError(f"{self.url}: no choices in the answer") from None
        for call in calls:
            fn = call.get("function") if isinstance(call, dict) else None
            if isinstance(fn, dict) and isinstance(fn.get("name"), str):
                return fn["name"]
        return None
