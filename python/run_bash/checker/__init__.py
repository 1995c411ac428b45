"""Pause-list checker: decides which commands need a human's approval. Pure: no pynvim, no I/O.

Public API (used by the host, the CLI and the Lua shim through the host):
    check(cmd: str, rules: Mapping | None = None) -> Verdict
    Verdict(pause: bool, reason: str, rule: str | None, command: str | None, commands: list[list[str]])
``commands`` lists every simple command the checker saw (argv after unwrapping), so Lua-function rules can be
evaluated in Lua.
"""
