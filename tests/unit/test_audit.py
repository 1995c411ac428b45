"""The audit log file: JSON lines, 0600 in a 0700 directory, rotated by size, never in the way."""

from __future__ import annotations

import json
import os
import stat

from run_bash.audit import AuditLog


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_lines_modes_and_rotation(tmp_path):
    path = tmp_path / "state" / "run_bash" / "audit.jsonl"
    log = AuditLog(str(path), 4096)
    for i in range(60):
        log.decision({"cmd": f"echo {i}", "decided_by": "auto", "secret": "dropped"})
    rotated = path.with_name("audit.jsonl.1")
    assert rotated.exists() and path.exists()
    assert os.path.getsize(path) <= 4096 and os.path.getsize(rotated) <= 4096
    assert mode(path) == 0o600 and mode(rotated) == 0o600 and mode(path.parent) == 0o700
    records = [json.loads(x) for x in rotated.read_text().splitlines()]
    records += [json.loads(x) for x in path.read_text().splitlines()]
    assert [r["cmd"] for r in records] == [f"echo {i}" for i in range(60 - len(records), 60)]
    assert all(r["event"] == "decision" and "time" in r and "secret" not in r for r in records)


def test_run_records_keep_the_run_fields(tmp_path):
    path = tmp_path / "audit.jsonl"
    AuditLog(str(path), 1 << 20).run(
        {"id": "abc", "cmd": "make", "exit_code": 2, "duration_s": 1.5, "output": "x" * 100},
        source="agent",
    )
    [rec] = [json.loads(x) for x in path.read_text().splitlines()]
    assert rec["event"] == "run" and rec["exit_code"] == 2 and rec["source"] == "agent"
    assert "output" not in rec


def test_disabled_or_unwritable_log_is_silent(tmp_path):
    off = tmp_path / "off.jsonl"
    AuditLog(str(off), 4096, enabled=False).decision({"cmd": "x"})
    assert not off.exists()
    blocked = tmp_path / "file"
    blocked.write_text("")
    AuditLog(str(blocked / "audit.jsonl"), 4096).decision(
        {"cmd": "x"}
    )  # parent is a file: no error


def test_invalid_utf8_is_escaped_and_every_line_is_strict_json(tmp_path):
    """A command holding invalid UTF-8 arrives as surrogate escapes; the line shows the bytes as
    \\xHH and holds no lone surrogate (which strict JSON parsers reject)."""
    path = tmp_path / "audit.jsonl"
    log = AuditLog(str(path), 1 << 20)
    bad = b"printf 'caf\xe9 \xff'".decode("utf-8", "surrogateescape")
    log.decision({"cmd": bad, "cwd": "/tmp/\udcfe", "decided_by": "auto"})
    log.run({"id": "x", "cmd": "echo café ✓", "status": "exited"})
    raw = path.read_bytes()
    raw.decode("utf-8")  # strictly valid UTF-8 on disk
    lines = [json.loads(x) for x in raw.decode("utf-8").splitlines()]
    assert lines[0]["cmd"] == "printf 'caf\\xe9 \\xff'" and lines[0]["cwd"] == "/tmp/\\xfe"
    assert lines[1]["cmd"] == "echo café ✓"  # valid text stays as it is
    for rec in lines:
        for value in rec.values():
            if isinstance(value, str):
                value.encode("utf-8")  # no lone surrogates
