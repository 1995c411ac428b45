"""``python -m run_bash sandbox …`` and ``python -m run_bash policy …``: the sandbox outside Neovim.

``sandbox [--backend B] [--cwd DIR] [--config FILE.json] -- CMD…`` runs ``CMD`` under the effective
policy (one argument is a bash script; several are a command and its arguments, quoted as given), passing its stdout and stderr through and
exiting with its exit code (128+N when killed by signal N; 125 when the sandbox cannot be built).

``policy [--backend B] [--cwd DIR] [--config FILE.json]`` prints the effective policy as JSON:
paths, network, environment names, limits, and what the backend makes of them.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import sys
import tempfile
from typing import Any

from run_bash.config import Config
from run_bash.errors import RunBashError

EXIT_SANDBOX_ERROR = 125
USAGE_SANDBOX = (
    "usage: python -m run_bash sandbox [--backend B] [--cwd DIR] [--config F.json] -- CMD..."
)
USAGE_POLICY = "usage: python -m run_bash policy [--backend B] [--cwd DIR] [--config F.json]"


def _parse(argv: list[str], usage: str) -> tuple[dict[str, str], list[str]]:
    opts: dict[str, str] = {}
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            return opts, argv[i + 1 :]
        if arg in ("-h", "--help"):
            raise SystemExit(usage)
        name, eq, value = arg.partition("=")
        if name in ("--backend", "--cwd", "--config"):
            if not eq:
                if i + 1 >= len(argv):
                    raise RunBashError(f"{name} needs a value\n{usage}")
                value = argv[i + 1]
                i += 1
            opts[name[2:]] = value
        elif arg.startswith("-"):
            raise RunBashError(f"unknown option {arg}\n{usage}")
        else:
            return opts, argv[i:]
        i += 1
    return opts, []


def _config(opts: dict[str, str]) -> Config:
    from run_bash.config import parse_config

    raw: dict[str, Any] = {}
    if "config" in opts:
        try:
            with open(opts["config"]) as f:
                raw = json.load(f)
        except OSError as e:
            raise RunBashError(f"cannot read --config {opts['config']}: {e.strerror}") from None
        except json.JSONDecodeError as e:
            raise RunBashError(f"--config {opts['config']} is not valid JSON: {e}") from None
        if not isinstance(raw, dict):
            raise RunBashError(f"--config {opts['config']} should hold a JSON object")
    if "backend" in opts:
        raw.setdefault("sandbox", {})["backend"] = opts["backend"]
    return parse_config(raw)


def _backend_view(backend: Any, policy: Any, cwd: str) -> dict[str, Any]:
    """What the backend would run, for the policy report (environment values left out)."""
    from run_bash.sandbox.base import RunSpec

    spec = RunSpec(
        cmd="CMD", cwd=cwd, env={}, stdout_fd=1, tmpdir="<private tmp>", session_id="policy"
    )
    try:
        if backend.name == "sandlock":
            from run_bash.sandbox.sandlock import Layout, host_network

            layout = Layout(backend.mount_ns, not host_network(policy))
            req, notes = backend.request(policy, spec, layout)
            kwargs = req["sandbox"]
            kwargs.pop("env", None)
            namespace = {k: req[k] for k in ("mount_ns", "reexpose", "self", "ro", "hide", "gate")}
            namespace["network"] = (
                "run_bash's own network namespace"
                if layout.shared_netns
                else "the host's, each loopback connect checked"
            )
            return {
                "sandbox": kwargs,
                "namespace": namespace,
                "argv": backend.argv("CMD"),
                "notes": notes,
            }
        if backend.name == "bubblewrap":
            return {"argv": backend.argv(policy, spec)}
    except Exception as e:  # a broken profile, a missing tool: report, do not crash
        return {"error": str(e)}
    return {}


def policy_main(argv: list[str]) -> int:
    from run_bash.sandbox.base import get_backend
    from run_bash.sandbox.policy import build_env, build_policy

    opts, rest = _parse(argv, USAGE_POLICY)
    if rest:
        raise RunBashError(f"unexpected arguments: {' '.join(rest)}\n{USAGE_POLICY}")
    config = _config(opts)
    cwd = os.path.abspath(opts.get("cwd") or os.getcwd())
    name = config.sandbox.backend
    backend = get_backend(name, config)
    avail = backend.availability()
    policy = build_policy(config, cwd)
    env, dropped = build_env(config, tmpdir="<private tmp>", session_id="<id>", base_env=os.environ)
    out: dict[str, Any] = {
        "backend": {
            "name": name,
            "available": avail.ok,
            "reason": avail.reason,
            "advice": avail.advice,
            "version": avail.version,
            "problems": backend.validate(),
            "warnings": backend.warnings(),
        },
        **policy.to_json(),
        "env": {"names": sorted(env), "dropped": dropped},
    }
    if backend.isolates:
        out["backend"]["effective"] = _backend_view(backend, policy, cwd)
    print(json.dumps(out, indent=2))
    return 0


def sandbox_main(argv: list[str]) -> int:
    from run_bash.sandbox import proc
    from run_bash.sandbox.base import RunSpec, get_backend
    from run_bash.sandbox.policy import build_env, build_policy

    opts, rest = _parse(argv, USAGE_SANDBOX)
    if not rest:
        raise RunBashError(f"no command given\n{USAGE_SANDBOX}")
    config = _config(opts)
    cwd = os.path.abspath(opts.get("cwd") or os.getcwd())
    if not os.path.isdir(cwd):
        raise RunBashError(f"working directory {cwd} does not exist")
    backend = get_backend(config.sandbox.backend, config)
    avail = backend.availability()
    if not avail.ok:
        print(f"run_bash: {backend.name} unavailable: {avail.reason}", file=sys.stderr)
        if avail.advice:
            print(f"run_bash: advice: {avail.advice}", file=sys.stderr)
        return EXIT_SANDBOX_ERROR
    problems = backend.validate()
    if problems:
        print("run_bash: " + "; ".join(problems), file=sys.stderr)
        return EXIT_SANDBOX_ERROR
    proc.set_child_subreaper()
    sid = f"cli{os.getpid()}"
    tmpdir = tempfile.mkdtemp(prefix="run_bash-cli-")
    os.chmod(tmpdir, 0o700)
    launched = None
    try:
        env, dropped = build_env(config, tmpdir=tmpdir, session_id=sid, base_env=os.environ)
        for n in dropped:
            print(f"run_bash: environment variable {n} looks secret; not passed", file=sys.stderr)
        policy = build_policy(config, cwd) if backend.isolates else None
        spec = RunSpec(
            cmd=rest[0] if len(rest) == 1 else shlex.join(rest),
            cwd=cwd,
            env=env,
            stdout_fd=sys.stdout.fileno(),
            tmpdir=tmpdir,
            session_id=sid,
            policy=policy,
            stderr_fd=sys.stderr.fileno(),
        )
        sys.stdout.flush()
        sys.stderr.flush()
        launched = backend.spawn(spec)
        tracker = proc.Tracker(sid, launched.pid)

        def forward(signum: int, _frame: Any) -> None:
            if launched is not None:
                launched.terminate(signum)

        for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(s, forward)
        status = launched.reap()
        proc.sweep([tracker], grace_s=0.5)
        for note in launched.notices:
            print(f"run_bash: {note}", file=sys.stderr)
        return status if status >= 0 else 128 - status
    except RunBashError as e:
        print(f"run_bash: {e}", file=sys.stderr)
        return EXIT_SANDBOX_ERROR
    finally:
        if launched is not None:
            launched.close()
        shutil.rmtree(tmpdir, ignore_errors=True)


def main(argv: list[str]) -> int:
    """Entry for ``python -m run_bash``: ``argv`` starts with "sandbox" or "policy"."""
    if not argv:
        print(USAGE_SANDBOX + "\n" + USAGE_POLICY, file=sys.stderr)
        return 2
    cmd, rest = argv[0], argv[1:]
    try:
        if cmd == "sandbox":
            return sandbox_main(rest)
        if cmd == "policy":
            return policy_main(rest)
    except RunBashError as e:
        print(f"run_bash: {e}", file=sys.stderr)
        return 2
    except SystemExit as e:
        print(e, file=sys.stderr)
        return 0
    print(f"run_bash: unknown command {cmd!r}", file=sys.stderr)
    return 2
