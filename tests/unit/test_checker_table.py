"""The command table and the classes it closes: global options, home paths, scripts and
task files a line writes and runs, options that run code, wrappers, interpreter one-liners, effect
classes and their targets. Each class has property tests (every member pauses however it is
written, the look-alikes do not) and named examples."""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from run_bash.checker import Verdict, ask_reversible, check, validate_rules
from run_bash.checker.reading import Code, Command, Each, Shell
from run_bash.checker.table import TABLE
from tests.unit.test_checker_properties import DANGEROUS, SAFE

from .checker_util import runs

P = pytest.param
Q = shlex.quote


def _pauses(cmd: str) -> Verdict:
    verdict = check(cmd, strict=True)
    assert verdict.pause, (cmd, verdict)
    return verdict


def _runs(cmd: str) -> None:
    verdict = check(cmd, strict=True)
    assert runs(verdict), (cmd, verdict)


def _line(argv: list[str]) -> str:
    return " ".join(Q(w) for w in argv)


# -- global options before the subcommand ---------------------------------------------------------

# tool -> (global option groups, subcommands that pause, subcommands that do not)
GLOBALS: dict[str, tuple[list[list[str]], list[list[str]], list[list[str]]]] = {
    "git": (
        [["-C", "repo"], ["-c", "user.name=x"], ["-cuser.email=y"], ["--git-dir", ".git"],
         ["--git-dir=.git"], ["--work-tree", "."], ["--no-pager"], ["-P"], ["--bare"],
         ["--namespace", "n"], ["--literal-pathspecs"]],
        [["push", "--force"], ["reset", "--hard", "HEAD~1"], ["branch", "-D", "x"],
         ["stash", "drop"]],
        [["status"], ["push"], ["log", "--oneline"], ["stash", "list"]],
    ),
    "docker": (
        [["--context", "prod"], ["-H", "tcp://h:2375"], ["--host=tcp://h"], ["-l", "debug"],
         ["--config", "cfg"], ["--debug"], ["--tls"]],
        [["volume", "rm", "data"], ["system", "prune", "-af"],
         ["compose", "-f", "prod.yml", "down", "-v"],
         ["compose", "--project-name", "p", "--env-file", ".env", "down", "--volumes"]],
        [["ps", "-a"], ["compose", "-f", "prod.yml", "down"], ["volume", "ls"]],
    ),
    "kubectl": (
        [["--context", "prod"], ["-n", "ns"], ["--namespace=ns"], ["--kubeconfig", "k"],
         ["-s", "https://x"], ["--insecure-skip-tls-verify"]],
        [["delete", "pod", "x"], ["delete", "-f", "k.yaml"]],
        [["get", "pods"], ["delete", "pod", "x", "--dry-run=client"]],
    ),
    "helm": (
        [["--kube-context", "c"], ["-n", "ns"], ["--kubeconfig", "k"], ["--debug"]],
        [["uninstall", "rel"], ["del", "rel"]],
        [["list"], ["uninstall", "rel", "--dry-run"]],
    ),
    "aws": (
        [["--profile", "p"], ["--region", "eu-west-1"], ["--output", "json"],
         ["--endpoint-url", "http://x"], ["--debug"], ["--no-verify-ssl"]],
        [["s3", "rm", "--recursive", "s3://b/x"], ["s3", "rb", "s3://b"]],
        [["s3", "ls"], ["s3", "rm", "s3://b/x", "--dryrun"]],
    ),
    "npm": (
        [["--prefix", "web"], ["--registry", "https://r"], ["-w", "pkg"], ["--workspace=pkg"],
         ["-g"], ["--loglevel", "warn"]],
        [["publish"], ["uninstall", "left-pad"], ["rm", "left-pad"]],
        [["install"], ["test"], ["publish", "--dry-run"]],
    ),
    "pip": (
        [["--python", ".venv/bin/python"], ["--proxy", "http://p"], ["--timeout", "5"], ["-q"],
         ["--cache-dir", "d"]],
        [["uninstall", "-y", "requests"]],
        [["install", "requests"], ["list"]],
    ),
    "cargo": (
        [["-C", "crate"], ["-Z", "unstable-options"], ["--color", "never"], ["--locked"],
         ["--config", "k=v"]],
        [["publish"], ["yank", "--version", "1.0.0"]],
        [["build"], ["publish", "--dry-run"]],
    ),
    "systemctl": (
        [["--user"], ["-H", "host"], ["-M", "machine"], ["--no-block"], ["--now"]],
        [["stop", "nginx"], ["restart", "nginx"], ["mask", "nginx"], ["start", "nginx"]],
        [["status", "nginx"], ["is-active", "nginx"], ["daemon-reload"]],
    ),
    "gh": (
        [["--repo", "o/r"], ["-R", "o/r"]],
        [["release", "delete", "v1"], ["repo", "delete", "o/r"]],
        [["release", "list"], ["pr", "list"]],
    ),
    "uv": (
        [["--directory", "d"], ["--project", "p"], ["-q"], ["--offline"], ["--cache-dir", "c"]],
        [["pip", "uninstall", "x"], ["publish"]],
        [["pip", "install", "x"], ["sync"]],
    ),
    "pnpm": (
        [["--dir", "d"], ["-C", "d"], ["--filter", "pkg"], ["-r"]],
        [["publish"]],
        [["install"], ["publish", "--dry-run"]],
    ),
    "gcloud": (
        [["--project", "p"], ["--account", "a@x"], ["--format", "json"], ["--quiet"]],
        [["compute", "instances", "delete", "vm"], ["sql", "instances", "delete", "db"]],
        [["compute", "instances", "list"]],
    ),
    "terraform": (
        [["-chdir=infra"]],
        [["destroy"], ["apply", "-destroy"], ["apply", "-auto-approve", "-destroy"]],
        [["plan"], ["apply"], ["init"]],
    ),
    "loginctl": (
        [["-H", "host"], ["--no-ask-password"]],
        [["terminate-user", "me"], ["poweroff"]],
        [["list-sessions"]],
    ),
}  # fmt: skip


@st.composite
def with_globals(draw: st.DrawFn, dangerous: bool) -> tuple[str, str]:
    tool = draw(st.sampled_from(sorted(GLOBALS)))
    groups, bad, good = GLOBALS[tool]
    options = draw(st.lists(st.sampled_from(groups), max_size=3))
    sub = draw(st.sampled_from(bad if dangerous else good))
    head = ["cargo", "+nightly"] if tool == "cargo" and draw(st.booleans()) else [tool]
    return tool, _line([*head, *(w for group in options for w in group), *sub])


