"""A symbolic link a run leaves does not lead the host where the sandbox did not let the run go.

Inside the sandbox ``ln -s ~/.ssh/id_rsa notes.md`` is harmless: the kernel resolves the link in
the run's view, where the key is hidden. Outside, whatever follows the link later (CodeCompanion's
``read_file`` or ``insert_edit_into_file``, your editor) is led by the host's kernel to the key,
under a name that looks like the project's. The judge here is that reader: the host opening the
path, as every file tool does. The control is the same link made by the user before the run: it
stays, and reading it gives the secret (so the reading would leak, and the check tells the
run's links from the user's).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.security.conftest import CONTROL, SECRET

OUT = {
    "notes.md": "~/.ssh/id_rsa",  # denied
    "init.lua": "~/.config/nvim/init.lua",  # outside what the run could read
    "env.txt": "/proc/self/environ",  # the host's own /proc
    "homelink": "~",  # a directory that holds denied paths
    "gc": "~/.gitconfig",  # a file granted read-only by itself
    "later": "~/.bashrc.d/new.sh",  # does not exist, where the run could not write
    "deep/er/cred": "~/.aws/credentials",  # in a directory the run made
    "g": ".git",  # git's own directory, under a name an approval does not show
}
STAY = {
    "readme2": "README",
    "envbin": "/usr/bin/env",
    "devnull": "/dev/null",
    "sub/up": "../README",
    "here": ".",  # a link inside the directory it names adds nothing
    "mirror/p": "..",
}


def links(spec: dict[str, str]) -> str:
    out = []
    for name, target in spec.items():
        parent = os.path.dirname(name)
        if parent:
            out.append(f"mkdir -p {parent}")
        out.append(f"ln -s {target} {name}")
    return " && ".join(out)


def test_links_a_run_leaves_that_lead_out_are_moved_away(sbx, world):
    (world.project / "mine").symlink_to(world.home / ".ssh/id_rsa")  # the user's own
    r = sbx.run(f"{links(OUT)} && {links(STAY)} && echo {CONTROL}")
    assert CONTROL in r.output, r.output
    for name in OUT:
        assert not os.path.lexists(world.project / name), (name, r.notices)
        assert any(f"{name} is a symbolic link the run left" in n for n in r.notices), (
            name,
            r.notices,
        )
    for name, target in STAY.items():
        assert os.readlink(world.project / name) == target, name
    assert (world.project / "readme2").read_text() == "hello\n"
    # The control: the user's link stays, and the host reading it reads the key.
    assert (world.project / "mine").read_text() == SECRET + "-ssh"
    assert not any("mine" in n for n in r.notices), r.notices


def test_a_link_the_run_points_elsewhere_is_judged_again(sbx, world):
    (world.project / "doc").symlink_to("README")
    (world.project / "keep").symlink_to("README")
    r = sbx.run(f"ln -sfn {world.home}/.ssh/id_rsa doc && touch new && echo {CONTROL}")
    assert CONTROL in r.output, r.output
    assert not os.path.lexists(world.project / "doc"), r.notices
    assert os.readlink(world.project / "keep") == "README"  # listed again, not the run's
    assert any("doc is a symbolic link the run left" in n for n in r.notices), r.notices


def test_a_later_run_does_not_take_the_users_links_for_its_own(sbx, world):
    """Links the user makes between runs are there before the next run starts: not its own."""
    r = sbx.run(f"echo a > a.txt && echo {CONTROL}")
    assert CONTROL in r.output, r.output
    (world.project / "mine").symlink_to(world.home / ".ssh/id_rsa")
    r = sbx.run(f"echo b > b.txt && ln -s a.txt c.txt && echo {CONTROL}")
    assert CONTROL in r.output, r.output
    assert os.path.islink(world.project / "mine"), r.notices
    assert os.readlink(world.project / "c.txt") == "a.txt"
    assert not [n for n in r.notices if "symbolic link the run left" in n], r.notices


def read_with_stdin(path: Path, stdin: Path) -> str:
    """What a reader whose standard input is ``stdin`` reads at ``path`` (``cat``)."""
    with stdin.open("rb") as f:
        done = subprocess.run(["cat", str(path)], stdin=f, capture_output=True, timeout=30)
    return done.stdout.decode(errors="replace")


def test_a_link_through_proc_is_moved_away_wherever_it_ends_for_the_guard(sbx, world):
    # /dev/stdin and /dev/fd/N lead through /proc/self: each reader reaches its own open files
    # (Neovim's are its UI channel and whatever it holds open), not what the guard's own
    # process would read there.
    key = world.home / ".ssh/id_rsa"
    r = sbx.run(
        f"ln -s /dev/stdin in.md && ln -s /dev/fd/0 fd.md && ln -s /dev/null null && echo {CONTROL}"
    )
    assert CONTROL in r.output, r.output
    for name in ("in.md", "fd.md"):
        assert not os.path.lexists(world.project / name), (name, r.notices)
        assert any(
            f"{name} is a symbolic link the run left" in n and "/proc" in n for n in r.notices
        )
    assert os.readlink(world.project / "null") == "/dev/null"  # control: stays
    # Control: the same link made by the user stays, and a reader holding the key open reads it.
    (world.project / "mine.md").symlink_to("/dev/stdin")
    r = sbx.run(f"echo {CONTROL}")
    assert not any("mine.md" in n for n in r.notices), r.notices
    assert read_with_stdin(world.project / "mine.md", key) == SECRET + "-ssh"
