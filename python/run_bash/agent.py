"""The arguments of the CodeCompanion tool, as the agent sends them (JSON), checked in one place.

``tool_args(raw)`` returns the normalized arguments or raises one ``UsageError`` whose text the agent
reads (after ``Error: ``). The limits are the runtime's (``config.MAX_*``), so the schema the agent
sees, this check and the runtime agree.
"""

from __future__ import annotations

from typing import Any

from run_bash.boundary import number
from run_bash.config import MAX_BG_AFTER_S, MAX_TIMEOUT_S, MAX_WAIT_S, as_table, describe
from run_bash.errors import UsageError
from run_bash.matching import compile_pattern
from run_bash.sessions import check_cmd, ready_pattern

ACTIONS = ("run", "kill", "output", "list", "wait")


def _number(args: dict[str, Any], name: str, unit: str = "seconds") -> float | None:
    """A number (whole numbers as int); agents sometimes send one as a string ("30")."""
    value = args.get(name)
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            pass
    n = number(name, value, unit)
    return int(n) if n is not None and n.is_integer() else n


def _string(raw: dict[str, Any], name: str) -> str | None:
    value = raw.get(name)
    if value is None or isinstance(value, str):
        return value
    raise UsageError(f"`{name}` should be a string, not {describe(value)}")


def tool_args(raw: object) -> dict[str, Any]:
    """Check and normalize the agent's arguments: ``{action, cmd?, session_id?, bg_after?,
    timeout?, tail?, wait_for?, skip_sandbox}`` (``bg_after`` 0 means foreground and is left
    out). A ``wait_for`` pattern is compiled here, so a bad one is refused before anything runs."""
    table = {} if raw is None else as_table(raw)
    if table is None:
        raise UsageError("the arguments should be a JSON object")
    # JSON null counts as absent; keys the schema does not have are ignored, as they always were.
    args = {k: v for k, v in table.items() if v is not None}
    action = _string(args, "action") or "run"
    if action not in ACTIONS:
        raise UsageError(f'unknown action "{action}": use one of {", ".join(ACTIONS)}')
    out: dict[str, Any] = {"action": action}
    if action in ("kill", "output", "wait"):
        sid = (_string(args, "session_id") or "").strip()
        if not sid:
            raise UsageError(f'`session_id` is required for action "{action}" (see action "list")')
        out["session_id"] = sid
        if action == "output" and "tail" in args:
            tail = _number(args, "tail", "lines")
            if tail is None or tail < 1 or tail != int(tail):
                raise UsageError(
                    f"`tail` should be a positive whole number of lines, not {args['tail']!r}"
                )
            out["tail"] = int(tail)
        if action == "wait":
            if "wait_for" in args:
                out["wait_for"] = compile_pattern(args["wait_for"]).pattern
            timeout = _number(args, "timeout")
            if timeout is not None:
                if not 1 <= timeout <= MAX_WAIT_S:
                    raise UsageError(
                        f"`timeout` of a wait must be 1..{MAX_WAIT_S} seconds, not {args['timeout']}"
                    )
                out["timeout"] = timeout
        return out
    if action == "list":
        return out
    cmd = _string(args, "cmd")
    if cmd is None or not cmd.strip():
        raise UsageError('`cmd` is required for action "run"')
    out["cmd"] = check_cmd(cmd)
    bg = _number(args, "bg_after")
    if bg is not None and bg > MAX_BG_AFTER_S:
        raise UsageError(
            f"`bg_after` cannot exceed {MAX_BG_AFTER_S} seconds, not {args['bg_after']}"
        )
    if bg is not None and bg < 0:
        raise UsageError(
            f"`bg_after` must be 0 (foreground) or 1..{MAX_BG_AFTER_S} seconds, "
            f"not {args['bg_after']}"
        )
    if bg:
        out["bg_after"] = bg  # 0 means foreground, as in the original plugin
    pattern = ready_pattern(args.get("wait_for"), bg or 0)  # None: absent (nulls were dropped)
    if pattern is not None:
        out["wait_for"] = pattern.pattern
    timeout = _number(args, "timeout")
    if timeout is not None:
        if not 1 <= timeout <= MAX_TIMEOUT_S:
            raise UsageError(f"`timeout` must be 1..{MAX_TIMEOUT_S} seconds, not {args['timeout']}")
        out["timeout"] = timeout
    skip = args.get("skip_sandbox", False)
    if not isinstance(skip, bool):
        raise UsageError(f"`skip_sandbox` should be true or false, not {describe(skip)}")
    out["skip_sandbox"] = skip
    return out
