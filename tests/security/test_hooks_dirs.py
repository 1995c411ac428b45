"""#20 class 3: a hooks directory in the work tree is kept whole, with what holds it.

Husky's layout: ``core.hooksPath = .husky/_``, whose ``pre-commit`` sources the wrapper ``h``,
which runs ``.husky/pre-commit`` beside it. A run may change none of ``.husky``. Through
``SessionManager`` under every confining backend; the outside ``git commit`` is the judge, and
the same attack without a sandbox is the control.
"""

from __future__ import annotations

import os
import shutil

import pytest

from tests.security.conftest import CONTROL
from tests.security.test_hostread import git, hook, payload, pwned, unconfined_fires

WRAPPER = """#!/bin/sh
n=$(basename "$0")
s=$(dirname "$(dirname "$0")")/$n
[ ! -f "$s" ] && exit 0
sh -e "$s" "$@"
"""


def husky(world) -> None:
    """The user's project with husky's hooks, committed."""
    d = world.project / ".husky"
    (d / "_").mkdir(parents=True)
    (d / "_/h").write_text(WRAPPER)
    (d / "_/pre-commit").write_text('#!/bin/sh\n. "$(dirname "$0")/h"\n')
    for p in (d / "_/h", d / "_/pre-commit"):
        p.chmod(0o755)
    (d / "pre-commit").write_text("echo lint\n")
    git(world, "config", "core.hooksPath", ".husky/_", check=True)
    git(world, "add", ".husky", check=True)
    git(world, "commit", "-qm", "husky", check=True)


def test_scripts_beside_the_hooks_path_cannot_change(sbx, world):
    husky(world)
    attack = f"echo '{payload(world, 'husky')}' >> .husky/pre-commit"
    r = sbx.run(f"echo ok > other.txt && echo {CONTROL}; {attack}; echo end")
    assert CONTROL in r.output, r.output
    assert (world.project / ".husky/pre-commit").read_text() == "echo lint\n"
    git(world, "add", "other.txt")
    git(world, "commit", "-qm", "x")
    assert pwned(world) == []
    unconfined_fires(sbx, world, attack, ["commit", "-q", "--allow-empty", "-m", "y"])


def test_nothing_new_appears_beside_the_hooks_path(sbx, world):
    """A new script the wrapper would pick up (a hook name that had none) cannot be added."""
    husky(world)
    attack = f"echo '{payload(world, 'new')}' > .husky/commit-msg"
    r = sbx.run(f"echo {CONTROL}; {attack}; echo end")
    assert CONTROL in r.output
    assert not (world.project / ".husky/commit-msg").exists()
    (world.project / ".husky/_/commit-msg").write_text('#!/bin/sh\n. "$(dirname "$0")/h"\n')
    (world.project / ".husky/_/commit-msg").chmod(0o755)
    git(world, "commit", "-q", "--allow-empty", "-m", "x")
    assert pwned(world) == []


def test_a_hooks_holder_that_does_not_exist_yet_may_not_appear(sbx, world):
    git(world, "config", "core.hooksPath", "tools/hooks/_", check=True)
    attack = (
        "mkdir -p tools/hooks/_ && "
        f"printf '#!/bin/sh\\n{payload(world, 'absent')}\\n' > tools/hooks/_/pre-commit && "
        "chmod +x tools/hooks/_/pre-commit"
    )
    r = sbx.run(f"echo ok > other.txt && echo {CONTROL}; {attack}; sleep 2; echo end")
    assert CONTROL in r.output, r.output
    assert not os.path.lexists(world.project / "tools/hooks")
    assert any("tools/hooks" in n for n in r.notices), r.notices
    git(world, "commit", "-q", "--allow-empty", "-m", "x")
    assert pwned(world) == []
    shutil.rmtree(world.project / "tools", ignore_errors=True)
    unconfined_fires(sbx, world, attack, ["commit", "-q", "--allow-empty", "-m", "y"])


