"""``sessions/lastpolicy.py``: the first runs' policies kept between hosts, as plain data."""

from __future__ import annotations

import json
import os
from dataclasses import fields
from pathlib import Path

import pytest

from run_bash.config import parse_config
from run_bash.sandbox.hostread import Discovery
from run_bash.sandbox.netholder import project_of
from run_bash.sandbox.policy import Policy, build_policy
from run_bash.sessions import lastpolicy


@pytest.fixture
def policy(tmp_path, monkeypatch) -> Policy:
    project = tmp_path / "proj"
    project.mkdir()
    (project / "README").write_text("hello\n")
    monkeypatch.setenv("HOME", str(tmp_path))
    return build_policy(
        parse_config({"sandbox": {"network": {"allow": ["example.com:443"]}}}),
        str(project),
        env=dict(os.environ),
        discovery=Discovery(),
        scan_ports=False,
    )


def test_every_field_of_a_policy_but_its_host_read_set_is_kept():
    kinds = (*lastpolicy.TEXTS, *lastpolicy.TEXT_LISTS, *lastpolicy.NUMBER_LISTS, "limits")
    assert len(kinds) == len(set(kinds))
    assert set(kinds) == {f.name for f in fields(Policy)} - {"host_read"}


def test_a_policy_comes_back_as_it_was_with_its_project(policy):
    back = lastpolicy.decode(json.loads(json.dumps(lastpolicy.encode(policy))))
    assert back is not None
    for f in fields(Policy):
        if f.name != "host_read":
            assert getattr(back, f.name) == getattr(policy, f.name), f.name
    assert policy.network_allow == ["example.com:443"]  # (a list that is not empty)
    assert project_of(back) == project_of(policy)


@pytest.mark.parametrize(
    "change",
    [
        lambda d: d.pop("writable"),
        lambda d: d.update(writable="/"),
        lambda d: d.update(own_ports=["80"]),
        lambda d: d.update(own_ports=[True]),
        lambda d: d.update(cwd="relative"),
        lambda d: d.update(project=None),
        lambda d: d["limits"].update(extra=1),
        lambda d: d["limits"].update(max_processes="512"),
    ],
)
def test_data_not_exactly_a_policy_is_no_policy(policy, change):
    data = json.loads(json.dumps(lastpolicy.encode(policy)))
    assert lastpolicy.decode(data) is not None
    change(data)
    assert lastpolicy.decode(data) is None


def test_a_note_is_what_the_next_load_finds_and_only_for_its_directory(policy, tmp_path):
    path = str(tmp_path / "state" / "first.json")
    assert lastpolicy.load(path, policy.cwd) is None
    assert lastpolicy.note(path, policy.cwd, policy)
    assert os.stat(path).st_mode & 0o777 == 0o600
    assert lastpolicy.load(path, policy.cwd).writable == policy.writable
    assert lastpolicy.load(path, str(tmp_path)) is None
    before = os.stat(path).st_mtime_ns
    assert not lastpolicy.note(path, policy.cwd, policy)  # the same: not written again
    assert os.stat(path).st_mtime_ns == before


def test_the_newest_directories_are_kept(policy, tmp_path):
    path = str(tmp_path / "first.json")
    kept_dirs = lambda: [cwd for cwd, _ in json.loads(Path(path).read_text())["dirs"]]  # noqa: E731
    dirs = [str(tmp_path / f"d{i}") for i in range(lastpolicy.MAX_DIRS + 2)]
    for d in dirs:
        assert lastpolicy.note(path, d, policy)
    assert kept_dirs() == dirs[::-1][: lastpolicy.MAX_DIRS]
    assert lastpolicy.note(path, dirs[-3], policy)  # noted again: first once more
    assert kept_dirs()[0] == dirs[-3]


def test_a_file_not_ours_to_trust_is_not_read(policy, tmp_path):
    path = tmp_path / "first.json"
    assert lastpolicy.note(str(path), policy.cwd, policy)
    assert lastpolicy.load(str(path), policy.cwd) is not None  # the control
    path.chmod(0o622)  # others may write it
    assert lastpolicy.load(str(path), policy.cwd) is None
    path.chmod(0o600)
    link = tmp_path / "link.json"
    link.symlink_to(path)
    assert lastpolicy.load(str(link), policy.cwd) is None
    data = json.loads(path.read_text())
    path.write_text(json.dumps({**data, "format": 0}))
    assert lastpolicy.load(str(path), policy.cwd) is None
    path.write_text(json.dumps(data) + " " * lastpolicy.MAX_BYTES)
    assert lastpolicy.load(str(path), policy.cwd) is None
    path.write_text("{not json")
    assert lastpolicy.load(str(path), policy.cwd) is None
    assert lastpolicy.note(str(path), policy.cwd, policy)  # a malformed file is written anew
    assert lastpolicy.load(str(path), policy.cwd) is not None


def test_the_file_is_named_by_an_absolute_path_only():
    assert lastpolicy.path_of({lastpolicy.FILE_ENV: "/x/first.json"}) == "/x/first.json"
    assert lastpolicy.path_of({lastpolicy.FILE_ENV: "first.json"}) is None
    assert lastpolicy.path_of({}) is None
