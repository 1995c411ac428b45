"""Helpers for the change-store tests: real files, real git, byte-exact tree hashes."""

from __future__ import annotations

import hashlib
import os
import stat
import subprocess
import time
from typing import Any

GIT_ENV = {
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.com",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.com",
}


def sh(cmd: str, cwd: str | os.PathLike[str]) -> None:
    """Run ``cmd`` as the command under test would run: a plain bash process in ``cwd``."""
    subprocess.run(["bash", "-c", cmd], cwd=cwd, check=True, env={**os.environ, **GIT_ENV})


def tree_hash(
    root: str | os.PathLike[str], skip_git: bool = True, skip: tuple[str, ...] = ()
) -> str:
    """SHA-256 over every path under ``root`` (bytes), its type, permission bits, and content or
    link target; empty directories count. ``.git`` entries are left out unless ``skip_git`` is
    False; ``skip`` names more top-level entries to leave out."""
    h = hashlib.sha256()
    base = os.fsencode(os.fspath(root))
    rows = []
    for dirpath, dirs, files in os.walk(base):
        rel = os.path.relpath(dirpath, base)
        for name in sorted(dirs + files):
            path = os.path.join(dirpath, name)
            relp = os.path.normpath(os.path.join(rel, name))
            top = relp.split(b"/")[0]
            if (skip_git and b".git" in relp.split(b"/")) or os.fsdecode(top) in skip:
                continue
            st = os.lstat(path)
            if stat.S_ISLNK(st.st_mode):
                body = b"L" + os.readlink(path)
            elif stat.S_ISDIR(st.st_mode):
                body = b"D%o" % stat.S_IMODE(st.st_mode)
            elif stat.S_ISREG(st.st_mode):
                with open(path, "rb") as f:
                    body = b"F%o:" % stat.S_IMODE(st.st_mode) + hashlib.sha256(f.read()).digest()
            else:
                body = b"S%o" % st.st_mode
            rows.append(relp + b"\0" + body)
        dirs[:] = [d for d in dirs if not (skip_git and d == b".git")]
    for row in sorted(rows):
        h.update(row + b"\n")
    return h.hexdigest()


def dir_bytes(root: str | os.PathLike[str]) -> dict[bytes, tuple[int, int, bytes]]:
    """Every path under ``root`` with (mode, mtime_ns, content or target): a byte-for-byte
    fingerprint that also sees a rewrite with identical content."""
    out = {}
    base = os.fsencode(os.fspath(root))
    for dirpath, dirs, files in os.walk(base):
        for name in dirs + files:
            p = os.path.join(dirpath, name)
            st = os.lstat(p)
            if stat.S_ISREG(st.st_mode):
                with open(p, "rb") as f:
                    body = f.read()
            elif stat.S_ISLNK(st.st_mode):
                body = os.readlink(p)
            else:
                body = b""
            out[os.path.relpath(p, base)] = (st.st_mode, st.st_mtime_ns, body)
    return out


def git_repo(path: str | os.PathLike[str]) -> None:
    """A repository with a few committed files, an ignored build dir and uncommitted work."""
    os.makedirs(path, exist_ok=True)
    sh(
        "git init -q -b main . && mkdir -p src/pkg docs empty/inner && "
        "printf 'print(1)\\n' > src/app.py && printf 'x = 1\\n' > src/pkg/mod.py && "
        "printf '# Title\\n' > docs/index.md && printf 'build/\\n*.log\\n' > .gitignore && "
        "git add -A && git commit -qm init && "
        "mkdir -p build && echo obj > build/out.o && echo log > run.log && "
        "printf 'draft\\n' > notes.md",
        path,
    )


# What the scenarios below start from, in a ``git_repo``: many files, symlinks (one dangling), a
# binary file, uncommitted work, a directory with an unusual mode.
SCENARIO_SETUP = (
    'mkdir -p many docs/sub && for i in $(seq 1 150); do echo "line $i" > many/f$i.txt; done; '
    "ln -s gone src/dangling; ln -s app.py src/link; head -c 3000 /dev/urandom > bin.dat; "
    "echo changed >> src/app.py; chmod 755 src/pkg"
)

# Commands whose effect an undo must take back byte-exact (``build/`` and ``run.log`` are
# ignored, so not covered: leave them out of the comparison).
SCENARIOS = {
    "rm -rf a tree": "rm -rf src",
    "sed -i over many files": "sed -i 's/line/LINE/' many/*.txt",
    "renames and moves": "mv src/app.py src/main.py && mv docs manual && mv notes.md manual/",
    "chmod +x and chmod 600": "chmod +x src/app.py && chmod 600 docs/index.md && chmod 700 docs",
    "file replaced by a directory and the reverse": (
        "rm src/app.py && mkdir -p src/app.py/inner && echo x > src/app.py/inner/f && "
        "rm -rf docs && echo now-a-file > docs"
    ),
    "symlinks retargeted, added, removed": (
        "ln -sfn pkg/mod.py src/link && ln -sfn missing src/dangling2 && rm src/dangling && "
        "ln -sfn ../docs src/dirlink"
    ),
    "binary files": "head -c 5000 /dev/urandom > blob.bin && printf '\\0\\1\\2' >> bin.dat",
    "empty directories": "rmdir empty/inner && mkdir -p fresh/empty2 && rmdir docs/sub",
    "git reset --hard": "git reset -q --hard",
    "git clean -fd": "git clean -q -fd",
    "git checkout and git stash": "git stash -q -u && git checkout -q -b other",
}


CLOCK_REALTIME_COARSE = 5  # Linux's clock id (the time module does not name it)


def begin(store: Any, run_id: str, cwd: str | os.PathLike[str]) -> Any:
    """``store.begin`` for a run; returns its token once the coarse clock (file birth times) has
    passed the stamp the run began at. A file born with that stamp counts as older than the run
    (undo keeps it rather than delete bytes that may predate the run), and these tests' "runs"
    start at once, where a real one starts a sandbox first."""
    from run_bash.changes import Token

    tok = store.begin(run_id, str(cwd))
    assert isinstance(tok, Token), tok
    while time.clock_gettime_ns(CLOCK_REALTIME_COARSE) <= tok.born_ns:
        time.sleep(0.001)
    return tok
