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
