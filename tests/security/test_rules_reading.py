"""#20 class 5: agent rules files are read one way: CodeCompanion's.

A differential test runs CodeCompanion's own rules code (``Rules.add_to_chat_from_config`` and
its ``claude``, ``codecompanion`` and ``cli`` parsers, in a headless Neovim with
deps/codecompanion.nvim) on adversarial rules files, and asserts that every file it reads is one
run_bash judges (its references are among run_bash's, its reads among the candidates run_bash
resolves) and that run_bash's verdict refuses every file that makes it read outside the project.
Then, through ``SessionManager`` under every confining backend, a run that writes such a file
gets it put back, with CodeCompanion (when deps/ has it) as the judge of the effect.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from run_bash.sandbox.agentrules import include_candidates, include_refs, rules_problems
from run_bash.sandbox.hostread import Discovery
from tests.conftest import ROOT, nvim_path
from tests.security.conftest import CONTROL, SECRET, World

CC = ROOT / "deps" / "codecompanion.nvim"
PLENARY = ROOT / "deps" / "plenary.nvim"
HARNESS = Path(__file__).with_name("cc_rules.lua")
PARSERS = ("claude", "codecompanion", "cli")


def have_codecompanion() -> str | None:
    """Why CodeCompanion's own code cannot be run here, or None."""
    if not (CC / "lua/codecompanion/interactions/shared/rules/init.lua").is_file():
        return "deps/codecompanion.nvim is missing (run `make deps-codecompanion`)"
    if not (PLENARY / "lua/plenary").is_dir():
        return "deps/plenary.nvim is missing (run `make deps-codecompanion`)"
    if nvim_path() is None:
        return "no Neovim >= 0.11"
    return None


