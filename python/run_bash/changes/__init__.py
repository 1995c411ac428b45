"""Reversible runs: what each command changed in its project, and undo.

Plain Python, no pynvim. The host calls it from worker threads, never on the RPC loop: every
call may walk the project and read files that a sandboxed command controls.

How it works
------------
``ChangeStore.begin(run_id, cwd)`` snapshots the run's project before the command starts;
``finish(token)`` snapshots it again when the run is over and keeps the difference, the run's
*change set*. A snapshot is one walk of the project (snapshot.py): every path's type, mode and
stat, and for covered files their content, stored once by SHA-256 in pack files (objects.py).
The previous snapshot is the stat cache of the next walk, so only files whose (mode, size,
mtime, ctime, inode) changed are read again. inotify (watch.py) makes the common case cheap:
``begin`` skips its walk when nothing happened since the last one, and ``finish`` lists again
only the directories with events (a full walk when a directory or a ``.gitignore`` was created,
removed or moved, or events were lost). Such a quick end is then checked by a full walk on a
thread of the store, shortly after (or by the next ``begin``, ``get`` or ``undo`` of that
project if it comes first): what inotify cannot report, a write through a shared ``mmap``, is
added to that run's change set ("some changes were found by the full check after the run"),
except in directories that changed again after the run ended (those changes are not the run's).
``quick_finish=False`` makes every ``finish`` a full walk.

``undo(run_id)`` puts back, path by path, the state the run started from: modified and deleted
files byte-exact with their permission bits, symlinks with their target, directories the run
removed (empty ones too) with their mode; it removes what the run added. A path that changed
again since the run ended is a conflict, left alone unless forced. The undo is a run of its own
(begin, apply, finish), so it has a change set and can be undone.

Why not git plumbing ("ghost snapshots": a private GIT_DIR and GIT_INDEX_FILE with the project as
work tree)? Measured on the same 5,000-file / 50 MB project (bench/bench_changes.py), it was
slower: its first snapshot alone took 1.2-5 s against 0.6-1.4 s for this store's begin+finish
(one loose object per file, and creating a file costs 0.65 ms on the test machine's file
system), and ``git add -A`` + ``write-tree`` at both ends of a warm run cost 47-135 ms against
this store's full-walk end alone (33-85 ms), let alone its quick end (2-18 ms). It also cannot
do the job alone: git keeps
only 644/755 modes and no empty directories (a side walk would be needed anyway), and a host
git reading a tree that a sandboxed command is changing can be made to open a FIFO (and hang)
or follow a directory swapped for a symlink between its lstat and its open. This store needs no
git at all: no hooks, filters, attributes, fsmonitor or config can apply, because nothing runs.

What is covered
---------------
The project is the git top level of the run's cwd (nearest ancestor with ``.git``), else the
cwd; never ``/``, ``$HOME`` or a directory that contains ``$HOME`` (then "changes not recorded:
the project would be your home directory"). When the git top level is ``$HOME`` itself (a
dotfiles repository), the cwd alone is the project. Covered: regular files up to
``max_file_size`` (content and permission bits), symlinks (target), directories (mode; empty
ones too), in the project and in nested repositories inside it (their work trees are covered
like the rest, each with its own ignore rules, as git applies them).

What is not, and why (each is listed in the change set, never silently dropped)
-------------------------------------------------------------------------------
- Paths ignored by the project's ``.gitignore`` files and ``.git/info/exclude``: "not tracked:
  build/ (ignored)" when they change, "not recovered" when the run deleted them. An ignored
  directory is not entered (its own stat is compared). The user's global ``core.excludesFile``
  is deliberately not used: coverage then depends only on the project, and what it lists (editor
  files, often ``.env``) is better kept than lost. Ignore rules never uncover a path already
  covered (as in git, where ignore rules do not apply to tracked files): a command cannot hide
  its changes by editing ``.gitignore``.
- Files over ``max_file_size`` (default 10 MiB): listed, content not kept; an added one is
  removed by undo when unchanged since the run.
- FIFOs, sockets and devices: listed from ``lstat`` alone, never opened (so never blocking).
- ``.git`` itself (refs, index, objects of the user's repository): never read for content, never
  written; "not tracked: .git/ (repository data)" when it changed. Undo of ``git commit`` or
  ``git reset --hard`` puts the files back, not the branch (``git reflog`` has it).
- Projects over ``max_files`` (default 100,000) at the start: "changes not recorded". A run that
  leaves more than four times that many entries gets a change set for everything that existed
  before it; new paths are listed where they start, neither entered nor read.
- Owners, timestamps, extended attributes, ACLs and hard links are not restored (a restored file
  is a new file, owned by the user, with the current time: build tools see it as changed).
  Setuid/setgid bits on files are kept.

Safety
------
Project content is untrusted. Reads open each directory relative to its parent's fd with
``O_NOFOLLOW``, resolve each file with ``O_PATH|O_NOFOLLOW``, check it is a regular file with
``fstat`` and only then read it through ``/proc/self/fd`` (the same inode; no FIFO or device is
ever opened). Writes (undo) walk from the project's directory fd component by component with
``O_NOFOLLOW|O_DIRECTORY``: a component that is a symlink stops that path ("src is a symlink,
not a directory"), so nothing outside the project is written, removed or chmod'ed; files are
written to a temp name and renamed over the target. ``.gitignore`` patterns are matched in
linear time (ignore.py), so an adversarial pattern cannot stall the host. The store never
writes into the project or its ``.git``; its own directory is skipped if it lies inside a
project.

Persistence and retention
-------------------------
The store lives in the directory given to ChangeStore (the host passes
``stdpath("state")/run_bash/undo``, 0700); a new ChangeStore on the same directory sees every
kept change set, so undo works after Neovim restarts. Kept: the last ``keep`` (default 50) runs
with changes per project, within ``max_store`` bytes in all (default 1 GiB; oldest change sets
go first, then the snapshots of the least recently used projects); a project unused for 30
days is dropped whole. Runs that changed nothing are not kept.

Threading
---------
Every public method is safe to call from several threads at once and from several hosts on one
store: walks of one project are serialized (thread lock + ``flock``), collections exclude walks
(``gc.lock``). Runs that overlap in time in one project are told apart only by time: each
change set names the runs that overlapped it ("overlaps session abc123: changes may be mixed").
"""

from .render import Change, ChangeSet, display_path
from .snapshot import Snapshot
from .store import ChangeStore, Limits, NotRecorded, Token

__all__ = [
    "Change",
    "ChangeSet",
    "ChangeStore",
    "Limits",
    "NotRecorded",
    "Snapshot",
    "Token",
    "display_path",
]
