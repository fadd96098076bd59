"""Evals: replay fixtures through the engine and grade what comes out.

``caveman-engine evals run [--fixtures DIR]`` (spec §1.10) compresses every fixture of a
manifest against a fresh in-memory store, checks that the original is recoverable byte for
byte, runs retention probes and graders, and prints a JSON report. The embedded fixtures
(``fixtures/manifest.yaml`` beside this file) cover every compressor the engine registers.

:mod:`.run` loads manifests and builds the report, :mod:`.graders` holds the offline graders,
:mod:`.cli` is the click group.
"""

from __future__ import annotations

from pathlib import Path

FIXTURES_DIR = Path(__file__).resolve().parent / "fixtures"

__all__ = ["FIXTURES_DIR"]
