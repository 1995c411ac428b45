"""Values from Lua and from the agent are checked for type, and every RPC for its arguments: one
UsageError that names the argument, and nothing runs."""

from __future__ import annotations

import pytest

from run_bash.boundary import flag, options, working_dir
from run_bash.errors import RunBashError, UsageError
from run_bash.service import RPC


@pytest.mark.parametrize("value", ["no", "false", 0, 1, [], {}], ids=repr)
def test_a_flag_must_be_a_boolean(value):
    with pytest.raises(UsageError, match="`approved` should be true or false"):
        flag("approved", value)


def test_absent_flags_are_false():
    assert flag("live", None) is False and flag("live", True) is True


def test_unknown_options_are_named():
    with pytest.raises(UsageError, match=r"unknown output option\(s\): bogus"):
        options("output", {"tail": 1, "bogus": 2}, ("tail",))
    assert options("output", [], ("tail",)) == {}  # an empty Lua table


def test_cwd_problems_are_named(tmp_path):
    f = tmp_path / "file"
    f.write_text("")
    with pytest.raises(UsageError, match="`cwd` should be a string, not number 5"):
        working_dir(5, confined=False)
    with pytest.raises(UsageError, match=f"`cwd` {f} is not a directory"):
        working_dir(str(f), confined=False)
    with pytest.raises(UsageError, match="does not exist"):
        working_dir(str(tmp_path / "nope"), confined=False)
    assert working_dir(str(tmp_path), confined=True) == str(tmp_path)


def test_a_cwd_a_confined_command_cannot_enter_is_refused(tmp_path):
    """A sandboxed command has no capabilities, so even as root it cannot enter a directory its
    permissions close to it."""
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o000)
    try:
        with pytest.raises(UsageError, match=f"`cwd` {locked}: permission denied"):
            working_dir(str(locked), confined=True)
        locked.chmod(0o700)
        assert working_dir(str(locked), confined=True) == str(locked)  # the control
    finally:
        locked.chmod(0o700)


@pytest.fixture
def svc(clean_svc):
    return clean_svc


@pytest.mark.parametrize("method", sorted(RPC))
async def test_extra_arguments_to_any_rpc_are_one_usage_error(svc, method):
    extra = (None,) * (len(RPC[method]) + 1)
    with pytest.raises(UsageError, match=f"^{method} takes "):
        svc.rpc(method, extra)


@pytest.mark.parametrize(
    ("method", "given"),
    [(m, k) for m in sorted(set(RPC) - {"shutdown", "hello"}) for k in range(len(RPC[m]))],
)
async def test_an_argument_left_out_of_any_rpc_is_nil(svc, method, given):
    """Lua leaves a trailing nil out of a request: the method then sees nil, which it checks as
    any other value. Leaving it out answers as giving it as nil does: the same result or the same
    clear error, never a Python error about the call."""

    def outcome(args: tuple[object, ...]) -> tuple[str, str]:
        try:
            return "ok", type(svc.rpc(method, args)).__name__
        except RunBashError as err:
            return "error", str(err)

    short = ("abc",) * given
    assert outcome(short) == outcome(short + (None,) * (len(RPC[method]) - given))


@pytest.mark.parametrize(
    ("method", "args", "message"),
    [
        ("output", (5,), "the session id should be a string, not number 5"),
        ("output", ("abc", 5), "`output` should be a table"),
        ("output", ("abc", {"tail": 1, "x": 1}), r"unknown output option\(s\): x"),
        ("watch", ([],), "the session id should be a string"),
        ("kill", ({},), "the session id should be a string"),
        ("check", (5,), "`cmd` should be a string, not number 5"),
        ("check", ("ls", {"skip_sandbox": "yes"}), "`skip_sandbox` should be true or false"),
        ("check", ("ls", {"source": "me"}), "`source` should be one of user, agent"),
        ("run", ("ls",), "`run` should be a table"),
        ("run", ({"cmd": "ls", "cwd": 7},), "`cwd` should be a string"),
        ("run", ({"cmd": "ls", "live": "yes", "unsandboxed_ok": True},), "`live` should be"),
        ("decide", (5, "accept"), "`id` should be a string"),
        ("decide", ("abc", "maybe"), "`decision` should be one of accept, always"),
        ("tool_args", ("x",), "the arguments should be a JSON object"),
    ],
)
async def test_wrong_argument_types_name_the_argument(svc, method, args, message):
    with pytest.raises(UsageError, match=message):
        svc.rpc(method, args)
    assert svc.sessions() == []
