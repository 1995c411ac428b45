"""Git operations a run leaves in progress whose next steps git itself runs when they are continued.

A rebase keeps its to-do list in the git directory (``rebase-merge/git-rebase-todo``), and
``git rebase --continue`` runs its ``exec`` lines as the user; ``git cherry-pick``/``revert``
keep theirs in ``sequencer/``, ``git am`` and the apply backend in ``rebase-apply/``. The git
directory stays writable inside the sandbox (a rebase, a cherry-pick, a conflict to resolve are
ordinary agent work), so a run can leave one of these with a list it wrote itself. What the
list says is git's to read, not run_bash's: the guard only compares each state directory's files
(name, inode, size, change time) before and after the run, and when a run created or changed
one that is still there, the run's notice says so: continue or abort it through run_bash (inside
the sandbox), or read the list before continuing it outside. The change time cannot be set back
by a run, so a list rewritten with its old size and modification time is still seen.
"""

from __future__ import annotations

import contextlib
import os

# The state directories of in-progress operations, in a git directory or one of its linked work
# trees' (``worktrees/<name>/``), and the file that holds each one's list of next steps.
STATE_DIRS = {
    "rebase-merge": ("rebase", "git-rebase-todo"),
    "rebase-apply": ("rebase or am", "next"),
    "sequencer": ("cherry-pick or revert", "todo"),
}

State = dict[str, tuple[tuple[str, int, int, int], ...]]


def _places(git_dir: str) -> list[str]:
    """The git directory and its linked work trees' own directories."""
    places = [git_dir]
    with contextlib.suppress(OSError):
        wt = os.path.join(git_dir, "worktrees")
        places += [os.path.join(wt, n) for n in sorted(os.listdir(wt))]
    return places


def _files(path: str) -> tuple[tuple[str, int, int, int], ...]:
    out = []
    with contextlib.suppress(OSError), os.scandir(path) as it:
        for e in it:
            with contextlib.suppress(OSError):
                st = e.stat(follow_symlinks=False)
                out.append((e.name, st.st_ino, st.st_size, st.st_ctime_ns))
    return tuple(sorted(out))


def state(git_dir: str) -> State:
    """Every in-progress state directory of ``git_dir`` (and its work trees) with its files."""
    found: State = {}
    for place in _places(git_dir):
        for name in STATE_DIRS:
            d = os.path.join(place, name)
            if os.path.isdir(d) and not os.path.islink(d):
                found[d] = _files(d)
            elif os.path.lexists(d):
                found[d] = (("", -1, -1, -1),)  # not a plain directory: always "changed"
    return found


def left_by_run(before: State, git_dir: str, name: str, reported: set[str]) -> list[str]:
    """Notices for the state directories of ``git_dir`` the run created or changed and left
    behind; ``name`` is how the notice names the repository. ``reported``: state directories
    already reported (another git dir's place), skipped, and added to."""
    notes = []
    for d, files in state(git_dir).items():
        if before.get(d) == files or d in reported:
            continue
        reported.add(d)
        what, todo = STATE_DIRS[os.path.basename(d)]
        where = os.path.join(name, os.path.relpath(os.path.join(d, todo), git_dir))
        notes.append(
            f"{name}: the run left a {what} in progress whose list of next steps it wrote "
            f"({where}); git runs that list's `exec` lines as you when it is continued: continue "
            "or abort it through run_bash, or read that file before continuing it outside"
        )
    return notes
