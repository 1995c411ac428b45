"""What a host keeps of finished sessions: their history (``sessions.keep_finished``), pins, and the
output files' shared budget (``output.dir_cap``)."""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable, MutableMapping

from run_bash.config import Config
from run_bash.errors import UsageError
from run_bash.output import OutputBudget
from run_bash.results import Forgotten, SessionInfo, Wire
from run_bash.sessions.session import Session
from run_bash.statedir import fs_size, human_size

log = logging.getLogger("run_bash")


class Retention:
    """Session history, pins and the output budget of one host.

    ``sessions`` is the host's table of sessions (finished ones are removed from it here);
    ``kept(sid)`` says whether the undo store still keeps that run's change set.
    """

    def __init__(
        self,
        sessions: MutableMapping[str, Session],
        config: Callable[[], Config],
        state_dir: str,
        on_event: Callable[[str, Wire], None],
        kept: Callable[[str], bool],
    ) -> None:
        self.sessions = sessions
        self._config = config
        self.state_dir = state_dir
        self.on_event = on_event
        self.kept = kept
        self._budget: OutputBudget | None = None

    @property
    def budget(self) -> OutputBudget:
        """What all output files may hold together: ``output.dir_cap``, at most a quarter of the
        output directory's filesystem (``$XDG_RUNTIME_DIR`` is often a small RAM disk)."""
        cap = self._config().output.dir_cap
        size = fs_size(self.state_dir)
        if size > 0:
            cap = min(cap, size // 4)
        if self._budget is None:
            self._budget = OutputBudget(cap, self._reclaim_output)
        self._budget.cap = cap
        return self._budget

    def pin(self, s: Session, reason: object) -> SessionInfo:
        """Keep session ``s`` however old it gets, for ``reason`` (e.g. "output buffer": the
        user has its output open), until ``unpin``."""
        if not isinstance(reason, str) or not reason:
            raise UsageError(f"a pin needs a reason (a non-empty string), not {reason!r}")
        s.pins.add(reason)
        return s.info()

    def unpin(self, sid: object, reason: object) -> bool:
        """Drop one reason to keep ``sid``; False when the session is already forgotten."""
        if not isinstance(reason, str) or not reason:
            raise UsageError(f"a pin needs a reason (a non-empty string), not {reason!r}")
        s = self.sessions.get(sid) if isinstance(sid, str) else None
        if s is None:
            return False
        s.pins.discard(reason)
        self.prune()
        return True

    def _finished_oldest_first(self) -> list[Session]:
        done = [s for s in self.sessions.values() if s.done.is_set() and s.ended_mono is not None]
        return sorted(done, key=lambda s: s.ended_mono or 0.0)

    def prune(self) -> list[str]:
        """Forget finished sessions beyond the newest ``sessions.keep_finished`` (their summary,
        text and output file), except pinned ones; tell Lua (``forgotten``). Returns the ids."""
        done = self._finished_oldest_first()
        excess = len(done) - self._config().sessions.keep_finished
        gone: list[str] = []
        for s in done[: max(0, excess)]:
            if s.pins or self.kept(s.id):
                continue
            self._remove_output(s)
            del self.sessions[s.id]
            gone.append(s.id)
        if gone:
            log.debug("forgot %d finished session(s)", len(gone))
            self.on_event("forgotten", Forgotten(tuple(gone)))
        return gone

    def _remove_output(self, s: Session) -> int:
        """Delete a finished session's output file; return the bytes freed."""
        c = s.capture
        if c is None or c.removed:
            return 0
        with contextlib.suppress(OSError):
            os.unlink(c.path)
        c.removed = True
        freed = c.on_disk
        if self._budget is not None:
            self._budget.release(freed)
        return freed

    def _reclaim_output(self, need: int) -> None:
        """The output budget is short by ``need`` bytes: remove the output files of the oldest
        finished, unpinned sessions until that much is free (their summary and text stay)."""
        freed = 0
        for s in self._finished_oldest_first():
            if freed >= need:
                break
            if s.pins or s.capture is None or s.capture.removed or not s.capture.on_disk:
                continue
            freed += self._remove_output(s)
            s.notices.append(
                "output file removed to keep the output directory under its cap "
                f"({human_size(self.budget.cap)}, output.dir_cap)"
            )
