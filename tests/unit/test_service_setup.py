"""``Service.setup``: problems that would make every run fail are one error naming each key, and the
previous configuration stays in force."""

from __future__ import annotations

import asyncio

import pytest

from run_bash.errors import ConfigError
from run_bash.service import Service


@pytest.fixture
async def svc(tmp_path):
    service = Service(
        asyncio.get_running_loop(),
        lambda _name, _payload: None,
        environ={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
        state_dir=str(tmp_path / "state"),
    )
    yield service
    await service.mgr.shutdown()


async def test_a_good_setup_is_applied(svc):
    reply = svc.setup({"default_timeout": 42, "sandbox": {"backend": "none"}})
    assert reply["backend"] == "none"
    assert svc.config.default_timeout == 42 and svc.mgr.config is svc.config


@pytest.mark.parametrize(
    ("opts", "keys"),
    [
        ({"bogus": 1, "output": {"max_chars": "x"}}, ["bogus", "output.max_chars"]),
        (
            {
                "sandbox": {
                    "backend": "sandlock",
                    "backends": {"sandlock": {"profile": "/nope.toml"}},
                }
            },
            ["sandbox.backends.sandlock.profile"],
        ),
    ],
)
async def test_a_bad_setup_names_every_key_and_keeps_the_previous_config(svc, opts, keys):
    svc.setup({"default_timeout": 42, "sandbox": {"backend": "none"}})
    with pytest.raises(ConfigError) as err:
        svc.setup(opts)
    for key in keys:
        assert f"`{key}`" in str(err.value)
    assert svc.config.default_timeout == 42 and svc.config.sandbox.backend == "none"
    assert svc.mgr.config is svc.config


async def test_setup_builds_the_undo_index_of_neovims_project(tmp_path, monkeypatch):
    """The gate answers the first command in Neovim's project from its undo index: setup builds
    it. Another project's index is built only when asked about (the control)."""
    from run_bash.run_changes import CoverSpec

    home = tmp_path / "home"
    projects = [home / "here", home / "other"]
    for p in projects:
        p.mkdir(parents=True)
        (p / "pyproject.toml").write_text("")
        (p / "a.txt").write_text("a\n")
    monkeypatch.chdir(projects[0])
    service = Service(
        asyncio.get_running_loop(),
        lambda _name, _payload: None,
        environ={
            "PATH": "/usr/bin:/bin",
            "HOME": str(home),
            "RUN_BASH_UNDO": str(tmp_path / "undo"),
        },
        state_dir=str(tmp_path / "state"),
    )
    try:
        service.setup({"sandbox": {"backend": "none"}})
        changes = service.mgr.changes
        assert changes is not None and changes.recording

        def cover(project):
            return changes.coverage(CoverSpec(cwd=str(project), paths=(str(project / "a.txt"),)))

        deadline = asyncio.get_running_loop().time() + 30
        while not changes.indexed(str(projects[0])):  # nothing asked about it
            assert asyncio.get_running_loop().time() < deadline, "the index was never built"
            await asyncio.sleep(0.01)
        assert cover(projects[0]).ok, cover(projects[0])
        assert not changes.indexed(str(projects[1]))
        assert "not built yet" in cover(projects[1]).why  # asking builds it
    finally:
        await service.mgr.shutdown()


async def test_a_directory_that_becomes_a_project_after_setup_is_recorded_at_once(
    tmp_path, monkeypatch
):
    """Setup looks for Neovim's project to build its index; finding none then is not remembered
    by the gate: a project made right after (`git init`, a package.json) is covered at once."""
    from run_bash.run_changes import CoverSpec

    work = tmp_path / "home" / "work"
    work.mkdir(parents=True)
    monkeypatch.chdir(work)
    service = Service(
        asyncio.get_running_loop(),
        lambda _name, _payload: None,
        environ={
            "PATH": "/usr/bin:/bin",
            "HOME": str(tmp_path / "home"),
            "RUN_BASH_UNDO": str(tmp_path / "undo"),
        },
        state_dir=str(tmp_path / "state"),
    )
    try:
        service.setup({"sandbox": {"backend": "none"}})
        (work / "package.json").write_text("{}\n")
        (work / "a.txt").write_text("a\n")
        info = service.run({"cmd": "true", "unsandboxed_ok": True})
        r = (await asyncio.wait_for(service.mgr.wait_result(info["id"]), 30)).to_wire()
        assert r["exit_code"] == 0 and "not_recorded" not in (r.get("changes") or {}), r
        cover = service.recorder.coverage(CoverSpec(cwd=str(work), paths=(str(work / "a.txt"),)))
        assert cover.ok, cover.why
    finally:
        await service.mgr.shutdown()


EARLY = {"default_timeout": 42, "sandbox": {"backend": "none", "prepare": True}}


@pytest.mark.parametrize(
    "later",
    [
        {"default_timeout": 42, "sandbox": {"backend": "none", "prepare": 1}},  # 1 for true
        {"default_timeout": 42.0, "sandbox": {"backend": "none", "prepare": True}},  # 42.0
        {"default_timeout": 42, "sandbox": {"backend": "none"}},  # a key less
    ],
)
async def test_setup_keeps_the_options_of_hello_only_when_they_are_the_same_data(svc, later):
    """The options that came with ``hello`` are in force; a ``setup`` whose options are equal to
    them in Python but not the same data (``1`` for ``true``, ``42.0`` for ``42``, a key less)
    is checked and applied as any other: refused, or applied anew."""
    svc.rpc("hello", ({"opts": EARLY, "codecompanion": None},))
    applied = svc.config
    assert applied.default_timeout == 42 and applied.sandbox.prepare is True
    try:
        svc.setup(later)
    except ConfigError as err:
        assert "`sandbox.prepare`" in str(err) or "`default_timeout`" in str(err)
    else:
        assert svc.config is not applied  # applied in full, not kept


async def test_setup_with_the_options_of_hello_keeps_what_they_made(svc):
    """The control of the test above: the very same data (a copy, as a second message from Lua
    decodes to) gets the answer ``hello``'s options made; they stay in force, nothing is redone."""
    import copy

    svc.rpc("hello", ({"opts": EARLY, "codecompanion": None},))
    applied = svc.config
    reply = svc.setup(copy.deepcopy(EARLY))
    assert reply["notices"] == [] and reply["default_timeout"] == 42
    assert svc.config is applied
