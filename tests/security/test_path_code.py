"""What a program on PATH loads with it stays what it was.

A PATH link that runs a program in the project (``~/.local/bin/mytool`` -> ``proj/tools/...``, a
relative ``node_modules/.bin``) runs more than the file it leads to: Python imports from the
script's own directory first, Node requires the files of its package and resolves bare requires
through every ``node_modules`` above it. And a program on PATH may have another name (a hard
link) in the project. Each attack below writes one of those from inside the sandbox; the user
then runs the program outside it. Every test has its positive controls: the same run does its
ordinary work (a file written beside), and the same attack without a sandbox (the ``none``
backend) does run the payload for the user.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from run_bash.errors import SpawnError
from tests.security.conftest import CONTROL, World
from tests.security.test_hostread import payload, pwned

ORDINARY = f"echo ok > other.txt && echo {CONTROL}"


def run_outside(world: World, script: str) -> str:
    """A shell of the user's, outside the sandbox, in the project, with their PATH."""
    done = subprocess.run(
        ["/bin/sh", "-c", script],
        env=world.env,
        capture_output=True,
        text=True,
        cwd=world.project,
        stdin=subprocess.DEVNULL,
        timeout=60,
    )
    return done.stdout + done.stderr


def local_bin(world: World) -> Path:
    """``~/.local/bin``, first on the user's PATH (no run can write it)."""
    lb = world.home / ".local/bin"
    lb.mkdir(parents=True, exist_ok=True)
    world.env["PATH"] = f"{lb}:{world.env['PATH']}"
    return lb


