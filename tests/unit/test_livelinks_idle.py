"""The live links thread waits a while for the next run instead of ending with the last one:
starting a thread is on a run's way, and commands come in bursts. It ends once ``IDLE_S`` passed
with nothing to watch (the next run starts another), and at once when the host exits."""

from __future__ import annotations

import threading

import pytest

from run_bash.sandbox import livelinks
from run_bash.sandbox.livelinks import LiveLinks


class Judge:
    """What the guard's judge answers: whether a run is still watched; each call is noted."""

    def __init__(self) -> None:
        self.calls = 0
        self.watched = False
        self.called = threading.Condition()

    def __call__(self) -> bool:
        with self.called:
            self.calls += 1
            self.called.notify_all()
        return self.watched

    def wait_calls(self, n: int, timeout: float = 10.0) -> None:
        with self.called:
            assert self.called.wait_for(lambda: self.calls >= n, timeout), self.calls


@pytest.fixture
def live():
    judge = Judge()
    links = LiveLinks(lambda: None, judge)
    yield links, judge
    links.close()


def idle_thread(links: LiveLinks, judge: Judge) -> threading.Thread:
    """Start the thread for a run, once judged (nothing watched now): it is idle."""
    links.start()
    judge.wait_calls(1)
    thread = links._thread
    assert thread is not None
    return thread


def ended(links: LiveLinks, timeout: float = 10.0) -> bool:
    thread = links._thread
    if thread is not None:
        thread.join(timeout)
    return links._thread is None


def test_the_thread_serves_the_next_run_without_starting_again(live, monkeypatch):
    links, judge = live
    monkeypatch.setattr(livelinks, "IDLE_S", 3600.0)
    first = idle_thread(links, judge)
    first.join(0.2)  # nothing is watched now: it waits instead of ending
    assert first.is_alive() and links._thread is first
    links.start()  # the next run of the burst: judged by the same thread
    judge.wait_calls(2)
    assert links._thread is first and first.is_alive()


def test_the_thread_ends_when_nothing_comes(live, monkeypatch):
    links, judge = live
    monkeypatch.setattr(livelinks, "IDLE_S", 0.05)
    links.start()
    judge.wait_calls(1)
    assert ended(links)
    # Control: the next run starts another, which judges it.
    links.start()
    judge.wait_calls(2)
    assert links._thread is not None


def test_a_poke_while_idle_neither_judges_nor_keeps_it(live, monkeypatch):
    links, judge = live
    monkeypatch.setattr(livelinks, "IDLE_S", 0.3)
    links.start()
    judge.wait_calls(1)
    links.poke()  # another caller read tree events: nothing is watched, nothing to judge
    assert ended(links)
    assert judge.calls == 1


def test_closing_ends_an_idle_thread_at_once(live, monkeypatch):
    links, judge = live
    monkeypatch.setattr(livelinks, "IDLE_S", 3600.0)
    thread = idle_thread(links, judge)
    links.close()
    thread.join(10)
    assert not thread.is_alive()
