"""A `.tool-versions` a run writes does not put its programs on your PATH.

A version ``path:<dir>`` in ``.tool-versions`` (asdf's file, which mise reads too, without asking
for trust) makes the shims of asdf, and the PATH of a shell mise activates, run ``<dir>/bin/node``
at the next ``node`` typed in the project: a directory a run filled. The file at the top of the
project is kept: an existing one is read-only inside the run, a new one stops the run and is
removed. The judge is mise on the host (``mise x -- node``, what an activated shell runs), with the
user's environment; the control is the ``none`` backend, where the same run's node runs.
"""

from __future__ import annotations

import shutil

import pytest

from tests.security.conftest import CONTROL, on_host

MISE = shutil.which("mise")
pytestmark = pytest.mark.skipif(MISE is None, reason="mise not found")
FIRED = "NODE-FROM-THE-RUN"


def plant(world, wait: bool = False) -> str:
    """A node in the project that prints FIRED and a ``.tool-versions`` naming its directory
    (then, with ``wait``, 5 s for a guard to stop the run before it prints ``survived``)."""
    return (
        f"mkdir -p ev/bin && printf '#!/bin/sh\\necho {FIRED}\\n' > ev/bin/node && "
        f"chmod +x ev/bin/node && echo {CONTROL}; echo 'node path:{world.project}/ev' > "
        ".tool-versions" + ("; sleep 5; echo survived" if wait else "")
    )


def host_node(world) -> str:
    """``node --version`` in the project through mise, as a shell mise activates runs it."""
    return on_host(world, [str(MISE), "x", "--", "node", "--version"])


def test_a_new_tool_versions_file_is_removed(sbx, world):
    r = sbx.run(plant(world, wait=True))
    assert CONTROL in r.output and "survived" not in r.output, r.output
    assert not (world.project / ".tool-versions").exists()
    assert any("protected file .tool-versions was created" in n for n in r.notices), r.notices
    assert FIRED not in host_node(world)
    # Control: without the sandbox the same run makes the user's node its own.
    sbx.unconfined().run(plant(world))
    assert FIRED in host_node(world)


def test_an_existing_tool_versions_file_is_read_only(sbx, world):
    (world.project / ".tool-versions").write_text("node system\n")
    r = sbx.run(plant(world))
    assert CONTROL in r.output and "Read-only file system" in r.output, r.output
    assert (world.project / ".tool-versions").read_text() == "node system\n"
    assert FIRED not in host_node(world)
    sbx.unconfined().run(plant(world))
    assert FIRED in host_node(world)
