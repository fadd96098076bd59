"""The semantic tool-choice grader: cosine similarity of WordLlama sentence embeddings.

Each tool's text is the one the lexical grader indexes (:func:`lexical.tool_text`: its name,
its description, and every parameter's name and description), with the identifiers written
as words (``get_user_id`` / ``getUserId`` → ``get user id``) so that the tokenizer sees the
words a question uses. Query and tool texts are embedded with WordLlama's ``l2_supercat``
model at 256 dimensions (average-pooled token embeddings, ``wordllama`` 0.4), and the tools
are ranked by the cosine of their vector with the query's; ties keep catalog order. A text with
no tokens has the zero vector and scores 0.

The model's weights (``l2_supercat_256.safetensors``, 16 MB) and its tokenizer file ship inside
the ``wordllama`` wheel, and are read from there with downloads disabled: the grader never
touches the network. (Left to its defaults, ``WordLlama.load()`` looks for the tokenizer in
``wordllama/tokenizer/`` while the wheel puts it in ``wordllama/tokenizers/``, then falls back
to a download from Hugging Face; pointing its ``cache_dir`` at the package directory makes it
find both files where they are.) Deterministic: every text is embedded on its own, so its
vector does not depend on the texts batched with it, and vectors are cached by text.

``wordllama`` (and numpy, safetensors, tokenizers, which it pulls in) is imported on first
use only: ``pip install 'caveman-engine[evals]'``.
"""

from __future__ import annotations

import re
from typing import Any

from .lexical import tool_text

MODEL = "l2_supercat"
DIM = 256

_IDENT = re.compile(r"[A-Za-z0-9]+")
_PART = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")


class SemanticUnavailable(RuntimeError):
    """wordllama is missing or its model cannot be loaded (one line, for the CLI)."""


def available() -> bool:
    """Is ``wordllama`` installed? (Looks it up without importing it.)"""
    import importlib.util

    try:
        return importlib.util.find_spec("wordllama") is not None
    except (ImportError, ValueError):
        return False


def _load_model():
    try:
        import wordllama
        from wordllama import WordLlama
    except ImportError:
        raise SemanticUnavailable(
            "the semantic grader needs wordllama: pip install 'caveman-engine[evals]'") from None
    from pathlib import Path

    package = Path(wordllama.__file__).parent
    try:
        return WordLlama.load(MODEL, cache_dir=package, dim=DIM, disable_download=True)
    except (OSError, ValueError) as exc:
        raise SemanticUnavailable(f"cannot load the wordllama model from {package}: {exc}") from None


def load_model():
    """WordLlama's model, from the files in its wheel. Importing wordllama configures logging
    (its ``inference`` module calls ``logging.basicConfig(level=INFO)``, a stderr handler on the
    root logger); the root logger's handlers and level are put back as they were."""
    import logging

    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        return _load_model()
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)


def plain_words(text: str) -> str:
    """``text`` with identifiers split into words: ``get_user_id`` / ``getUserID`` → ``get user
    id``, ``math.hypot`` → ``math hypot``. Other characters are kept."""
    def split(m: re.Match) -> str:
        return " ".join(_PART.findall(m.group(0)))

    return _IDENT.sub(split, text.replace("_", " ").replace(".", " "))


class Embedder:
    """Unit-length embeddings of texts, cached by text."""

    def __init__(self, model=None) -> None:
        self.model = model if model is not None else load_model()
        self._cache: dict[str, Any] = {}

    def vector(self, text: str):
        v = self._cache.get(text)
        if v is None:
            import numpy as np

            v = self.model.embed([text], norm=False)[0].astype(np.float64)
            n = float(np.linalg.norm(v))
            v = v / n if n > 0 else np.zeros_like(v)
            self._cache[text] = v
        return v

    def similarities(self, query: str, texts: list[str]) -> list[float]:
        q = self.vector(query)
        return [float(q @ self.vector(t)) for t in texts]


_shared: Embedder | None = None


def embedder() -> Embedder:
    """The process's embedder (the model is loaded once)."""
    global _shared
    if _shared is None:
        _shared = Embedder()
    return _shared


def rank(query: str, catalog: Any, emb: Embedder | None = None) -> list[tuple[str, float]]:
    """``[(tool name, cosine)]`` best first (ties in catalog order)."""
    from ..catalog import envelope

    emb = emb or embedder()
    tools = envelope.iter_tools(catalog)
    scores = emb.similarities(plain_words(query), [plain_words(tool_text(t)) for t in tools])
    order = sorted(range(len(tools)), key=lambda i: -scores[i])
    return [(tools[i].name, scores[i]) for i in order]


class SemanticGrader:
    name = "semantic"

    def __init__(self, emb: Embedder | None = None) -> None:
        self.emb = emb or embedder()

    def choose(self, case, catalog: Any) -> str | None:
        ranked = rank(case.query, catalog, self.emb)
        return ranked[0][0] if ranked else None
