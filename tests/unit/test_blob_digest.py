"""A blob's name (``objects.digest``): the change store loads no OpenSSL (3 ms of a host's start),
and the name is the same whichever SHA-256 computes it."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

CODE = """
import json, sys
import run_bash.changes
from run_bash.changes.objects import digest, load_fast_hash
data = bytes(range(256)) * 4000
before = digest(data), digest(b"")
loaded = ["hashlib" in sys.modules, "_hashlib" in sys.modules]
load_fast_hash()
after = digest(data), digest(b"")
print(json.dumps([loaded, "_hashlib" in sys.modules, before, after]))
"""


def test_the_change_store_loads_no_openssl_and_names_blobs_the_same_after_it_is_loaded():
    out = subprocess.run(
        [sys.executable, "-c", CODE],
        cwd=ROOT / "python",
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    loaded, loaded_after, before, after = json.loads(out)
    assert loaded == [False, False]
    assert loaded_after  # (the check can see it when it is there)
    data = bytes(range(256)) * 4000
    expected = [hashlib.sha256(data).hexdigest(), hashlib.sha256(b"").hexdigest()]
    assert before == after == expected