@settings(max_examples=400, deadline=None)
@given(with_globals(dangerous=True))
def test_global_options_before_the_subcommand_are_seen_past(case: tuple[str, str]) -> None:
    tool, cmd = case
    verdict = _pauses(cmd)
    assert verdict.rule == tool, (cmd, verdict)


@settings(max_examples=300, deadline=None)
@given(with_globals(dangerous=False))
def test_global_options_before_a_harmless_subcommand_do_not_pause(case: tuple[str, str]) -> None:
    _runs(case[1])


# -- the home directory ---------------------------------------------------------------------------

HOME_FORMS = ["~/{}", "$HOME/{}", '"$HOME"/{}', '"$HOME/{}"', "${{HOME}}/{}", '"${{HOME}}/{}"']


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from(["rm -rf {}", "chown -R me {}", "chmod -R 700 {}", "chgrp -R staff {}",
                     "find {} -delete", 'chown -R "$(whoami)" {}']),
    st.sampled_from([".npm", ".cache/pip", "proj/build", "x_y"]),
)  # fmt: skip
def test_home_is_one_path_however_it_is_written(template: str, path: str) -> None:
    verdicts = [_pauses(template.format(form.format(Q(path)))) for form in HOME_FORMS]
    targets = {tuple(h.targets or ()) for v in verdicts for h in v.hits}
    effects = {v.effect for v in verdicts}
    assert len(targets) == 1 and len(effects) == 1, (template, path, verdicts)
    if template.startswith(("rm", "find")):
        assert targets == {(f"~/{path}",)}


@pytest.mark.parametrize("form", HOME_FORMS)
def test_a_home_path_changed_without_recursion_does_not_pause(form: str) -> None:
    _runs(f"chown me {form.format('.npmrc')}")
    _runs(f"chmod 600 {form.format('.netrc')}")
    _runs(f"ls -la {form.format('.config')}")


def test_a_home_the_script_sets_is_its_own_value() -> None:
    hit = _pauses("HOME=/tmp/h; rm -rf $HOME/x").hits[0]
    assert hit.targets == ("/tmp/h/x",)


# -- scripts and task files the line writes and runs ----------------------------------------------

WRITERS: list[Callable[[str, str], str]] = [
    lambda path, code: f"cat > {path} <<'EOF'\n{code}\nEOF",
    lambda path, code: f"printf '%s\\n' {Q(code)} > {path}",
    lambda path, code: f"exec 3>{path}; echo {Q(code)} >&3",
    lambda path, code: f"exec {{fd}}>{path}; printf '%s\\n' {Q(code)} >&$fd",
    lambda path, code: f"echo {Q(code)} | tee {path} >/dev/null",
]
PATHS = ["x.sh", "./x.sh", '"$PWD/x.sh"', "$PWD/x.sh"]
RUNNERS = ["bash {}", "sh {}", "source {}", ". {}", "chmod +x {0} && ./x.sh", "bash -e {}"]


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from(WRITERS), st.sampled_from(PATHS), st.sampled_from(RUNNERS),
    st.sampled_from([_line(c) for c in DANGEROUS[:10]]),
)  # fmt: skip
def test_a_script_written_by_any_route_and_run_is_judged(
    write: Callable[[str, str], str], path: str, run: str, payload: str
) -> None:
    _pauses(f"{write(path, payload)}\n{run.format(path)}")


@settings(max_examples=150, deadline=None)
@given(
    st.sampled_from(WRITERS), st.sampled_from(PATHS), st.sampled_from(RUNNERS),
    st.sampled_from(["ls -la", "echo done", "make test", "git status"]),
)  # fmt: skip
def test_a_harmless_script_written_by_any_route_and_run_does_not_pause(
    write: Callable[[str, str], str], path: str, run: str, payload: str
) -> None:
    _runs(f"{write(path, payload)}\n{run.format(path)}")


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(WRITERS), st.sampled_from(PATHS), st.sampled_from(["-n", "-n -e", "-en"]))
def test_bash_n_only_reads_the_script(
    write: Callable[[str, str], str], path: str, flags: str
) -> None:
    _runs(f"{write(path, 'rm -rf build')}\nbash {flags} {path}")
    _runs(f"bash {flags} {path}")


# (file, how it is written around a command, how it is run)
TASK_FILES: list[tuple[str, Callable[[str], str], list[str]]] = [
    ("sub/Makefile", lambda c: f"all:\n\t{c}\n", ["make -C sub", "make -C sub all",
                                                  "make --directory=sub", "gmake -C sub"]),
    ("Makefile", lambda c: f"clean:\n\t@{c}\n", ["make clean", "make -j4", "make -f Makefile"]),
    ("justfile", lambda c: f"clean:\n    {c}\n", ["just clean", "just"]),
    ("Taskfile.yml", lambda c: f"version: '3'\ntasks:\n  clean:\n    cmds:\n      - {c}\n",
     ["task clean", "task"]),
    ("Taskfile.yml", lambda c: f"version: '3'\ntasks:\n  x:\n    cmd: {c}\n", ["task x"]),
    ("package.json", lambda c: json.dumps({"scripts": {"test": c}}), ["npm test", "npm t",
                                                                       "yarn test", "npm run test"]),
    ("package.json", lambda c: json.dumps({"scripts": {"build": "tsc", "prebuild": c}}),
     ["npm run build", "pnpm run build", "yarn run build", "bun run build"]),
    ("package.json", lambda c: json.dumps({"scripts": {"postinstall": c}}),
     ["npm install", "npm ci", "npm i"]),
]  # fmt: skip


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(TASK_FILES), st.data())
def test_a_task_file_written_and_run_is_judged(
    task: tuple[str, Callable[[str], str], list[str]], data: st.DataObject
) -> None:
    path, body, runs = task
    run = data.draw(st.sampled_from(runs))
    payload = data.draw(st.sampled_from(["rm -rf build", "git push --force", "kill 1"]))
    content = body(payload)
    _pauses(f"mkdir -p sub && cat > {path} <<'EOF'\n{content}\nEOF\n{run}")
    _runs(f"mkdir -p sub && cat > {path} <<'EOF'\n{body('echo ok')}\nEOF\n{run}")


def test_a_task_file_the_line_does_not_write_is_not_followed() -> None:
    for cmd in ("make clean", "make -C sub", "npm test", "just clean", "task build"):
        _runs(cmd)


# -- options that run code ------------------------------------------------------------------------


def _ext(cmd: str) -> str:
    """``ext::`` URL syntax: arguments split at spaces, ``% `` a space inside one."""
    words = [w.replace("%", "%%").replace(" ", "% ") for w in shlex.split(cmd)]
    return Q("ext::" + " ".join(words))


