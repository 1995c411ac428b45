"""Where a link a run leaves leads, against the run's reach (``linkcheck``), and how the tree scan
finds the links that appeared (``TreeScan.links_since``)."""

from __future__ import annotations

import os

from run_bash.sandbox import treescan
from run_bash.sandbox.linkcheck import Reach, leads_out, through_proc
from run_bash.sandbox.treescan import TreeScan


def reach(tmp_path):
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".gitconfig").write_text("[user]\n")
    (home / ".cargo/bin").mkdir(parents=True)
    (home / ".cargo/bin/cargo").write_text("#!/bin/sh\n")
    proj = home / "proj"
    (proj / ".git").mkdir(parents=True)
    (proj / ".git/config").write_text("")
    return (
        home,
        proj,
        Reach.of(
            readable=["/usr", "/proc", str(home / ".gitconfig"), str(home / ".cargo")],
            writable=[str(proj), "/dev/null"],
            denied=[str(home / ".ssh")],
            kept=[str(proj / ".git/config")],
            git_dirs=[str(proj / ".git")],
        ),
    )


def test_what_leads_out(tmp_path):
    home, proj, r = reach(tmp_path)
    out = {
        str(home / ".ssh/id_rsa"): "denies",
        str(home): "holds paths the sandbox denies",
        "/proc/1/environ": "/proc",
        str(proj / ".git/config"): "the host reads",
        str(home / ".config/nvim/init.lua"): "could read",
        str(home / ".gitconfig"): "could only read",
        str(home / ".cargo/bin/new"): "does not exist",
        str(proj / ".git"): "git's own directory",
        str(proj / ".git/HEAD"): "git's own directory",
        str(proj): "holds files the host reads",
    }
    for end, why in out.items():
        got = leads_out(end, r, str(home / "cache/link"))
        assert got is not None and why in got, (end, got)


def test_what_stays(tmp_path):
    home, proj, r = reach(tmp_path)
    for end in (
        str(proj / "README"),
        str(proj / "not/yet"),
        "/usr/bin/env",
        "/dev/null",
        str(home / ".cargo/bin/cargo"),
    ):
        assert leads_out(end, r) is None, end
    assert leads_out(str(proj), r, str(proj / "sub/up")) is None  # inside what it names


def test_the_scan_finds_the_links_that_appeared_after_a_mark(tmp_path):
    root = tmp_path / "t"
    (root / "a").mkdir(parents=True)
    os.symlink("x", root / "a/old")
    scan = TreeScan()
    try:
        scan.find(str(root))  # the first walk: what is there is no news
        mark = scan.link_mark()
        assert scan.links_since(mark, [str(root)])[0] == []
        os.symlink("y", root / "a/new")
        os.remove(root / "a/old")
        os.symlink("z", root / "a/old")  # the same name, a new text
        (root / "b/c").mkdir(parents=True)
        os.symlink("w", root / "b/c/deep")  # in a directory that is new
        scan.find(str(root))
        got = sorted(scan.links_since(mark, [str(root)])[0])
        assert got == sorted(
            [(f"{root}/a/new", "y"), (f"{root}/a/old", "z"), (f"{root}/b/c/deep", "w")]
        )
        later = scan.link_mark()
        scan.find(str(root))
        assert scan.links_since(later, [str(root)])[0] == []
        assert scan.links_since(mark, [str(tmp_path / "elsewhere")])[0] == []
        # The mark it gives covers what it gave: a link found after it, by any walk, is newer.
        covered = scan.links_since(mark, [str(root)])[1]
        assert scan.links_since(covered, [str(root)])[0] == []
        os.symlink("v", root / "b/c/later")
        scan.find(str(root))
        assert scan.links_since(covered, [str(root)])[0] == [(f"{root}/b/c/later", "v")]
    finally:
        scan.close()


def test_a_way_through_proc_is_seen_on_every_step(tmp_path):
    (tmp_path / "a").symlink_to("/dev/stdin")  # /dev/stdin -> /proc/self/fd/0
    (tmp_path / "b").symlink_to(tmp_path / "a")
    (tmp_path / "d").mkdir()
    (tmp_path / "c").symlink_to("d/" + "../" * 40 + "proc/self/environ")
    for p in ("/dev/fd/0", "/dev/stdin", "/proc", "/etc/../proc/1", "a", "b", "c"):
        assert through_proc(str(tmp_path / p) if not p.startswith("/") else p), p
    for p in ("/dev/null", "/usr/bin", "/", "/tmp"):
        assert not through_proc(p), p


def test_more_new_links_than_are_kept_gives_every_link_there(tmp_path, monkeypatch):
    """Fail closed: a mark older than what the scan keeps gets every link under the roots, the
    ones from before the mark too; a mark the kept ones cover gets only the new ones."""
    monkeypatch.setattr(treescan, "MAX_BORN", 3)
    root = tmp_path / "t"
    root.mkdir()
    os.symlink("x", root / "old")
    scan = TreeScan()
    try:
        scan.find(str(root))
        mark = scan.link_mark()
        for i in range(5):
            os.symlink(f"y{i}", root / f"new{i}")
        scan.find(str(root))
        got = dict(scan.links_since(mark, [str(root)])[0])
        assert got == {f"{root}/old": "x", **{f"{root}/new{i}": f"y{i}" for i in range(5)}}
        later = scan.link_mark()
        os.symlink("z", root / "last")
        scan.find(str(root))
        assert scan.links_since(later, [str(root)])[0] == [(f"{root}/last", "z")]  # the control
    finally:
        scan.close()
