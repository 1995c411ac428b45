"""Property tests: a dangerous command stays paused however it is wrapped, quoted or embedded,
and a safe command stays unpaused under the same transformations."""

from __future__ import annotations

import shlex

from hypothesis import given, settings
from hypothesis import strategies as st

from run_bash.checker import check, parse_commands

DANGEROUS = [
    ["rm", "-rf", "build"],
    ["rm", "--recursive", "/tmp/x"],
    ["git", "push", "--force", "origin", "main"],
    ["git", "reset", "--hard", "HEAD~1"],
    ["git", "clean", "-fd"],
    ["git", "push", "origin", "+main"],
    ["git", "checkout", "--", "file.py"],
    ["git", "stash", "drop"],
    ["dd", "if=/dev/zero", "of=/dev/sda"],
    ["mkfs.ext4", "/dev/sdb1"],
    ["kill", "-9", "1"],
    ["pkill", "node"],
    ["chmod", "-R", "777", "/etc"],
    ["systemctl", "stop", "nginx"],
    ["npm", "publish"],
    ["pip", "uninstall", "-y", "requests"],
    ["cargo", "publish"],
    ["shutdown", "now"],
]

SAFE = [
    ["ls", "-la"],
    ["rm", "-f", "a.o"],
    ["git", "status"],
    ["git", "push", "--force-with-lease"],
    ["git", "commit", "-m", "rm -rf / and git push --force"],
    ["echo", "git reset --hard"],
    ["grep", "-rn", "rm -rf", "."],
    ["cp", "-r", "a", "b"],
    ["docker", "rm", "-f", "web"],
    ["npm", "test"],
    ["pip", "install", "requests"],
    ["pytest", "-q"],
    ["make", "-j4"],
    ["chmod", "+x", "run.sh"],
]

# Wrappers that keep the wrapped command's meaning. "@@" is the command; "@Q" is it quoted.
# Command wrappers take one simple command; script wrappers take any script.
COMMAND_WRAPPERS = [
    "sudo @@",
    "sudo -u root -E @@",
    "doas @@",
    "env A=1 @@",
    "env -i PATH=/usr/bin @@",
    "exec @@",
    "nohup @@",
    "nice -n 10 @@",
    "timeout -k 5 30 @@",
    "time @@",
    "command @@",
    "stdbuf -oL @@",
    "ionice -c 3 @@",
    "setsid @@",
    "flock /tmp/lock @@",
    "/usr/bin/time -f %e @@",
]
# (template, result is a simple command)
SCRIPT_WRAPPERS = [
    ("bash -c @Q", True),
    ("sh -ec @Q", True),
    ("zsh -c @Q", True),
    ("su -c @Q root", True),
    ("eval @Q", True),
    ("watch -n 2 @Q", True),
    ("bash <<< @Q", False),
    ("( @@ )", False),
    ("{\n@@\n}", False),
    ("echo $( @@ )", False),
    ('echo "$( @@ )"', False),
    ("cat <( @@ )", False),
    ("if true; then\n@@\nfi", False),
    ("for x in 1 2; do\n@@\ndone", False),
    ("while true; do\n@@\ndone", False),
    ("case $v in *)\n@@\n;; esac", False),
    ("f() {\n@@\n}", False),
    ("true && @@", False),
    ("false || @@", False),
    ("ls | @@", False),
    ("@@ &", False),
    ("[[ -n $x ]] && @@", False),
]

FILLERS = [
    "ls -la",
    "cd src",
    "echo 'rm -rf /'",
    "git status",
    "make test",
    "X=1",
    "cat > f <<'EOF'\ngit push --force\nEOF",
    'for f in *.py; do wc -l "$f"; done',
    "(( n += 1 ))",
    "[[ -f x ]]",
    "# rm -rf /",
    'printf "%s\\n" "$HOME"',
]
SEPARATORS = ["; ", " && ", " || ", "\n", " | ", " & "]


