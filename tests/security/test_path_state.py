"""#20 class 4: PATH by state, not by name.

Any change to a program the host would find on its PATH is caught: its content, mode or link
target, its target's own content or mode, an execute bit added by a later run, an existing name
overwritten; for a venv whose ``bin`` is on PATH, its start-up files too (``*.pth``,
``sitecustomize.py``, ``usercustomize.py``, ``activate*``). Through ``SessionManager`` under every
confining backend; the outside PATH lookup is the judge, and the same attack without a sandbox
is the control.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.security.conftest import CONTROL, World
from tests.security.test_hostread import on_path, payload, pwned


def snapshot(root: Path) -> dict[str, tuple[object, ...]]:
    """Every entry under ``root``: type, mode, content or link text."""
    out: dict[str, tuple[object, ...]] = {}
    for dirpath, dirs, files in os.walk(root):
        for name in [*dirs, *files]:
            p = Path(dirpath) / name
            st = p.lstat()
            if p.is_symlink():
                out[str(p)] = ("link", os.readlink(p))
            elif p.is_file():
                out[str(p)] = ("file", st.st_mode, p.read_bytes())
            else:
                out[str(p)] = ("dir", st.st_mode)
    return out


def make_venv(world: World) -> Path:
    venv = world.project / ".venv"
    subprocess.run(["python3", "-m", "venv", "--without-pip", str(venv)], check=True)
    (venv / "bin/tool").write_text("#!/bin/sh\necho real-tool\n")
    (venv / "bin/tool").chmod(0o755)
    # Not executable: a run that adds the bit would make the user run it.
    (venv / "bin/notes").write_text(f"#!/bin/sh\n{payload(world, 'venv')}\n")
    return venv


def site(venv: Path) -> str:
    out = subprocess.run(
        [
            str(venv / "bin/python"),
            "-c",
            "import sysconfig;print(sysconfig.get_paths()['purelib'])",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    return os.path.relpath(out.stdout.strip(), venv.parent)


def venv_attacks(world: World, venv: Path) -> dict[str, str]:
    p = payload(world, "venv")
    sp = site(venv)
    shell = f"printf '#!/bin/sh\\n{p}\\n'"
    return {
        "content": f"{shell} > .venv/bin/tool",
        "overwrite_by_rename": f"{shell} > t.$$ && chmod +x t.$$ && mv t.$$ .venv/bin/tool",
        "mode": "chmod +x .venv/bin/notes",
        "link_target": f"{shell} > evil && chmod +x evil && ln -sf ../../evil .venv/bin/python3",
        "shadow": f"{shell} > .venv/bin/git && chmod +x .venv/bin/git",
        "pth": f"echo 'import os; os.system(\"{p}\")' > {sp}/evil.pth",
        "sitecustomize": f"echo 'import os; os.system(\"{p}\")' > {sp}/sitecustomize.py",
        "usercustomize": f"echo 'import os; os.system(\"{p}\")' > {sp}/usercustomize.py",
        "activate": f"echo '{p}' >> .venv/bin/activate",
        "pyvenv_cfg": "echo 'include-system-site-packages = true' >> .venv/pyvenv.cfg",
        "replace_venv": "mv .venv .venv.old && mkdir -p .venv/bin",
    }


def use_the_venv(world: World, venv: Path) -> None:
    """What the user does outside: their PATH's programs, the venv's Python, its activate."""
    run_outside(world, "tool; python3 -c pass; git --version; notes")
    run_outside(world, f". {venv}/bin/activate && true")


def run_outside(world: World, script: str) -> None:
    """A shell of the user's, outside the sandbox, in the project, with their PATH."""
    subprocess.run(
        ["/bin/sh", "-c", script],
        env=world.env,
        capture_output=True,
        cwd=world.project,
        stdin=subprocess.DEVNULL,
        timeout=60,
    )


@pytest.mark.parametrize(
    "attack",
    [
        "content",
        "overwrite_by_rename",
        "mode",
        "link_target",
        "shadow",
        "pth",
        "sitecustomize",
        "usercustomize",
        "activate",
        "pyvenv_cfg",
        "replace_venv",
    ],
)
def test_a_venv_on_path_stays_as_it_was(sbx, world, attack):
    venv = make_venv(world)
    rb = on_path(sbx, world, venv / "bin")
    before = snapshot(venv)
    cmd = venv_attacks(world, venv)[attack]
    r = rb.run(f"echo ok > other.txt && echo {CONTROL}; {cmd}; echo end")
    assert CONTROL in r.output and (world.project / "other.txt").exists(), r.output
    assert snapshot(venv) == before, r.notices
    use_the_venv(world, venv)
    assert pwned(world) == [], r.notices


