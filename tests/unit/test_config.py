"""Config: defaults, validation by dotted key (all problems at once), legacy migration."""

from __future__ import annotations

import pytest

from run_bash.config import DEFAULTS, parse_config, parse_size
from run_bash.errors import ConfigError


def test_empty_config_is_the_defaults():
    cfg = parse_config({})
    assert cfg["sandbox"]["backend"] == "sandlock"
    assert cfg["default_timeout"] == 300
    assert cfg["output"]["max_chars"] == 30000
    assert cfg["notices"] == []
    assert {k: cfg[k] for k in DEFAULTS} == DEFAULTS


@pytest.mark.parametrize(
    ("opts", "message"),
    [
        (
            {"sandbox": {"backend": "docker"}},
            '`sandbox.backend` should be "sandlock", "bubblewrap"',
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
    ],
)
def test_invalid_options_are_named(opts, message):
    with pytest.raises(ConfigError) as err:
        parse_config(opts)
    assert message in str(err.value)


def test_every_problem_is_reported_at_once():
    with pytest.raises(ConfigError) as err:
        parse_config({"bogus": 1, "default_timeout": -1, "output": {"file_cap": 1}})
    assert len(err.value.problems) == 3


def test_options_must_be_a_table():
    with pytest.raises(ConfigError, match="options should be table"):
        parse_config("x")  # type: ignore[arg-type]


def test_legacy_sandbox_shape_is_migrated_with_notices():
    cfg = parse_config({"sandbox": {"profile": "/p.toml", "extra_args": ["--x"], "rules": {}}})
    assert cfg["sandbox"]["backends"]["sandlock"]["profile"] == "/p.toml"
    assert cfg["sandbox"]["backends"]["sandlock"]["extra_args"] == ["--x"]
    assert any("sandbox.profile" in n for n in cfg["notices"])


@pytest.mark.parametrize("legacy", [{"enabled": False}, {"backend": False}])
def test_sandbox_off_spellings_mean_none(legacy):
    assert parse_config({"sandbox": legacy})["sandbox"]["backend"] == "none"


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("512M", 512 << 20),
        ("4G", 4 << 30),
        ("1024", 1024),
        ("1.5k", 1536),
        ("x", None),
        ("-1G", None),
    ],
)
def test_parse_size(text, value):
    assert parse_size(text) == value
