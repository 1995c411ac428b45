"""The change store: each run's change set and its undo, with real files and real git commands
run as plain processes in place of the sandboxed command. Every undo is checked byte-exact with a
tree hash of the whole project (types, modes, contents, link targets, empty directories)."""

from __future__ import annotations

import json
import os
import socket
import stat
import threading
from pathlib import Path

import pytest

from run_bash.changes import ChangeStore, Limits, NotRecorded, Token

from .changes_util import SCENARIO_SETUP, SCENARIOS, begin, dir_bytes, git_repo, sh, tree_hash


@pytest.fixture
def home(tmp_path):
    h = tmp_path / "home"
    h.mkdir()
    return h


@pytest.fixture
def store(tmp_path, home):
    return ChangeStore(str(tmp_path / "state" / "undo"), home=str(home))


@pytest.fixture
def repo(tmp_path):
    p = tmp_path / "proj"
    git_repo(p)
    return p


def run_and_undo(store, proj, cmd, run_id="r1", skip=()):
    """Run ``cmd`` between begin and finish, undo it, and check the project is back byte-exact."""
    before = tree_hash(proj, skip=skip)
    tok = begin(store, run_id, proj)
    sh(cmd, proj)
    assert tree_hash(proj, skip=skip) != before  # the command did change the project
    cs = store.finish(tok)
    assert cs.changes
    res = store.undo(run_id)
    assert res["conflicts"] == [] and res["errors"] == [], res
    assert tree_hash(proj, skip=skip) == before
    return cs, res


@pytest.mark.parametrize("cmd", SCENARIOS.values(), ids=SCENARIOS.keys())
def test_undo_restores_the_project_byte_exact(store, repo, cmd):
    sh(SCENARIO_SETUP, repo)
    run_and_undo(store, repo, cmd, skip=("build", "run.log"))


def test_sed_in_place_over_many_files_lists_each_one(store, repo):
    sh('mkdir many && for i in $(seq 1 40); do echo "a $i" > many/f$i.txt; done', repo)
    cs, _ = run_and_undo(store, repo, "sed -i 's/a/b/' many/*.txt")
    assert {c.path for c in cs.changes} == {f"many/f{i}.txt" for i in range(1, 41)}
    assert {c.kind for c in cs.changes} == {"modified"}
    assert "M many/f1.txt" in cs.summary() and ", and 30 more" in cs.summary()


