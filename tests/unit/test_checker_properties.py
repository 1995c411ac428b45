"""Property tests: every member of a bypass class pauses, however it is wrapped, quoted, nested
or embedded; safe commands stay unpaused under the same transformations; no input makes an
exception escape the analysis (``strict=True`` lets one through, so these tests can fail)."""

from __future__ import annotations

import base64
import re
import shlex
import subprocess
from collections.abc import Callable

from hypothesis import given, settings
from hypothesis import strategies as st

from run_bash.checker import check, parse_commands
from run_bash.checker.rules import DEFAULT_RULES
from run_bash.checker.table import TABLE

from .checker_util import runs

DANGEROUS = [
    ["rm", "-rf", "build"],
    ["rm", "--recursive", "/tmp/x"],
    ["git", "push", "--force", "origin", "main"],
    ["git", "reset", "--hard", "HEAD~1"],
    ["git", "clean", "-fd"],
    ["git", "push", "origin", "+main"],
    ["git", "checkout", "--", "file.py"],
    ["git", "stash", "drop"],
    ["git", "branch", "-D", "topic"],
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
    ["truncate", "-s", "0", "db.sqlite"],
    ["rsync", "-a", "--delete", "src/", "dst/"],
    ["docker", "system", "prune", "-af"],
    ["kubectl", "delete", "ns", "prod"],
    ["terraform", "destroy"],
    ["find", ".", "-delete"],
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
    ["kubectl", "get", "pods"],
    ["rsync", "-av", "src/", "dst/"],
]

