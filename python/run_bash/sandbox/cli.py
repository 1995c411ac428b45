"""``python -m run_bash sandbox …`` and ``python -m run_bash policy …``: the sandbox outside Neovim.

``sandbox [--backend B] [--cwd DIR] [--config FILE.json] [--timeout S] -- CMD…`` runs ``CMD`` under
the effective policy (one argument is a bash script; several are a command and its arguments,
quoted as given), passing its stdout and stderr through and exiting with its exit code (128+N when
killed by signal N; 124 after the timeout; 125 when the sandbox cannot be built). It keeps the
plugin's lifetime guarantees (``keeper.py``): nothing the command started outlives it, whether it
ends, times out, is interrupted or the command line itself is killed with SIGKILL.

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
from typing import TYPE_CHECKING, Any

from run_bash.config import Config
from run_bash.errors import RunBashError

if TYPE_CHECKING:
    from run_bash.sandbox.base import Choice

EXIT_SANDBOX_ERROR = 125
USAGE_SANDBOX = (
    "usage: python -m run_bash sandbox [--backend B] [--cwd DIR] [--config F.json] "
    "[--timeout S] -- CMD..."
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
        if name in ("--backend", "--cwd", "--config", "--timeout"):
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
            namespace = {k: req[k] for k in ("mount_ns", "reexpose", "binds", "hide", "gate")}
            namespace["network"] = (
                "the project's own network namespace"
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


def _choose(config: Config) -> Choice:
    from run_bash.sandbox.base import choose_backend, get_backend

    return choose_backend(config.sandbox.backend, lambda name: get_backend(name, config))


def policy_main(argv: list[str]) -> int:
    from run_bash.sandbox.base import get_backend
    from run_bash.sandbox.policy import build_env, build_policy

    opts, rest = _parse(argv, USAGE_POLICY)
    if rest:
        raise RunBashError(f"unexpected arguments: {' '.join(rest)}\n{USAGE_POLICY}")
    config = _config(opts)
    cwd = os.path.abspath(opts.get("cwd") or os.getcwd())
    chosen = _choose(config)
    name = chosen.backend.name if config.sandbox.backend == "auto" else config.sandbox.backend
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
            "chosen_because": chosen.reason,
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
    """Run a command under the sandbox, kept like the host's runs (see the module docstring)."""
    opts, rest = _parse(argv, USAGE_SANDBOX)
    if not rest:
        raise RunBashError(f"no command given\n{USAGE_SANDBOX}")
    config = _config(opts)
    cwd = os.path.abspath(opts.get("cwd") or os.getcwd())
    if not os.path.isdir(cwd):
        raise RunBashError(f"working directory {cwd} does not exist")
    timeout = _timeout(opts)
    cmd = rest[0] if len(rest) == 1 else shlex.join(rest)
    from run_bash.keeper import fork_kept
    from run_bash.statedir import make_temp_root

    temp_root = make_temp_root()
    sys.stdout.flush()
    sys.stderr.flush()
    # Everything that may start threads (a backend's probe, sandlock) happens in the worker.
    return fork_kept(lambda: _run(config, cmd, cwd, temp_root, timeout), [temp_root])


def _timeout(opts: dict[str, str]) -> float | None:
    if "timeout" not in opts:
        return None
    try:
        value = float(opts["timeout"])
    except ValueError:
        value = -1.0
    if not 0 < value <= 86400:
        raise RunBashError(
            f"--timeout should be a number of seconds (0 < N <= 86400), not {opts['timeout']!r}"
        )
    return value


