"""Where a host's start-up time goes: monotonic marks from the moment Lua started the job until
the host said ``ready``, logged once as one line (``make bench ARGS=coldstart`` reads it).

Lua passes the time it called ``jobstart`` (``RUN_BASH_STARTED_NS``, ``vim.uv.hrtime()``: the same
clock as ``time.monotonic_ns()``); each mark is in milliseconds from it. Costs nothing worth
measuring: a dict of integers and one log line.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping

STARTED_ENV = "RUN_BASH_STARTED_NS"
_MARKS: list[tuple[str, int]] = []


def mark(name: str) -> None:
    """Note that start-up reached ``name`` now."""
    _MARKS.append((name, time.monotonic_ns()))


def report(environ: Mapping[str, str] = os.environ) -> str:
    """The marks so far as ``name +ms`` from the job's start (or from the first mark when Lua did
    not say when it started the job), e.g. ``interpreter +31.0, rpc +72.4, ready +158.9``."""
    try:
        origin = int(environ.get(STARTED_ENV, ""))
    except ValueError:
        origin = _MARKS[0][1] if _MARKS else 0
    return ", ".join(f"{name} +{(ns - origin) / 1e6:.1f}" for name, ns in _MARKS)
