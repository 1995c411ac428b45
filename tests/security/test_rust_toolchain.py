"""A rust-toolchain file a run writes does not choose the program your cargo runs.

rustup's proxies (``cargo``, ``rustc``, ``rust-analyzer`` in ``~/.cargo/bin``) run the toolchain
that a ``rust-toolchain.toml`` (or a legacy ``rust-toolchain``) in the working directory or above
names, and ``[toolchain] path`` (the legacy file: an absolute path) may name any directory:
``cargo --version`` in the project, the editor starting rust-analyzer there or a prompt asking
``rustc --version``, would run ``<path>/bin/cargo`` with the user's rights. Both names at the top
of the project are kept: an existing one is read-only inside the run, a new one stops the run and
is removed. The judge is rustup on the host, with the user's environment; the control is the
``none`` backend, where the same run makes ``cargo --version`` run its program.
"""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from tests.security.conftest import CONTROL

RUSTUP = shutil.which("rustup")
pytestmark = pytest.mark.skipif(RUSTUP is None, reason="rustup not found")
FIRED = "TOOLCHAIN-FROM-THE-RUN"


def plant(world, name: str, wait: bool = False) -> str:
    """A toolchain in the project whose cargo prints FIRED, and ``name`` pointing at it (then,
    with ``wait``, 5 s for a guard to stop the run before it prints ``survived``)."""
    tc = world.project / "tc"
    text = f'[toolchain]\\npath = "{tc}"\\n' if name.endswith(".toml") else f"{tc}\\n"
    return (
        f"mkdir -p tc/bin && printf '#!/bin/sh\\necho {FIRED}\\n' > tc/bin/cargo && "
        f"chmod +x tc/bin/cargo && echo {CONTROL}; printf '{text}' > {name}"
        + ("; sleep 5; echo survived" if wait else "")
    )


def host_cargo(world) -> str:
    """``cargo --version`` in the project, as the user runs it (their rustup)."""
    real = os.path.expanduser("~")
    env = {
        **world.env,
        "RUSTUP_HOME": os.environ.get("RUSTUP_HOME", os.path.join(real, ".rustup")),
        "CARGO_HOME": os.environ.get("CARGO_HOME", os.path.join(real, ".cargo")),
    }
    cargo = os.path.join(os.path.dirname(str(RUSTUP)), "cargo")
    done = subprocess.run(
        [cargo, "--version"], cwd=world.project, env=env, capture_output=True, text=True, timeout=60
    )
    return done.stdout + done.stderr


@pytest.mark.parametrize("name", ["rust-toolchain.toml", "rust-toolchain"])
def test_a_new_rust_toolchain_file_is_removed(sbx, world, name):
    r = sbx.run(plant(world, name, wait=True))
    assert CONTROL in r.output and "survived" not in r.output, r.output
    assert not (world.project / name).exists()
    assert any(f"protected file {name} was created" in n for n in r.notices), r.notices
    assert FIRED not in host_cargo(world)
    # Control: without the sandbox the same run makes the user's cargo run its program.
    sbx.unconfined().run(plant(world, name))
    assert FIRED in host_cargo(world)


def test_an_existing_rust_toolchain_file_is_read_only(sbx, world):
    pinned = '[toolchain]\nchannel = "stable"\n'
    (world.project / "rust-toolchain.toml").write_text(pinned)
    r = sbx.run(plant(world, "rust-toolchain.toml"))
    assert CONTROL in r.output and "Read-only file system" in r.output, r.output
    assert (world.project / "rust-toolchain.toml").read_text() == pinned
    assert FIRED not in host_cargo(world)
    sbx.unconfined().run(plant(world, "rust-toolchain.toml"))
    assert FIRED in host_cargo(world)
