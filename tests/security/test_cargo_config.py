"""A cargo config file a run writes does not make your cargo run its program.

Cargo reads ``.cargo/config.toml`` (and the older ``.cargo/config``) in the working directory and
every directory above it, and ``build.rustc-wrapper`` (or ``build.rustc``) names the program it
runs for every question it asks rustc: ``cargo metadata``, which rust-analyzer runs as your editor
starts it in the project, and ``cargo tree`` run ``<wrapper> rustc -vV`` before anything of the
project is built. Both names at the top of the project are kept: an existing one is read-only
inside the run, a new one stops the run and is removed. The judge is cargo on the host, with the
user's environment; the control is the ``none`` backend, where the same run makes ``cargo
metadata`` run its program.
"""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from tests.security.conftest import CONTROL

CARGO = shutil.which("cargo")
pytestmark = pytest.mark.skipif(CARGO is None, reason="cargo not found")
FIRED = "WRAPPER-FROM-THE-RUN"
MANIFEST = '[package]\nname = "p"\nversion = "0.1.0"\nedition = "2021"\n'


def plant(world, name: str, wait: bool = False) -> str:
    """A program in the project that prints FIRED to a file, and ``name`` naming it as cargo's
    rustc wrapper (then, with ``wait``, 5 s for a guard to stop the run before it prints
    ``survived``)."""
    log = world.project / "fired.log"
    return (
        f"printf '#!/bin/sh\\necho {FIRED} >> {log}\\nexec \"$@\"\\n' > w.sh && chmod +x w.sh && "
        f"mkdir -p .cargo && echo {CONTROL}; "
        f"printf '[build]\\nrustc-wrapper = \"{world.project}/w.sh\"\\n' > {name}"
        + ("; sleep 5; echo survived" if wait else "")
    )


def host_cargo(world) -> str:
    """``cargo metadata`` in the project, as the editor's rust-analyzer runs it (the user's
    rustup); what the wrapper logged."""
    (world.project / "Cargo.toml").write_text(MANIFEST)
    (world.project / "src").mkdir(exist_ok=True)
    (world.project / "src/main.rs").write_text("fn main() {}\n")
    real = os.path.expanduser("~")
    env = {
        **world.env,
        "RUSTUP_HOME": os.environ.get("RUSTUP_HOME", os.path.join(real, ".rustup")),
        "CARGO_HOME": os.environ.get("CARGO_HOME", os.path.join(real, ".cargo")),
        "CARGO_TARGET_DIR": str(world.home.parent / "target"),
    }
    log = world.project / "fired.log"
    log.unlink(missing_ok=True)
    done = subprocess.run(
        [str(CARGO), "metadata", "--offline", "--format-version", "1"],
        cwd=world.project,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return (log.read_text() if log.exists() else "") + done.stderr


@pytest.mark.parametrize("name", [".cargo/config.toml", ".cargo/config"])
def test_a_new_cargo_config_is_removed(sbx, world, name):
    r = sbx.run(plant(world, name, wait=True))
    assert CONTROL in r.output and "survived" not in r.output, r.output
    assert not (world.project / name).exists()
    assert any(f"protected file {name} was created" in n for n in r.notices), r.notices
    assert FIRED not in host_cargo(world)
    # Control: without the sandbox the same run makes the user's cargo run its program.
    sbx.unconfined().run(plant(world, name))
    assert FIRED in host_cargo(world)


def test_an_existing_cargo_config_is_read_only(sbx, world):
    pinned = "[build]\njobs = 2\n"
    (world.project / ".cargo").mkdir()
    (world.project / ".cargo/config.toml").write_text(pinned)
    r = sbx.run(plant(world, ".cargo/config.toml"))
    assert CONTROL in r.output and "Read-only file system" in r.output, r.output
    assert (world.project / ".cargo/config.toml").read_text() == pinned
    assert FIRED not in host_cargo(world)
    sbx.unconfined().run(plant(world, ".cargo/config.toml"))
    assert FIRED in host_cargo(world)