# Command runners: "@@" is the command's words.
COMMAND_WRAPPERS = [
    "sudo @@",
    "sudo -u root -E @@",
    "doas @@",
    "env A=1 @@",
    "env -i PATH=/usr/bin @@",
    "env - @@",
    "env -- - @@",
    "env 'odd name=1' @@",
    "exec @@",
    "nohup @@",
    "nice -n 10 @@",
    "timeout -k 5 30 @@",
    "time @@",
    "time -p -- @@",
    "command @@",
    "stdbuf -oL @@",
    "ionice -c 3 @@",
    "setsid @@",
    "flock /tmp/lock @@",
    "/usr/bin/time -f %e @@",
    "chrt 10 @@",
    "chrt -f 99 @@",
    "taskset 0x1 @@",
    "taskset -c 0,1 @@",
    "runuser -u root -- @@",
    "pkexec @@",
    "pkexec --user root @@",
    "strace -f -o /tmp/t @@",
    "ltrace -o /tmp/t @@",
    "fakeroot -- @@",
    "unshare -r @@",
    "nsenter -t 1 -m @@",
    "systemd-run --user --scope @@",
    "gosu root @@",
    "setpriv --reuid=0 @@",
    "xvfb-run -a @@",
    "prlimit --nofile=1024 @@",
    "bwrap --ro-bind / / --dev /dev @@",
    "uv run @@",
    "poetry run @@",
    "busybox @@",
]
# Wrappers taking any script. "@Q" is the script shell-quoted as one word; a callable builds the
# text itself. The flag says whether the result is still one simple command.
Template = str | Callable[[str], str]
SCRIPT_WRAPPERS: list[tuple[Template, bool]] = [
    ("bash -c @Q", True),
    ("sh -ec @Q", True),
    ("zsh -c @Q", True),
    ("tcsh -c @Q", True),
    ("fish -c @Q", True),
    ("su -c @Q root", True),
    ("runuser root -c @Q", True),
    ("sg wheel -c @Q", True),
    ("script -qc @Q /dev/null", True),
    ("eval @Q", True),
    ("watch -n 2 @Q", True),
    ("flock /tmp/l -c @Q", True),
    ("nix-shell --run @Q", True),
    ("tmux new-session -d @Q", True),
    ("tmux send-keys -t s @Q Enter", True),
    ("screen -dm bash -c @Q", True),
    ("parallel ::: @Q", True),
    ("trap @Q EXIT", False),
    ("bash <<< @Q", False),
    ("echo @Q | bash", False),
    ("bash < <(printf '%s\\n' @Q)", False),
    ("source <(echo @Q)", False),
    (". /dev/stdin < <(echo @Q)", False),
    (lambda c: f"echo {base64.b64encode(c.encode()).decode()} | base64 -d | bash", False),
    (lambda c: "git -c " + shlex.quote("alias.q=!" + c) + " q", False),
    (lambda c: "GIT_SSH_COMMAND=" + shlex.quote(c) + " git fetch", False),
    (lambda c: "git -c " + shlex.quote("core.pager=" + c) + " log", False),
    (lambda c: "PROMPT_COMMAND=" + shlex.quote(c) + " bash -i", False),
    (lambda c: "alias zz=" + shlex.quote(c) + "\nzz", False),
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
    ("coproc N {\n@@\n}", False),
    ("true && @@", False),
    ("false || @@", False),
    ("ls | @@", False),
    ("! @@", False),
    ("@@ &", False),
    ("[[ -n $x ]] && @@", False),
]
HEREDOC_WRAPPERS = [
    "bash <<'{D}'\n@@\n{D}",
    "cat <<'{D}' | sh\n@@\n{D}",
    "cat > /tmp/s{D}.sh <<'{D}'\n@@\n{D}\nbash /tmp/s{D}.sh",
    "cat > s{D}.sh <<'{D}'\n@@\n{D}\nchmod +x s{D}.sh && ./s{D}.sh",
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
    if style == 5 and len(word) > 1:
        # A line continuation inside a word disappears.
        return shlex.quote(word[:1]) + "\\\n" + shlex.quote(word[1:])
    half = len(word) // 2
    return _render(word[:half], (style + 1) % 5) + _render(word[half:], (style + 2) % 5)


@st.composite
def spelled(draw: st.DrawFn, pool: list[list[str]]) -> tuple[list[str], str]:
    argv = draw(st.sampled_from(pool))
    styles = draw(st.lists(st.integers(0, 6), min_size=len(argv), max_size=len(argv)))
    return argv, " ".join(_render(w, s) for w, s in zip(argv, styles, strict=True))


def _apply(template: Template, cmd: str) -> str:
    if callable(template):
        return template(cmd)
    return template.replace("@Q", shlex.quote(cmd)).replace("@@", cmd)


@st.composite
def wrapped(draw: st.DrawFn, cmd: str) -> str:
    """Wrap ``cmd`` up to three times, each wrapper fitting what it wraps."""
    simple = True
    for depth in range(draw(st.integers(0, 3))):
        kind = draw(st.integers(0, 4))
        if simple and kind < 2:
            cmd = _apply(draw(st.sampled_from(COMMAND_WRAPPERS)), cmd)
        elif kind == 2:
            template = draw(st.sampled_from(HEREDOC_WRAPPERS)).replace("{D}", f"EOF{depth}")
            cmd, simple = _apply(template, cmd), False
        else:
            template, simple = draw(st.sampled_from(SCRIPT_WRAPPERS))
            heredoc_last = re.fullmatch(r"EOF\d+", cmd.rsplit("\n", 1)[-1]) is not None
            if template == "@@ &" and (cmd.rstrip().endswith("&") or heredoc_last):
                template = "( @@ )"
            if template == "ls | @@" and cmd.startswith("!"):
                template = "( @@ )"  # `!` starts a pipeline, bash rejects it after `|`
            if heredoc_last and isinstance(template, str) and re.search(r"@@[^\n]", template):
                cmd += "\n"  # a heredoc's delimiter line must stand alone
            cmd = _apply(template, cmd)
    return cmd


@st.composite
def embedded(draw: st.DrawFn, cmd: str) -> str:
    before = draw(st.lists(st.sampled_from(FILLERS), max_size=3))
    after = draw(st.lists(st.sampled_from(FILLERS), max_size=3))
    parts = [*before, cmd, *after]
    seps = draw(st.lists(st.sampled_from(SEPARATORS), min_size=len(parts), max_size=len(parts)))
    out = parts[0]
    for sep, part in zip(seps, parts[1:], strict=False):
        last = out.rsplit("\n", 1)[-1]
        # A heredoc's delimiter line must stand alone, a comment runs to the end of its line,
        # `&&`, `||` and `|` need a command (not a comment) after them, and `&` ends a command.
        alone = re.fullmatch(r"EOF\d*", last) is not None or "#" in last
        alone = alone or out.rstrip().endswith("&") or out.endswith("\n}") or out.endswith("fi")
        alone = alone or (part.startswith("#") and sep.strip() in ("&&", "||", "|"))
        alone = alone or (part.startswith("!") and sep.strip() == "|")  # `!` starts a pipeline
        out += ("\n" if alone else sep) + part
    return out


def _paused_by_a_rule(script: str) -> None:
    verdict = check(script, strict=True)
    assert verdict.pause, (script, verdict)
    assert any(hit.rule is not None for hit in verdict.hits), (script, verdict)


@settings(max_examples=400, deadline=None)
@given(spelled(DANGEROUS), st.data())
def test_dangerous_command_stays_paused(
    spelled_cmd: tuple[list[str], str], data: st.DataObject
) -> None:
    _, cmd = spelled_cmd
    _paused_by_a_rule(data.draw(embedded(data.draw(wrapped(cmd)))))


@settings(max_examples=300, deadline=None)
@given(spelled(SAFE), st.data())
def test_safe_command_stays_unpaused(
    spelled_cmd: tuple[list[str], str], data: st.DataObject
) -> None:
    _, cmd = spelled_cmd
    script = data.draw(embedded(data.draw(wrapped(cmd))))
    verdict = check(script, strict=True)
    assert runs(verdict), (script, verdict)


@settings(max_examples=200, deadline=None)
@given(spelled(DANGEROUS + SAFE))
def test_quoting_resolves_to_the_same_argv(spelled_cmd: tuple[list[str], str]) -> None:
    argv, cmd = spelled_cmd
    assert parse_commands(cmd) == [argv]


# -- code in data -------------------------------------------------------------------------------

PAYLOADS = ["rm -rf build", "git push --force", "git reset --hard", "dd if=/dev/zero of=x"]
CARRIERS = ["a[$(@@)]", "a[`@@`]", "$(@@)", "x[0$(@@)]", "$(@@)+1"]
# How a string reaches a variable. "@S" is the string as one shell word.
PLACEMENTS = [
    "v=@S",
    "export v=@S",
    "declare v=@S",
    "local v=@S",
    "readonly v=@S",
    "read -r v <<< @S",
    "read -r v <<'END'\n@R\nEND",
    "printf -v v '%s' @S",
]
SINKS = [
    "(( v ))",
    "echo $(( v + 1 ))",
    "echo $[ v ]",
    "[[ $v -eq 0 ]]",
    "[[ $v -lt 2 ]]",
    "let v",
    "let 'w = v * 2'",
    "declare -i n; n=$v",
    "echo ${!v}",
    "declare -n r=$v; echo $r",
    'echo "${arr[$v]}"',
    "arr[v]=1",
    "echo ${s:v}",
    "for ((i = v; i < 1; i++)); do :; done",
    'echo "${v@P}"',
    'PS4="$v"; set -x; true',
    "bash -c '(( v ))'",
    "case 1 in $((v))) ;; esac",
]


def _word(text: str, style: int) -> str:
    if style == 0:
        return shlex.quote(text)
    if style == 1:
        return '"' + "".join("\\" + c if c in '"\\$`' else c for c in text) + '"'
    if style == 2:
        return "$'" + "".join(f"\\x{ord(c):02x}" for c in text) + "'"
    return "".join("\\" + c if not c.isalnum() else c for c in text)


@st.composite
def carrier_script(draw: st.DrawFn, payload: str, sink: bool) -> str:
    text = draw(st.sampled_from(CARRIERS)).replace("@@", payload)
    placement = draw(st.sampled_from(PLACEMENTS))
    placed = placement.replace("@S", _word(text, draw(st.integers(0, 3)))).replace("@R", text)
    use = draw(st.sampled_from(SINKS)) if sink else 'echo "$v"'
    sep = "\n" if "END" in placed else draw(st.sampled_from(["; ", " && ", "\n"]))
    return placed + sep + use


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(PAYLOADS), st.data())
def test_code_in_a_string_that_reaches_an_evaluation_pauses(payload: str, data: st.DataObject):
    script = data.draw(carrier_script(payload, sink=True))
    _paused_by_a_rule(data.draw(embedded(script)))


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(PAYLOADS), st.data())
def test_code_in_a_string_that_is_only_printed_does_not_pause(payload: str, data: st.DataObject):
    script = data.draw(carrier_script(payload, sink=False))
    verdict = check(script, strict=True)
    assert runs(verdict), (script, verdict)