def test_a_hooks_path_behind_a_condition_that_does_not_hold_yet(sbx, world):
    """A hooks path the user set only for another branch: switching to it is something a run
    can do, so that hooks directory is kept too."""
    husky(world)
    git(world, "config", "--unset", "core.hooksPath", check=True)
    (world.project / ".git/other.cfg").write_text("[core]\n\thooksPath = .husky/_\n")
    git(world, "config", "includeIf.onbranch:other.path", "other.cfg", check=True)
    attack = f"echo '{payload(world, 'cond')}' >> .husky/pre-commit; git checkout -q -B other"
    r = sbx.run(f"echo {CONTROL}; {attack}; echo end")
    assert CONTROL in r.output
    assert (world.project / ".husky/pre-commit").read_text() == "echo lint\n", r.notices
    git(world, "checkout", "-q", "-B", "other")
    git(world, "commit", "-q", "--allow-empty", "-m", "x")
    assert pwned(world) == []
    git(world, "checkout", "-q", "main")
    unconfined_fires(sbx, world, attack, ["commit", "-q", "--allow-empty", "-m", "y"])


def test_the_rest_of_the_project_stays_writable(sbx, world):
    """The positive side: only the hooks' directory is kept; its neighbours are the project."""
    husky(world)
    (world.project / "src").mkdir()
    r = sbx.run(f"echo code > src/a.js && echo more >> README && echo {CONTROL}")
    assert CONTROL in r.output and r.notices == (), (r.output, r.notices)
    assert (world.project / "src/a.js").read_text() == "code\n"


def test_a_hooks_path_that_is_a_symlink_keeps_where_it_leads(sbx, world):
    """`core.hooksPath = .hooks` with `.hooks -> tools/hooks`: git runs what is in tools/hooks."""
    hooks = world.project / "tools/hooks"
    hooks.mkdir(parents=True)
    (hooks / "pre-commit").write_text("#!/bin/sh\ntrue\n")
    (hooks / "pre-commit").chmod(0o755)
    (world.project / ".hooks").symlink_to("tools/hooks")
    git(world, "config", "core.hooksPath", ".hooks", check=True)
    attack = f"echo '{payload(world, 'hooklink')}' >> tools/hooks/pre-commit"
    r = sbx.run(f"echo ok > other.txt && echo {CONTROL}; {attack}; echo end")
    assert CONTROL in r.output, r.output
    assert (hooks / "pre-commit").read_text() == "#!/bin/sh\ntrue\n", r.notices
    git(world, "commit", "-q", "--allow-empty", "-m", "x")
    assert pwned(world) == []
    unconfined_fires(sbx, world, attack, ["commit", "-q", "--allow-empty", "-m", "y"])


# -- what hooks lead to through symlinks ------------------------------------------------------------


def linked_hooks(world, route: str) -> None:
    """The user's hooks live in the work tree and are reached through symlinks, committed."""
    p = world.project
    (p / "scripts/lib").mkdir(parents=True)
    (p / "scripts/pre-commit").write_text("#!/bin/sh\necho lint\n")
    (p / "scripts/pre-commit").chmod(0o755)
    (p / "scripts/lib/common.sh").write_text("echo common\n")
    if route == "husky":
        husky(world)
        (p / ".husky/pre-commit").write_text(". .husky/lib/common.sh\n")
        (p / ".husky/lib").symlink_to("../scripts/lib")
    else:
        h = p / ".git/hooks/pre-commit"
        h.unlink(missing_ok=True)
        if route == "chain":
            (p / "tools").symlink_to("scripts")
            h.symlink_to("../../tools/pre-commit")
        else:
            h.symlink_to("../../scripts/pre-commit")
    git(world, "add", "-A", check=True)
    git(world, "commit", "-qm", "hooks", check=True)


LINKED_HOOK_ATTACKS = {
    "append": ("direct", "echo '{p}' >> scripts/pre-commit"),
    "chain": ("chain", "echo '{p}' >> scripts/pre-commit"),
    "relink": (
        "chain",
        "mkdir evil && printf '#!/bin/sh\\n{p}\\n' > evil/pre-commit && "
        "chmod +x evil/pre-commit && ln -sfn evil tools",
    ),
    "rename": (
        "direct",
        "mv scripts old && mkdir scripts && "
        "printf '#!/bin/sh\\n{p}\\n' > scripts/pre-commit && chmod +x scripts/pre-commit",
    ),
    "linked_dir": ("husky", "echo '{p}' >> scripts/lib/common.sh"),
}