def test_names_with_spaces_newlines_and_non_utf8_bytes(store, repo):
    base = os.fsencode(str(repo))
    odd = [b"with space.txt", b"new\nline.txt", b"caf\xe9.txt", b"dir \xff/inner\tname"]
    for name in odd:
        path = os.path.join(base, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(b"content of " + name)
    cs, _ = run_and_undo(
        store,
        repo,
        "for f in *.txt; do printf 'more\\n' >> \"$f\"; done; rm -rf $'dir \\xff'; "
        "touch $'added\\x01\\xfe'",
    )
    listed = {c["path"] for c in store.changes("r1")}
    assert '"caf\\351.txt"' in listed and '"new\\nline.txt"' in listed
    assert '"added\\001\\376"' in listed
    for item in listed:
        item.encode("utf-8")  # everything sent to Lua is valid UTF-8
    json.dumps(store.changes("r1"))
    assert cs.summary().startswith("Changed files: ")


def test_non_git_project_is_the_nearest_directory_with_a_project_file(store, tmp_path):
    proj = tmp_path / "plain"
    proj.mkdir()
    sh("mkdir -p a/b && echo 1 > a/b/c && echo 2 > top && mkdir emptydir", proj)
    # Without a project file nothing is recorded, and the run says why.
    got = store.begin("r0", str(proj / "a" / "b"))
    assert isinstance(got, NotRecorded) and "is in no project" in got.reason
    (proj / "Makefile").write_text("all:\n")
    assert store.project_for(str(proj / "a" / "b")) == (str(proj), None)
    run_and_undo(store, proj, "rm -rf a emptydir && echo 3 >> top && mkdir new && echo n > new/f")


def test_a_directory_with_nothing_of_a_project_is_never_walked(store, tmp_path):
    shared = tmp_path / "share"
    shared.mkdir()
    sh("mkdir -p a/b && for i in $(seq 1 50); do echo $i > a/b/f$i; done", shared)
    walks = store.walks
    got = store.begin("r1", str(shared))
    assert isinstance(got, NotRecorded) and "no project file such as package.json" in got.reason
    assert store.walks == walks


def test_only_what_the_sandbox_can_write_is_walked(store, repo):
    # The run may write src/ only (its working directory, the default grant): docs/ is not
    # walked, and a project it cannot write at all is not recorded.
    tok = store.begin("r1", str(repo / "src"), writable=[str(repo / "src")])
    assert isinstance(tok, Token) and tok.before.scope == ("src",)
    assert "docs" not in tok.before.dirs and "src/pkg" in tok.before.dirs
    sh("echo more >> pkg/mod.py", repo / "src")
    cs = store.finish(tok)
    assert [c.path for c in cs.changes] == ["src/pkg/mod.py"]
    store.undo("r1")
    assert (repo / "src" / "pkg" / "mod.py").read_text() == "x = 1\n"
    got = store.begin("r2", str(repo), writable=["/nowhere"])
    assert isinstance(got, NotRecorded) and "cannot write the project" in got.reason


def test_project_is_the_git_top_level(store, repo):
    assert store.project_for(str(repo / "src" / "pkg")) == (str(repo), None)
    tok = begin(store, "r1", repo / "src" / "pkg")
    sh("echo top > ../../docs/x.md", repo / "src" / "pkg")
    cs = store.finish(tok)
    assert [c.path for c in cs.changes] == ["docs/x.md"]


def test_home_and_root_are_refused(store, home, tmp_path):
    for cwd, word in ((home, "home directory"), ("/", "/"), (tmp_path, "home directory")):
        got = store.begin("r", str(cwd))
        assert isinstance(got, NotRecorded) and word in got.reason
        assert str(got).startswith("changes not recorded: ")
    # A repository at $HOME: a directory under it with a project file is a project of its own
    # (positive control).
    sh("git init -q .", home)
    sub = home / "work"
    sub.mkdir()
    (sub / "package.json").write_text("{}")
    assert store.project_for(str(sub / ".")) == (str(sub), None)


def test_git_clean_fdx_of_small_ignored_files_is_undone(store, repo):
    before = tree_hash(repo)
    tok = begin(store, "r1", repo)
    sh("git clean -q -fdx", repo)
    cs = store.finish(tok)
    assert {"D build/ (1 file)", "D run.log"} <= set(cs.brief()), cs.summary()
    res = store.undo("r1")
    assert res["not_recovered"] == [] and res["errors"] == []
    assert tree_hash(repo) == before  # build/ and run.log too: within the ignored budget


def test_ignored_paths_created_by_a_run_are_covered_within_the_budget(store, repo):
    before = tree_hash(repo)
    tok = begin(store, "r1", repo)
    sh(
        "mkdir -p build/deep && echo x > build/deep/a.o && echo y >> run.log && echo t > keep.txt",
        repo,
    )
    cs = store.finish(tok)
    assert cs.summary() == "Changed files: A build/deep/ (1 file), A keep.txt, M run.log"
    store.undo("r1")
    assert tree_hash(repo) == before


def test_git_reset_hard_restores_work_and_reports_repository_data(store, repo):
    before = tree_hash(repo)
    tok = begin(store, "r1", repo)
    sh("git add notes.md && git commit -qm wip && git reset -q --hard HEAD~1", repo)
    cs = store.finish(tok)
    assert "D notes.md" in cs.summary()
    assert "not tracked: .git/ (repository data)" in cs.summary()
    res = store.undo("r1")
    assert res["restored"] == ["notes.md"]
    assert tree_hash(repo) == before


def test_the_users_git_directory_is_never_written(store, repo):
    sh("git status -s >/dev/null", repo)  # let git refresh its own index first
    git_before = dir_bytes(repo / ".git")
    tok = begin(store, "r1", repo)
    sh("echo more >> src/app.py && rm docs/index.md && echo n > new.txt", repo)
    store.finish(tok)
    store.plan("r1")
    store.undo("r1")
    store.diff_text("r1")
    assert dir_bytes(repo / ".git") == git_before
    # Positive control: the fingerprint does see a write into .git.
    sh("git update-ref refs/heads/extra HEAD", repo)
    assert dir_bytes(repo / ".git") != git_before


def test_nothing_is_left_in_the_project_by_the_store(store, repo):
    before = dir_bytes(repo)
    tok = begin(store, "r1", repo)
    store.finish(tok)
    assert dir_bytes(repo) == before


def test_conflicts_are_left_alone_unless_forced(store, repo):
    tok = begin(store, "r1", repo)
    sh("echo run >> src/app.py && echo run >> docs/index.md && echo a > added.txt", repo)
    store.finish(tok)
    sh("echo user >> src/app.py && echo user > added.txt", repo)  # edited again after the run
    plan = store.plan("r1")
    assert {c["path"] for c in plan["conflicts"]} == {"src/app.py", "added.txt"}
    assert plan["restore"] == ["docs/index.md"]
    res = store.undo("r1")
    assert {c["path"] for c in res["conflicts"]} == {"src/app.py", "added.txt"}
    assert res["restored"] == ["docs/index.md"]
    assert (repo / "src" / "app.py").read_text().endswith("run\nuser\n")
    assert (repo / "docs" / "index.md").read_text() == "# Title\n"
    res = store.undo("r1", force=True)
    assert res["restored"] == ["src/app.py"] and res["removed"] == ["added.txt"]
    assert (repo / "src" / "app.py").read_text() == "print(1)\n"


@pytest.mark.parametrize("user_writes", [True, False], ids=["user writes", "control"])
@pytest.mark.parametrize(
    ("setup", "cmd", "path", "why"),
    [
        # restored where nothing was: never renamed over a file made meanwhile
        ("echo old > notes.txt", "rm notes.txt", "notes.txt", "notes.txt was made"),
        # a link put back over the run's link: only while that is still there
        ("ln -s app.py src/lnk", "ln -sfn other src/lnk", "src/lnk", "lnk changed"),
    ],
    ids=["file", "symlink"],
)
def test_undo_never_writes_over_what_appears_after_it_looked(
    store, repo, monkeypatch, setup, cmd, path, why, user_writes
):
    """The user writes the path between undo's look at it and its write: what they wrote stays,
    byte for byte, and undo says so. Control: nobody writes, and the path is restored."""
    from run_bash.changes import undoing

    sh(setup, repo)
    target = repo / path
    before = os.readlink(target) if target.is_symlink() else target.read_bytes()
    tok = begin(store, "r1", repo)
    sh(cmd, repo)
    store.finish(tok)
    real = undoing._plan

    def plan_then_user_writes(*args, **kwargs):
        got = real(*args, **kwargs)
        if user_writes:
            if target.is_symlink():
                target.unlink()
            target.write_bytes(b"the user's new work\n")
        return got

    monkeypatch.setattr(undoing, "_plan", plan_then_user_writes)
    res = store.undo("r1")
    if user_writes:
        assert res["restored"] == []
        assert res["not_recovered"] == [
            {"path": path, "why": f"left in place: {why} while it was being undone"}
        ]
        assert not target.is_symlink() and target.read_bytes() == b"the user's new work\n"
    else:
        assert res["restored"] == [path] and res["not_recovered"] == []
        assert (os.readlink(target) if target.is_symlink() else target.read_bytes()) == before
    assert not [n for n in os.listdir(target.parent) if n.startswith(".run_bash-undo-")]


def test_an_undo_is_a_run_that_can_be_undone(store, repo):
    start = tree_hash(repo)
    tok = begin(store, "r1", repo)
    sh("rm -rf src && echo x > new.txt", repo)
    store.finish(tok)
    after_run = tree_hash(repo)
    res = store.undo("r1", new_run_id="u1")
    assert res["run"] == "u1" and tree_hash(repo) == start
    assert res["recorded"].startswith("Changed files: ")
    assert store.get("u1").undo_of == "r1"
    res2 = store.undo("u1")
    assert res2["conflicts"] == [] and tree_hash(repo) == after_run


def test_undo_never_writes_outside_through_a_symlinked_directory(store, repo, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    sh("echo precious > app.py && mkdir pkg && echo keep > pkg/mod.py", outside)
    outside_before = dir_bytes(outside)
    start = tree_hash(repo)
    tok = begin(store, "r1", repo)
    sh(f"echo run >> src/app.py && rm -rf src && ln -s {outside} src", repo)
    store.finish(tok)
    res = store.undo("r1")
    assert res["conflicts"] == [] and res["errors"] == []
    assert tree_hash(repo) == start
    assert dir_bytes(outside) == outside_before


def test_a_directory_swapped_for_a_symlink_after_the_run_stops_the_restore(store, repo, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    sh("echo precious > app.py", outside)
    outside_before = dir_bytes(outside)
    tok = begin(store, "r1", repo)
    sh("echo run >> src/app.py && rm src/pkg/mod.py", repo)
    store.finish(tok)
    sh(f"mv src src.real && ln -s {outside} src", repo)  # e.g. a later background command
    res = store.undo("r1")
    assert res["restored"] == []
    assert res["conflicts"] == [{"path": "src/app.py", "why": "deleted since the run"}]
    assert res["errors"] == [{"path": "src/pkg/mod.py", "why": "src is a symlink, not a directory"}]
    res = store.undo("r1", force=True)
    assert res["restored"] == []
    assert {e["path"]: e["why"] for e in res["errors"]} == {
        "src/app.py": "src is a symlink, not a directory",
        "src/pkg/mod.py": "src is a symlink, not a directory",
    }
    assert dir_bytes(outside) == outside_before
    assert (repo / "src.real" / "app.py").read_text() == "print(1)\nrun\n"


def test_fifos_sockets_never_block_and_are_reported(store, repo):
    os.mkfifo(repo / "pipe")  # present before: a reader opening it would block forever
    tok = store.begin("r1", str(repo))
    assert isinstance(tok, Token)
    srv = socket.socket(socket.AF_UNIX)
    srv.bind(str(repo / "sock"))
    sh("rm pipe && mkfifo pipe && echo f > file.txt", repo)
    done = []
    t = threading.Thread(target=lambda: done.append(store.finish(tok)), daemon=True)
    t.start()
    t.join(30)
    srv.close()
    assert done, "finish blocked on a FIFO"
    items = {c["path"]: c for c in store.changes("r1")}
    assert items["pipe"]["skipped"] == "FIFO, socket or device"
    assert items["sock"]["skipped"] == "FIFO, socket or device"
    assert items["file.txt"]["kind"] == "added" and "skipped" not in items["file.txt"]


def test_files_over_the_size_cap_are_listed_not_kept(tmp_path, home, repo):
    store = ChangeStore(str(tmp_path / "st"), Limits(max_file_size=1000), home=str(home))
    sh("head -c 2000 /dev/zero > big.bin && echo s > small.txt", repo)
    tok = begin(store, "r1", repo)
    sh("echo x >> big.bin && echo y >> small.txt && head -c 5000 /dev/zero > big2.bin", repo)
    cs = store.finish(tok)
    assert "not tracked: big.bin (over 1000 B), big2.bin (over 1000 B)" in cs.summary()
    res = store.undo("r1")
    # big2.bin was born during the run, but this undo cannot keep it (over the cap): it stays.
    assert res["restored"] == ["small.txt"] and res["removed"] == []
    assert {x["path"]: x["why"] for x in res["not_recovered"]} == {
        "big.bin": "left in place: over 1000 B",
        "big2.bin": "left in place: not kept by this undo (over 1000 B)",
    }
    assert (repo / "big2.bin").read_bytes() == bytes(5000)


def test_a_project_over_the_file_cap_is_not_recorded(tmp_path, home, repo):
    store = ChangeStore(str(tmp_path / "st"), Limits(max_files=3), home=str(home))
    got = store.begin("r1", str(repo))
    assert isinstance(got, NotRecorded)
    assert "more than 3 files" in str(got) and "undo.max_files" in str(got)
    store_ok = ChangeStore(str(tmp_path / "st2"), Limits(max_files=50), home=str(home))
    assert isinstance(store_ok.begin("r1", str(repo)), Token)  # positive control


def test_a_run_that_floods_the_project_still_gets_what_existed_before(tmp_path, home, repo):
    store = ChangeStore(str(tmp_path / "st"), Limits(max_files=20), home=str(home))
    start = tree_hash(repo, skip=("flood", "more"))
    tok = begin(store, "r1", repo)
    sh("rm -rf src && echo x >> notes.md && mkdir flood && for i in $(seq 1 100); do : > flood/$i; done"
       " && for i in $(seq 1 5); do : > more$i; done", repo)  # fmt: skip
    cs = store.finish(tok)
    line = cs.summary()
    assert line.startswith(
        "Changed files: M notes.md, D src/ (2 files); not tracked: flood/ (over the file-count cap), more1 (over the file-count cap), "
    )
    assert "the run left more than 80 files in the project: new paths are not tracked" in line
    res = store.undo("r1")
    assert res["errors"] == [] and res["conflicts"] == []
    assert tree_hash(repo, skip=("flood", "more1", "more2", "more3", "more4", "more5")) == start
    assert (repo / "flood").is_dir()  # not tracked, so left in place


def test_racy_rewrite_with_the_same_size_and_mtime_is_seen(store, repo):
    f = repo / "src" / "app.py"
    st = f.stat()
    tok = begin(store, "r1", repo)
    f.write_text("print(2)\n")  # same size
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))  # and the old mtime
    cs = store.finish(tok)
    assert [c.path for c in cs.changes] == ["src/app.py"]
    # The next run starts from the racy entry and still sees a second same-size rewrite.
    tok = begin(store, "r2", repo)
    f.write_text("print(3)\n")
    cs = store.finish(tok)
    assert [c.path for c in cs.changes] == ["src/app.py"]


def test_editing_gitignore_does_not_hide_a_runs_changes(store, repo):
    start = tree_hash(repo)
    tok = begin(store, "r1", repo)
    sh("printf '*\\n' >> .gitignore && echo gone > src/app.py && rm -rf docs", repo)
    cs = store.finish(tok)
    assert {"M src/app.py", "D docs/ (1 file)", "M .gitignore"} <= set(
        cs.summary()[15:].split(", ")
    )
    store.undo("r1")
    assert tree_hash(repo) == start


def test_nested_repository_files_are_covered_and_its_git_reported(store, repo):
    sh("mkdir -p vendor/lib && cd vendor/lib && git init -q && echo v1 > lib.c && "
       "git add lib.c && git commit -qm v1", repo)  # fmt: skip
    start = tree_hash(repo)
    tok = begin(store, "r1", repo)
    sh("cd vendor/lib && echo v2 > lib.c && git commit -qam v2", repo)
    cs = store.finish(tok)
    assert "M vendor/lib/lib.c" in cs.summary()
    assert "vendor/lib/.git/ (repository data)" in cs.summary()
    assert tok.before.nested == ["vendor/lib"]
    store.undo("r1")
    assert tree_hash(repo) == start


def test_overlapping_runs_say_so(store, repo):
    t1 = begin(store, "bg1", repo)
    t2 = begin(store, "fg2", repo)
    sh("echo a > a.txt", repo)
    cs2 = store.finish(t2)
    assert cs2.overlaps == ["bg1"]
    assert cs2.summary().endswith("; overlaps session bg1: changes may be mixed")
    sh("echo b > b.txt", repo)
    cs1 = store.finish(t1)
    assert cs1.overlaps == ["fg2"]
    assert [c.path for c in cs1.changes] == ["a.txt", "b.txt"]
    t3 = begin(store, "later", repo)  # started after both ended: no overlap
    sh("echo c > c.txt", repo)
    assert store.finish(t3).overlaps == []


def test_concurrent_runs_from_threads(store, tmp_path):
    projects = []
    for i in range(3):
        p = tmp_path / f"p{i}"
        p.mkdir()
        (p / "Makefile").write_text("")
        sh("mkdir d && for j in $(seq 1 30); do echo $j > d/f$j; done", p)
        projects.append(p)
    errors = []

    def work(n: int) -> None:
        try:
            p = projects[n % 3]
            for k in range(5):
                rid = f"t{n}-{k}"
                tok = begin(store, rid, p)
                (p / f"{rid}.txt").write_text(rid)
                cs = store.finish(tok)
                assert f"{rid}.txt" in [c.path for c in cs.changes]
        except BaseException as err:
            errors.append(err)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_change_sets_persist_across_a_new_store_object(tmp_path, home, repo):
    root = str(tmp_path / "st")
    start = tree_hash(repo)
    s1 = ChangeStore(root, home=str(home))
    tok = begin(s1, "r1", repo)
    sh("rm -rf src docs", repo)
    s1.finish(tok)
    s2 = ChangeStore(root, home=str(home))  # a host restart
    assert [c["path"] for c in s2.changes("r1")][:2] == ["docs/", "docs/index.md"]
    assert s2.latest().run_id == "r1"
    s2.undo("r1")
    assert tree_hash(repo) == start


def test_retention_keeps_the_last_runs_and_drops_their_blobs(tmp_path, home, repo):
    store = ChangeStore(str(tmp_path / "st"), Limits(keep=3), home=str(home))
    for i in range(6):
        tok = begin(store, f"r{i}", repo)
        (repo / "data.txt").write_text(f"unique content {i}\n" * 50)
        store.finish(tok)
    assert [r["run"] for r in store.runs()] == ["r5", "r4", "r3"]
    assert store.get("r0") is None and store.changes("r1") is None
    store.collect()
    blobs = store.objects.hashes()
    from run_bash.changes.objects import digest

    kept = {digest((f"unique content {i}\n" * 50).encode()) for i in range(2, 6)}
    gone = {digest((f"unique content {i}\n" * 50).encode()) for i in range(0, 2)}
    assert kept <= blobs and not (gone & blobs)
    store.undo("r3")  # still undoable after collection (conflicts: data.txt changed since)
    assert (repo / "data.txt").read_text().startswith("unique content 5")
    assert store.undo("r5")["restored"] == ["data.txt"]
    assert (repo / "data.txt").read_text().startswith("unique content 4")


def test_store_size_cap_drops_the_oldest_change_sets(tmp_path, home, repo):
    store = ChangeStore(str(tmp_path / "st"), Limits(max_store=300_000), home=str(home))
    for i in range(6):
        tok = begin(store, f"r{i}", repo)
        (repo / "noise.bin").write_bytes(os.urandom(80_000))
        store.finish(tok)
    info = store.collect()
    assert info["bytes"] <= 300_000
    runs = [r["run"] for r in store.runs()]
    assert runs and runs[0] == "r5" and "r0" not in runs
    assert store.usage()["bytes"] <= 300_000 + 64 * 1024  # plus locks, state and snapshot files


def test_store_directory_is_private(store, repo, tmp_path):
    begin(store, "r1", repo)
    assert stat.S_IMODE(os.stat(store.root).st_mode) == 0o700
    assert store.usage()["path"] == store.root


def test_a_damaged_blob_is_reported_never_restored(store, repo):
    tok = begin(store, "r1", repo)
    sh("echo changed > src/app.py", repo)
    cs = store.finish(tok)
    h = cs.changes[0].before[6]
    pack, off, _n = store.objects.locate(h)
    with open(os.path.join(store.objects.packs, pack), "r+b") as f:
        f.seek(off + 3)
        f.write(b"X")
    res = store.undo("r1")
    assert res["errors"] and "damaged" in res["errors"][0]["why"]
    assert (repo / "src" / "app.py").read_text() == "changed\n"


def test_summary_collapses_whole_trees_and_caps_the_list(store, tmp_path):
    proj = tmp_path / "p"
    proj.mkdir()
    (proj / "pyproject.toml").write_text("")
    sh("mkdir -p build/a && for i in $(seq 1 312); do echo $i > build/a/f$i; done", proj)
    tok = begin(store, "r1", proj)
    sh("rm -rf build && for i in $(seq 1 12); do echo > n$i.md; done && mkdir -p e/f", proj)
    cs = store.finish(tok)
    line = cs.summary()
    assert line.startswith("Changed files: D build/ (312 files), A e/, A n1.md, ")
    assert line.endswith(", and 4 more")
    assert store.changes("r1")[0] == {"path": "build/", "kind": "deleted"}


def test_diff_shows_text_and_binary_changes(store, repo):
    sh("head -c 100 /dev/urandom > b.bin", repo)
    tok = begin(store, "r1", repo)
    sh(
        "printf 'print(2)\\n' > src/app.py && head -c 120 /dev/urandom > b.bin && chmod +x src/pkg/mod.py",
        repo,
    )
    store.finish(tok)
    text = store.diff_text("r1")
    assert "-print(1)\n+print(2)\n" in text
    assert "Binary files a/b.bin and b/b.bin differ (100 B, sha256 " in text
    assert "old mode 100644\nnew mode 100755" in text
    assert store.diff_text("nope") is None


def test_a_run_that_changes_nothing_keeps_no_change_set(store, repo):
    tok = begin(store, "r1", repo)
    cs = store.finish(tok)
    assert cs.changes == [] and cs.summary() == ""
    assert store.get("r1") is None and store.runs() == []
    with pytest.raises(KeyError):
        store.undo("r1")


def test_a_start_with_nothing_changed_skips_the_walk(store, repo):
    store.finish(begin(store, "r1", repo))
    store.settle()
    walks = store.walks
    tok = begin(store, "r2", repo)
    assert store.walks == walks  # inotify saw nothing since the last walk
    sh("echo more >> src/pkg/mod.py", repo)
    quick = store.quick_walks
    cs = store.finish(tok)
    assert store.quick_walks == quick + 1  # only src/pkg was listed again
    assert [c.path for c in cs.changes] == ["src/pkg/mod.py"]
    store.settle()
    assert store.walks == walks + 1  # then checked by a full walk, off the caller's thread
    assert store.amended == 0


def test_without_quick_finish_every_end_walks(tmp_path, home, repo):
    store = ChangeStore(str(tmp_path / "st"), home=str(home), quick_finish=False)
    store.finish(begin(store, "r1", repo))
    walks = store.walks
    store.finish(begin(store, "r2", repo))
    assert store.walks == walks + 1 and store.quick_walks == 0


MMAP_WRITER = """
import mmap, os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
m = mmap.mmap(fd, 0)
os.close(fd)
print("ready", flush=True)
for line in sys.stdin:
    m[0:5] = line.strip().encode()[:5].ljust(5)
    m.flush()
    print("done", flush=True)
"""


def test_a_write_through_a_shared_mmap_is_added_by_the_check(store, repo):
    import subprocess
    import sys

    target = repo / "docs" / "index.md"
    writer = subprocess.Popen(
        [sys.executable, "-c", MMAP_WRITER, str(target)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert writer.stdout.readline() == "ready\n"
        store.finish(begin(store, "r0", repo))  # walks: the open/close above are seen
        store.settle()
        tok = begin(store, "r1", repo)
        writer.stdin.write("XXXXX\n")
        writer.stdin.flush()
        assert writer.stdout.readline() == "done\n"  # no inotify event for this write
        sh("echo n > notes2.md", repo)
        cs = store.finish(tok)
        assert [c.path for c in cs.changes] == ["notes2.md"]  # the quick end cannot see it
        assert store.changes("r1") == [  # get() settles: the check found it
            {"path": "docs/index.md", "kind": "modified", "detail": "content"},
            {"path": "notes2.md", "kind": "added"},
        ]
        assert store.amended == 1
        assert "inotify missed them" in store.get("r1").summary()
    finally:
        writer.stdin.close()
        writer.wait()
    store.undo("r1")
    assert target.read_text() == "# Title\n"


def test_changes_after_a_quick_end_are_not_added_to_it(store, repo):
    store.finish(begin(store, "r0", repo))
    store.settle()
    tok = begin(store, "r1", repo)
    sh("echo run >> src/app.py", repo)
    store.finish(tok)  # quick; its check is due
    sh(
        "echo user >> src/pkg/mod.py && mkdir -p d1/d2 && echo x > d1/d2/f && mv src/pkg src/pkg2",
        repo,
    )
    store.settle()
    assert [c["path"] for c in store.changes("r1")] == ["src/app.py"]
    assert store.amended == 0


EDITS_BETWEEN_RUNS = {
    "content": "echo user >> src/app.py",
    "chmod": "chmod 700 src/app.py",
    "touch -d": "touch -d 2001-01-01 src/app.py",
    "new file in a new directory": "mkdir -p src/new/deep && echo n > src/new/deep/f",
    "rename a directory": "mv src/pkg src/pkg2",
    "delete": "rm docs/index.md",
    "replace by a symlink": "rm src/app.py && ln -s pkg/mod.py src/app.py",
    "git commit": "git add -A && git commit -qm user",
}


@pytest.mark.parametrize("edit", EDITS_BETWEEN_RUNS.values(), ids=EDITS_BETWEEN_RUNS.keys())
def test_edits_between_runs_are_seen_by_the_next_start(store, repo, edit):
    store.finish(begin(store, "r1", repo))
    store.settle()
    sh(edit, repo)  # the user, between two runs
    walks, quick = store.walks, store.quick_walks
    user_state = tree_hash(repo)
    tok = begin(store, "r2", repo)
    # The start lists again only what inotify saw change (a new directory whole).
    assert (store.walks, store.quick_walks) == (walks, quick + 1)
    cs = store.finish(tok)
    assert cs.changes == []  # the user's edit is not the run's
    tok = begin(store, "r3", repo)
    sh("rm -rf src docs && echo x > other", repo)
    store.finish(tok)
    store.undo("r3")
    assert tree_hash(repo) == user_state


def test_a_failed_walk_does_not_vouch_for_the_next_start(tmp_path, home, repo):
    store = ChangeStore(str(tmp_path / "st"), Limits(max_files=20), home=str(home))
    tok = begin(store, "r1", repo)
    sh("mkdir flood && for i in $(seq 1 100); do : > flood/$i; done", repo)
    store.finish(tok)
    store.settle()
    walks = store.walks
    assert isinstance(store.begin("r2", str(repo)), NotRecorded)
    assert store.walks == walks + 1


def test_a_run_that_removes_the_project_directory_itself(store, repo):
    start = tree_hash(repo)
    tok = begin(store, "r1", repo)
    sh(f"rm -rf {repo}", repo.parent)
    cs = store.finish(tok)
    assert "D src/ (2 files)" in cs.summary()
    assert "src/app.py" in store.plan("r1")["restore"]
    res = store.undo("r1")
    assert res["errors"] == [] and res["conflicts"] == []
    # .git went with it (not covered, and said so); the work tree is back, ignored files too.
    assert {x["path"] for x in res["not_recovered"]} == {".git"}
    assert tree_hash(repo) == start


def test_a_store_inside_the_project_is_not_walked(tmp_path, home):
    proj = tmp_path / "p"
    proj.mkdir()
    (proj / "go.mod").write_text("")
    (proj / "a.txt").write_text("a")
    store = ChangeStore(str(proj / ".state" / "undo"), home=str(home))
    tok = begin(store, "r1", proj)
    (proj / "b.txt").write_text("b")
    cs = store.finish(tok)
    assert [c.path for c in cs.changes] == ["b.txt"]  # not the store's own files
    assert all(not p.startswith(".state/undo/") for d in tok.before.dirs for p in [d + "/"])


def test_two_hosts_share_one_store(tmp_path, home, repo):
    root = str(tmp_path / "st")
    a = ChangeStore(root, home=str(home))
    b = ChangeStore(root, home=str(home))
    start = tree_hash(repo)
    ta = begin(a, "ra", repo)
    tb = begin(b, "rb", repo)
    sh("echo a >> src/app.py", repo)
    csa = a.finish(ta)
    sh("echo b >> docs/index.md", repo)
    csb = b.finish(tb)
    assert csa.overlaps == ["rb"] and csb.overlaps == ["ra"]
    assert [c.path for c in csb.changes] == ["docs/index.md", "src/app.py"]
    a.settle()
    b.collect()  # one host's collection keeps the other's blobs
    a.collect()
    assert b.undo("rb")["errors"] == []
    assert tree_hash(repo) == start
    assert a.undo("ra")["conflicts"] == []  # already as before: nothing to do
    assert tree_hash(repo) == start


def _recent(store):
    (state,) = [json.loads(p.read_text()) for p in Path(store.root).glob("projects/*/state.json")]
    return [r[0] for r in state["recent"]]


def test_runs_one_after_another_leave_no_history_in_the_state(store, repo):
    """What every run reads and writes stays small: an ended run is kept only while a run that
    began before it ended is still going (the one it may overlap)."""
    for i in range(5):
        store.finish(begin(store, f"r{i}", repo))
    assert _recent(store) == ["r4"]  # r0..r3 ended before r4 began
    # The control: a run going meanwhile keeps those that ended after it began, and they are
    # its overlaps.
    long = begin(store, "long", repo)
    for i in range(3):
        store.finish(begin(store, f"s{i}", repo))
    assert _recent(store) == ["s0", "s1", "s2"]
    assert store.finish(long).overlaps == ["s0", "s1", "s2"]
    store.finish(begin(store, "after", repo))
    assert _recent(store) == ["after"]
