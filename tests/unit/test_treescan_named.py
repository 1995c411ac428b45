"""The tree walk reports the entries of the names it is asked for (``TreeScan.find_named``): from
the listing it makes anyway, kept with each directory, so an unchanged tree costs nothing more."""

from __future__ import annotations

import os
from pathlib import Path

from run_bash.sandbox.treescan import TreeScan


def test_named_entries_of_every_kind_at_every_level(tmp_path: Path) -> None:
    root = tmp_path / "p"
    (root / "src" / ".cargo").mkdir(parents=True)
    (root / "a" / "b" / "c").mkdir(parents=True)
    (root / "a" / "b" / "c" / ".envrc").write_text("")
    (root / "web").mkdir()
    (root / "web" / ".envrc").symlink_to("/etc/hostname")
    (root / ".envrc").write_text("")
    (root / "other.txt").write_text("")
    scan = TreeScan({".envrc", ".cargo"})
    found, named, truncated = scan.find_named(str(root))
    assert (found, truncated) == ([], False)
    assert sorted(named) == sorted(
        str(root / p) for p in (".envrc", "a/b/c/.envrc", "src/.cargo", "web/.envrc")
    )
    # Skipped directories (kept whole) are not looked into.
    _f, named, _t = scan.find_named(str(root), frozenset({str(root / "a")}))
    assert str(root / "a/b/c/.envrc") not in named


def test_a_new_entry_is_reported_at_the_next_walk(tmp_path: Path) -> None:
    root = tmp_path / "p"
    (root / "x").mkdir(parents=True)
    scan = TreeScan({"rust-toolchain.toml"})
    assert scan.find_named(str(root))[1] == []
    (root / "x" / "y").mkdir()
    (root / "x" / "y" / "rust-toolchain.toml").write_text("")
    assert scan.find_named(str(root))[1] == [str(root / "x/y/rust-toolchain.toml")]
    os.unlink(root / "x" / "y" / "rust-toolchain.toml")
    assert scan.find_named(str(root))[1] == []


def test_a_name_wanted_later_lists_every_directory_again(tmp_path: Path) -> None:
    root = tmp_path / "p"
    (root / "web" / "node_modules" / ".bin").mkdir(parents=True)
    (root / "web" / "ln").symlink_to("/etc/hostname")
    scan = TreeScan()
    scan.find_named(str(root))
    mark = scan.link_mark()
    assert scan.find_named(str(root))[1] == []
    scan.want({"node_modules"})
    assert scan.find_named(str(root))[1] == [str(root / "web" / "node_modules")]
    # Listing again for a new name does not make the links there new.
    assert scan.links_since(mark, [str(root)])[0] == []
    scan.want({"node_modules"})  # nothing more: no new listing needed
    assert scan.find_named(str(root))[1] == [str(root / "web" / "node_modules")]


def test_walk_on_reports_named_entries_too(tmp_path: Path) -> None:
    root = tmp_path / "p"
    (root / "old").mkdir(parents=True)
    scan = TreeScan({".tool-versions"})
    scan.find_named(str(root))
    old = scan.known()
    (root / "new" / "deep").mkdir(parents=True)
    (root / "new" / "deep" / ".tool-versions").write_text("")
    named: list[str] = []
    scan.walk_on(str(root), frozenset(), old, limit=10_000, named=named)
    assert named == [str(root / "new/deep/.tool-versions")]


def test_a_listing_made_while_the_directory_was_young_is_not_reused(tmp_path, monkeypatch):
    """Two changes within one timestamp tick leave the same (inode, ctime, mtime): a directory
    listed while its change time is young is listed again at the next walk, and the walk is not
    kept (a name made in the same tick, before its watch, would be missed for good)."""
    from run_bash.sandbox import treescan

    root = tmp_path / "p"
    (root / "a").mkdir(parents=True)
    scan = TreeScan({".envrc"})
    listed: list[str] = []
    real_list = TreeScan._list

    def counting(self, d, ident, top):
        listed.append(d)
        return real_list(self, d, ident, top)

    monkeypatch.setattr(TreeScan, "_list", counting)
    scan.find_named(str(root))
    first = len(listed)
    scan.find_named(str(root))  # young: every directory listed again
    assert len(listed) == 2 * first
    # Once settled, an unchanged tree is not listed again.
    monkeypatch.setattr(treescan, "_now", lambda: 2**62)
    scan.find_named(str(root))
    settled = len(listed)
    scan.find_named(str(root))
    assert len(listed) == settled