# -- rebound names ------------------------------------------------------------------------------

REBINDINGS = [
    "hash -p /bin/rm @N; @N -rf x",
    "hash -p /usr/bin/rm @N\n@N -rf x",
    "BASH_CMDS[@N]=/bin/rm; @N -rf x",
    "BASH_CMDS=([@N]=/usr/bin/rm); @N -rf x",
    "alias @N='rm -rf'\n@N x",
    "shopt -s expand_aliases; alias @N='rm -rf'; @N x",
    "BASH_ALIASES[@N]='rm -rf'; @N x",
    "f() { @N -rf x; }; hash -p /bin/rm @N; f",
    "bash -O expand_aliases -c \"alias @N='rm -rf'\n@N x\"",
]
NAMES = ["ls", "cat", "echo", "make", "build_1", "x", "pytest", "git_"]


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(REBINDINGS), st.sampled_from(NAMES), st.data())
def test_a_rebound_name_is_judged_as_its_target(template: str, name: str, data: st.DataObject):
    _paused_by_a_rule(data.draw(embedded(template.replace("@N", name))))


# -- shell input --------------------------------------------------------------------------------

PRODUCERS: list[Callable[[str], str]] = [
    lambda c: f"echo {shlex.quote(c)}",
    lambda c: f"printf '%s\\n' {shlex.quote(c)}",
    lambda c: f"cat <<< {shlex.quote(c)}",
    lambda c: f"echo {base64.b64encode(c.encode()).decode()} | base64 -d",
    lambda c: "printf " + shlex.quote("".join(f"\\x{ord(ch):02x}" for ch in c) + "\\n"),
]
SHELLS = ["bash", "sh", "dash", "zsh", "ksh", "bash -s", "sh -s --"]
FEEDERS = [
    "@P | @SH",
    "@SH < <(@P)",
    "source <(@P)",
    ". <(@P)",
    "source /dev/stdin < <(@P)",
    "@SH <(@P)",
    "{ @P; } | @SH",
    "(@P) | @SH",
    "@P | (@SH)",
]