CODE_OPTIONS: list[Callable[[str], str]] = [
    lambda c: f"tar -xf a.tar --to-command={Q(c)}",
    lambda c: f"tar -I {Q(c)} -xf a.tar",
    lambda c: f"tar --use-compress-program={Q(c)} -xf a.tar",
    lambda c: f"tar --use-compress {Q(c)} -cf a.tar src",
    lambda c: f"tar -cf a.tar --checkpoint=10 --checkpoint-action=exec={Q(c)} src",
    lambda c: f"TAR_OPTIONS={Q('--to-command=' + Q(c))} tar -xf a.tar",
    lambda c: f"ssh -o ProxyCommand={Q(c)} host true",
    lambda c: f"ssh -oProxyCommand={Q(c)} host",
    lambda c: f"ssh -o {Q('LocalCommand ' + c)} -o PermitLocalCommand=yes host",
    lambda c: f"scp -o ProxyCommand={Q(c)} a host:b",
    lambda c: f"rsync -a -e {Q(c)} src/ host:dst/",
    lambda c: f"git -c core.sshCommand={Q(c)} ls-remote",
    lambda c: f"git -c core.pager={Q(c)} log",
    lambda c: f"git clone {_ext(c)} dst",
    lambda c: f"git remote add evil {_ext(c)}",
    lambda c: f"vim -c {Q('!' + c)} file",
    lambda c: f"nvim --headless +{Q('silent !' + c)} +q",
    lambda c: f"vim -es -c {Q('r !' + c)} -c wq file",
    lambda c: f"vim -c {Q('terminal ' + c)}",
    lambda c: f"LESSOPEN={Q('|' + c + ' %s')} less file",
    lambda c: f"zip -T -TT {Q(c)} a.zip file",
    lambda c: f"sort --compress-program={Q(c)} big.txt",
    lambda c: f"man -P {Q(c)} ls",
    lambda c: f"gdb -batch -ex {Q('shell ' + c)} ./a.out",
    lambda c: f"sed -i {Q('1e ' + c)} file",
    lambda c: f"apt-get -o APT::Update::Pre-Invoke::={Q(c)} update",
    lambda c: f"apt -o Dpkg::Pre-Install-Pkgs::={Q(c)} install -y jq",
    lambda c: f"nodemon --exec {Q(c)} app.js",
    lambda c: f"hyperfine --prepare {Q(c)} 'sleep 1'",
]


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(CODE_OPTIONS), st.sampled_from([_line(c) for c in DANGEROUS]))
def test_the_command_an_option_carries_is_judged(
    option: Callable[[str], str], payload: str
) -> None:
    _pauses(option(payload))


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(CODE_OPTIONS), st.sampled_from(["ls -la", "cat", "gzip -d", "true"]))
def test_a_harmless_command_an_option_carries_does_not_pause(
    option: Callable[[str], str], payload: str
) -> None:
    _runs(option(payload))


@pytest.mark.parametrize(
    "cmd",
    [
        "git -c core.hooksPath=.githooks commit -m x",
        "git -c core.worktree=/elsewhere status",
        "git -c core.somethingnew=1 status",
        "git -c protocol.ext.allow=always fetch",
        "git -c protocol.allow=always fetch",
        "git -c include.path=/tmp/cfg status",
        "git -c includeIf.onbranch:main.path=x status",
        "git -c url.ext::sh.insteadOf=https:// fetch",
        "git -c core.sshCommand=$CMD fetch",
        "git config alias.p 'push --force' && git p",
        "git config --global alias.nuke 'reset --hard HEAD~3'",
        "git config alias.x '!rm -rf build'",
        "git config remote.origin.push '+refs/heads/*:refs/heads/*' && git push",
        "git config remote.origin.mirror true; git push origin",
        "git config core.hooksPath hooks",
        "git config core.pager 'rm -rf x'",
    ],
)
def test_git_configuration_that_runs_programs_pauses(cmd: str) -> None:
    _pauses(cmd)


@pytest.mark.parametrize(
    "cmd",
    [
        "git -c core.quotepath=off status",
        "git -c core.autocrlf=false diff",
        "git -c core.hooksPath=/dev/null commit -m x",
        "git -c protocol.file.allow=always submodule update --init",
        "git -c color.ui=always log",
        "git config alias.co checkout && git co main",
        "git config --global alias.lg 'log --oneline --graph'",
        "git config remote.origin.push refs/heads/main:refs/heads/main",
        "git config user.email me@example.com",
        "git clone https://example.com/r.git",
        "echo 'ext::sh -c rm% -rf% x'",
    ],
)
def test_inert_git_configuration_does_not_pause(cmd: str) -> None:
    _runs(cmd)


@pytest.mark.parametrize(
    "cmd",
    [
        "vim -c wq file", "vim -c 'normal! gg=G' -c 'wq!' file", "nvim +10 file",
        "vim -c 'set ft=python' -c 'x' f", "nvim --headless -c 'Lazy! sync' -c qa",
        "LESSOPEN='|lesspipe %s' less f", "tar -czf a.tgz src", "ssh -o BatchMode=yes host ls",
        "zip -r a.zip src", "sed -i 's/e/E/g' f", "sed -e '/x/d' -e 's/a/b/' f",
        "man ls", "sort -k2 f",
    ],
)  # fmt: skip
def test_options_that_run_nothing_do_not_pause(cmd: str) -> None:
    _runs(cmd)


@pytest.mark.parametrize(
    "cmd",
    [
        "vim -c 'lua os.execute(\"rm -rf x\")' f",
        "vim -c 'call system(\"rm -rf x\")' f",
        "nvim --headless -c 'py3 import os' -c q",
        "sed 's/.*/rm -rf &/e' list.txt",
        "sed 'e' cmds.txt",
        'ssh -o "$OPTS" host',
    ],
)
def test_options_that_run_code_the_checker_cannot_read_pause(cmd: str) -> None:
    assert _pauses(cmd).effect == "irreversible"


# -- wrappers that run their argument -------------------------------------------------------------