@pytest.mark.parametrize("attack", ["content", "mode", "shadow", "pth", "activate"])
def test_venv_attacks_work_without_the_sandbox(world, attack):
    """The control: each attack, made without a sandbox, does run for the user."""
    from tests.security.conftest import Runner

    venv = make_venv(world)
    world.env["PATH"] = f"{venv / 'bin'}:{world.env['PATH']}"
    runner = Runner("none", world)
    try:
        runner.run(venv_attacks(world, venv)[attack])
    finally:
        runner.close()
    use_the_venv(world, venv)
    assert pwned(world), attack


def node_project(world: World) -> Path:
    """node_modules/.bin on PATH as a relative entry; its program a link into the package."""
    pkg = world.project / "node_modules/eslint/bin"
    pkg.mkdir(parents=True)
    (pkg / "eslint.js").write_text("#!/bin/sh\necho real-eslint\n")
    (pkg / "eslint.js").chmod(0o755)
    dot_bin = world.project / "node_modules/.bin"
    dot_bin.mkdir()
    (dot_bin / "eslint").symlink_to("../eslint/bin/eslint.js")
    world.env["PATH"] = f"node_modules/.bin:{world.env['PATH']}"
    return dot_bin


NODE_ATTACKS = {
    "target_content": "printf '#!/bin/sh\\n{p}\\n' > node_modules/eslint/bin/eslint.js",
    "target_mode": "chmod 777 node_modules/eslint/bin/eslint.js",
    "target_dir_swapped": (
        "mv node_modules/eslint node_modules/eslint.old && mkdir -p node_modules/eslint/bin && "
        "printf '#!/bin/sh\\n{p}\\n' > node_modules/eslint/bin/eslint.js && "
        "chmod +x node_modules/eslint/bin/eslint.js"
    ),
    "link_retargeted": (
        "printf '#!/bin/sh\\n{p}\\n' > evil && chmod +x evil && "
        "ln -sf ../../evil node_modules/.bin/eslint"
    ),
}


@pytest.mark.parametrize("attack", sorted(NODE_ATTACKS))
def test_a_link_on_path_and_its_target(sbx, world, attack):
    node_project(world)
    rb = sbx.with_config()
    cmd = NODE_ATTACKS[attack].format(p=payload(world, "node"))
    r = rb.run(f"echo {CONTROL}; {cmd}; echo end")
    assert CONTROL in r.output, r.output
    run_outside(world, "eslint")
    assert pwned(world) == [], (r.output, r.notices)


@pytest.mark.parametrize("attack", sorted(set(NODE_ATTACKS) - {"target_mode"}))
def test_link_attacks_work_without_the_sandbox(world, attack):
    """The control: each attack, made without a sandbox, does run for the user."""
    from tests.security.conftest import Runner

    node_project(world)
    runner = Runner("none", world)
    try:
        runner.run(NODE_ATTACKS[attack].format(p=payload(world, "node")))
    finally:
        runner.close()
    run_outside(world, "eslint")
    assert pwned(world), attack


def test_the_project_on_path_is_compared_by_state(sbx, world):
    """`.` on PATH: the project itself cannot be read-only, so every entry's state is compared:
    an existing program changed, or a file made executable by a later run, is moved out."""
    (world.project / "tool").write_text("#!/bin/sh\necho real\n")
    (world.project / "tool").chmod(0o755)
    (world.project / "rb-xbit").write_text(f"#!/bin/sh\n{payload(world, 'xbit')}\n")
    world.env["PATH"] = f".:{world.env['PATH']}"
    rb = sbx.with_config()
    r = rb.run(f"echo {CONTROL}; echo '{payload(world, 'dot')}' >> tool; echo end")
    assert CONTROL in r.output
    assert not (world.project / "tool").exists(), r.notices
    assert any("tool" in n and "PATH" in n for n in r.notices), r.notices
    r = rb.run(f"echo ok > notes.txt && echo {CONTROL}; chmod +x rb-xbit; echo end")
    assert CONTROL in r.output and (world.project / "notes.txt").exists()
    assert not (world.project / "rb-xbit").exists() or not os.access(
        world.project / "rb-xbit", os.X_OK
    ), r.notices
    run_outside(world, "tool; rb-xbit")
    assert pwned(world) == []


