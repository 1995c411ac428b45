"""The user's own files in the home directory that lead into the project (dotfiles kept in a
repository and put in place with GNU stow or ``ln -s``: ``~/.bashrc`` -> ``~/proj/bashrc``,
``~/.config/nvim`` -> ``~/proj/nvim``). No run writes HOME, but what such a link leads to lies
where runs write, and the user's shell and editor read it at their next start: it is kept
read-only (a directory whole), and one not there yet may not appear. Through ``SessionManager``
under every confining backend; each case has its control: a write elsewhere in the project in
the same run goes through, and without the sandbox the same write reaches the user's shell."""

from __future__ import annotations

import os
import shutil
import subprocess

from tests.security.conftest import CONTROL, Runner

FIRED = "HOME-LINK-FIRED"


def fresh(sbx, world) -> Runner:
    """A runner whose policy is made now (after the test's links)."""
    r = Runner(sbx.name, world)
    sbx.derived.append(r)
    return r


def interactive_bash(world) -> str:
    done = subprocess.run(
        ["bash", "-i", "-c", "true"],
        env=world.env,
        cwd=world.home,
        capture_output=True,
        text=True,
        timeout=30,
        stdin=subprocess.DEVNULL,
    )
    return done.stdout + done.stderr


def test_a_shell_startup_file_linked_into_the_project_is_read_only(sbx, world):
    (world.project / "dotfiles").mkdir()
    (world.project / "dotfiles/bashrc").write_text("# mine\n")
    os.symlink(world.project / "dotfiles/bashrc", world.home / ".bashrc")
    attack = f"echo 'echo {FIRED}' >> dotfiles/bashrc"
    r = fresh(sbx, world).run(f"echo ok > other.txt && echo {CONTROL}; {attack}; echo end")
    assert CONTROL in r.output and (world.project / "other.txt").exists(), r.output
    assert "Read-only file system" in r.output or "Permission denied" in r.output, r.output
    assert (world.project / "dotfiles/bashrc").read_text() == "# mine\n"
    assert FIRED not in interactive_bash(world)
    # Control: without the sandbox the write reaches the user's next interactive shell.
    sbx.unconfined().run(attack)
    assert FIRED in interactive_bash(world)


def test_an_editor_config_directory_linked_into_the_project_is_read_only_whole(sbx, world):
    shutil.rmtree(world.home / ".config/nvim", ignore_errors=True)
    (world.project / "nvim/lua").mkdir(parents=True)
    (world.project / "nvim/init.lua").write_text("-- mine\n")
    os.symlink(world.project / "nvim", world.home / ".config/nvim")
    attack = "echo 'vim.fn.system(\"id\")' >> nvim/init.lua; echo x > nvim/lua/new.lua"
    r = fresh(sbx, world).run(f"echo ok > other.txt && echo {CONTROL}; {attack}; echo end")
    assert CONTROL in r.output and (world.project / "other.txt").exists(), r.output
    assert (world.project / "nvim/init.lua").read_text() == "-- mine\n", r.output
    assert not (world.project / "nvim/lua/new.lua").exists(), r.output
    # Control: without the sandbox Neovim's next start would read the run's code.
    sbx.unconfined().run(attack)
    assert "vim.fn.system" in (world.home / ".config/nvim/init.lua").read_text()


def test_a_linked_startup_file_not_there_yet_may_not_appear(sbx, world):
    os.symlink(world.project / "zshrc", world.home / ".zshrc")  # the dotfile not made yet
    r = fresh(sbx, world).run(f"echo ok > other.txt && echo {CONTROL}; echo 'x' > zshrc; echo end")
    assert CONTROL in r.output and (world.project / "other.txt").exists(), r.output
    assert not (world.project / "zshrc").exists(), (r.output, r.notices)
    assert any("zshrc" in n for n in r.notices), r.notices
    # Control: a link of the user's that leads nowhere writable keeps nothing of the project.
    os.unlink(world.home / ".zshrc")
    r = fresh(sbx, world).run("echo x > zshrc; echo end")
    assert "end" in r.output and (world.project / "zshrc").exists(), (r.output, r.notices)


def test_a_link_in_home_to_the_project_itself_keeps_nothing(sbx, world):
    """``~/work`` -> the project, or ``~/.dotfiles`` -> the project: a place the user works in,
    not a file a tool reads; the files in it that other links lead to are kept."""
    (world.project / "bashrc").write_text("# mine\n")
    os.symlink(world.project, world.home / "work")
    os.symlink(world.project, world.home / ".dotfiles")
    os.symlink(world.home / ".dotfiles/bashrc", world.home / ".bashrc")
    r = fresh(sbx, world).run(f"echo ok > other.txt && echo {CONTROL}; echo x >> bashrc; echo end")
    assert CONTROL in r.output and (world.project / "other.txt").exists(), r.output
    assert (world.project / "bashrc").read_text() == "# mine\n", r.output
    # ...while a visible link (a place, not a dotfile) to a file keeps nothing.
    os.unlink(world.home / ".bashrc")
    os.symlink(world.project / "bashrc", world.home / "my-bashrc")
    r = fresh(sbx, world).run("echo x >> bashrc; echo end")
    assert "end" in r.output and (world.project / "bashrc").read_text() == "# mine\nx\n", r.output