WRAPPERS = [
    "dotenv -- @@", "dotenv -e .env -- @@", "dotenv -e .env -e .env.local -- @@",
    "dotenv run @@", "dotenv -f .env run @@", "dotenvx run -f .env -- @@", "op run -- @@",
    "op run --env-file=.env -- @@", "op run --no-masking -- @@", "aws-vault exec prod -- @@",
    "aws-vault exec --duration=1h prod -- @@", "aws-vault exec prod @@", "watchexec -- @@",
    "watchexec -e py,toml -- @@", "watchexec -r -w src -- @@", "pueue add -- @@",
    "pueue add -g build -- @@", "gdb --args @@", "gdb -q --args @@", "lldb -- @@",
    "cross-env NODE_ENV=test @@", "env-cmd -f .env @@", "systemd-inhibit @@",
    "systemd-inhibit --why=build @@", "run0 @@", "chpst -u me @@", "envdir ./env @@",
    "setuidgid me @@", "sshpass -p pw @@", "perf stat @@", "perf record -g -- @@",
    "rr record @@", "py-spy record -o p.svg -- @@", "ip netns exec ns1 @@",
    "daemonize -c /srv @@", "retry -- @@", "mise exec node@20 -- @@", "distrobox enter -- @@",
    "heaptrack @@", "unbuffer @@", "nice -n 5 @@", "schroot -c jammy -- @@",
    "caffeinate -i @@", "systemd-cat -t job @@", "setarch x86_64 -R @@", "linux32 @@",
    "linux64 @@", "i386 @@", "x86_64 @@", "cpulimit -l 50 -- @@", "trickle -d 100 @@",
    "fakechroot @@", "devbox run -- @@", "pixi run @@", "rye run @@", "mamba run -n e @@",
    "micromamba run -n e @@", "rbenv exec @@", "pyenv exec @@", "nodenv exec @@",
    "jenv exec @@", "goenv exec @@", "plenv exec @@", "phpenv exec @@", "volta run @@",
    "fnm exec --using=20 -- @@", "nvm exec 20 @@", "rvm 3.2 do @@", "scl enable dts -- @@",
    "uftrace record @@", "npm explore pkg -- @@",
]  # fmt: skip
SHELL_WRAPPERS = [
    "watchexec @Q", "hyperfine @Q", "hyperfine -w 3 -r 10 @Q", "nodemon --exec @Q",
    "scl enable dts @Q", "ansible all -m shell -a @Q",
    "nodemon -x @Q app.js", "pueue add @Q",
]  # fmt: skip


def _wrap(template: str, argv: list[str]) -> str:
    return template.replace("@@", _line(argv)).replace("@Q", Q(_line(argv)))


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(WRAPPERS + SHELL_WRAPPERS), st.sampled_from(DANGEROUS))
def test_a_wrapper_runs_its_argument(template: str, argv: list[str]) -> None:
    _pauses(_wrap(template, argv))


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(WRAPPERS + SHELL_WRAPPERS), st.sampled_from(SAFE))
def test_a_wrapper_of_a_harmless_command_does_not_pause(template: str, argv: list[str]) -> None:
    _runs(_wrap(template, argv))


@pytest.mark.parametrize(
    "cmd, runs",
    [
        ("start-stop-daemon --start --exec /bin/rm -- -rf build", True),
        ("start-stop-daemon -S -x /usr/bin/git -- push --force", True),
        ("start-stop-daemon --start --exec /usr/bin/python3 -- app.py", False),
        ("start-stop-daemon --stop --pidfile app.pid", True),
        ("coreutils --coreutils-prog=rm -rf build", True),
        ("coreutils --coreutils-prog=ls -la", False),
        ("pipx run rimraf build", True),
        ("pipx run black .", False),
        ("coverage run -m pip uninstall -y x", True),
        ("coverage run -m pytest", False),
        ("docker run --rm -v .:/w node:20 rm -rf /w/node_modules", True),
        ("docker run --rm node:20 node --version", False),
        ("docker compose exec web rm -rf /app/tmp", True),
        ("kubectl exec pod -- rm -rf /data", True),
        ("ssh host 'git push --force'", True),
        ("ssh host uptime", False),
        ("pueue kill 3", True),
        ("pueue status", False),
    ],
)
def test_more_runners(cmd: str, runs: bool) -> None:
    assert check(cmd, strict=True).pause is runs, check(cmd)


# -- interpreter one-liners -----------------------------------------------------------------------


def _py(code: str) -> str:
    return repr(code)


# language -> (how its code runs from the shell, API forms starting a literal command)
SPAWNERS: dict[str, tuple[list[Callable[[str], str]], list[Callable[[list[str]], str]]]] = {
    "python": (
        [lambda code: f"python3 -c {Q(code)}", lambda code: f"python -c {Q(code)}",
         lambda code: f"python3 - <<'EOF'\n{code}\nEOF",
         lambda code: f"cat > t.py <<'EOF'\n{code}\nEOF\npython3 t.py"],
        [lambda a: f"import os; os.system({_py(_line(a))})",
         lambda a: f"import os\nprint(os.popen({_py(_line(a))}).read())",
         lambda a: f"import subprocess; subprocess.run({_py(_line(a))}, shell=True)",
         lambda a: f"import subprocess; subprocess.call({a!r})",
         lambda a: f"import subprocess as sp; sp.check_output({a!r})",
         lambda a: f"from subprocess import Popen; Popen({a!r}).wait()",
         lambda a: f"import os; os.execvp({a[0]!r}, {a!r})",
         lambda a: f"__import__('os').system({_py(_line(a))})",
         lambda a: f"exec({_py('import os; os.system(' + repr(_line(a)) + ')')})"],
    ),
    "node": (
        [lambda code: f"node -e {Q(code)}", lambda code: f"node <<'EOF'\n{code}\nEOF"],
        [lambda a: f"require('child_process').execSync({json.dumps(_line(a))})",
         lambda a: f"const cp = require('child_process'); cp.exec({json.dumps(_line(a))})",
         lambda a: "const {spawnSync} = require('node:child_process'); "
                   f"spawnSync({json.dumps(a[0])}, {json.dumps(a[1:])})",
         lambda a: f"import('child_process'); require('child_process').execFileSync("
                   f"{json.dumps(a[0])}, {json.dumps(a[1:])}, {{stdio: 'inherit'}})"],
    ),
    "ruby": (
        [lambda code: f"ruby -e {Q(code)}"],
        [lambda a: f"system({json.dumps(_line(a))})",
         lambda a: "system " + ", ".join(json.dumps(w) for w in a),
         lambda a: f"puts `{_line(a)}`", lambda a: f"puts %x({_line(a)})",
         lambda a: f"IO.popen({json.dumps(a)}).read",
         lambda a: f"require 'open3'; Open3.capture2({json.dumps(_line(a))})"],
    ),
    "perl": (
        [lambda code: f"perl -e {Q(code)}", lambda code: f"perl -E {Q(code)}"],
        [lambda a: f"system({json.dumps(_line(a))})",
         lambda a: "system " + ", ".join(json.dumps(w) for w in a) + ";",
         lambda a: f"print `{_line(a)}`;", lambda a: f"print qx{{{_line(a)}}};",
         lambda a: f"open(my $f, '-|', {json.dumps(_line(a))}); print <$f>;"],
    ),
    "php": (
        [lambda code: f"php -r {Q(code)}"],
        [lambda a: f"system({json.dumps(_line(a))});",
         lambda a: f"echo shell_exec({json.dumps(_line(a))});",
         lambda a: f"passthru({json.dumps(_line(a))});",
         lambda a: f"exec({json.dumps(_line(a))}, $out);"],
    ),
    "lua": (
        [lambda code: f"lua -e {Q(code)}"],
        [lambda a: f"os.execute({json.dumps(_line(a))})",
         lambda a: f"io.popen({json.dumps(_line(a))}):read('a')"],
    ),
    "awk": (
        [lambda code: f"awk {Q(code)}", lambda code: f"gawk {Q(code)} /dev/null"],
        [lambda a: f"BEGIN {{ system({json.dumps(_line(a))}) }}",
         lambda a: f"BEGIN {{ {json.dumps(_line(a))} | getline x; print x }}"],
    ),
}  # fmt: skip


