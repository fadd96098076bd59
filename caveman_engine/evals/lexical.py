"""The built-in tool-choice grader: BM25 over each tool's words. Offline and deterministic.

A tool's document is its name, its description, and the name and description of every
parameter (nested object properties and array items included). Words are lower-cased ASCII
letter/digit runs, with ``snake_case``, ``dotted.names`` and ``camelCase`` split into their parts;
common English function words (the list below, written for this grader) are dropped. The query
is tokenised the same way. Scores are Okapi BM25 (k1 = 1.2, b = 0.75, idf = ln(1 + (N − n + ½) /
(n + ½)), never negative) over the tools of one catalog; ties keep catalog order.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from typing import Any

K1 = 1.2
B = 0.75

# Words too common to tell tools apart. Written for this grader: articles, pronouns,
# auxiliaries, prepositions, conjunctions and politeness words of requests.
STOP_WORDS = frozenset("""
a an the this that these those it its s t d ll re ve m
i me my we our us you your he him his she her they them their
is am are was were be been being do does did done have has had having
will would shall should can could may might must
and or but nor so if then than as because while
of to in on at by for from with without into onto about over under between through
up down out off per via
what which who whom whose when where why how
not no yes all any some each every both either neither
please kindly just also too very
there here
let lets want wants need needs like
given using
""".split())

_WORD = re.compile(r"[A-Za-z0-9]+")
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")


def words(text: str) -> list[str]:
    """Lower-cased words of ``text`` without stop words (camelCase and snake_case split)."""
    out = []
    for run in _WORD.findall(text):
        for part in _CAMEL.findall(run):
            w = part.lower()
            if w not in STOP_WORDS:
                out.append(w)
    return out


def _schema_text(schema: Any, out: list[str]) -> None:
    stack = [schema]
    while stack:
        s = stack.pop()
        if not isinstance(s, dict):
            continue
        props = s.get("properties")
        if isinstance(props, dict):
            for name, sub in props.items():
                out.append(str(name))
                if isinstance(sub, dict) and isinstance(sub.get("description"), str):
                    out.append(sub["description"])
                stack.append(sub)
        items = s.get("items")
        if isinstance(items, dict):
            stack.append(items)
        for key in ("anyOf", "oneOf", "allOf"):
            branches = s.get(key)
            if isinstance(branches, list):
                stack.extend(branches)


def tool_text(tool) -> str:
    """The words of one :class:`caveman_engine.catalog.envelope.Tool`."""
    c = tool.container
    parts = [tool.name]
    if isinstance(c.get("description"), str):
        parts.append(c["description"])
    schemas = tool.schemas()
    if schemas:
        _schema_text(schemas[0][1], parts)
    return "\n".join(parts)


def bm25(query: list[str], docs: list[list[str]]) -> list[float]:
    """Okapi BM25 score of each document for the query."""
    n = len(docs)
    if n == 0:
        return []
    avgdl = sum(len(d) for d in docs) / n or 1.0
    df: Counter = Counter()
    for d in docs:
        df.update(set(d))
    terms = Counter(query)
    scores = []
    for d in docs:
        tf = Counter(d)
        norm = K1 * (1 - B + B * len(d) / avgdl)
        score = 0.0
        for term, qn in terms.items():
            f = tf.get(term, 0)
            if not f:
                continue
            idf = math.log(1 + (n - df[term] + 0.5) / (df[term] + 0.5))
            score += qn * idf * f * (K1 + 1) / (f + norm)
        scores.append(score)
    return scores


def rank(query: str, catalog: Any) -> list[tuple[str, float]]:
    """``[(tool name, score)]`` best first (ties in catalog order)."""
    from ..catalog import envelope

    tools = envelope.iter_tools(catalog)
    scores = bm25(words(query), [words(tool_text(t)) for t in tools])
    order = sorted(range(len(tools)), key=lambda i: -scores[i])
    return [(tools[i].name, scores[i]) for i in order]


class LexicalGrader:
    name = "lexical"

    def choose(self, case, catalog: Any) -> str | None:
        ranked = rank(case.query, catalog)
        return ranked[0][0] if ranked else None
