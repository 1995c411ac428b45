"""Config: a typed frozen object, validation by dotted key (all problems at once), legacy
migration, and empty Lua tables (which arrive as lists) wherever a table is expected."""

from __future__ import annotations

import dataclasses

import pytest

from run_bash.config import Config, option_keys, parse_config, parse_size
from run_bash.errors import ConfigError
from run_bash.sandbox.base import BACKEND_NAMES


def test_empty_config_is_the_defaults():
    cfg = parse_config({})
    assert cfg == Config()
    assert cfg.sandbox.backend == "auto"
    assert cfg.default_timeout == 300
    assert cfg.output.max_chars == 30000
    assert cfg.sandbox.limits.max_memory == 4 << 30  # "4G", in bytes
    assert cfg.notices == ()
    assert parse_config(None) == cfg


def test_config_is_frozen():
    cfg = parse_config({})
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.default_timeout = 5  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.output.max_chars = 5  # type: ignore[misc]


def test_values_are_typed():
    cfg = parse_config(
        {
            "sandbox": {
                "limits": {"max_memory": "512M", "max_file_size": 4096},
                "network": {"allow": ["pypi.org:443"], "allow_local_ports": [5432]},
                "env": {"pass": ["MY_*"], "set": {"A": "b"}},
                "rules": {"fs_writable": ["."]},
            }
        }
    )
    sb = cfg.sandbox
    assert sb.limits.max_memory == 512 << 20 and sb.limits.max_file_size == 4096
    assert sb.network.allow == ("pypi.org:443",) and sb.network.allow_local_ports == (5432,)
    assert sb.env.passthrough == ("MY_*",) and sb.env.set == {"A": "b"}
    assert sb.rules.fs_writable == (".",) and sb.rules.fs_readable is None


@pytest.mark.parametrize(
    "empty",
    [
        {"pauselist": []},
        {"sandbox": []},
        {"sandbox": {"rules": [], "env": {"set": [], "pass": {}}, "backends": {"sandlock": []}}},
        {"sandbox": {"network": {"allow": {}, "allow_local_ports": []}}},
        {"output": [], "sessions": [], "audit": []},
    ],
)
def test_an_empty_lua_table_is_accepted_wherever_a_table_or_list_is_expected(empty):
    # msgpack sends an empty Lua table as an empty list; an empty map may come for a list.
    assert parse_config(empty) == Config()


def test_every_backend_of_the_registry_is_a_valid_choice():
    for name in BACKEND_NAMES:
        assert parse_config({"sandbox": {"backend": name}}).sandbox.backend == name


def test_every_option_has_one_dotted_key():
    keys = list(option_keys())
    assert len(keys) == len(set(keys))
    assert {"sandbox.backend", "sandbox.env.pass", "pauselist", "audit.max_bytes"} <= set(keys)
    assert "notices" not in keys


@pytest.mark.parametrize(
    ("opts", "message"),
    [
        (
            {"sandbox": {"backend": "docker"}},
            '`sandbox.backend` should be "auto", "bubblewrap", "sandlock"',
        ),
        (
            {"sandbox": {"backends": {"sandlock": {"profile": 3}}}},
            "`sandbox.backends.sandlock.profile` should be string, not number 3",
        ),
        (
            {"sandbox": {"rules": {"fs_writable": "/tmp"}}},
            "`sandbox.rules.fs_writable` should be list of strings",
        ),
        ({"default_timeout": 0}, "`default_timeout` should be integer 1..3600"),
        ({"default_timeout": 4000}, "`default_timeout` should be integer 1..3600"),
        ({"output": {"max_chars": "big"}}, "`output.max_chars` should be integer >= 1000"),
        ({"bogus": 1}, "unknown option `bogus`"),
        ({"sandbox": {"nonsense": 1}}, "unknown option `sandbox.nonsense`"),
        ({"sandbox": 5}, "`sandbox` should be table, not number"),
        (
            {"sandbox": {"limits": {"max_memory": "lots"}}},
            "`sandbox.limits.max_memory` should be size",
        ),
        ({"sandbox": {"env": {"set": {"A": 1}}}}, "`sandbox.env.set` should be table of strings"),
        ({"sandbox": {"network": {"allow_local_ports": [70000]}}}, "list of port numbers"),
        (
            {"sandbox": {"network": {"allow": ["example.com"]}}},
            "`sandbox.network.allow`: 'example.com' is not \"host:port\"",
        ),
        ({"sandbox": {"network": {"allow": ["h:0"]}}}, "'h:0' is not"),
        ({"pauselist": {"rm": 5}}, "`pauselist.rm` should be boolean, function or table"),
        ({"pauselist": [1]}, "`pauselist` should be table, not list"),
        ({"sandbox": {"rules": [1]}}, "`sandbox.rules` should be table, not list"),
        ({"audit": {"enabled": "yes"}}, "`audit.enabled` should be boolean, not string 'yes'"),
        ({"sandbox": {"backends": {"bubblewrap": {"extra_args": "--x"}}}}, "list of strings"),
    ],
)
def test_invalid_options_are_named(opts, message):
    with pytest.raises(ConfigError) as err:
        parse_config(opts)
    assert message in str(err.value)


def test_every_problem_is_reported_at_once():
    with pytest.raises(ConfigError) as err:
        parse_config(
            {
                "bogus": 1,
                "default_timeout": -1,
                "output": {"file_cap": 1},
                "pauselist": {"rm": 5},
                "sandbox": {"env": {"sett": {}}},
            }
        )
    assert len(err.value.problems) == 5
    text = str(err.value)
    for key in ("bogus", "default_timeout", "output.file_cap", "pauselist.rm", "sandbox.env.sett"):
        assert f"`{key}`" in text


def test_options_must_be_a_table():
    with pytest.raises(ConfigError, match="options should be table"):
        parse_config("x")  # type: ignore[arg-type]


def test_legacy_sandbox_shape_is_migrated_with_notices():
    cfg = parse_config({"sandbox": {"profile": "/p.toml", "extra_args": ["--x"], "rules": {}}})
    assert cfg.sandbox.backends.sandlock.profile == "/p.toml"
    assert cfg.sandbox.backends.sandlock.extra_args == ("--x",)
    assert any("sandbox.profile" in n for n in cfg.notices)


@pytest.mark.parametrize("legacy", [{"enabled": False}, {"backend": False}])
def test_sandbox_off_spellings_mean_none(legacy):
    assert parse_config({"sandbox": legacy}).sandbox.backend == "none"


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("512M", 512 << 20),
        ("4G", 4 << 30),
        ("1024", 1024),
        ("1.5k", 1536),
        ("x", None),
        ("-1G", None),
        # Not finite, under a byte, or above what the kernel's limits hold: not a size.
        ("1e400", None),
        ("inf", None),
        ("nan", None),
        ("0.0001", None),
        ("8E", None),
        ("8192P", None),
        ("8388607T", 8388607 << 40),
    ],
)
def test_parse_size(text, value):
    assert parse_size(text) == value


@pytest.mark.parametrize("value", ["1e400", "nan", "9" * 400, 2**63, 2**70, "0.0001"])
def test_a_size_out_of_range_is_one_config_error_naming_the_key(value):
    with pytest.raises(ConfigError, match=r"sandbox\.limits\.max_memory"):
        parse_config({"sandbox": {"limits": {"max_memory": value}}})
    assert parse_config({"sandbox": {"limits": {"max_memory": 2**63 - 1}}})  # the largest
