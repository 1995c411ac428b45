"""The undo store (every project's snapshots and change sets) is out of reach of sandboxed
commands: they can neither read nor change it, also when the user's rules grant the directory
around it. Driven through ``SessionManager`` with the change store recording, as in the host."""

from __future__ import annotations

import shutil
import subprocess
import uuid

import pytest

from tests.security.conftest import CONTROL, Runner, selected_backends


@pytest.mark.parametrize("backend", selected_backends())
@pytest.mark.parametrize("granted", [False, True], ids=["default rules", "state dir granted"])
def test_sandboxed_commands_cannot_read_or_change_the_undo_store(world, backend, granted):
    state = world.home / ".local" / "state"
    store = state / "run_bash" / "undo"
    state.mkdir(parents=True, exist_ok=True)
    (state / "other.txt").write_text("other-state\n")
    config = {"sandbox": {"rules": {"fs_readable": [str(state)]}}} if granted else {}
    runner = Runner(backend, world, config, undo_root=str(store))
    mark = f"UNDO-SECRET-{uuid.uuid4().hex}"  # short and random: kept raw, not compressed
    try:
        runner.run(f"echo {mark} > kept.txt")
        removal = runner.run("rm kept.txt")  # now only the store holds the text
        assert removal.changes is not None and removal.changes["paths"] == ["D kept.txt"]
        packs = sorted((store / "objects").rglob("*.pack"))
        assert any(mark.encode() in p.read_bytes() for p in packs)
        before = {p: p.read_bytes() for p in packs}
        # The positive control for reading: the same commands on a copy of the store's files
        # in the project do find the text.
        shutil.copytree(store / "objects", world.project / "copy")
        attack = (
            f"cat {store}/objects/packs/*; grep -r {mark} {store}; cp -r {store} stolen; "
            f"echo x > {store}/planted; for p in {store}/objects/packs/*; do echo x >> $p; done; "
            f"rm -rf {store}/projects; mv {store} moved; "
        )
        control = f"grep -rc {mark} copy/; cat README && echo ok > w && echo {CONTROL}" + (
            f"; cat {state}/other.txt" if granted else ""
        )
        r = runner.run(attack + control)
        assert CONTROL in r.output and ":1" in r.output, r.output  # the controls worked
        assert ("other-state" in r.output) is granted, r.output
        assert r.output.count(mark) == 0, r.output
        shutil.rmtree(world.project / "copy")
        found = subprocess.run(["grep", "-rl", mark, str(world.project)], capture_output=True)
        assert found.stdout == b"", found.stdout  # nothing of the store got into the project
        assert {p: p.read_bytes() for p in packs} == before
        assert not (store / "planted").exists()
        # The store still works: the run that removed the file is undone from it.
        done = runner.loop.run_until_complete(
            runner.recorder.undo(removal.id, str(world.project), False, "u1")
        )
        assert done["restored"] == ["kept.txt"], done
        assert (world.project / "kept.txt").read_text() == mark + "\n"
    finally:
        runner.close()


@pytest.mark.parametrize("backend", selected_backends())
def test_with_undo_off_a_granted_state_dir_still_cannot_plant_the_store(world, backend):
    """With ``undo.enabled = false`` nothing is snapshotted, yet the store's place stays out of
    reach: a store planted by a run (forged change sets naming paths outside the project) would
    be trusted by the host once undo is turned on."""
    state = world.home / ".local" / "state"
    store = state / "run_bash" / "undo"
    state.mkdir(parents=True, exist_ok=True)
    config = {
        "sandbox": {"rules": {"fs_writable": [".", str(state)]}},
        "undo": {"enabled": False},
    }
    runner = Runner(backend, world, config, undo_root=str(store))
    try:
        attack = (
            f"mkdir -p {store}/projects/k/runs; echo forged > {store}/projects/k/path; "
            f"echo x > {store}/planted; "
        )
        # The positive control: the same writes beside the store, in the granted state dir.
        control = (
            f"mkdir -p {state}/run_bash/other/projects && echo ok > {state}/run_bash/other/f "
            f"&& echo {CONTROL}"
        )
        r = runner.run(attack + control)
        assert CONTROL in r.output, r.output
        assert (state / "run_bash" / "other" / "f").read_text() == "ok\n"
        assert not (store / "planted").exists()
        assert not (store / "projects").exists()
    finally:
        runner.close()
