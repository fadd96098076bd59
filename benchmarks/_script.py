"""The console script under test: the one installed beside the running interpreter."""

from __future__ import annotations

import sys
from pathlib import Path


def console_script() -> str:
    beside = Path(sys.executable).with_name("caveman-engine")
    if not beside.exists():
        raise SystemExit(f"caveman-engine is not installed beside {sys.executable}")
    return str(beside)
