"""The kernel interfaces a command has no use for are refused on every confining backend:
sandlock's own blocklist, bubblewrap's seccomp filter (``sandbox/seccomp.py``). Each call
fails with EPERM inside; the control makes the same calls outside the sandbox, where the
informative ones (keyctl, personality) succeed, and inside, where getpid still answers."""

from __future__ import annotations

import json
import platform
import subprocess

import pytest

from run_bash.sandbox.seccomp import BLOCKED

# Makes each call with harmless arguments and prints {name: errno or 0} as JSON.
PROBE = r"""
import ctypes, json, platform
libc = ctypes.CDLL(None, use_errno=True)
col = 0 if platform.machine() == "x86_64" else 1
calls = {
    "io_uring_setup": (0, 0), "bpf": (0, 0, 0), "userfaultfd": (0xFFFF,),
    "perf_event_open": (0, 0, 0, 0, 0), "keyctl": (0, -4, 0), "add_key": (0, 0, 0, 0, 0),
    "personality": (0xFFFFFFFF,), "name_to_handle_at": (-100, 0, 0, 0, 0),
    "getpid": (),
}
nrs = NRS
out = {}
for name, args in calls.items():
    ctypes.set_errno(0)
    r = libc.syscall(nrs[name][col], *[ctypes.c_long(a) for a in args])
    out[name] = ctypes.get_errno() if r == -1 else 0
print("ERRNOS", json.dumps(out))
"""


def probe_script() -> str:
    nrs = {name: list(BLOCKED[name]) for name in BLOCKED}
    nrs["getpid"] = [39, 172]
    return PROBE.replace("NRS", repr(nrs))


def errnos(output: str) -> dict[str, int]:
    return json.loads(output.split("ERRNOS", 1)[1].strip().splitlines()[0])


@pytest.mark.skipif(platform.machine() not in ("x86_64", "aarch64"), reason="no filter here")
def test_the_kernels_rarely_needed_interfaces_are_refused(sbx, world):
    script = world.project / "calls.py"
    script.write_text(probe_script())
    outside = errnos(
        subprocess.run(["python3", str(script)], capture_output=True, text=True, check=True).stdout
    )
    # Control: outside, these answer (a key ring id, the current persona) rather than EPERM.
    assert outside["keyctl"] == 0 and outside["personality"] == 0, outside
    r = sbx.run("python3 calls.py")
    assert "ERRNOS" in r.output, r.output
    inside = errnos(r.output)
    assert inside.pop("getpid") == 0, inside  # the sandbox answers what it allows
    assert inside == {name: 1 for name in inside}, inside  # every one refused, with EPERM