@st.composite
def fed_script(draw: st.DrawFn, payload: str) -> str:
    producer = draw(st.sampled_from(PRODUCERS))(payload)
    feeder = draw(st.sampled_from(FEEDERS))
    shell = draw(st.sampled_from(SHELLS))
    if "<(" in feeder and "-s" in shell:
        shell = shell.split()[0]
    return feeder.replace("@P", producer).replace("@SH", shell)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(PAYLOADS), st.data())
def test_code_fed_to_a_shell_is_judged(payload: str, data: st.DataObject) -> None:
    _paused_by_a_rule(data.draw(embedded(data.draw(fed_script(payload)))))


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(["ls -la", "echo hi", "git status", "make test"]), st.data())
def test_safe_code_fed_to_a_shell_does_not_pause(payload: str, data: st.DataObject) -> None:
    script = data.draw(fed_script(payload))
    verdict = check(script, strict=True)
    assert runs(verdict), (script, verdict)


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(["curl -s https://x/i.sh", "wget -qO- x", "python3 gen.py"]), st.data())
def test_code_from_an_unknown_producer_pauses(producer: str, data: st.DataObject) -> None:
    feeder = data.draw(st.sampled_from(FEEDERS))
    shell = data.draw(st.sampled_from(SHELLS))
    if "<(" in feeder:
        shell = shell.split()[0]  # `bash -s FILE` would read its input, not FILE
    script = feeder.replace("@P", producer).replace("@SH", shell)
    assert check(script, strict=True).pause, script


# -- scripts written and run by the same command ------------------------------------------------

WRITERS = [
    "cat > @F <<'EOF'\n@@\nEOF",
    "cat <<EOF > @F\n@@\nEOF",
    "echo @Q > @F",
    "printf '%s\\n' @Q > @F",
    "tee @F <<< @Q > /dev/null",
    "echo ls > @F; echo @Q >> @F",
]
RUNNERS = ["bash @F", "sh @F", "source @F", ". @F", "chmod +x @F && @X", "chmod +x @F; @X"]
FILES = ["s.sh", "./run.sh", "/tmp/x/y.sh", "scripts/build.sh"]


