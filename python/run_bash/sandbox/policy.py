"""The effective sandbox policy: environment (and, for the confining backends, fs/net/limits).

Pure apart from reading the process environment it is given.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Mapping
from typing import Any

from run_bash.sandbox.proc import SESSION_TAG

# Names passed from the user's environment by default.
ENV_ALLOW = ("PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "TZ", "SHELL")
ENV_ALLOW_GLOBS = ("LC_*",)

# Set for every command: nothing waits for a terminal, an editor, a pager or a password.
ANTI_HANG_ENV = {
    "TERM": "dumb",
    "PAGER": "cat",
    "GIT_PAGER": "cat",
    "GH_PAGER": "cat",
    "MANPAGER": "cat",
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_EDITOR": "true",
    "GIT_SEQUENCE_EDITOR": "true",
    "EDITOR": "true",
    "VISUAL": "true",
    "NO_COLOR": "1",
    "DEBIAN_FRONTEND": "noninteractive",
    "SSH_ASKPASS_REQUIRE": "never",
}

# Names that look like secrets or like handles to outside services; never passed, even when asked.
SECRET_NAME_RE = re.compile(
    r"(TOKEN|SECRET|PASSW(OR)?D|PASSPHRASE|CREDENTIAL|API_?KEY|ACCESS_?KEY|PRIVATE_?KEY|AUTH|"
    r"SESSION_?KEY|COOKIE|_PAT$|^PAT$|^AWS_|^AZURE_|^GCP_|^GOOGLE_APPLICATION|^OPENAI|^ANTHROPIC|"
    r"^GEMINI|^GH_|^GITHUB_|^GITLAB_|^NPM_|^PYPI_|^HF_|^HUGGING)",
    re.IGNORECASE,
)
SOCKET_NAMES = {
    "NVIM",
    "NVIM_LISTEN_ADDRESS",
    "SSH_AUTH_SOCK",
    "SSH_AGENT_PID",
    "GPG_AGENT_INFO",
    "DBUS_SESSION_BUS_ADDRESS",
    "DBUS_SYSTEM_BUS_ADDRESS",
    "TMUX",
    "TMUX_PANE",
    "STY",
    "DISPLAY",
    "WAYLAND_DISPLAY",
    "XAUTHORITY",
    "XDG_RUNTIME_DIR",
    "DOCKER_HOST",
    "KITTY_LISTEN_ON",
    "WEZTERM_UNIX_SOCKET",
    "ALACRITTY_SOCKET",
}


def is_blocked_name(name: str) -> bool:
    """True for names that look like secrets or sockets to outside services."""
    return name in SOCKET_NAMES or bool(SECRET_NAME_RE.search(name))


def build_env(
    config: Mapping[str, Any],
    *,
    tmpdir: str,
    session_id: str,
    base_env: Mapping[str, str],
) -> tuple[dict[str, str], list[str]]:
    """Return the command's environment and the names dropped although the user asked to pass them."""
    env_cfg = config.get("sandbox", {}).get("env", {}) if config else {}
    wanted = list(env_cfg.get("pass", []))
    env: dict[str, str] = {}
    for name, value in base_env.items():
        if name in ENV_ALLOW or any(fnmatch.fnmatchcase(name, g) for g in ENV_ALLOW_GLOBS):
            env[name] = value
    dropped: list[str] = []
    for pattern in wanted:
        for name, value in base_env.items():
            if fnmatch.fnmatchcase(name, pattern):
                if is_blocked_name(name):
                    dropped.append(name)
                else:
                    env[name] = value
    env.update(ANTI_HANG_ENV)
    # Values in `set` are written by the user in their config, not inherited: they are kept.
    env.update(env_cfg.get("set", {}))
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    env["TMPDIR"] = tmpdir
    env[SESSION_TAG] = session_id
    return env, sorted(set(dropped))