def _run(config: Config, cmd: str, cwd: str, temp_root: str, timeout: float | None) -> int:
    """The worker: run ``cmd`` under the configured backend and stop it and everything it started
    when it ends, on ``timeout`` (exit 124), on SIGINT/SIGTERM/SIGHUP, or when the keeper dies."""
    import threading
    import time

    from run_bash.sandbox import proc
    from run_bash.sandbox.base import RunSpec
    from run_bash.sandbox.guard import Keeper
    from run_bash.sandbox.guardscope import quarantine_dir
    from run_bash.sandbox.policy import build_env, build_policy

    stop: list[int] = []
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda signum, _frame: stop.append(signum))
    chosen = _choose(config)
    backend = chosen.backend
    if chosen.error or chosen.unavailable:
        # Nobody here to ask: without the sandbox it wanted, the command does not run.
        print(f"run_bash: {chosen.error or chosen.reason}", file=sys.stderr)
        print("run_bash: `--backend none` runs it without a sandbox", file=sys.stderr)
        return EXIT_SANDBOX_ERROR
    problems = backend.validate()
    if problems:
        print("run_bash: " + "; ".join(problems), file=sys.stderr)
        return EXIT_SANDBOX_ERROR
    sid = f"cli{os.getpid()}"
    tmpdir = tempfile.mkdtemp(prefix=f"tmp-{sid}-", dir=temp_root)
    launched = None
    keeper = Keeper(quarantine_dir(os.environ))
    try:
        env, dropped = build_env(config, tmpdir=tmpdir, session_id=sid, base_env=os.environ)
        for n in dropped:
            print(f"run_bash: environment variable {n} looks secret; not passed", file=sys.stderr)
        policy = build_policy(config, cwd, discovery=keeper.discovery) if backend.isolates else None
        scope = (
            keeper.prepare(sid, policy.host_read, policy.readable)
            if policy and policy.host_read
            else None
        )
        spec = RunSpec(
            cmd=cmd,
            cwd=cwd,
            env=env,
            stdout_fd=sys.stdout.fileno(),
            tmpdir=tmpdir,
            session_id=sid,
            policy=policy,
            stderr_fd=sys.stderr.fileno(),
        )
        launched = backend.spawn(spec)
        tracker = proc.Tracker(sid, launched.pid)
        if scope is not None:

            def kill() -> None:
                launched.terminate(signal.SIGKILL)
                tracker.signal(9)

            scope.attach(kill)
        status: list[int] = []
        done = threading.Event()

        def reap() -> None:
            status.append(launched.reap())
            done.set()

        # The wait runs in a thread so that this one stays free for signals and the timeout.
        threading.Thread(target=reap, name="run_bash-reap", daemon=True).start()
        deadline = time.monotonic() + timeout if timeout is not None else None
        stopped_at: float | None = None
        timed_out = False
        while not done.wait(0.05):
            now = time.monotonic()
            if stopped_at is None and (stop or (deadline is not None and now >= deadline)):
                timed_out = not stop
                stopped_at = now
                launched.terminate(signal.SIGTERM)
                tracker.signal(signal.SIGTERM)
            elif stopped_at is not None and now - stopped_at >= proc.KILL_GRACE_S:
                launched.terminate(signal.SIGKILL)
                tracker.signal(signal.SIGKILL)
        # What the command left behind (setsid, double forks): tagged first, then everything
        # below this process (it is their subreaper).
        proc.sweep([tracker], grace_s=0.5)
        proc.sweep_all_descendants(grace_s=0.3)
        launched.close()  # what the run held goes; the notices say what its cgroup saw
        for note in [*launched.notices, *keeper.finish(sid)]:
            print(f"run_bash: {note}", file=sys.stderr)
        if timed_out:
            print(f"run_bash: timed out after {timeout:g} s", file=sys.stderr)
            return 124
        code = status[0] if status else -int(signal.SIGKILL)
        return code if code >= 0 else 128 - code
    except RunBashError as e:
        print(f"run_bash: {e}", file=sys.stderr)
        return EXIT_SANDBOX_ERROR
    finally:
        if launched is not None:
            launched.close()
        from run_bash.sandbox.cgroups import CGROUPS

        CGROUPS.close()
        keeper.finish(sid)
        keeper.shutdown()
        shutil.rmtree(tmpdir, ignore_errors=True)
        sys.stdout.flush()
        sys.stderr.flush()


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