def codecompanion_reads(cases: list[dict[str, str]], home: Path) -> list[dict[str, Any]]:
    """Run CodeCompanion's rules code on each case (one headless Neovim for all of them)."""
    work = home.parent / "cc-differential"
    work.mkdir(exist_ok=True)
    (work / "cases.json").write_text(json.dumps(cases))
    out = work / "out.json"
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "XDG_CONFIG_HOME": str(work / "cfg"),
           "XDG_DATA_HOME": str(work / "data"), "XDG_STATE_HOME": str(work / "state"),
           "XDG_CACHE_HOME": str(work / "cache")}  # fmt: skip
    argv = [nvim_path() or "nvim", "--headless", "--clean", "-l", str(HARNESS), str(ROOT)]
    proc = subprocess.run(
        [*argv, str(work / "cases.json"), str(out)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0 and out.exists(), proc.stderr[-2000:]
    result: list[dict[str, Any]] = json.loads(out.read_text())
    return result


def adversarial(home: Path) -> dict[str, bytes]:
    """Rules files whose references a second reader could resolve differently."""
    secret = b"~/.ssh/id_rsa"
    return {
        "plain_tilde": b"# Rules\n\n@" + secret + b"\n",
        "list_item": b"# Rules\n\n- @" + secret + b"\n",
        "block_quote": b"> @" + secret + b"\n",
        "ordered_list": b"1. @../.ssh/id_rsa\n",
        "no_break_space": b"@notes\xc2\xa0/../../.ssh/id_rsa\n",
        "ideographic_space": b"@notes\xe3\x80\x80/../../.ssh/id_rsa\n",
        "tab_before": b"\t@" + secret + b"\n",
        "vertical_tab_in_line": b"x\x0b@" + secret + b"\n",
        "crlf": b"# Rules\r\n\r\n@" + secret + b"\r\n",
        "dotdot": b"@../.ssh/id_rsa\n",
        "dotdot_via_inside": b"@docs/../../.ssh/id_rsa\n",
        "env_var": b"@$HOME/.ssh/id_rsa\n",
        "env_var_mid_path": b"@docs/../$HOME/../../.ssh/id_rsa\n",
        "absolute": b"@" + str(home).encode() + b"/.ssh/id_rsa\n",
        "double_slash": b"@//" + str(home).encode().lstrip(b"/") + b"/.ssh/id_rsa\n",
        "quoted": b"@\"~/.ssh/id_rsa\"\n@'../.ssh/id_rsa'\n",
        "long_line": b"x" * 300_000 + b"\n@" + secret + b"\n",
        "after_long_paragraph": b"text\n" * 2000 + b"@" + secret + b"\n",
        "setext_heading": b"@" + secret + b"\n====\n",
        "in_code_block": b"```\n@" + secret + b"\n```\n",
        "section": b"## Notes\n\n@" + secret + b"\n",
        "system_prompt_section": b"## System Prompt\n\n@" + secret + b"\n",
        "inside_only": b"# Rules\n\n@notes.md\n- @docs/a.md\n",
        "nul_byte": b"@../.ssh/id_rsa\x00tail\n",
        "tilde_user_form": b"@~/../" + home.name.encode() + b"/.ssh/id_rsa\n",
    }


def layout(world: World) -> None:
    (world.project / "notes.md").write_text("notes\n")
    (world.project / "docs").mkdir(exist_ok=True)
    (world.project / "docs/a.md").write_text("a\n")
    (world.project / "notes").mkdir(exist_ok=True)


def host_read(world: World):
    return Discovery().discover(
        str(world.project),
        writable=[str(world.project)],
        denied=[str(world.home / ".ssh")],
        env=world.env,
        home=str(world.home),
    )


def test_run_bash_judges_everything_codecompanion_reads(world):
    why = have_codecompanion()
    if why:
        pytest.skip(why)
    layout(world)
    files = adversarial(world.home)
    cases = []
    for name, data in files.items():
        path = world.project / f"rules-{name}.md"
        path.write_bytes(data)
        for parser in PARSERS:
            cases.append({"rules": str(path), "cwd": str(world.project), "parser": parser})
    results = codecompanion_reads(cases, world.home)
    hr = host_read(world)
    outside_seen = set()
    for case, got in zip(cases, results, strict=True):
        # A file CodeCompanion fails on (a NUL byte) reads what it read before failing.
        data = Path(case["rules"]).read_bytes()
        refs = include_refs(data)
        if case["parser"] == "cli":  # returns the references as written
            for token in got["tokens"]:
                assert bytes.fromhex(token) in refs, (case, bytes.fromhex(token), refs)
        candidates = {
            os.path.realpath(c)
            for ref in refs
            for c in include_candidates(ref, case["rules"], [str(world.project)], hr.env, hr.home)
        }
        for read in got["reads"]:
            assert os.path.realpath(read) in candidates, (case, read)
        outside = [r for r in got["reads"] if not r.startswith(str(world.project) + "/")]
        if outside:
            outside_seen.add(Path(case["rules"]).name)
            assert rules_problems(hr, case["rules"]), (case, outside)
    # The control: CodeCompanion does read outside the project for these (so the checks above
    # are not vacuous), the ones a regex anchored at the line start misses among them.
    for name in ("plain_tilde", "list_item", "block_quote", "no_break_space", "crlf", "dotdot"):
        assert f"rules-{name}.md" in outside_seen, (name, sorted(outside_seen))
    assert not rules_problems(hr, str(world.project / "rules-inside_only.md"))


# -- through the sandbox ---------------------------------------------------------------------------

SANDBOX_CASES = ("list_item", "block_quote", "no_break_space", "crlf", "ordered_list")


@pytest.mark.parametrize("name", SANDBOX_CASES)
def test_a_rules_file_a_run_writes_is_put_back(sbx, world, name):
    layout(world)
    (world.project / "CLAUDE.md").write_text("# Rules\nUse tabs.\n")
    data = adversarial(world.home)[name]
    (world.project / "payload.bin").write_bytes(data)
    control = "printf '# agents\\n@notes.md\\n- @docs/a.md\\n' > AGENTS.md"
    r = sbx.run(f"{control} && echo {CONTROL}; cat payload.bin > CLAUDE.md; echo end")
    assert CONTROL in r.output, r.output
    assert (world.project / "AGENTS.md").read_text() == "# agents\n@notes.md\n- @docs/a.md\n"
    assert (world.project / "CLAUDE.md").read_text() == "# Rules\nUse tabs.\n", r.notices
    assert any("CLAUDE.md" in n for n in r.notices), r.notices
    if have_codecompanion() is None:
        cases = [
            {"rules": str(world.project / n), "cwd": str(world.project), "parser": "claude"}
            for n in ("CLAUDE.md", "AGENTS.md")
        ]
        for got in codecompanion_reads(cases, world.home):
            assert all(p.startswith(str(world.project) + "/") for p in got["reads"]), got
        # The control: the same file left in place makes CodeCompanion read the secret.
        (world.project / "CLAUDE.md").write_bytes(data)
        got = codecompanion_reads(cases[:1], world.home)[0]
        secret = str(world.home / ".ssh/id_rsa")
        assert secret in got["reads"], got
        assert SECRET in (world.home / ".ssh/id_rsa").read_text()


# -- the port of vim.fs against vim.fs itself --------------------------------------------------------


def test_normalize_and_joinpath_are_vim_fs_own(world):
    """``nvim_normalize`` and ``nvim_joinpath`` give what Neovim's own ``vim.fs.normalize`` and
    ``vim.fs.joinpath`` give, on random adversarial paths (``~`` forms, ``$NAME`` set, unset and
    glued, ``//``, ``.`` and ``..`` runs, Unicode and no-break spaces, tabs, quotes, CR)."""
    import random

    from run_bash.sandbox.agentrules import nvim_joinpath, nvim_normalize

    nvim = nvim_path()
    if nvim is None:
        pytest.skip("no Neovim >= 0.11")
    rng = random.Random(2005)
    parts = [b"~", b"~x", b"$HOME", b"$RB_VISIBLE", b"$UNSET_X", b"$HOMEx", b"${HOME}", b".",
             b"..", b"", b"a", b"b c", b"\xc2\xa0", b"\xe3\x80\x80", b"\t", b'"q"', b"'s'",
             b"\r", b"x$", b"$", b"\xff"]  # fmt: skip
    cases = []
    for _ in range(400):
        n = rng.randint(0, 7)
        path = b"/".join(rng.choice(parts) for _ in range(n))
        if rng.random() < 0.3:
            path = b"/" * rng.randint(1, 3) + path
        base = rng.choice([b"/proj", b"/proj/", b"rel/dir", b"", b"//x"])
        cases.append((path, base))
    work = world.home.parent / "normalize"
    work.mkdir()
    (work / "in.json").write_text(json.dumps([[p.hex(), b.hex()] for p, b in cases]))
    env = {**world.env, "HOME": str(world.home)}
    script = str(Path(__file__).with_name("nvim_normalize.lua"))
    argv = [nvim, "--headless", "--clean", "-l", script, str(work / "in.json")]
    proc = subprocess.run(
        [*argv, str(work / "out.json")],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = json.loads((work / "out.json").read_text())
    benv = {os.fsencode(k): os.fsencode(v) for k, v in env.items()}
    home = os.fsencode(env["HOME"])
    for (path, base), (norm, joined) in zip(cases, got, strict=True):
        assert nvim_normalize(path, home, benv) == bytes.fromhex(norm), path
        assert nvim_joinpath(base, path) == bytes.fromhex(joined), (base, path)
