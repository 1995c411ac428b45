"""A full disk under the output directory (#12 item 1): reproduced on a real 1 MB tmpfs.

Needs root (to mount the tmpfs); skipped otherwise.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
from pathlib import Path

import pytest

from run_bash.config import parse_config
from run_bash.sandbox.base import CONFINING_BACKENDS, get_backend
from run_bash.sessions import SessionManager

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")

THREE_MB_THEN_LAST = "head -c 3000000 /dev/zero | tr '\\0' x; echo; echo LAST-LINE"
NOTICE = "output file stopped at {} bytes: no space left on device"


@pytest.fixture
def small_disk(tmp_path):
    """A 1 MB tmpfs (the output directory's filesystem)."""
    mnt = tmp_path / "small"
    mnt.mkdir()
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m,mode=0700", "tmpfs", str(mnt)], check=True
    )
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


@pytest.fixture
async def managers(small_disk, tmp_path):
    """One manager whose output directory is on the small disk, one elsewhere; both live. Another
    program's file takes most of the disk, so it fills up before run_bash's own cap on the output
    directory (a quarter of the filesystem) is reached."""
    (small_disk / "other-program").write_bytes(b"o" * 900_000)
    loop = asyncio.get_running_loop()
    cfg = parse_config({"sandbox": {"backend": "none"}})
    events: list[tuple[str, object]] = []
    full = SessionManager(
        cfg, loop=loop, on_event=lambda n, p: events.append((n, p)), state_dir=str(small_disk / "s")
    )
    os.makedirs(full.state_dir, mode=0o700)
    other_dir = tmp_path / "other"
    other = SessionManager(cfg, loop=loop, state_dir=str(other_dir))
    os.makedirs(other.state_dir, mode=0o700)
    full.events = events  # type: ignore[attr-defined]
    try:
        yield full, other
    finally:
        for m in (full, other):
            with contextlib.suppress(Exception):
                await m.shutdown()


async def test_a_full_disk_stops_the_file_says_so_and_the_tail_still_reaches_the_agent(managers):
    full, other = managers
    loop_errors: list[dict] = []
    asyncio.get_running_loop().set_exception_handler(lambda _l, ctx: loop_errors.append(ctx))
    s = full.start(THREE_MB_THEN_LAST, unsandboxed_ok=True, live=True)
    bystander = other.start(
        "for i in $(seq 1 30); do echo b$i; sleep 0.01; done", unsandboxed_ok=True
    )
    r = await asyncio.wait_for(full.wait_result(s.id), 60)
    b = await asyncio.wait_for(other.wait_result(bystander.id), 60)

    assert r.status == "exited" and r.exit_code == 0
    assert "\nLAST-LINE\n" in r.output  # the in-memory tail reaches the agent
    size = Path(r.output_file).stat().st_size
    assert 0 < size <= 1024 * 1024 - 900_000
    assert NOTICE.format(size) in r.notices, r.notices
    assert r.truncated is True
    live = "".join(p.data for n, p in full.events if n == "output" and p.id == s.id)
    assert NOTICE.format(size) in live and "LAST-LINE" in live
    # Nothing escaped into the loop's error log; the other manager's session is unaffected.
    assert loop_errors == []
    assert b.output == "".join(f"b{i}\n" for i in range(1, 31))

    # A later run on the same full disk still reaches the agent, with the notice.
    r2 = await asyncio.wait_for(
        full.wait_result(full.start("echo after", unsandboxed_ok=True).id), 30
    )
    assert r2.output == "after\n"
    assert any(n.startswith("output file stopped at 0 bytes") for n in r2.notices), r2.notices
    # Reading output back through `output` gives the memory tail past the file's end.
    assert "LAST-LINE" in full.output(s.id, tail=3).output


@pytest.mark.parametrize("backend", CONFINING_BACKENDS)
async def test_a_run_filling_its_temp_space_cannot_starve_output_capture(tmp_path, backend):
    """Output files and run temp dirs on one small filesystem (no $XDG_RUNTIME_DIR): a sandboxed
    run writing into its temp space as fast as it can fills its own tmpfs (the kernel stops it at
    max_temp_size), not that filesystem, and another run's output, captured meanwhile, is whole."""
    cfg = parse_config({"sandbox": {"backend": backend, "limits": {"max_temp_size": "16M"}}})
    avail = get_backend(backend, cfg).availability()
    if not avail.ok:
        pytest.skip(f"{backend} unavailable: {avail.reason}")
    disk = tmp_path / "disk"
    disk.mkdir()
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64m,mode=0700", "tmpfs", str(disk)], check=True
    )
    try:
        (disk / "out").mkdir(mode=0o700)
        (disk / "tmp").mkdir(mode=0o700)
        project = tmp_path / "proj"
        project.mkdir()
        m = SessionManager(
            cfg,
            loop=asyncio.get_running_loop(),
            state_dir=str(disk / "out"),
            temp_root=str(disk / "tmp"),
        )
        free = os.statvfs(disk).f_bavail
        try:
            filler = m.start(
                "for i in $(seq 1 200); do head -c 1000000 /dev/zero > /tmp/f$i || break; done; "
                "df -k /tmp | tail -1; echo FILLED $i",
                cwd=str(project),
            )
            writer = m.start(
                "for i in $(seq 1 20000); do echo line-$i-xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx; done",
                cwd=str(project),
            )
            f = await asyncio.wait_for(m.wait_result(filler.id), 60)
            w = await asyncio.wait_for(m.wait_result(writer.id), 60)
            assert "No space left on device" in f.output and "FILLED 17" in f.output, f.output
            # The files went to the run's own tmpfs: the disk lost only what output took (once
            # the runs are let go of: their output files' reserved space comes back then).
            for sid in (filler.id, writer.id):
                await asyncio.wait_for(m.sessions[sid].done.wait(), 30)
            st = os.statvfs(disk)
            assert (free - st.f_bavail) * st.f_frsize < 4 * 1024 * 1024
            data = Path(w.output_file).read_text()
            assert (
                w.status == "exited"
                and data.count("\n") == 20000
                and data.endswith("line-20000-" + "x" * 39 + "\n")
            )
        finally:
            await m.shutdown()
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)