def write(path: Path, text: str, mode: int | None = None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    if mode is not None:
        path.chmod(mode)


def attack_and_check(sbx, world: World, attack: str, program: str, **config) -> Any:
    """The attack inside the sandbox, after ordinary work: the work is done, and the user's
    program does not run the payload afterwards. Then the control: the same attack without the
    sandbox does. Returns the sandboxed run's result."""
    rb = sbx.with_config(**config)
    r = rb.run(f"{ORDINARY}; {attack}; echo end")
    assert CONTROL in r.output and (world.project / "other.txt").exists(), (r.error, r.output)
    said = run_outside(world, program)
    assert pwned(world) == [], (r.output, r.notices, said)
    control = rb.unconfined().run(attack)
    said = run_outside(world, program)
    assert pwned(world), (
        "the attack does not work even without a sandbox: the test proves nothing "
        f"(the run: {control.error or ''} {control.output!r}; {program}: {said!r})"
    )
    return r


# -- a Python program: its own directory is the first place its imports are found ----------------


def python_tool(world: World, suffix: bool) -> None:
    """``~/.local/bin/mytool`` -> ``proj/tools/mytool[.py]``, which imports ``json`` and
    ``helper`` (beside it). Without the suffix it is known by its `#!` line."""
    name = "mytool.py" if suffix else "mytool"
    tools = world.project / "tools"
    write(
        tools / name,
        "#!/usr/bin/env python3\nimport json\nimport helper\nprint('real', helper.X)\n",
        0o755,
    )
    write(tools / "helper.py", "X = 1\n")
    (local_bin(world) / "mytool").symlink_to(tools / name)


def py_payload(world: World, tag: str) -> str:
    return f"printf 'import os\\nos.system(\"{payload(world, tag)}\")\\nX = 2\\n'"


PYTHON_ATTACKS = {
    "new_stdlib_shadow": "{p} > tools/json.py",
    "edit_sibling": "{p} >> tools/helper.py",
    "package_shadow": "mkdir -p tools/helper && {p} > tools/helper/__init__.py",
}


@pytest.mark.parametrize("suffix", [True, False], ids=["py", "shebang"])
@pytest.mark.parametrize("attack", sorted(PYTHON_ATTACKS))
def test_a_python_program_on_path_keeps_its_modules(sbx, world, attack, suffix):
    python_tool(world, suffix)
    assert "real 1" in run_outside(world, "mytool")
    cmd = PYTHON_ATTACKS[attack].format(p=py_payload(world, attack))
    attack_and_check(sbx, world, cmd, "mytool")


def test_a_write_the_unit_refuses_says_why(sbx, world):
    """The run that fails on the read-only directory is told which program on PATH keeps it,
    and the option."""
    python_tool(world, True)
    r = sbx.with_config().run(f"{ORDINARY} && echo 'X = 3' > tools/helper.py")
    assert CONTROL in r.output and r.exit_code, r.output
    lb = world.home / ".local/bin/mytool"
    said = [n for n in r.notices if n.startswith("tools is read-only inside the sandbox")]
    assert said and str(lb) in said[0] and "sandbox.rules.path_writable" in said[0], r.notices
    assert "X = 1" in (world.project / "tools/helper.py").read_text()


# -- a Node package in the project ---------------------------------------------------------------


def js_payload(world: World, tag: str) -> str:
    return f'printf \'require("child_process").execSync("{payload(world, tag)}");\\n\''


def node_tool(world: World, dep_in: str) -> None:
    """``~/.local/bin/cli`` -> ``proj/tools/cli/bin/cli.js`` (a package: ``package.json``) that
    requires ``../lib/main.js`` and the package ``dep``, installed in ``dep_in``."""
    cli = world.project / "tools/cli"
    write(cli / "package.json", '{"name": "cli", "bin": {"cli": "bin/cli.js"}}\n')
    write(
        cli / "bin/cli.js",
        "#!/usr/bin/env node\nrequire('../lib/main.js');\nrequire('dep');\n"
        "console.log('real cli');\n",
        0o755,
    )
    write(cli / "lib/main.js", "module.exports = 1;\n")
    write(world.project / dep_in / "dep/index.js", "module.exports = 1;\n")
    (local_bin(world) / "cli").symlink_to(cli / "bin/cli.js")


NODE_ATTACKS = {
    ("node_modules", "edit_lib"): "{p} >> tools/cli/lib/main.js",
    ("node_modules", "edit_hoisted_dep"): "{p} >> node_modules/dep/index.js",
    # A package of that name nearer to the program than the one it finds now.
    ("node_modules", "shadow_dep"): "mkdir -p tools/node_modules/dep && "
    "{p} > tools/node_modules/dep/index.js",
    ("tools/cli/node_modules", "edit_own_dep"): "{p} >> tools/cli/node_modules/dep/index.js",
}


@pytest.mark.parametrize("case", sorted(NODE_ATTACKS), ids="-".join)
def test_a_node_package_on_path_keeps_its_files(sbx, world, case):
    dep_in, tag = case
    node_tool(world, dep_in)
    assert "real cli" in run_outside(world, "cli")
    attack_and_check(sbx, world, NODE_ATTACKS[case].format(p=js_payload(world, tag)), "cli")


# -- `./node_modules/.bin` on PATH: the whole node_modules -----------------------------------------


def eslint_project(world: World) -> None:
    """``PATH=./node_modules/.bin:$PATH`` with an eslint-like layout: ``.bin/eslint`` ->
    ``../eslint/bin/eslint.js``, which requires ``../lib/cli.js`` and the hoisted ``espree``."""
    nm = world.project / "node_modules"
    write(nm / "eslint/package.json", '{"name": "eslint", "bin": {"eslint": "bin/eslint.js"}}\n')
    write(
        nm / "eslint/bin/eslint.js",
        "#!/usr/bin/env node\nrequire('../lib/cli.js');\nrequire('espree');\n"
        "console.log('real eslint');\n",
        0o755,
    )
    write(nm / "eslint/lib/cli.js", "module.exports = 1;\n")
    write(nm / "espree/package.json", '{"name": "espree"}\n')
    write(nm / "espree/index.js", "module.exports = 1;\n")
    (nm / ".bin").mkdir()
    (nm / ".bin/eslint").symlink_to("../eslint/bin/eslint.js")
    world.env["PATH"] = f"./node_modules/.bin:{world.env['PATH']}"


ESLINT_ATTACKS = {
    "edit_lib": "{p} >> node_modules/eslint/lib/cli.js",
    "edit_hoisted_dep": "{p} >> node_modules/espree/index.js",
    "nested_shadow": "mkdir -p node_modules/eslint/node_modules/espree && "
    "{p} > node_modules/eslint/node_modules/espree/index.js",
}


@pytest.mark.parametrize("attack", sorted(ESLINT_ATTACKS))
def test_relative_node_modules_bin_keeps_the_packages(sbx, world, attack):
    eslint_project(world)
    assert "real eslint" in run_outside(world, "eslint")
    attack_and_check(
        sbx, world, ESLINT_ATTACKS[attack].format(p=js_payload(world, attack)), "eslint"
    )


# -- what links in those kept directories lead to: workspaces, linked modules ----------------------


def workspace(world: World, where: str) -> str:
    """An npm workspace: ``eslint`` requires ``@my/lib``, a link (``node_modules/@my/lib`` ->
    ``../../packages/lib``) to a workspace package in the project, and ``dep``, hoisted to the
    root ``node_modules``. ``where``: ``root`` puts ``./node_modules/.bin`` on PATH;
    ``package``, ``packages/web/node_modules/.bin`` (eslint in the package's own node_modules,
    ``@my/lib`` linked there). The program to run outside."""
    p = world.project
    nm = p / ("node_modules" if where == "root" else "packages/web/node_modules")
    write(
        nm / "eslint/bin/eslint.js",
        "#!/usr/bin/env node\nrequire('@my/lib');\nrequire('dep');\nconsole.log('real');\n",
        0o755,
    )
    write(nm / "eslint/package.json", '{"name": "eslint"}\n')
    write(p / "packages/lib/package.json", '{"name": "@my/lib"}\n')
    write(p / "packages/lib/index.js", "module.exports = 1;\n")
    (nm / "@my").mkdir(parents=True)
    (nm / "@my/lib").symlink_to(os.path.relpath(p / "packages/lib", nm / "@my"))
    write(p / "node_modules/dep/index.js", "module.exports = 1;\n")
    (nm / ".bin").mkdir()
    (nm / ".bin/eslint").symlink_to("../eslint/bin/eslint.js")
    entry = "./node_modules/.bin" if where == "root" else str(nm / ".bin")
    world.env["PATH"] = f"{entry}:{world.env['PATH']}"
    return "eslint"


WORKSPACE_ATTACKS = {
    "workspace_package": "{p} >> packages/lib/index.js",
    "hoisted_to_the_root": "{p} >> node_modules/dep/index.js",
    "new_file_of_the_package": "{p} > packages/lib/extra.js && "
    "printf 'require(\"./extra.js\");\n' >> packages/lib/index.js",
}


@pytest.mark.parametrize("where", ["root", "package"])
@pytest.mark.parametrize("attack", sorted(WORKSPACE_ATTACKS))
def test_a_workspace_package_a_program_on_path_requires(sbx, world, attack, where):
    program = workspace(world, where)
    assert "real" in run_outside(world, program)
    attack_and_check(
        sbx, world, WORKSPACE_ATTACKS[attack].format(p=js_payload(world, attack)), program
    )


def test_a_module_linked_into_a_python_programs_directory(sbx, world):
    """``tools/helper.py`` is a link to ``lib/helper.py``: Python imports what it leads to."""
    python_tool(world, True)
    lib = world.project / "lib"
    lib.mkdir()
    (world.project / "tools/helper.py").rename(lib / "helper.py")
    (world.project / "tools/helper.py").symlink_to("../lib/helper.py")
    assert "real 1" in run_outside(world, "mytool")
    attack_and_check(sbx, world, f"{py_payload(world, 'linked')} >> lib/helper.py", "mytool")


# -- the package is the project: refused, unless allowed -------------------------------------------


def project_package(world: World) -> str:
    """``~/.local/bin/cli`` -> ``proj/bin/cli.js`` of the package that is the project (``npm
    link`` in it); what the attack writes: its ``lib/main.js``."""
    p = world.project
    write(p / "package.json", '{"name": "proj", "bin": {"cli": "bin/cli.js"}}\n')
    write(
        p / "bin/cli.js",
        "#!/usr/bin/env node\nrequire('../lib/main.js');\nconsole.log('real cli');\n",
        0o755,
    )
    write(p / "lib/main.js", "module.exports = 1;\n")
    (local_bin(world) / "cli").symlink_to(p / "bin/cli.js")
    return f"{js_payload(world, 'project')} >> lib/main.js"


def test_a_package_that_is_the_project_is_refused(sbx, world):
    """Its code unit would be the project, which cannot be read-only: the run does not start and
    says which program, why, and the option. Nothing of the attack runs."""
    attack = project_package(world)
    with pytest.raises(SpawnError) as refused:
        sbx.with_config().run(f"{ORDINARY}; {attack}; echo end")
    assert not (world.project / "other.txt").exists()
    err = str(refused.value)
    assert str(world.home / ".local/bin/cli") in err and "path_writable" in err, err
    assert "package.json" in err and "holds the project" in err, err
    assert "\n" not in err.strip(), err
    run_outside(world, "cli")
    assert pwned(world) == []
    # The control: without a sandbox the attack does run for the user.
    sbx.unconfined().run(attack)
    run_outside(world, "cli")
    assert pwned(world)


@pytest.mark.parametrize("allowed", ["~/.local/bin/cli", "~/.local/bin", "."])
def test_a_package_that_is_the_project_runs_when_allowed(sbx, world, allowed):
    """`sandbox.rules.path_writable` naming the program, its PATH directory or the project lets
    the runs start (and change what it runs: the user's choice)."""
    project_package(world)
    rb = sbx.with_config(sandbox={"rules": {"path_writable": [allowed]}})
    r = rb.run(f"{ORDINARY}; echo '// edited' >> lib/main.js && echo edited")
    assert r.error is None and CONTROL in r.output and "edited" in r.output, (r.error, r.output)
    assert "// edited" in (world.project / "lib/main.js").read_text()
    assert "real cli" in run_outside(world, "cli")  # its link was left in place
    assert (world.home / ".local/bin/cli").is_symlink(), r.notices


# -- hard links: another name of a program on PATH -----------------------------------------------


def script(world: World, text: str = "echo real tool") -> str:
    return f"#!/bin/sh\n{text}\n"


def hard_linked(world: World, order: str) -> tuple[Path, Path]:
    """``~/.local/bin/mytool`` and ``proj/tools/mytool`` are one file; ``order`` says which name
    the user made first (the other is the hard link)."""
    on_path = local_bin(world) / "mytool"
    in_project = world.project / "tools/mytool"
    in_project.parent.mkdir(parents=True)
    first, second = (in_project, on_path) if order == "project_first" else (on_path, in_project)
    write(first, script(world), 0o755)
    os.link(first, second)
    return on_path, in_project


HARD_LINK_ATTACKS = {
    "write": "printf '#!/bin/sh\\n{p}\\n' > tools/mytool",
    "truncate": ": > tools/mytool && printf '#!/bin/sh\\n{p}\\n' >> tools/mytool",
    "append": "echo '{p}' >> tools/mytool",
}


@pytest.mark.parametrize("order", ["project_first", "path_first"])
@pytest.mark.parametrize("attack", sorted(HARD_LINK_ATTACKS))
def test_a_hard_link_of_a_program_on_path(sbx, world, attack, order):
    on_path, _ = hard_linked(world, order)
    before = on_path.read_bytes()
    cmd = HARD_LINK_ATTACKS[attack].format(p=payload(world, attack))
    rb = sbx.with_config()
    # The project's name of it stays readable inside the run.
    r = rb.run(f"{ORDINARY} && cat tools/mytool; {cmd}; echo end")
    assert CONTROL in r.output and "real tool" in r.output, (r.error, r.output)
    assert (world.project / "other.txt").exists()
    assert on_path.read_bytes() == before, r.notices
    run_outside(world, "mytool")
    assert pwned(world) == [], (r.output, r.notices)
    rb.unconfined().run(cmd)
    run_outside(world, "mytool")
    assert pwned(world), "the attack does not work even without a sandbox"


@pytest.mark.parametrize("order", ["project_first", "path_first"])
def test_a_hard_link_made_between_runs(sbx, world, order):
    """The link is made after a run in the same session has looked at PATH (what was found then
    is remembered): the next run keeps the new name too."""
    lb = local_bin(world)
    (world.project / "tools").mkdir()
    rb = sbx.with_config()
    first = lb / "mytool" if order == "path_first" else world.project / "tools/mytool"
    write(first, script(world), 0o755)
    r = rb.run(f"echo {CONTROL}")
    assert CONTROL in r.output, (r.error, r.output)
    second = world.project / "tools/mytool" if order == "path_first" else lb / "mytool"
    os.link(first, second)
    attack = HARD_LINK_ATTACKS["append"].format(p=payload(world, "between"))
    r = rb.run(f"{ORDINARY}; {attack}; echo end")
    assert CONTROL in r.output and (world.project / "other.txt").exists(), (r.error, r.output)
    run_outside(world, "mytool")
    assert pwned(world) == [], (r.output, r.notices)
    rb.unconfined().run(attack)
    run_outside(world, "mytool")
    assert pwned(world), "the attack does not work even without a sandbox"


def test_a_hard_link_of_what_a_path_link_runs(sbx, world):
    """``~/.local/bin/mytool`` -> ``proj/tools/mytool``, which is also ``proj/other/mytool``."""
    tools = world.project / "tools"
    write(tools / "mytool", script(world), 0o755)
    (world.project / "other").mkdir()
    os.link(tools / "mytool", world.project / "other/mytool")
    (local_bin(world) / "mytool").symlink_to(tools / "mytool")
    attack = f"echo '{payload(world, 'end')}' >> other/mytool"
    attack_and_check(sbx, world, attack, "mytool")


def test_a_hard_link_of_a_program_in_a_path_directory_in_the_project(sbx, world):
    """``proj/pbin`` is on PATH (read-only inside runs); its ``tool`` is also ``proj/scripts/tool``."""
    pbin = world.project / "pbin"
    write(pbin / "tool", script(world), 0o755)
    (world.project / "scripts").mkdir()
    os.link(pbin / "tool", world.project / "scripts/tool")
    world.env["PATH"] = f"{pbin}:{world.env['PATH']}"
    attack = f"echo '{payload(world, 'pbin')}' >> scripts/tool"
    attack_and_check(sbx, world, attack, "tool")


def interpreted_tool(world: World) -> str:
    """``~/.local/bin/tool`` → ``proj/tools/tool.py``, whose `#!` line names the project venv's
    python: the sandboxed attack (made by the caller) plants a ``*.pth`` in that venv, which every
    start of its python runs."""
    import glob
    import sys

    venv = world.project / ".venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    write(world.project / "tools/tool.py", f"#!{venv}/bin/python\nprint('real tool')\n", 0o755)
    (local_bin(world) / "tool").symlink_to(world.project / "tools/tool.py")
    site = os.path.relpath(glob.glob(str(venv / "lib/python*/site-packages"))[0], world.project)
    return f"printf 'import os; os.system(\"%s\")\\n' '{payload(world, 'pth')}' > {site}/evil.pth"


def test_the_interpreter_a_linked_program_names_is_kept(sbx, world):
    attack = interpreted_tool(world)
    assert "real tool" in run_outside(world, "tool")
    r = attack_and_check(sbx, world, attack, "tool")
    assert "Read-only file system" in r.output, r.output


@pytest.mark.parametrize("ext", ["js", "mjs"])
def test_a_package_json_above_a_linked_script_cannot_claim_its_imports(sbx, world, ext):
    """A JavaScript program in no package of its own: a ``package.json`` a run writes above it
    would be its package, whose ``name`` and ``exports`` resolve ``import 'dep'`` before any
    ``node_modules`` is searched (Node's self-reference)."""
    write(world.home / "node_modules/dep/package.json", '{"name":"dep","main":"index.js"}\n')
    write(world.home / "node_modules/dep/index.js", "module.exports = 'dep-real';\n")
    src = (
        "#!/usr/bin/env node\nimport d from 'dep';\nconsole.log('real', d);\n"
        if ext == "mjs"
        else "#!/usr/bin/env node\nconsole.log('real', require('dep'));\n"
    )
    write(world.project / f"tools/mytool.{ext}", src, 0o755)
    (local_bin(world) / "mytool").symlink_to(world.project / f"tools/mytool.{ext}")
    assert "dep-real" in run_outside(world, "mytool")
    pl = payload(world, "selfref")
    attack = (
        'printf \'{"name":"dep","exports":{"import":"./evil.mjs",'
        '"require":"./evil.cjs"}}\' > package.json && '
        f'printf \'require("child_process").execSync("{pl}");module.exports="x";\' '
        "> evil.cjs && "
        f'printf \'import cp from "child_process";cp.execSync("{pl}");export default "x";\' '
        "> evil.mjs"
    )
    r = sbx.with_config().run(f"echo ok > other.txt && echo {CONTROL}; {attack}; echo end")
    assert CONTROL in r.output and (world.project / "other.txt").exists(), r.output
    run_outside(world, "mytool")
    assert pwned(world) == [], (r.output, r.notices)
    for name in ("package.json", "evil.cjs", "evil.mjs"):
        (world.project / name).unlink(missing_ok=True)
    # The control: without the sandbox the same files take over the user's tool's import.
    sbx.with_config().unconfined().run(attack)
    run_outside(world, "mytool")
    assert pwned(world), "the attack does not work even without a sandbox: the test proves nothing"


@pytest.mark.parametrize("existing", [False, True])
@pytest.mark.parametrize(
    ("entry", "plant"), [("../bin", "bin"), ("../node_modules/.bin", "node_modules/.bin")]
)
def test_a_parent_relative_entry_is_kept_at_the_top(sbx, world, entry, plant, existing):
    """From ``web``, ``../bin`` is the project's ``bin``: kept at the top too."""
    tool = "rbtool"
    (world.project / "web").mkdir()
    if existing:
        write(world.project / plant / tool, "#!/bin/sh\necho real\n", 0o755)
    world.env["PATH"] = f"{entry}:{world.env['PATH']}"
    attack = (
        f"mkdir -p {plant} && printf '#!/bin/sh\\n{payload(world, 'up')}\\n' > {plant}/{tool} "
        f"&& chmod +x {plant}/{tool}"
    )

    def shell() -> None:
        subprocess.run(
            ["bash", "-c", f"{tool}; true"],
            cwd=world.project / "web",
            env=world.env,
            capture_output=True,
            timeout=60,
        )

    r = sbx.with_config().run(f"echo ok > web/other.txt && echo {CONTROL}; {attack}; echo end")
    assert CONTROL in r.output and (world.project / "web/other.txt").exists(), r.output
    shell()
    assert pwned(world) == [], (r.output, r.notices)
    sbx.with_config().unconfined().run(attack)
    shell()
    assert pwned(world), "the attack does not work even without a sandbox: the test proves nothing"


def test_the_libraries_a_linked_compiled_program_loads_are_kept(sbx, world, tmp_path):
    """``~/.local/bin/tool`` → ``proj/build/bin/tool``, linked with ``RUNPATH $ORIGIN/../lib``:
    the loader takes ``build/lib/libh.so`` from beside ``bin``, so that directory is kept too
    (the loader says where it looks)."""
    import shutil

    if shutil.which("gcc") is None:
        pytest.skip("gcc not found")
    b, src = world.project / "build", tmp_path / "src"
    for d in (b / "bin", b / "lib", src):
        d.mkdir(parents=True, exist_ok=True)
    (src / "h.c").write_text("int h(void){return 1;}\n")
    (src / "m.c").write_text(
        '#include <stdio.h>\nint h(void);\nint main(){printf("real %d\\n",h());}\n'
    )
    (src / "e.c").write_text(
        "#include <stdlib.h>\nint h(void){return 2;}\n"
        f'__attribute__((constructor)) static void c(void){{system("{payload(world, "elf")}");}}\n'
    )

    def gcc(*args: object) -> None:
        subprocess.run(["gcc", *map(str, args)], check=True)

    gcc("-shared", "-fPIC", "-o", b / "lib/libh.so", src / "h.c")
    gcc("-o", b / "bin/tool", src / "m.c", f"-L{b}/lib", "-lh", "-Wl,-rpath,$ORIGIN/../lib")
    gcc("-shared", "-fPIC", "-o", world.project / "evil.so", src / "e.c")
    (local_bin(world) / "tool").symlink_to(b / "bin/tool")
    assert "real 1" in run_outside(world, "tool")
    r = attack_and_check(sbx, world, "cp evil.so build/lib/libh.so", "tool")
    assert "Read-only file system" in r.output, r.output