@st.composite
def one_liner(draw: st.DrawFn, pool: list[list[str]]) -> str:
    lang = draw(st.sampled_from(sorted(SPAWNERS)))
    shells, apis = SPAWNERS[lang]
    argv = draw(st.sampled_from(pool))
    return draw(st.sampled_from(shells))(draw(st.sampled_from(apis))(argv))


@settings(max_examples=400, deadline=None)
@given(one_liner(DANGEROUS))
def test_a_one_liner_is_judged_by_the_literal_command_it_starts(cmd: str) -> None:
    verdict = _pauses(cmd)
    assert any(hit.rule is not None for hit in verdict.hits), (cmd, verdict)


@settings(max_examples=300, deadline=None)
@given(one_liner([["ls", "-la"], ["git", "status"], ["echo", "rm -rf /"], ["make", "test"]]))
def test_a_one_liner_starting_a_harmless_command_does_not_pause(cmd: str) -> None:
    _runs(cmd)


@pytest.mark.parametrize(
    "cmd",
    [
        "python3 -c 'import os, sys; os.system(sys.argv[1])' 'rm -rf x'",
        "python3 -c 'import os; os.system(f\"rm -rf {d}\")'",
        "python3 -c 'import os; os.system(\"rm -rf \" + d)'",
        "python3 -c 'import subprocess; subprocess.run(cmd.split())'",
        "python3 -c 'import os; f = os.system; f(\"ls\")'",
        "python3 -c 'exec(open(\"x.py\").read())'",
        "node -e 'require(\"child_process\").execSync(process.argv[1])'",
        "node -e 'const c = require(\"child_process\"); c.exec(`rm -rf ${d}`)'",
        "ruby -e 'system(ARGV[0])'",
        'ruby -e \'x = "rm"; system("#{x} -rf y")\'',
        "perl -e 'system($ARGV[0])'",
        "perl -e 'my $d = shift; system(\"rm -rf $d\")'",
        "php -r 'system($argv[1]);'",
        "awk '{ system($0) }' cmds.txt",
        "awk '{ print | \"sh\" }' cmds.txt",
    ],
)
def test_a_one_liner_starting_a_program_only_known_at_run_time_pauses(cmd: str) -> None:
    verdict = _pauses(cmd)
    assert verdict.effect == "irreversible" and verdict.rule is None, verdict


DELETERS: list[tuple[str, str]] = [
    ("python3 -c {}", "import shutil; shutil.rmtree({!r})"),
    ("python3 -c {}", "import os; os.remove({!r})"),
    ("python3 -c {}", "import os; os.unlink({!r})"),
    ("python3 -c {}", "from pathlib import Path; Path({!r}).unlink()"),
    ("python3 -c {}", "import shutil as s; s.rmtree({!r}, ignore_errors=True)"),
    ("node -e {}", "require('fs').rmSync({!r}, {{recursive: true, force: true}})"),
    ("node -e {}", "const fs = require('fs'); fs.unlinkSync({!r})"),
    ("ruby -e {}", "require 'fileutils'; FileUtils.rm_rf({!r})"),
    ("ruby -e {}", "File.delete({!r})"),
    ("perl -e {}", "unlink({!r});"),
    ("php -r {}", "unlink({!r});"),
    ("lua -e {}", "os.remove({!r})"),
]


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(DELETERS), st.sampled_from(["build", "dist/app.js", "/tmp/x", "~/.cache"]))
def test_a_one_liner_that_deletes_is_reversible_like_rm(form: tuple[str, str], path: str) -> None:
    shell, code = form
    cmd = shell.format(Q(code.format(path).replace("'", '"')))
    verdict = _pauses(cmd)
    assert verdict.effect == "reversible", verdict
    assert verdict.hits[0].targets == (path,), verdict


@pytest.mark.parametrize(
    "cmd",
    [
        'python3 -c \'open("out.txt", "w").write("x")\'',
        "python3 -c 'import json,sys; print(json.load(sys.stdin)[\"a\"])'",
        "python3 -c 'xs = [1, 2]; xs.remove(1); print(xs)'",
        "python3 -c 'import asyncio; asyncio.run(main())'",
        "python3 -c 'print(\"os.system(rm -rf /)\")'",
        "python3 -c 'import subprocess; print(subprocess.__version__)'",
        'node -e \'require("fs").writeFileSync("out.txt", "x")\'',
        "node -e 'console.log(/exec(x)/.exec(\"exec(x)\"))'",
        "node -p 'require(\"./package.json\").version'",
        'ruby -e \'File.write("out.txt", "x")\'',
        "ruby -ne 'print if /system/' f",
        "perl -pi -e 's/system/os/g' f",
        "perl -ne 'print if /unlink/' f",
        "perl -e 'eval { die \"x\" }; print $@'",
        'php -r \'file_put_contents("out.txt", "x");\'',
        "awk '/a|b/ { print $1 }' f",
        "awk -F: '$3 > 1000 || $1 == \"root\"' /etc/passwd",
        "awk '{ print > \"out.txt\" }' f",
        "lua -e 'print(os.time())'",
    ],
)
def test_a_one_liner_that_writes_or_only_mentions_does_not_pause(cmd: str) -> None:
    _runs(cmd)


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from(["python3 -c", "node -e", "ruby -e", "perl -e", "php -r", "lua -e", "awk"]),
    st.text(alphabet=st.sampled_from(list("()[]{}'\"`,;.$@%|\\/=# abcsyemxq\n")), max_size=60),
)
def test_no_one_liner_makes_the_checker_fail(interp: str, code: str) -> None:
    verdict = check(f"{interp} {Q(code)}", strict=True)
    assert verdict.internal_error is None


# -- effect classes and targets -------------------------------------------------------------------

