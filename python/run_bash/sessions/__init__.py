"""Sessions: spawn, foreground/background, timeouts, kill of whole trees, bounded output capture.

``SessionManager`` (``manager.py``) is the API; see its module for the parts it is made of.
"""

from run_bash.sessions.manager import DRAIN_GRACE_S, KILL_GRACE_S, EventSink, SessionManager
from run_bash.sessions.session import (
    MAX_CMD_CHARS,
    Session,
    Waiter,
    caller_id,
    check_cmd,
    new_id,
    ready_pattern,
    validate_request,
)

__all__ = [
    "DRAIN_GRACE_S",
    "KILL_GRACE_S",
    "MAX_CMD_CHARS",
    "EventSink",
    "Session",
    "SessionManager",
    "Waiter",
    "caller_id",
    "check_cmd",
    "new_id",
    "ready_pattern",
    "validate_request",
]
