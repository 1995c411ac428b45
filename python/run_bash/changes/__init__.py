"""Reversible runs: what each command changed in its project, and undo.

Plain Python, no Neovim. The host calls it from worker threads, never on the RPC loop: every
call may walk the project and read files that a sandboxed command controls.

How it works
------------
``ChangeStore.begin(run_id, cwd)`` records the run's project before the command starts;
``finish(token)`` records it again when the run is over and keeps the difference, the run's
*change set*. A snapshot (snapshot.py, walk.py) holds every path's type, mode and stat, and for
covered files their content, stored once by SHA-256 in pack files (objects.py). Each project has
an index in memory: its latest snapshot plus an inotify watcher (watch.py) on every directory
walked. A start and an end list again only the directories with events (a new directory is
walked whole), so a run that changes nothing reads nothing; the previous snapshot is the stat
cache, so only files whose (mode, size, mtime, ctime, inode) changed are read again. The whole
project is walked when the watcher cannot vouch (the first run of a host in a project, an event
overflow, a file system where changes can come from elsewhere: ``project.trusted_fs``), and by a
start after a run changed an ignore file (it classifies again).

What inotify cannot see: a write through a shared ``mmap`` is reported when the mapping goes
(``IN_CLOSE_WRITE`` on the last reference), and every process of a run is gone before its
``finish``; a write through a hard link whose other name is outside the watched directories, or
by a process outside run_bash that keeps a writable shared mapping, is not. A full walk checks
each quick end once the project has been quiet for ``CHECK_DELAY_S`` (on the store's own thread,
stopped at the next directory by a run that wants the project): what it finds is added to that
run's change set ("some changes were found by the full check after the run") unless a run
started since or the directory changed again after the run ended. Undo itself never trusts the
index: it compares each path with what the run left before it touches it.

Why not git plumbing ("ghost snapshots": a private GIT_DIR and GIT_INDEX_FILE with the project as
work tree)? Measured on the same 5,000-file / 50 MB project (bench/bench_changes.py), it was
slower: its first snapshot alone took 1.2-5 s against 0.5-0.8 s for this store's begin+finish,
and ``git add -A`` + ``write-tree`` at both ends of a warm run cost 47-135 ms against 2-3 ms here.
It also cannot do the job alone: git keeps only 644/755 modes and no empty directories, and a
host git reading a tree that a sandboxed command is changing can be made to open a FIFO (and
hang) or follow a directory swapped for a symlink between its lstat and its open. This store
needs no git at all: no hooks, filters, attributes, fsmonitor or config can apply.

Why not staged runs (an overlay whose upper layer is the change set)? Unprivileged overlayfs
refuses ``rename(2)`` of a directory from the lower layer (EXDEV: ``git mv src lib`` fails), and
a background session's writes would be invisible to the runs after it until merged; the index
gives the same cost without changing what a command sees.

``undo(run_id)`` puts back, path by path, the state the run started from (undoing.py, restore.py):
modified and deleted files byte-exact with their permission bits, symlinks with their target,
directories the run removed (empty ones too) with their mode; it removes what the run added.
It never deletes or overwrites bytes the store does not hold (see below). A path that changed
again since the run ended is a conflict, left alone unless forced. The undo is a run of its own
(begin, apply, finish), so it has a change set and can be undone.

What is covered
---------------
The project (project.py) is the git top level of the run's cwd, else the nearest directory with
a project file (``MARKERS``) that the user can write; never ``/``, ``$HOME`` or a directory that
contains ``$HOME``; elsewhere nothing is recorded. Only the part the run's sandbox may write is
walked (its *scope*). Covered: regular files up to ``max_file_size`` (content and permission
bits), symlinks (target), directories (mode; empty ones too), in the project and in nested
repositories (each with its own ignore rules, as git applies them). Ignored paths (``.gitignore``
files and ``.git/info/exclude``; not the user's global excludes) are covered within a budget:
each ignored file up to ``ignored_file_max``, ``ignored_total`` bytes of ignored content per
project, an ignored directory whole or not at all (walk.py decides new ones in path order).
A run's end classifies with the ignore rules from its start, and never enters a directory its
start did not enter: a run cannot change what undo covers.

What is not, and why (each is listed in the change set, never silently dropped)
-------------------------------------------------------------------------------
- Ignored content beyond the budget: "not recovered: node_modules/ (ignored, 312 MB, over
  undo.ignored_total)". An ignored directory not covered is not entered (its own stat is
  compared), but every directory in it (up to ``watch.hole_dirs()``) is watched, so a change deep in it
  (``rm node_modules/pkg/index.js``) names it too (watch.py).
- Files over ``max_file_size`` (default 10 MiB): listed, content not kept.
- Unreadable files and directories, files that keep changing while read: compared by stat.
- FIFOs, sockets and devices: listed from ``lstat`` alone, never opened (so never blocking).
- ``.git`` itself (refs, index, objects of the user's repository): never read for content, never
  written; "not tracked: .git/ (repository data)" when it changed. Undo of ``git commit`` or
  ``git reset --hard`` puts the files back, not the branch (``git reflog`` has it).
- Projects over ``max_files`` (default 100,000) at the start: "changes not recorded". A run that
  leaves more than four times that many entries gets a change set for everything that existed
  before it; new paths are listed where they start, neither entered nor read.
- Owners, timestamps, extended attributes, ACLs and hard links are not restored (a restored file
  is a new file, owned by the user, with the current time: build tools see it as changed).
  Setuid/setgid bits on files are kept. A file with more than one name is asked for its state
  at every start and end (``linked_moved``): a write through a name outside the project tells
  no watch of it.

Undo never deletes or overwrites bytes it cannot give back: what is at a path is removed or
replaced only when the undo's own start keeps it (undoing the undo brings it back; without a
recorded start, only the run's own output, when the run destroyed nothing unkept). A path that
existed before the run and whose content was not kept is "left in place" (or "not recovered"
when the run deleted it); a path the run created whose content was not kept is left in place,
born during the run (``statx`` birth time) or not; one the run moved there from content that
was not kept (the same inode, or born well before a run that changed such content) is left in
place too, whatever its size; a file is renamed aside and checked there before it is removed or
replaced, and put back if it changed.

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
go first, then the snapshots of the least recently used projects; the newest change set of a
project is never dropped for size); a project unused for 30 days is dropped whole. Runs that changed nothing are not kept.

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