REVERSIBLE = [
    "rm -rf build", "rm -r build", "rm -f a.o", "rimraf node_modules", "find . -name '*.o' -delete",
    "truncate -s 0 app.log", "shred -u secret.txt", "git reset --hard", "git reset --hard HEAD",
    "git checkout -- src/app.py", "git checkout .", "git restore src/app.py", "git clean -fd",
    "git clean -f", "python3 -c 'import shutil; shutil.rmtree(\"build\")'",
]  # fmt: skip
IRREVERSIBLE = [
    "git push --force", "git branch -D topic", "git stash drop", "git reflog expire --all",
    "git gc --prune=now", "git filter-branch HEAD", "git update-ref -d refs/heads/x",
    "git reset --hard origin/main", "git clean -fdx", "git clean -fX", "kill 1", "pkill node",
    "npm publish", "docker compose down -v", "aws s3 rb s3://b", "shred /dev/sda", "$CMD x",
    "ls &&", "systemctl stop nginx", "ssh host rm -rf build", "chroot /srv rm -rf /x",
    "python3 -c 'import os; os.kill(1, 9)'",
]  # fmt: skip


@pytest.mark.parametrize("cmd", [c for c in REVERSIBLE if not c.startswith("rm -f ")])
def test_reversible_reasons(cmd: str) -> None:
    verdict = _pauses(cmd)
    assert verdict.effect == "reversible", verdict
    assert all(hit.effect == "reversible" for hit in verdict.hits), verdict


@pytest.mark.parametrize("cmd", IRREVERSIBLE)
def test_irreversible_reasons(cmd: str) -> None:
    assert _pauses(cmd).effect == "irreversible"


def test_plain_rm_still_does_not_pause() -> None:
    _runs("rm -f a.o")


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.sampled_from([c for c in REVERSIBLE if not c.startswith("rm -f ")]), max_size=3),
    st.lists(st.sampled_from(IRREVERSIBLE[:17]), max_size=2),
    st.sampled_from(["; ", " && ", "\n"]),
    st.randoms(),
)
def test_a_line_is_reversible_only_when_every_reason_is(
    rev: list[str], irr: list[str], sep: str, rnd: object
) -> None:
    parts = [*rev, *irr]
    if not parts:
        return
    import random

    assert isinstance(rnd, random.Random)
    rnd.shuffle(parts)
    verdict = _pauses(sep.join(parts))
    assert verdict.effect == ("irreversible" if irr else "reversible"), verdict
    if irr:
        assert next(h for h in verdict.hits if h.reason == verdict.reason).effect == "irreversible"
    assert len(verdict.hits) >= len(set(parts)) - 1, verdict


@pytest.mark.parametrize(
    "cmd, targets",
    [
        ("rm -rf build dist", ("build", "dist")),
        ("rm -rf ./build/../dist", ("build/../dist",)),
        ("rm -rf build//x/", ("build/x",)),
        ("rm -rf /tmp/x ~/y", ("/tmp/x", "~/y")),
        ("rm -rf $X", None),
        ("rm -rf build $X", None),
        ('rm -rf "$OUT"', None),
        ("cd web && rm -rf dist", ("web/dist",)),
        ("cd /tmp && rm -rf x", ("/tmp/x",)),
        ("cd && rm -rf x", ("~/x",)),
        ("cd ~/proj && rm -rf x", ("~/proj/x",)),
        ("(cd web && npm ci) && rm -rf build", ("build",)),
        ("cd /tmp; (cd ~/proj); rm -rf x", ("/tmp/x",)),
        ("cd web; cd ..; rm -rf build", ("web/../build",)),
        ('cd "$D" && rm -rf x', None),
        ("for d in a b; do cd $d; done; rm -rf x", None),
        ("f() { cd /tmp; }; f; rm -rf x", None),
        ("pushd web; popd; rm -rf x", None),
        ("cd - && rm -rf x", None),
        ("env -C sub rm -rf x", ("sub/x",)),
        ("sudo -D /srv rm -rf x", ("/srv/x",)),
        ("bash -c 'cd web && rm -rf dist'", ("web/dist",)),
        ("find build -delete", ("build",)),
        ("find -delete", (".",)),
        ("cd web && find . -name x -delete", ("web",)),
        ("git clean -fd", (".",)),
        ("git -C sub clean -fd", ("sub",)),
        ("cd sub && git reset --hard", ("sub",)),
        ("python3 -c 'import os; os.remove(p)'", None),
        ("truncate -s0 a.log b.log", ("a.log", "b.log")),
        # `~` is the HOME the line sets, when it sets one (in any way, for the command or not).
        ("rm -rf ~/proj/src", ("~/proj/src",)),
        ("cd ~/proj && rm -rf x", ("~/proj/x",)),
        ("HOME=/srv; rm -rf x", ("x",)),
        ("HOME=$PWD/src; rm -rf ~/proj/objects", None),
        ("export HOME=/srv; rm -rf ~/x", None),
        ("HOME+=/sub; rm -rf ~/x", None),
        ("HOME=src; cd; rm -rf x", None),
        ("HOME=src; cd ~/a && rm -rf x", None),
        ("HOME=/srv bash -c 'rm -rf ~/x'", None),
        ("env HOME=/srv bash -c 'rm -rf ~/x'", None),
        # What find and fd find is only known at run time.
        ("fd . /etc -x rm -rf", None),
        ("fd -e py -X rm -r", None),
        ("fd . /tmp -x shred -u", None),
        ("find build -exec rm -rf {} +", None),
        # `cd NAME` may go to a directory of CDPATH.
        ("CDPATH=/etc cd ssh && rm -rf x", None),
        ("CDPATH=/etc; cd ssh && rm -rf x", None),
        ("CDPATH=/etc; cd ./ssh && rm -rf x", ("ssh/x",)),
        ("CDPATH=/etc; cd /srv && rm -rf x", ("/srv/x",)),
    ],
)
def test_targets_are_the_paths_as_resolved(cmd: str, targets: tuple[str, ...] | None) -> None:
    hits = [h for h in _pauses(cmd).hits if h.effect == "reversible"]
    assert hits and hits[-1].targets == targets, hits


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from(["web", "/srv/app", "~/proj", "a/b/../c", "."]),
    st.sampled_from(["build", "x y", "../up", "/abs"]),
)
def test_a_cd_moves_every_relative_target(directory: str, path: str) -> None:
    (hit,) = _pauses(f"cd {Q(directory)} && rm -rf {Q(path)}").hits
    # Joined as written: `..` stays, since a symlink may stand before it.
    expected = path if path.startswith("/") else f"{directory}/{path}".removeprefix("./")
    assert hit.targets == (expected,), hit