def _render(word: str, style: int) -> str:
    """Spell ``word`` in one of several quoting styles that all mean the same word to bash."""
    if style == 0:
        return shlex.quote(word)
    if style == 1:
        return "'" + word.replace("'", "'\\''") + "'"
    if style == 2:
        escaped = "".join("\\" + c if c in '"\\$`' else c for c in word)
        return '"' + escaped + '"'
    if style == 3:
        return "".join("\\" + c if c not in "\n" else "'\n'" for c in word)
    if style == 4:
        return "$'" + "".join(f"\\x{ord(c):02x}" for c in word) + "'"
    half = len(word) // 2
    return _render(word[:half], (style + 1) % 5) + _render(word[half:], (style + 2) % 5)


@st.composite
def spelled(draw: st.DrawFn, pool: list[list[str]]) -> tuple[list[str], str]:
    argv = draw(st.sampled_from(pool))
    styles = draw(st.lists(st.integers(0, 5), min_size=len(argv), max_size=len(argv)))
    return argv, " ".join(_render(w, s) for w, s in zip(argv, styles, strict=True))


@st.composite
def wrapped(draw: st.DrawFn, cmd: str) -> str:
    """Wrap ``cmd`` up to three times, each wrapper fitting what it wraps."""
    simple = True
    for _ in range(draw(st.integers(0, 3))):
        if simple and draw(st.booleans()):
            template = draw(st.sampled_from(COMMAND_WRAPPERS))
        else:
            template, simple = draw(st.sampled_from(SCRIPT_WRAPPERS))
        cmd = template.replace("@Q", shlex.quote(cmd)).replace("@@", cmd)
    return cmd


@st.composite
def embedded(draw: st.DrawFn, cmd: str) -> str:
    before = draw(st.lists(st.sampled_from(FILLERS), max_size=3))
    after = draw(st.lists(st.sampled_from(FILLERS), max_size=3))
    parts = [*before, cmd, *after]
    seps = draw(st.lists(st.sampled_from(SEPARATORS), min_size=len(parts), max_size=len(parts)))
    out = parts[0]
    for sep, part in zip(seps, parts[1:], strict=False):
        # A heredoc's delimiter line must stand alone, and a comment runs to the end of its line.
        # and `&&`, `||` or `|` need a command after them, not a comment.
        alone = out.endswith("\nEOF") or "#" in out.rsplit("\n", 1)[-1]
        alone = alone or (part.startswith("#") and sep.strip() in ("&&", "||", "|"))
        out += ("\n" if alone else sep) + part
    return out


@settings(max_examples=300, deadline=None)
@given(spelled(DANGEROUS), st.data())
def test_dangerous_command_stays_paused(
    spelled_cmd: tuple[list[str], str], data: st.DataObject
) -> None:
    _, cmd = spelled_cmd
    script = data.draw(embedded(data.draw(wrapped(cmd))))
    verdict = check(script)
    assert verdict.pause, (script, verdict)
    assert verdict.rule is not None, (script, verdict)


@settings(max_examples=300, deadline=None)
@given(spelled(SAFE), st.data())
def test_safe_command_stays_unpaused(
    spelled_cmd: tuple[list[str], str], data: st.DataObject
) -> None:
    _, cmd = spelled_cmd
    script = data.draw(embedded(data.draw(wrapped(cmd))))
    verdict = check(script)
    assert not verdict.pause, (script, verdict)


@settings(max_examples=200, deadline=None)
@given(spelled(DANGEROUS + SAFE))
def test_quoting_resolves_to_the_same_argv(spelled_cmd: tuple[list[str], str]) -> None:
    argv, cmd = spelled_cmd
    assert parse_commands(cmd) == [argv]


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("rm -f'\"\\$`(){};|&<>\n#*?[]=x!")), max_size=40))
def test_arbitrary_input_never_crashes(text: str) -> None:
    verdict = check(text)
    assert isinstance(verdict.pause, bool) and isinstance(verdict.reason, str)
