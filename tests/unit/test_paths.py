"""paths: ~, $VAR, ${VAR}, XDG fallbacks, relative paths, existence rules."""

from __future__ import annotations

from run_bash.paths import expand, expand_rules, is_under

ENV = {"HOME": "/home/u", "XDG_CONFIG_HOME": "/cfg", "FOO": "/foo", "EMPTY": ""}


def test_tilde_and_vars():
    assert expand("~", env=ENV) == "/home/u"
    assert expand("~/.ssh", env=ENV) == "/home/u/.ssh"
    assert expand("$FOO/bar", env=ENV) == "/foo/bar"
    assert expand("${FOO}/bar", env=ENV) == "/foo/bar"
    assert expand("$XDG_CONFIG_HOME/git", env=ENV) == "/cfg/git"


def test_xdg_fallbacks_when_unset_or_empty():
    env = {"HOME": "/h", "XDG_CACHE_HOME": ""}
    assert expand("$XDG_CACHE_HOME/pip", env=env) == "/h/.cache/pip"
    assert expand("$XDG_DATA_HOME/keyrings", env=env) == "/h/.local/share/keyrings"
    assert expand("$XDG_STATE_HOME", env=env) == "/h/.local/state"
    assert expand("$XDG_CONFIG_HOME/gh", env=env) == "/h/.config/gh"


def test_unknown_unset_variable_is_unresolvable():
    assert expand("$NOPE/x", env=ENV) is None
    assert expand("$EMPTY/x", env=ENV) is None
    assert expand("$XDG_RUNTIME_DIR/sock", env=ENV) is None


def test_relative_paths_and_normalization():
    assert expand(".", env=ENV, base="/proj") == "/proj"
    assert expand("build/../out", env=ENV, base="/proj") == "/proj/out"
    assert expand("/a//b/./c/", env=ENV) == "/a/b/c"
    assert expand("", env=ENV) is None
    assert expand("   ", env=ENV) is None


def test_existence_rules():
    exists = {"/home/u/a", "/home/u/b"}.__contains__
    paths = ["~/a", "~/missing", "~/b", "~/a", "$NOPE/x"]
    assert expand_rules(paths, must_exist=True, env=ENV, exists=exists) == [
        "/home/u/a",
        "/home/u/b",
    ]
    assert expand_rules(paths, must_exist=False, env=ENV, exists=exists) == [
        "/home/u/a",
        "/home/u/missing",
        "/home/u/b",
    ]
    assert expand_rules(None, must_exist=True, env=ENV) == []


def test_is_under():
    assert is_under("/a/b", "/a")
    assert is_under("/a", "/a")
    assert not is_under("/ab", "/a")
    assert is_under("/x", "/")
