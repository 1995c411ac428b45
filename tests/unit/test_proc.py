"""Process bookkeeping (``sandbox/proc.py``) against the real kernel."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import ROOT

# A subreaper whose worker thread starts a bash that leaves a `sleep` behind: where does the
# orphan go? Printed: the worker's children while bash lives (the control: they are not the
# leader's), then what `adopted` finds once bash has exited.
SCRIPT = r"""
import json, os, subprocess, sys, threading
sys.path.insert(0, sys.argv[1])
from run_bash.sandbox import proc

proc.set_child_subreaper()
me, seen, found, done = os.getpid(), {}, threading.Event(), threading.Event()

def worker():
    tid = threading.get_native_id()
    p = subprocess.Popen(["bash", "-c", "sleep 30 >/dev/null & echo $!; read _"], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE)
    seen["orphan"] = int(p.stdout.readline())
    with open(f"/proc/{me}/task/{tid}/children") as f:
        seen["worker_children"] = [int(x) for x in f.read().split()]
    seen["bash"] = p.pid
    seen["leader_before"] = proc.adopted(me)
    p.communicate(b"\n")  # bash exits: its `sleep` is an orphan now
    seen["adopted"] = proc.adopted(me)
    found.set()
    done.wait()  # this thread stays alive meanwhile

t = threading.Thread(target=worker)
t.start()
found.wait(20)
print(json.dumps(seen))
os.kill(seen["orphan"], 9)
done.set()
t.join()
"""


def test_an_orphan_goes_to_the_subreapers_leader_whichever_thread_started_its_parent():
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(ROOT / "python")],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    seen = json.loads(out.stdout)
    # Control: bash was the worker thread's child, not the leader's.
    assert seen["bash"] in seen["worker_children"] and seen["bash"] not in seen["leader_before"]
    assert seen["orphan"] in seen["adopted"], seen