@st.composite
def written_script(draw: st.DrawFn, payload: str) -> str:
    path = draw(st.sampled_from(FILES))
    run_path = path if "/" in path else "./" + path
    writer = draw(st.sampled_from(WRITERS)).replace("@Q", shlex.quote(payload))
    writer = writer.replace("@@", payload).replace("@F", path)
    runner = draw(st.sampled_from(RUNNERS)).replace("@F", path).replace("@X", run_path)
    sep = "\n" if writer.endswith("EOF") else draw(st.sampled_from(["; ", " && ", "\n"]))
    return writer + sep + runner


@settings(max_examples=250, deadline=None)
@given(st.sampled_from(PAYLOADS), st.data())
def test_a_script_written_then_run_is_analysed(payload: str, data: st.DataObject) -> None:
    _paused_by_a_rule(data.draw(written_script(payload)))


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(["ls -la", "echo done", "make test"]), st.data())
def test_a_safe_script_written_then_run_does_not_pause(payload: str, data: st.DataObject):
    script = data.draw(written_script(payload))
    verdict = check(script, strict=True)
    assert runs(verdict), (script, verdict)


# -- env, xargs, git, npm, options from variables -----------------------------------------------


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.sampled_from(["-i", "-", "-u HOME", "-C /tmp", "--", "A=1", "'a b=c'", "x.y=z", "=q"]),
        max_size=5,
    ),
    spelled(DANGEROUS),
)
def test_env_options_and_assignments_are_skipped(
    words: list[str], spelled_cmd: tuple[list[str], str]
) -> None:
    # `--` and a lone `-` end env's options: only assignments and `-` may follow them.
    ended = False
    kept: list[str] = []
    for w in words:
        if ended and w.startswith("-") and w != "-":
            continue
        ended = ended or w in ("--", "-")
        kept.append(w)
    _paused_by_a_rule(" ".join(["env", *kept, spelled_cmd[1]]))


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            [
                "-0",
                "-r",
                "-t",
                "-n1",
                "-n 1",
                "-P4",
                "-eEOF",
                "-l1",
                "-L 1",
                "-s 512",
                "-d '\\n'",
                "-E END",
                "--null",
                "--max-args=2",
                "-a list",
            ]
        ),
        max_size=4,
    ),
    st.sampled_from(["", "-I{}", "-i{}", "-I {}", "--replace={}"]),
)
def test_xargs_options_are_not_the_command(options: list[str], replace: str) -> None:
    target = "rm -rf {}" if replace else "rm -rf"
    _paused_by_a_rule(" ".join(["xargs", *options, replace, target]))


PARALLEL_FORMS = [
    "parallel @@ ::: a b",
    "parallel -j4 @@ ::: a",
    "parallel --jobs 2 -k @@ ::: a",
    "parallel ::: @Q",
    "parallel {} ::: @Q",
    "ls | parallel @@",
    "sem @@",
]


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(PARALLEL_FORMS), spelled(DANGEROUS))
def test_parallel_runs_its_command_and_inputs(form: str, spelled_cmd: tuple[list[str], str]):
    _, cmd = spelled_cmd
    _paused_by_a_rule(form.replace("@Q", shlex.quote(cmd)).replace("@@", cmd))


PARSER_GAPS = [
    "time -- @@",
    "time -p -- @@",
    "time -p @@",
    "! @@",
    "! ! @@",
    "!(@@)",
    "!( @@ )",
    "coproc N { @@; }",
    "coproc N ( @@ )",
    "coproc { @@; }",
    "echo $[ $(@@) ]",
    "echo $[ 1 + a[$(@@)] ]",
    "a[1<<2]=3; @@",
    "x=(a [1<<2]=b) @@",
    "(( a[1<<2] )); @@",
    "echo 10\u00a0000; @@",
]


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(PARSER_GAPS), spelled(DANGEROUS), st.data())
def test_parser_gap_forms_are_seen_through(
    form: str, spelled_cmd: tuple[list[str], str], data: st.DataObject
) -> None:
    _, cmd = spelled_cmd
    _paused_by_a_rule(data.draw(embedded(form.replace("@@", cmd))))