@pytest.mark.parametrize(
    "cmd",
    ["ssh host rm -rf build", "docker run --rm img rm -rf /w", "kubectl exec p -- rm -rf /d",
     "chroot /srv rm -rf x", "proot -r rootfs rm -rf x", "schroot -c s -- rm -rf x",
     "lxc exec c -- rm -rf x"],
)  # fmt: skip
def test_effects_elsewhere_are_irreversible(cmd: str) -> None:
    verdict = _pauses(cmd)
    assert verdict.effect == "irreversible" and all(h.targets is None for h in verdict.hits)


def test_user_rules_are_irreversible() -> None:
    assert check("rm -rf build", {"rm": True}).effect == "irreversible"
    assert check("rm -rf build", {"rm": {"flags": ["-r"]}}).effect == "irreversible"
    assert check("npm publish", {"npm": {"subcommands": ["publish"]}}).effect == "irreversible"


def test_every_reason_is_listed_with_its_rule_command_effect_and_targets() -> None:
    verdict = check("rm -rf build; git push -f; $X; git reset --hard")
    assert [(h.rule, h.command, h.effect, h.targets) for h in verdict.hits] == [
        ("rm", "rm -rf build", "reversible", ("build",)),
        ("git", "git push -f", "irreversible", None),
        (None, "$X", "irreversible", None),
        ("git", "git reset --hard", "reversible", (".",)),
    ]
    assert verdict.reason == verdict.hits[1].reason and verdict.effect == "irreversible"


def test_a_verdict_that_does_not_pause_has_no_effect() -> None:
    verdict = check("ls -la")
    assert verdict.effect is None and verdict.hits == []
    assert verdict.to_dict()["effect"] is None and verdict.to_dict()["hits"] == []


@pytest.mark.parametrize("cmd", ["rm -rf build; git push -f", "ls", "$X", "if", "python3 -c x"])
def test_to_dict_is_msgpack_and_json_safe(cmd: str) -> None:
    data = check(cmd).to_dict()
    assert msgpack.unpackb(msgpack.packb(data)) == data
    assert json.loads(json.dumps(data)) == data


# -- ask_reversible -------------------------------------------------------------------------------


def test_ask_reversible_is_a_boolean_option_not_a_rule() -> None:
    assert validate_rules({"ask_reversible": True}) == []
    assert validate_rules({"ask_reversible": False, "rm": False}) == []
    for value, kind in (("yes", "string"), (1, "number"), ({}, "table")):
        (problem,) = validate_rules({"ask_reversible": value})
        assert "`pauselist.ask_reversible` should be boolean" in problem and kind in problem
    assert not check("ask_reversible now", {"ask_reversible": True}).pause
    assert check("rm -rf build", {"ask_reversible": True}).effect == "reversible"


def test_ask_reversible_reads_the_option() -> None:
    assert ask_reversible(None) is False
    assert ask_reversible({}) is False
    assert ask_reversible({"ask_reversible": False}) is False
    assert ask_reversible({"ask_reversible": True}) is True
    assert ask_reversible({"ask_reversible": "true"}) is False


def test_the_config_rejects_a_non_boolean_ask_reversible() -> None:
    from run_bash.config import parse_config
    from run_bash.errors import ConfigError

    with pytest.raises(ConfigError) as err:
        parse_config({"pauselist": {"ask_reversible": "yes"}})
    assert "pauselist.ask_reversible" in str(err.value)
    parse_config({"pauselist": {"ask_reversible": True}})


# -- limits ---------------------------------------------------------------------------------------


def test_input_too_deep_or_too_long_pauses_with_the_reason() -> None:
    deep = check("echo " + "$(" * 200 + "ls" + ")" * 200, strict=True)
    assert deep.pause and "too deep" in deep.reason, deep
    nested = check("bash -c " + Q("bash -c " * 12 + "ls"), strict=True)
    assert isinstance(nested, Verdict)
    long = check("echo hi\n" * 60_000, strict=True)
    assert long.pause and "too much code" in long.reason, long.reason
    word = check("echo " + "x" * 200_000, strict=True)
    assert word.internal_error is None


# -- the table ------------------------------------------------------------------------------------


def _runs_commands(row: object) -> bool:
    from run_bash.checker.reading import Row

    assert isinstance(row, Row)
    kinds = (Command, Shell, Code, Each)
    return any(isinstance(r, kinds) for r in row.runs) or any(
        _runs_commands(sub) for sub in row.subs.values()
    )


def test_every_row_that_runs_commands_has_an_example() -> None:
    from tests.unit import test_checker_properties as props
    from tests.unit.test_checker_families import PAUSES, RUNS

    examples = " ".join(
        [*WRAPPERS, *SHELL_WRAPPERS, *props.COMMAND_WRAPPERS, *(c for c, _, _ in PAUSES), *RUNS,
         *(t for t, _ in props.SCRIPT_WRAPPERS if isinstance(t, str)),
         *(f("x") for f in CODE_OPTIONS),
         "ld.so command sudo doas pkexec nohup timeout time builtin stdbuf ionice setsid chroot "
         "chrt taskset strace ltrace fakeroot unshare nsenter systemd-run setpriv gosu su-exec "
         "dumb-init tini eatmydata catchsegv xvfb-run dbus-run-session dbus-launch ssh-agent "
         "valgrind prlimit numactl cgexec firejail flatpak-spawn distrobox-host-exec host-spawn "
         "toolbox faketime chronic ifne nocache rlwrap torsocks proxychains proxychains4 lckdo "
         "proot entr npx bunx pnpx pipenv bundle asdf direnv pee envuidgid s6-setuidgid "
         "s6-envdir softlimit systemd-nspawn machinectl lxc distrobox-enter autossh sftp sshfs "
         "mosh docker-compose script uv uvx poetry hatch pdm conda kubectl npm pnpm yarn bun "
         "mise dotenvx pipx coverage watch nix-shell ssh docker podman nerdctl incus memray "
         "scalene kernprof ansible lerna corepack"],
    )  # fmt: skip
    words = set(examples.replace("'", " ").replace('"', " ").split())
    missing = [name for name, row in TABLE.items() if _runs_commands(row) and name not in words]
    assert not missing, missing


def _written(path: str, body: str) -> str:
    return f"mkdir -p tests && cat > {path} <<'EOF'\n{body}\nEOF\n"


RMTREE_PY = "import shutil\nshutil.rmtree('src')"
PRINT_PY = "print('ok')"


