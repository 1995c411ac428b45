"""`python -m run_bash check`: print pause-list verdicts as JSON (or as text).

Usage:
    python -m run_bash check [--config FILE.json] [--text] [--] CMD...
    python -m run_bash check [--config FILE.json] --batch

``check CMD`` prints one JSON object ``{"pause", "reason", "rule", "command", "effect", "hits"}``
and exits 0 whatever the verdict (an error inside the checker pauses, with its details on
stderr). ``effect`` is "reversible" (undo covers every reason), "irreversible" or null (no pause);
``hits`` lists every reason with its rule, command, effect and targets. ``--text`` prints the
reasons as lines instead, each with its class. ``--batch`` reads one JSON-encoded command string
per stdin line and writes one verdict per line, in order; a line that is not a JSON string
yields a paused verdict saying so. ``--config`` reads a JSON file of plugin options and uses its
``pauselist`` key. Exit status 2 means a usage or configuration error.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from typing import Any, TextIO

from run_bash.checker import Verdict, check
from run_bash.checker.rules import validate_rules

USAGE = (
    "usage: python -m run_bash check [--config FILE.json] [--text] [--] CMD...\n"
    "       python -m run_bash check [--config FILE.json] --batch"
)
CLASSES = {"reversible": "reversible (undo covers it)", "irreversible": "irreversible"}


class _UsageError(Exception):
    pass


def _verdict_json(verdict: Verdict) -> str:
    if verdict.internal_error:
        # The verdict pauses and says so; the details are for whoever maintains the checker.
        print(f"run_bash: check: checker error: {verdict.internal_error}", file=sys.stderr)
    data = verdict.to_dict()
    keys = ("pause", "reason", "rule", "command", "effect", "hits")
    return json.dumps({k: data[k] for k in keys}, ensure_ascii=False)


def verdict_text(verdict: Verdict) -> str:
    """The verdict for people: whether it pauses, then each reason with its class."""
    if not verdict.pause:
        return f"runs without asking: {verdict.reason}"
    lines = [f"pauses, {CLASSES[verdict.effect or 'irreversible']}:"]
    for hit in verdict.hits or []:
        where = f" [{', '.join(hit.targets)}]" if hit.targets else ""
        lines.append(f"  {CLASSES[hit.effect]}: {hit.reason}{where}")
    return "\n".join(lines)


def _load_rules(path: str) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except OSError as err:
        raise _UsageError(f"cannot read {path}: {err.strerror or err}") from err
    except ValueError as err:
        raise _UsageError(f"{path} is not valid JSON: {err}") from err
    if not isinstance(data, Mapping):
        raise _UsageError(f"{path} should hold a JSON object of run_bash options")
    rules = data.get("pauselist") or {}
    if not isinstance(rules, Mapping):
        raise _UsageError("`pauselist` should be table")
    problems = validate_rules(rules)
    if problems:
        raise _UsageError("; ".join(problems))
    return dict(rules)


def _parse_args(argv: list[str]) -> tuple[bool, bool, str | None, list[str]]:
    batch = text = False
    config: str | None = None
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            return batch, text, config, argv[i + 1 :]
        if arg == "--batch":
            batch = True
        elif arg == "--text":
            text = True
        elif arg == "--config":
            if i + 1 >= len(argv):
                raise _UsageError("--config needs a file")
            config = argv[i + 1]
            i += 1
        elif arg.startswith("--config="):
            config = arg.split("=", 1)[1]
        elif arg in ("-h", "--help"):
            raise SystemExit(0)
        elif arg.startswith("-") and arg != "-":
            raise _UsageError(f"unknown option {arg} (use -- before a command starting with -)")
        else:
            return batch, text, config, argv[i:]
        i += 1
    return batch, text, config, []


def run_batch(rules: Mapping[str, Any] | None, stdin: TextIO, stdout: TextIO) -> None:
    """Answer one verdict line per input line."""
    for lineno, line in enumerate(stdin, start=1):
        try:
            cmd = json.loads(line)
        except ValueError:
            cmd = None
        if isinstance(cmd, str):
            verdict = check(cmd, rules)
        else:
            verdict = Verdict(True, f"input line {lineno} is not a JSON-encoded string")
        stdout.write(_verdict_json(verdict) + "\n")
        stdout.flush()


def main(argv: list[str]) -> int:
    """Run the ``check`` command with the arguments after ``check``; return the exit status."""
    try:
        batch, text, config, words = _parse_args(argv)
        rules = _load_rules(config) if config else None
        if batch and words:
            raise _UsageError("--batch reads commands from stdin; do not pass CMD too")
        if not batch and not words:
            raise _UsageError("no command given")
    except SystemExit:
        print(USAGE)
        print(__doc__.split("\n\n", 2)[2].strip())
        return 0
    except _UsageError as err:
        print(f"run_bash: check: {err}", file=sys.stderr)
        print(USAGE, file=sys.stderr)
        return 2
    if batch:
        run_batch(rules, sys.stdin, sys.stdout)
    elif text:
        verdict = check(" ".join(words), rules)
        _verdict_json(verdict)  # reports a checker error on stderr
        print(verdict_text(verdict))
    else:
        print(_verdict_json(check(" ".join(words), rules)))
    return 0