@settings(max_examples=200, deadline=None)
@given(
    st.integers(1, 4),
    st.sampled_from(["!rm -rf build", "reset --hard", "push --force", "clean -fd"]),
    st.sampled_from(["-c", "config-env", "env-count"]),
)
def test_git_alias_chains_are_followed(depth: int, final: str, source: str) -> None:
    names = [f"a{k}" for k in range(depth + 1)]
    defs = [(f"alias.{names[k]}", names[k + 1]) for k in range(depth)]
    defs.append((f"alias.{names[depth]}", final))
    if source == "-c":
        opts = " ".join("-c " + shlex.quote(f"{k}={v}") for k, v in defs)
        script = f"git {opts} {names[0]}"
    elif source == "config-env":
        prefix = " ".join(f"V{k}={shlex.quote(v)}" for k, (_, v) in enumerate(defs))
        opts = " ".join(f"--config-env={key}=V{k}" for k, (key, _) in enumerate(defs))
        script = f"{prefix} git {opts} {names[0]}"
    else:
        env = [f"GIT_CONFIG_COUNT={len(defs)}"]
        for k, (key, value) in enumerate(defs):
            env += [f"GIT_CONFIG_KEY_{k}={key}", f"GIT_CONFIG_VALUE_{k}={shlex.quote(value)}"]
        script = " ".join(env) + f" git {names[0]}"
    _paused_by_a_rule(script)


GIT_CODE_KEYS = [
    "core.sshCommand",
    "core.pager",
    "core.editor",
    "core.fsmonitor",
    "diff.external",
    "pager.log",
    "sequence.editor",
    "credential.helper",
    "filter.lfs.smudge",
    "diff.tool1.textconv",
]


@settings(max_examples=150, deadline=None)
@given(
    st.sampled_from(GIT_CODE_KEYS),
    st.sampled_from(PAYLOADS),
    st.sampled_from(["-c", "config", "config-env", "include"]),
)
def test_git_configuration_that_git_runs_is_analysed(key: str, payload: str, how: str) -> None:
    value = ("!" if key == "credential.helper" else "") + payload
    if how == "-c":
        script = "git -c " + shlex.quote(f"{key}={value}") + " log"
    elif how == "config":
        script = f"git config --global {key} " + shlex.quote(value)
    elif how == "config-env":
        script = f"X={shlex.quote(value)} git --config-env={key}=X status"
    else:
        section, _, name = key.rpartition(".")
        head = section.split(".", 1)
        title = f'{head[0]} "{head[1]}"' if len(head) == 2 else head[0]
        script = (
            f"cat > g.cfg <<'EOF'\n[{title}]\n\t{name} = {value}\nEOF\n"
            "git -c include.path=g.cfg status"
        )
    _paused_by_a_rule(script)


DRY_RUN_WORDS = {
    "--dry-run": True,
    "--dry-run=true": True,
    "--dry-run true": True,
    "--no-dry-run": False,
    "--dry-run=false": False,
    "--dry-run false": False,
}


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(sorted(DRY_RUN_WORDS)), min_size=1, max_size=4))
def test_the_last_npm_dry_run_word_wins(words: list[str]) -> None:
    verdict = check("npm publish " + " ".join(words), strict=True)
    assert verdict.pause is not DRY_RUN_WORDS[words[-1]], (words, verdict)


IDENT = st.from_regex(r"[a-z_][a-z0-9_]{0,6}", fullmatch=True).filter(
    lambda s: s not in ("in", "do", "if", "fi", "done", "case", "esac", "then", "else")
)
REFS = ['"$@V"', "$@V", "${@V}", '"${@V}"']
USES = [
    ("-rf", "rm @R build"),
    ("--hard", "git reset @R"),
    ("--force", "git push @R origin main"),
    ("-delete", "find . @R"),
    ("drop", "git stash @R"),
]


@settings(max_examples=250, deadline=None)
@given(IDENT, st.integers(0, 3), st.sampled_from(REFS), st.sampled_from(USES), st.data())
def test_a_dangerous_option_in_a_variable_pauses(
    name: str, depth: int, ref: str, use: tuple[str, str], data: st.DataObject
) -> None:
    value, command = use
    names = [f"{name}{k}" for k in range(depth + 1)]
    assigns = [f"{names[0]}={shlex.quote(value)}"]
    assigns += [f'{names[k + 1]}="${names[k]}"' for k in range(depth)]
    script = "; ".join([*assigns, command.replace("@R", ref.replace("@V", names[-1]))])
    _paused_by_a_rule(data.draw(embedded(script)))


