"""Command line: ``python -m run_bash {check,sandbox,policy,doctor} …`` (see :help run_bash-cli)."""

from __future__ import annotations

import sys

USAGE = """usage: python -m run_bash COMMAND [ARGS]

commands:
  check CMD | check --batch      print the pause-list verdict as JSON
  sandbox [--backend B] [--cwd DIR] [--config F.json] -- CMD...
                                 run CMD under the effective sandbox policy
  policy [--backend B] [--config F.json]
                                 print the effective sandbox policy as JSON
  doctor                         print what :checkhealth run_bash shows
"""


def doctor(argv: list[str]) -> int:
    import asyncio
    import json

    from run_bash.config import parse_config
    from run_bash.health import report
    from run_bash.sessions import SessionManager

    config = parse_config({})
    if argv[:1] == ["--config"] and len(argv) > 1:
        with open(argv[1]) as f:
            config = parse_config(json.load(f))
    loop = asyncio.new_event_loop()
    mgr = SessionManager(config, loop=loop)
    try:
        worst = 0
        for item in report(config, mgr):
            level = item["level"]
            if level == "start":
                print(f"\n== {item['msg']}")
                continue
            worst = max(worst, {"error": 2, "warn": 1}.get(level, 0))
            print(f"{level.upper():5} {item['msg']}")
            if item["advice"]:
                print(f"      advice: {item['advice']}")
        return 1 if worst == 2 else 0
    finally:
        mgr.close_now()
        loop.close()


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(USAGE, end="")
        return 0 if argv else 2
    cmd, rest = argv[0], argv[1:]
    if cmd == "check":
        from run_bash.checker_cli import main as check_main

        return check_main(rest)
    if cmd in ("sandbox", "policy"):
        from run_bash.sandbox.cli import main as sandbox_main

        return sandbox_main([cmd, *rest])
    if cmd == "doctor":
        return doctor(rest)
    sys.stderr.write(f"run_bash: unknown command {cmd!r}\n{USAGE}")
    return 2


if __name__ == "__main__":
    sys.exit(main())