@pytest.mark.parametrize(
    "cmd, runs",
    [
        (_written("t.py", "#!/usr/bin/env python3\n" + RMTREE_PY) + "chmod +x t.py && ./t.py", 1),
        (_written("t.py", "#!/usr/bin/env python3\n" + PRINT_PY) + "chmod +x t.py && ./t.py", 0),
        (_written("t.rb", "#!/usr/bin/ruby\nsystem('git push -f')") + "./t.rb", 1),
        (_written("t.awk", "#!/usr/bin/awk -f\nBEGIN { system(\"rm -rf x\") }") + "./t.awk", 1),
        (_written("test_x.py", RMTREE_PY) + "pytest -q", 1),
        (_written("tests/test_x.py", RMTREE_PY) + "python -m pytest tests", 1),
        (_written("test_x.py", "def test_a():\n    assert 1") + "pytest -q", 0),
        (_written("a.test.js", "require('fs').rmSync('src', {recursive: true})") + "npx jest", 1),
        (_written("a.test.js", "test('a', () => {})") + "npx vitest run", 0),
        (_written("sitecustomize.py", RMTREE_PY) + "PYTHONPATH=. python3 -c 'print(1)'", 1),
        (_written("x.pth", "import os; os.system('rm -rf src')") + "python3 -V", 1),
        (_written("x.js", "require('fs').rmSync('src', {recursive: true})")
         + "NODE_OPTIONS='--require ./x.js' node -v", 1),
        (_written("m.go", 'package main\nimport "os"\nfunc main() { os.RemoveAll("src") }')
         + "go run m.go", 1),
        (_written("m.go", 'package main\nimport "os/exec"\nfunc main() {\n'
                  '  exec.Command("git", "push", "-f").Run()\n}') + "go run .", 1),
        (_written("m.go", 'package main\nimport "fmt"\nfunc main() { fmt.Println(1) }')
         + "go run .", 0),
        ("julia -e 'run(`rm -rf x`)'", 1),
        ("julia -e 'rm(\"build\"; recursive=true)'", 1),
        ("julia -e 'println(1 + 1)'", 0),
        ("expect -c 'spawn rm -rf x; expect eof'", 1),
        ("expect -c 'spawn ssh host; expect \"$ \"'", 0),
        ("tclsh <<'EOF'\nexec git push --force\nEOF", 1),
        ("emacs --batch --eval '(shell-command \"rm -rf x\")'", 1),
        ("emacs --batch --eval '(call-process \"git\" nil t nil \"push\" \"-f\")'", 1),
        ("emacs --batch --eval '(message \"hi\")'", 0),
        ("sqlite3 db.sqlite '.shell rm -rf x'", 1),
        ("sqlite3 db.sqlite 'select count(*) from t'", 0),
        ("psql -c '\\! rm -rf x'", 1),
        ("psql -c 'select 1'", 0),
        ("mysql -e 'system rm -rf x'", 1),
        ("git clone -c core.sshCommand='rm -rf x' https://h/r.git", 1),
        ("git clone -c core.autocrlf=false https://h/r.git", 0),
        ("git clone --template=tpl https://h/r.git", 1),
        ("git send-email --sendmail-cmd='rm -rf x' 0001.patch", 1),
        ("git send-email --smtp-server=smtp.example.com 0001.patch", 0),
        ("ansible all -m shell -a 'rm -rf /srv'", 1),
        ("ansible all -m ping", 0),
        ("node -e \"require('execa').execaSync('rm', ['-rf', 'x'])\"", 1),
        ("node -e \"require('shelljs').rm('-rf', 'dist')\"", 1),
        ("ruby -e 'open(\"|rm -rf x\").read'", 1),
        ("ruby -e 'puts open(ARGV[0]).read' f", 0),
        ("cat > cfg <<'EOF'\nHost x\n  ProxyCommand rm -rf y\nEOF\nssh -F cfg x", 1),
        ("cat >> ~/.ssh/config <<'EOF'\nHost x\n  ProxyCommand rm -rf y\nEOF\nssh x true", 1),
        ("cat > cfg <<'EOF'\nHost x\n  User me\nEOF\nssh -F cfg x", 0),
        ("docker run --entrypoint rm img -rf /x", 1),
        ("docker run --rm --entrypoint sh img -c 'git push -f'", 1),
        ("docker run --rm --entrypoint sh img -c 'ls'", 0),
        ("php -r 'array_map(\"unlink\", glob(\"*.log\"));'", 1),
        ("php -r 'print_r(array_map(\"strtoupper\", [\"a\"]));'", 0),
    ],
)  # fmt: skip
def test_code_in_more_languages_and_places(cmd: str, runs: int) -> None:
    assert check(cmd, strict=True).pause is bool(runs), check(cmd)


@pytest.mark.parametrize(
    "make",
    [
        lambda n: "python3 -c " + Q("x = '" + "s(" * n + "'"),
        lambda n: "node -e " + Q("`" * n),
        lambda n: "perl -e " + Q("s/" * n),
        lambda n: "ruby -e " + Q("%x(" * n),
        lambda n: "awk " + Q("/" + "|" * n),
        lambda n: "sed " + Q("s/a/b/;" * n),
        lambda n: "vim -c " + Q("!|" * n),
        lambda n: "emacs --eval " + Q("(shell-command " * n),
        lambda n: "sqlite3 db " + Q(".shell x\n" * n),
        lambda n: "python3 -c " + Q("os.system(" * n),
        lambda n: "php -r " + Q("system(" * n),
        lambda n: "node -e " + Q("$(" * n),
        lambda n: "sed " + Q(" " * n),
        lambda n: "sed " + Q("\n" * n),
    ],
)
def test_large_code_in_another_language_finishes_quickly(make: Callable[[int], str]) -> None:
    import time

    start = time.perf_counter()
    verdict = check(make(20_000), strict=True)
    assert time.perf_counter() - start < 5, verdict.reason
    huge = check(make(120_000), strict=True)
    assert huge.internal_error is None


def _global_option_cases() -> list[tuple[str, str]]:
    """For every row with subcommands: each of its options that take a value, written before a
    subcommand that always pauses, in every spelling getopt accepts."""
    from run_bash.checker.options import REQUIRED
    from run_bash.checker.rules import DEFAULT_RULES

    cases: list[tuple[str, str]] = []
    for name, row in sorted(TABLE.items()):
        if name not in DEFAULT_RULES or row.skip or row.opts.go:
            continue
        always = [
            sub
            for sub, r in row.subs.items()
            if any(not (p.when or p.operands or p.check or p.unless) for p in r.pauses)
        ]
        if not always:
            continue
        sub = always[0]
        spellings: list[str] = []
        for long, arity in row.opts.longs.items():
            if arity == REQUIRED:
                spellings += [f"--{long} v", f"--{long}=v"]
        for letter in row.opts.value:
            spellings += [f"-{letter} v", f"-{letter}v"]
        cases += [(name, f"{name} {spelled} {sub}") for spelled in spellings]
    return cases


@pytest.mark.parametrize("rule, cmd", _global_option_cases())
def test_every_global_option_with_a_value_is_seen_past(rule: str, cmd: str) -> None:
    verdict = _pauses(cmd)
    assert verdict.rule == rule, verdict