@settings(max_examples=150, deadline=None)
@given(
    IDENT,
    st.sampled_from(['"$(cat f)"', "$(date +%s)", '"$1"', "${RANDOM}"]),
    st.sampled_from(USES),
)
def test_an_option_set_at_run_time_pauses(name: str, source: str, use: tuple[str, str]) -> None:
    command = use[1].replace("@R", f'"${name}"')
    script = (
        f"f() {{ {name}={source}; {command}; }}; f"
        if source == '"$1"'
        else (f"{name}={source}; {command}")
    )
    assert check(script, strict=True).pause, script


# -- syntax errors, Unicode, fuzzing ------------------------------------------------------------

VALID = [
    "ls -la",
    "git status && make test",
    'for f in *.py; do wc -l "$f"; done',
    "if [ -f x ]; then echo yes; fi",
    "case $1 in a) echo a;; esac",
    "{ echo a; echo b; }",
    "cat > f <<'EOF'\nhello\nEOF",
    'x=$(git rev-parse HEAD); echo "$x"',
    "f() { echo hi; }; f",
]
BREAKAGES: list[Callable[[str], str]] = [
    lambda s: s + " &&",
    lambda s: s + " ||",
    lambda s: s + " |",
    lambda s: "&& " + s,
    lambda s: "{ " + s,
    lambda s: "( " + s,
    lambda s: s + " )",
    lambda s: "if true; then " + s,
    lambda s: "while true; do " + s,
    lambda s: s + "\n;;",
    lambda s: s + "; ;",
    lambda s: ";" + s,
    lambda s: s + "\ncat <<EOF\nno end",
    lambda s: s + "; echo 'open",
    lambda s: s + "; echo $(ls",
    lambda s: "case x in a) " + s,
    lambda s: s + "\nfi",
]


def _bash_accepts(script: str) -> bool:
    out = subprocess.run(
        ["bash", "-n", "-c", "--", script], capture_output=True, text=True, timeout=10
    )
    return out.returncode == 0 and not out.stderr


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(VALID), st.sampled_from(BREAKAGES))
def test_a_syntax_error_pauses_as_could_not_be_parsed(valid: str, breakage) -> None:
    script = breakage(valid)
    assert not _bash_accepts(script), script  # the generated case really is invalid
    verdict = check(script, strict=True)
    assert verdict.pause and "could not be parsed" in verdict.reason, (script, verdict)


TOKENS = [
    "ls", "echo", "x", "-l", "a=1", "a[1]=2", "'q'", '"d $x"', "$(ls)", "`ls`", "$((1+2))",
    "${x}", "<(ls)", ";", "&", "&&", "||", "|", "\n", "(", ")", "{", "}", "if", "then",
    "else", "elif", "fi", "while", "until", "do", "done", "for", "in", "case", "esac", ";;",
    "!", "time", "((", "))", "function", "f()", "> f", "< f", "2>&1", "<<< w", "#c", "select",
    "-p", "--", ";&", "a=(1 2)", "$[1]", "x\u00a0y", "\\\n", "[[", "]]", "-eq", "=~", "-f",
]  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(TOKENS), min_size=1, max_size=9))
def test_the_parser_agrees_with_bash_on_what_is_valid(tokens: list[str]) -> None:
    script = " ".join(tokens)
    verdict = check(script, strict=True)
    parsed = "could not be parsed" not in verdict.reason
    accepted = _bash_accepts(script)
    if not accepted:
        assert verdict.pause and not parsed, (script, verdict)  # whatever bash rejects pauses
    else:
        assert parsed, script  # and what bash accepts parses


UNICODE_SPACES = "\u00a0\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u3000"


@settings(max_examples=200, deadline=None)
@given(spelled(SAFE), st.lists(st.sampled_from(UNICODE_SPACES), min_size=1, max_size=3))
def test_unicode_whitespace_is_part_of_a_word(
    spelled_cmd: tuple[list[str], str], spaces: list[str]
) -> None:
    argv, _ = spelled_cmd
    word = "file" + "".join(spaces) + "name"
    script = " ".join([*map(shlex.quote, argv), word])
    verdict = check(script, strict=True)
    assert not verdict.pause, verdict
    assert verdict.commands[-1][-1] == word


