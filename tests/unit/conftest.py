"""Unit-test fixtures shared by several files."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from run_bash.changes import store as change_store


@pytest.fixture(autouse=True)
def _close_change_stores(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Close every ChangeStore a test made: each holds inotify instances, and the user's limit
    (fs.inotify.max_user_instances, 128 by default) is shared with every other process."""
    made: list[Any] = []
    init = change_store.ChangeStore.__init__

    def tracked(self: Any, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        made.append(self)

    monkeypatch.setattr(change_store.ChangeStore, "__init__", tracked)
    yield
    for s in made:
        s.close()