def test_a_path_entry_that_leads_into_a_venv_through_a_symlink(sbx, world):
    """PATH names `bin`, a link to `.venv/bin`: the venv it leads to is kept whole."""
    venv = make_venv(world)
    (world.project / "bin").symlink_to(".venv/bin")
    world.env["PATH"] = f"{world.project / 'bin'}:{world.env['PATH']}"
    rb = sbx.with_config()
    before = snapshot(venv)
    attack = venv_attacks(world, venv)["pth"]
    r = rb.run(f"echo {CONTROL}; {attack}; echo end")
    assert CONTROL in r.output, r.output
    assert snapshot(venv) == before, r.notices
    use_the_venv(world, venv)
    assert pwned(world) == []


# -- a program on a PATH directory no run can write that leads into the project ---------------------


def linked_tool(world: World) -> Path:
    """``~/.local/bin/mytool`` leads into the project (``npm link``, ``ln -s``), through a link
    in the project; ``~/.local/bin`` is on PATH."""
    p = world.project
    (p / "tools").mkdir()
    (p / "tools/mytool").write_text("#!/bin/sh\necho real tool\n")
    (p / "tools/mytool").chmod(0o755)
    (p / "bin").mkdir()
    (p / "bin/mytool").symlink_to("../tools/mytool")
    lb = world.home / ".local/bin"
    lb.mkdir(parents=True)
    (lb / "mytool").symlink_to(p / "bin/mytool")
    world.env["PATH"] = f"{lb}:{world.env['PATH']}"
    return lb


LINKED_TOOL_ATTACKS = {
    "content": "printf '#!/bin/sh\\n{p}\\n' > tools/mytool",
    "relink": "printf '#!/bin/sh\\n{p}\\n' > evil && chmod +x evil && ln -sfn ../evil bin/mytool",
    "rename": "mv tools old && mkdir tools && printf '#!/bin/sh\\n{p}\\n' > tools/mytool && "
    "chmod +x tools/mytool",
}


@pytest.mark.parametrize("attack", sorted(LINKED_TOOL_ATTACKS))
def test_a_read_only_path_link_into_the_project(sbx, world, attack):
    linked_tool(world)
    rb = sbx.with_config()
    cmd = LINKED_TOOL_ATTACKS[attack].format(p=payload(world, attack))
    r = rb.run(f"echo ok > other.txt && echo {CONTROL}; {cmd}; echo end")
    assert CONTROL in r.output and (world.project / "other.txt").exists(), r.output
    run_outside(world, "mytool")
    assert pwned(world) == [], (r.output, r.notices)


@pytest.mark.parametrize("attack", sorted(LINKED_TOOL_ATTACKS))
def test_read_only_path_link_attacks_work_without_the_sandbox(sbx, world, attack):
    linked_tool(world)
    sbx.with_config().unconfined().run(LINKED_TOOL_ATTACKS[attack].format(p=payload(world, attack)))
    run_outside(world, "mytool")
    assert pwned(world), "the attack does not work even without a sandbox: the test proves nothing"


def vendored_tool(world: World) -> str:
    """``~/.local/bin/tool`` leads through ``proj/vendor``, a link in the project to a directory
    outside it; the shell that re-points that middle link (made by the test's caller)."""
    outside = world.home / "opt/vendor-1"
    (outside / "bin").mkdir(parents=True)
    (outside / "bin/tool").write_text("#!/bin/sh\necho real tool\n")
    (outside / "bin/tool").chmod(0o755)
    (world.project / "vendor").symlink_to(outside)
    lb = world.home / ".local/bin"
    lb.mkdir(parents=True)
    (lb / "tool").symlink_to(world.project / "vendor/bin/tool")
    world.env["PATH"] = f"{lb}:{world.env['PATH']}"
    return "mkdir -p evil/bin && printf '#!/bin/sh\\n{p}\\n' > evil/bin/tool && chmod +x evil/bin/tool && ln -sfn evil vendor"


def test_a_read_only_path_link_through_a_link_in_the_project(sbx, world):
    """The link on the way is a directory of the path, not its last name: it is kept too."""
    attack = vendored_tool(world).format(p=payload(world, "middle"))
    r = sbx.with_config().run(f"echo ok > other.txt && echo {CONTROL}; {attack}; echo end")
    assert CONTROL in r.output and (world.project / "other.txt").exists(), r.output
    run_outside(world, "tool")
    assert pwned(world) == [], (r.output, r.notices)
    # The control: the same attack without the sandbox re-points what the user runs.
    sbx.with_config().unconfined().run(attack)
    run_outside(world, "tool")
    assert pwned(world), "the attack does not work even without a sandbox: the test proves nothing"