BASHISH = st.lists(
    st.sampled_from(
        list("rm -f'\"\\$`(){}[];|&<>\n\t#*?=!@%:,.~^+0123456789xagit")
        + list(UNICODE_SPACES + "\u2028\r\f\v\x00é☕")
        + ["$(", "<(", "<<", "<<-", "EOF", "${", "$((", "$[", "[[", "]]", "((", "))", ";;"]
    ),
    max_size=60,
).map("".join)


@settings(max_examples=1500, deadline=None)
@given(BASHISH)
def test_no_exception_escapes_on_arbitrary_text(text: str) -> None:
    verdict = check(text, strict=True)
    assert isinstance(verdict.pause, bool) and verdict.internal_error is None


CORPUS = [
    "ls -la && git status",
    'for f in *.py; do echo "$f"; done',
    "cat > f <<'EOF'\nx $(y) `z`\nEOF",
    "v='a[$(rm -rf x)]'; (( v ))",
    "git -c alias.a='!rm -rf y' a",
    "echo 'rm -rf x' | bash",
    "make -f - <<'EOF'\nall:\n\trm -rf x\nEOF",
    "tmux send-keys -t s 'ls' Enter",
    "parallel echo ::: a b",
    'declare -A m=([a]=1); echo "${m[a]}"',
    "case $x in a|b) echo;; esac",
    "f() { local -n r=$1; }; f v",
]


EDIT_TEXTS = [*" \n'\"$`(){}[];|&<>\\#=\u00a0\u3000", "$(", "EOF", "<<", "))", "]]"]


@settings(max_examples=600, deadline=None)
@given(
    st.sampled_from(CORPUS),
    st.lists(
        st.tuples(st.integers(0, 200), st.integers(0, 3), st.sampled_from(EDIT_TEXTS)),
        min_size=1,
        max_size=4,
    ),
)
def test_no_exception_escapes_on_mutated_scripts(
    script: str, edits: list[tuple[int, int, str]]
) -> None:
    for at, cut, text in edits:
        at %= len(script) + 1
        script = script[:at] + text + script[at + cut :]
    verdict = check(script, strict=True)
    assert verdict.internal_error is None


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 200), st.sampled_from(["$(@@)", "`@@`", "bash -c @Q", "eval @Q", "(@@)"]))
def test_deep_nesting_never_crashes(depth: int, template: str) -> None:
    cmd = "rm -rf x"
    for _ in range(depth):
        if len(cmd) > 20_000:
            break  # quoting grows the text exponentially
        if template == "`@@`":
            cmd = "echo `" + cmd.replace("\\", "\\\\").replace("`", "\\`") + "`"
        elif "@Q" in template:
            cmd = template.replace("@Q", shlex.quote(cmd))
        else:
            cmd = "echo " + template.replace("@@", cmd)
    verdict = check(cmd, strict=True)
    assert verdict.pause, cmd  # either the rm rule or "nests too deeply"


HANDLER_WORDS = [
    "-c", "-x", "-s", "-i", "--", "-", "-e", "-f", "-p", "-u", "-I{}", "{}", ":::", "::::", ";",
    "+", "-rf", "rm", "x", "$X", '"$Y"', "'a b'", "--exec", "--run", "-C", "=", "a=b", "-o",
    "alias.x=!rm", "new-session", "send-keys", "Enter", "stuff", "-X", "all:", "run", "exec",
    "dlx", "pip", "uninstall", "--dry-run", "false", "publish", "delete", "$(ls)",
    "<(echo rm -rf x)", "--long=", "-n1", "-eEOF", "0", "--config-env=alias.a=X", "foreach",
    "--upload-pack=x", "bisect", "config", "core.pager", "-S", "--split-string=x y", "-E",
    "BASH_FUNC_x%%=() { :; }", "--eval=x", "--file=-",
]  # fmt: skip


@settings(max_examples=500, deadline=None)
@given(
    st.sampled_from(sorted({*TABLE, *DEFAULT_RULES, "python3", "ld.so"})),
    st.lists(st.sampled_from(HANDLER_WORDS), max_size=7),
)
def test_no_exception_escapes_from_any_command_handler(name: str, words: list[str]) -> None:
    verdict = check(" ".join([name, *words]), strict=True)
    assert verdict.internal_error is None
