"""Repairs of the host-read set: never through a symbolic link in a place a run can write
(``nofollow``). A mixin of the guard's ``Keeper`` (``guard.py``), which holds the repairer, the
fence of writable places and what could not be moved yet.
"""

from __future__ import annotations

import os

from run_bash.paths import is_under
from run_bash.sandbox import nofollow
from run_bash.sandbox.guardscope import Scope
from run_bash.sandbox.hostread import HostRead
from run_bash.sandbox.members import Repairer, State, matches
from run_bash.sandbox.nofollow import Fence, LinkInPath


class Repairs:
    """Moving to the quarantine and restoring, for ``Keeper``."""

    repairer: Repairer
    _fence: Fence
    _pending_moves: dict[str, str]  # what must leave the project -> why it did not

    def _name(self, hr: HostRead, path: str) -> str:
        for root in sorted(hr.roots, key=len, reverse=True):
            if is_under(path, root) and path != root:
                return os.path.relpath(path, root)
        return path

    def _exists(self, path: str) -> bool:
        """Whether something is at ``path``; a link on the way in a writable place counts (it
        is what must go)."""
        try:
            return nofollow.lexists(path, self._fence)
        except LinkInPath:
            return True

    def _move(self, path: str, scope: Scope) -> tuple[str, bool]:
        """Move what is at ``path`` to the quarantine: what was done, and whether a symbolic link
        on the way was moved instead (``path`` is then no longer reached at all)."""
        try:
            dest = self.repairer.quarantine(path, scope.sid)
        except LinkInPath as e:
            moved, done = self._move_link(e, scope)
            if moved:
                self._pending_moves.pop(path, None)
            else:
                self._pending_moves[path] = str(e.strerror)
            return done, moved
        except OSError as e:
            self._pending_moves[path] = str(e.strerror)
            return f"could not be moved away ({e.strerror})", False
        self._pending_moves.pop(path, None)
        return "moved to " + dest, False

    def _quarantine(self, path: str, scope: Scope) -> str:
        return self._move(path, scope)[0]

    def _move_link(self, e: LinkInPath, scope: Scope) -> tuple[bool, str]:
        """A repair met a symbolic link on its way, in a place a run can write: nothing is written
        through it, and the link itself goes to the quarantine (whatever reads that path, git,
        your shell or the next chat, would be led through it; a repair was needed behind it, so
        it leads to something a run changed, or somewhere a run chose). Whether the run made the
        link or only moved a directory that held one of the user's there cannot be told apart,
        so one that was the user's goes too, and the notice names it. (moved, what was done)."""
        said = (
            f"nothing was written through {self._name(scope.host_read, e.link)}: it is a symbolic "
            f"link (to {e.target}), which a repair never follows"
        )
        try:
            dest = self.repairer.quarantine(e.link, scope.sid)
        except OSError as e2:
            return False, f"{said}, and the link could not be moved away ({e2.strerror})"
        return True, f"{said}; the link was moved to {dest}"

    def _restore(self, path: str, state: State, scope: Scope) -> tuple[bool, str]:
        """``Repairer.restore``; a symbolic link on the way is moved away instead of followed
        (``_move_link``), then the path is compared (and written) again."""
        try:
            return self.repairer.restore(path, state, scope.sid)
        except LinkInPath as e:
            moved, done = self._move_link(e, scope)
        if not moved:
            return False, done
        if matches(path, state):
            return True, done
        try:
            # The link is gone: nothing is made in its place (its target keeps what the run
            # wrote, for the user to look at).
            ok, again = self.repairer.restore(path, state, scope.sid, create=False)
        except LinkInPath as e:
            return False, f"{done}; could not be restored ({e.strerror})"
        return ok, f"{done}; {again}"
