"""Bounded session history (#12 item 2): the last N finished sessions are kept, older ones are
forgotten with their output files unless pinned; the output directory's total size is capped."""

from __future__ import annotations

import asyncio
import os

import pytest

from run_bash.config import parse_config
from run_bash.errors import SessionError, UsageError
from run_bash.sessions import SessionManager


def manager(tmp_path, **opts):
    events: list[tuple[str, object]] = []
    cfg = parse_config({"sandbox": {"backend": "none"}, **opts})
    m = SessionManager(
        cfg,
        loop=asyncio.get_running_loop(),
        on_event=lambda n, p: events.append((n, p)),
        state_dir=str(tmp_path / "state"),
    )
    os.makedirs(m.state_dir, mode=0o700)
    m.events = events  # type: ignore[attr-defined]
    return m


async def run(m, cmd):
    s = m.start(cmd, unsandboxed_ok=True)
    return await asyncio.wait_for(m.wait_result(s.id), 30)


def forgotten(m) -> list[str]:
    return [i for n, p in m.events if n == "forgotten" for i in p.ids]


async def test_only_the_last_n_finished_sessions_are_kept_with_their_files(tmp_path):
    m = manager(tmp_path, sessions={"keep_finished": 3})
    try:
        results, sessions = [], []
        for i in range(8):
            results.append(await run(m, f"echo run{i}"))
            sessions.append(m.sessions[results[-1].id])
        # Every clean-up done (a run's may end after the next run's), the oldest forgotten.
        for s in sessions:
            await asyncio.wait_for(s.done.wait(), 30)
        kept = [r.id for r in results[-3:]]
        assert [info.id for info in m.list()] == kept
        assert forgotten(m) == [r.id for r in results[:5]]
        for r in results[:5]:
            assert not os.path.exists(r.output_file)
            with pytest.raises(SessionError):
                m.output(r.id)
        for r in results[-3:]:
            assert os.path.exists(r.output_file)
            assert m.output(r.id, tail=1).output == r.output
        # Beside them, the next run's output file, made ahead of it (empty).
        files = sorted(os.listdir(m.state_dir))
        ready = [f for f in files if f.startswith("ready-")]
        assert len(ready) == 1 and os.path.getsize(os.path.join(m.state_dir, ready[0])) == 0
        assert sorted(set(files) - set(ready)) == sorted(f"{i}.log" for i in kept)
    finally:
        await m.shutdown()


async def test_running_and_pinned_sessions_are_never_forgotten(tmp_path):
    m = manager(tmp_path, sessions={"keep_finished": 2})
    try:
        bg = m.start("echo bg; sleep 300", unsandboxed_ok=True, bg_after=0.2)
        pinned = await run(m, "echo keep-me")
        m.pin(pinned.id, "output buffer")
        for i in range(5):
            await run(m, f"echo {i}")
        ids = [info.id for info in m.list()]
        assert bg.id in ids and pinned.id in ids
        assert m.output(pinned.id, tail=1).output == "keep-me\n"
        # Unpinned, it is the oldest finished session beyond the limit: forgotten at once.
        assert m.unpin(pinned.id, "output buffer") is True
        assert pinned.id not in [info.id for info in m.list()]
        assert pinned.id in forgotten(m)
        assert m.unpin(pinned.id, "output buffer") is False
        with pytest.raises(UsageError):
            m.pin(bg.id, "")
        # A reason of another type (a table from Lua) is one clear error, pinning or not.
        for bad in ({"a": 1}, ["x"], None, 3):
            with pytest.raises(UsageError, match="a pin needs a reason"):
                m.unpin(bg.id, bad)
        await m.kill(bg.id)
    finally:
        await m.shutdown()


async def test_the_output_directory_stays_under_its_cap(tmp_path):
    m = manager(tmp_path, output={"dir_cap": 300_000})
    try:
        results = [await run(m, f"head -c 100000 /dev/zero | tr '\\0' {i}") for i in range(6)]
        on_disk = 0
        for f in os.listdir(m.state_dir):
            try:
                on_disk += os.path.getsize(os.path.join(m.state_dir, f))
            except FileNotFoundError:
                assert f.startswith("ready-")  # the next run's empty file, made again meanwhile
        assert on_disk <= 300_000
        assert m.budget.used == on_disk
        # The newest files are whole; the oldest made room and say so; their text remains.
        for r in results[-3:]:
            assert os.path.getsize(r.output_file) == 100_000
        old = {info.id: info for info in m.list()}[results[0].id]
        assert not os.path.exists(old.output_file)
        assert any("output file removed" in n for n in old.notices), old.notices
        assert m.output(results[0].id).output.startswith("0000")
    finally:
        await m.shutdown()


async def test_one_run_larger_than_the_cap_stops_at_it_and_still_reaches_the_agent(tmp_path):
    m = manager(tmp_path, output={"dir_cap": 50_000})
    try:
        r = await run(m, "seq 1 30000; echo LAST")
        assert os.path.getsize(r.output_file) == 50_000
        assert "output file stopped at 50000 bytes: the output directory reached its cap" in (
            " ".join(r.notices)
        )
        assert r.output.rstrip().endswith("LAST")
    finally:
        await m.shutdown()
