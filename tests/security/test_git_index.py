"""A git index a run leaves behind names only paths git itself accepts (``sandbox/gitindex.py``).

The index stays writable inside the sandbox (``git add``, a merge to resolve), and git does not
check the paths of an index it reads back: an entry ``.git/hooks/post-commit`` or ``../x`` that a
run wrote into ``.git/index`` is written as it is by the host's next ``git checkout-index -a`` (a
hook of the project, a file outside the work tree). Through ``SessionManager`` on every confining
backend; controls: the same index written without a sandbox makes the outside git plant the
payload, the run really wrote the entry (its own ``git ls-files`` lists it), and everyday index
work (``git add``, a merge conflict's stages, a new repository's ordinary index) stays as it is.
"""

from __future__ import annotations

from tests.security.conftest import CONTROL, World
from tests.security.test_hostread import git, payload, pwned, unconfined_fires

NOTE = "names a path git refuses to check out"


def write_index(*entries: tuple[str, str, str]) -> str:
    """Shell that replaces the index of the repository here by one holding ``entries`` (path,
    octal mode, content): written byte by byte, as git would not write it."""
    specs = ", ".join(repr(e) for e in entries)
    return (
        "python3 - <<'EOF'\n"
        "import hashlib, struct, subprocess\n"
        f"ents = sorted([{specs}])\n"
        "body = b'DIRC' + struct.pack('>II', 2, len(ents))\n"
        "for name, mode, text in ents:\n"
        "    sha = subprocess.run(['git', 'hash-object', '-w', '--stdin'], input=text.encode(),\n"
        "                         capture_output=True, check=True).stdout.strip().decode()\n"
        "    n = name.encode()\n"
        "    e = struct.pack('>10I', 0, 0, 0, 0, 0, 0, int(mode, 8), 0, 0, 0)\n"
        "    e += bytes.fromhex(sha) + struct.pack('>H', len(n)) + n\n"
        "    body += e + b'\\0' * (8 - len(e) % 8)\n"
        "gd = subprocess.run(['git', 'rev-parse', '--git-path', 'index'], capture_output=True,\n"
        "                    check=True, text=True).stdout.strip()\n"
        "open(gd, 'wb').write(body + hashlib.sha1(body).digest())\n"
        "EOF\n"
    )


def hook_entry(world: World, tag: str) -> tuple[str, str, str]:
    return (".git/hooks/post-commit", "100755", f"#!/bin/sh\n{payload(world, tag)}\n")


def test_an_index_naming_a_hook_goes_to_the_quarantine(sbx, world):
    attack = write_index(("README", "100644", "hello\n"), hook_entry(world, "idxhook"))
    r = sbx.run(f"echo {CONTROL}; {attack} git ls-files")
    assert CONTROL in r.output and ".git/hooks/post-commit" in r.output, r.output
    assert [n for n in r.notices if ".git/index" in n and NOTE in n], r.notices
    assert ".git/hooks" not in git(world, "ls-files")
    git(world, "checkout-index", "-a", "-f")
    git(world, "commit", "-q", "--allow-empty", "-m", "x")
    assert not (world.project / ".git/hooks/post-commit").exists()
    assert pwned(world) == [], r
    # The control: without the sandbox the outside git writes the hook, and the next commit runs it.
    sbx.unconfined().run(attack)
    git(world, "checkout-index", "-a", "-f")
    git(world, "commit", "-q", "--allow-empty", "-m", "y")
    assert pwned(world) == ["PWNED-idxhook"]


def test_an_index_naming_a_path_outside_the_work_tree_goes_to_the_quarantine(sbx, world):
    attack = write_index(("README", "100644", "hello\n"), ("../PWNED-idxout", "100644", "x\n"))
    r = sbx.run(f"echo {CONTROL}; {attack} git ls-files")
    assert CONTROL in r.output and "../PWNED-idxout" in r.output, r.output
    assert [n for n in r.notices if NOTE in n], r.notices
    git(world, "checkout-index", "-a", "-f")
    assert pwned(world) == [], r
    unconfined_fires(sbx, world, attack, ["checkout-index", "-a", "-f"])


def test_a_new_repository_whose_index_leads_out_is_not_inert(sbx, world):
    entry = ("../.git/hooks/post-commit", "100755", f"#!/bin/sh\n{payload(world, 'idxnew')}\n")
    attack = f"git init -q sub && cd sub && {write_index(('a', '100644', 'a'), entry)}"
    r = sbx.run(f"echo {CONTROL}; {attack} git ls-files")
    assert CONTROL in r.output and "../.git/hooks/post-commit" in r.output, r.output
    assert [n for n in r.notices if "new repository sub/.git is not inert" in n and NOTE in n], (
        r.notices
    )
    git(world, "checkout-index", "-a", "-f", cwd=world.project / "sub")
    git(world, "commit", "-q", "--allow-empty", "-m", "x")
    assert pwned(world) == [], r
    # The control: without the sandbox, git in sub writes the project's hook, which the next
    # commit of the project runs.
    sbx.unconfined().run(attack)
    git(world, "checkout-index", "-a", "-f", cwd=world.project / "sub")
    git(world, "commit", "-q", "--allow-empty", "-m", "y")
    assert pwned(world) == ["PWNED-idxnew"]


def test_everyday_index_work_stays(sbx, world):
    """``git add``, a merge stopped on a conflict (stages 1-3), an ordinary new repository and a
    linked worktree: nothing is said and the index is as the run left it."""
    git(world, "checkout", "-q", "-b", "topic", check=True)
    (world.project / "README").write_text("topic\n")
    git(world, "commit", "-qam", "topic", check=True)
    git(world, "checkout", "-q", "main", check=True)
    (world.project / "README").write_text("main\n")
    git(world, "commit", "-qam", "main", check=True)
    r = sbx.run(
        f"echo {CONTROL}; git -c user.name=a -c user.email=a@b merge -q topic; "
        "echo n > new.txt && git add new.txt && "
        "git init -q sub && (cd sub && echo s > s && git add s) && "
        "git worktree add -q wt2 2>/dev/null; git ls-files -s README | wc -l"
    )
    assert CONTROL in r.output and "3" in r.output.split(), r.output
    assert not [n for n in r.notices if "index" in n or "not inert" in n], r.notices
    staged = git(world, "ls-files", "-s")
    assert "new.txt" in staged and len([x for x in staged.splitlines() if "README" in x]) == 3
    assert "s" in git(world, "ls-files", cwd=world.project / "sub").split()
    assert (world.project / "wt2/README").exists()


def test_the_index_of_a_repository_the_run_moved_is_checked_where_it_went(sbx, world):
    """An embedded repository the run moves away (its git directory stays where it went) has its
    index checked there."""
    emb = world.project / "emb"
    emb.mkdir()
    git(world, "init", "-q", cwd=emb, check=True)
    attack = write_index(("a", "100644", "a\n"), ("../../PWNED-idxmv", "100644", "x\n"))
    r = sbx.run(f"echo {CONTROL}; mv emb emb2 && cd emb2 && {attack} git ls-files")
    assert CONTROL in r.output and "../../PWNED-idxmv" in r.output, r.output
    assert [n for n in r.notices if "emb2/.git/index" in n and NOTE in n], r.notices
    git(world, "checkout-index", "-a", "-f", cwd=world.project / "emb2")
    assert pwned(world) == [], r