@pytest.mark.parametrize("attack", sorted(LINKED_HOOK_ATTACKS))
def test_what_a_hook_link_leads_to_cannot_change(sbx, world, attack):
    route, cmd = LINKED_HOOK_ATTACKS[attack]
    linked_hooks(world, route)
    cmd = cmd.format(p=payload(world, attack))
    r = sbx.run(f"echo ok > other.txt && echo {CONTROL}; {cmd}; echo end")
    assert CONTROL in r.output and (world.project / "other.txt").exists(), r.output
    git(world, "add", "other.txt")
    git(world, "commit", "-qm", "x")
    assert pwned(world) == [], (r.output, r.notices)


@pytest.mark.parametrize("attack", sorted(LINKED_HOOK_ATTACKS))
def test_hook_link_attacks_work_without_the_sandbox(sbx, world, attack):
    route, cmd = LINKED_HOOK_ATTACKS[attack]
    linked_hooks(world, route)
    cmd = cmd.format(p=payload(world, attack))
    unconfined_fires(sbx, world, cmd, ["commit", "-q", "--allow-empty", "-m", "y"])


# -- a new work tree of the project's own git dir: its hooks path is taken in that work tree -----


def test_a_new_work_tree_of_the_project_takes_no_hooks_from_itself(sbx, world):
    """A `.git` file in a subdirectory leading to the project's own (kept) git dir: git takes
    the relative `.husky/_` in that subdirectory, which the run filled."""
    husky(world)
    sub = world.project / "sub"
    attack = (
        f"mkdir -p sub/.husky/_ && {hook(world, 'gitfile')} > sub/.husky/_/pre-commit && "
        "chmod +x sub/.husky/_/pre-commit && echo 'gitdir: ../.git' > sub/.git"
    )
    r = sbx.run(f"echo {CONTROL}; {attack}; echo end")
    assert CONTROL in r.output, r.output
    assert not os.path.lexists(sub / ".git")
    assert any("sub/.git" in n and ".husky/_: pre-commit" in n for n in r.notices), r.notices
    git(world, "commit", "-q", "--allow-empty", "-m", "x", cwd=sub)
    assert pwned(world) == []
    shutil.rmtree(sub)
    unconfined_fires(sbx, world, attack, ["commit", "-q", "--allow-empty", "-m", "y"], git_cwd=sub)


def linked_worktree(world, name: str, hook_name: str, tag: str) -> str:
    """Shell that adds a linked worktree and puts a hook into its own `.husky/_`."""
    return (
        f"git worktree add -q {name} && mkdir -p {name}/.husky/_ && "
        f"{hook(world, tag)} > {name}/.husky/_/{hook_name} && chmod +x {name}/.husky/_/{hook_name}"
    )


def forget_worktree(world, name: str) -> None:
    shutil.rmtree(world.project / name)
    git(world, "worktree", "prune", check=True)


def test_a_linked_worktree_takes_no_hooks_from_its_own_tree(sbx, world):
    husky(world)
    wt = world.project / "wt"
    attack = linked_worktree(world, "wt", "pre-commit", "worktree")
    r = sbx.run(f"echo {CONTROL}; {attack}; echo end")
    assert CONTROL in r.output, r.output
    assert not os.path.lexists(wt / ".git")
    assert any("wt/.git" in n and "not inert" in n for n in r.notices), r.notices
    git(world, "commit", "-q", "--allow-empty", "-m", "x", cwd=wt)
    assert pwned(world) == []
    forget_worktree(world, "wt")
    unconfined_fires(sbx, world, attack, ["commit", "-q", "--allow-empty", "-m", "y"], git_cwd=wt)


def test_a_linked_worktree_runs_nothing_on_git_status(sbx, world):
    """`post-index-change` runs when `git status` (a shell prompt) refreshes the index."""
    husky(world)
    wt = world.project / "wt"
    attack = (
        f"{linked_worktree(world, 'wt', 'post-index-change', 'status')} && "
        "touch -d @1000000000 wt/README"
    )
    r = sbx.run(f"echo {CONTROL}; {attack}; echo end")
    assert CONTROL in r.output, r.output
    assert not os.path.lexists(wt / ".git"), r.notices
    git(world, "status", cwd=wt)
    assert pwned(world) == []
    forget_worktree(world, "wt")
    unconfined_fires(sbx, world, attack, ["status"], git_cwd=wt)
