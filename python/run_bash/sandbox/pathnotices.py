"""What to tell the user about a directory kept read-only as a search path (``pathguard``): why
it is kept, and the notices of a run that failed writing one."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable

from run_bash.paths import is_under
from run_bash.sandbox.pathguard import OPTION, PathDir


def _show(path: str, cwd: str) -> str:
    return os.path.relpath(path, cwd) if is_under(path, cwd) and path != cwd else path


def reason(pd: PathDir, cwd: str) -> str:
    """Why ``pd``'s unit is kept, and the option that allows writing it."""
    if pd.var != "PATH":
        return (
            f"{_show(pd.path, cwd)} is on your {pd.var} ({pd.reads}), so what a run writes there "
            f"would run outside the sandbox; `{OPTION}` lets runs write it"
        )
    return (
        f"{_show(pd.path, cwd)} is on your PATH, so what a run writes there would run outside the "
        f"sandbox the next time you use it; `{OPTION}` lets runs write it"
    )


_READ_ONLY_RE = re.compile(r"read-only file system|\bEROFS\b", re.IGNORECASE)


def refusal_notices(
    units: Iterable[PathDir], output: str, exit_code: int | None, cwd: str
) -> list[str]:
    """What to tell when a run that failed seems to have tried to write a read-only PATH unit:
    its output says "read-only file system" (or names the unit)."""
    if not exit_code:
        return []
    hit = bool(_READ_ONLY_RE.search(output))
    out: list[str] = []
    for pd in units:
        if not pd.sealed:
            continue
        if not pd.outside:
            rel = _show(pd.unit, cwd)
            if hit or pd.unit in output or rel in output:
                out.append(f"{rel} is read-only inside the sandbox: {reason(pd, cwd)}")
        # What a program on PATH loads with it: only the one the output names a file of.
        for d, why, program in pd.kept if hit else ():
            rel = _show(d, cwd)
            if f"{d}/" in output or f"{rel}/" in output:
                out.append(
                    f"{rel} is read-only inside the sandbox: {why}; adding {program} to "
                    f"`{OPTION}` lets runs change it"
                )
    return list(dict.fromkeys(out))
