"""Search paths other than PATH (``searchvars.py``): a directory of the project that the user's
``PYTHONPATH``, ``LD_LIBRARY_PATH``, ``PERL5LIB`` (…) names is read-only inside the run, as a
writable ``PATH`` directory is, and a file ``PYTHONSTARTUP`` names is read-only as a file: what a
run leaves there would run at the user's next Python, program or Perl, in any directory, outside
the sandbox. Each attack runs through ``SessionManager`` under every confining backend, beside a
write elsewhere in the project that succeeds in the same run (the sandbox refuses only what it
keeps); the same command without the sandbox is the control (the tool really loads it)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.security.conftest import CONTROL, Runner, World

FIRED = "FIRED-FROM-THE-RUN"


def with_env(sbx: Runner, world: World, **env: str) -> Runner:
    world.env.update(env)
    return sbx.with_config()


def on_host(world: World, argv: list[str], cwd: Path | None = None) -> str:
    """What a later command of the user prints: their environment, from HOME (not the project)
    unless told."""
    done = subprocess.run(
        argv,
        cwd=cwd or world.home,
        env=world.env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return done.stdout + done.stderr


def attempt(sbx: Runner, rb: Runner, world: World, write: str, check: list[str]) -> None:
    """``write`` is refused inside the run (read-only) while the positive control beside it
    succeeds; without the sandbox the same write makes ``check`` print ``FIRED``."""
    assert FIRED not in on_host(world, check)
    r = rb.run(f"echo {CONTROL} > control.txt; {write} && echo planted")
    assert "planted" not in r.output and "Read-only file system" in r.output, r.output
    assert (world.project / "control.txt").read_text().strip() == CONTROL, r.output
    # The run failed on it: the result says what is kept and why.
    assert any("read-only inside the sandbox" in n for n in r.notices), r.notices
    out = on_host(world, check)
    assert FIRED not in out, out
    done = sbx.unconfined().run(f"{write} && echo planted")
    assert "planted" in done.output, done.output
    out = on_host(world, check)
    assert FIRED in out, out  # the mechanism is real: the user's next command runs it


def test_pythonpath_sitecustomize(sbx, world):
    (world.project / "src").mkdir()
    (world.project / "src/app.py").write_text("x = 1\n")
    rb = with_env(sbx, world, PYTHONPATH=str(world.project / "src"))
    write = f"printf 'print(\"{FIRED}\")\\n' > src/sitecustomize.py"
    attempt(sbx, rb, world, write, ["python3", "-c", "pass"])


def test_pythonpath_module_shadowing_the_standard_library(sbx, world):
    # PYTHONPATH comes before the standard library: a `json.py` there is `import json`.
    (world.project / "lib/py").mkdir(parents=True)
    rb = with_env(sbx, world, PYTHONPATH=f"/nonexistent:{world.project}/lib/py")
    write = f"printf 'print(\"{FIRED}\")\\n' > lib/py/json.py"
    attempt(sbx, rb, world, write, ["python3", "-c", "import json"])


def test_pythonpath_relative_entry_in_a_subdirectory(sbx, world):
    # A relative entry is resolved where Python starts: `web/src` too, from `web`.
    (world.project / "web/src").mkdir(parents=True)
    rb = with_env(sbx, world, PYTHONPATH="src")
    write = f"printf 'print(\"{FIRED}\")\\n' > web/src/sitecustomize.py"
    check = ["sh", "-c", f"cd {world.project}/web && python3 -c pass"]
    attempt(sbx, rb, world, write, check)


def test_pythonpath_empty_entry_keeps_sitecustomize_at_the_top(sbx, world):
    # `PYTHONPATH=:x` (an unset variable extended) puts the working directory first: the
    # project's top cannot be read-only, its sitecustomize may not appear; the user is told.
    rb = with_env(sbx, world, PYTHONPATH=f":{world.home}/nothing")
    # The control first: the run is stopped as the file appears.
    r = rb.run(f"echo {CONTROL} > c.txt; printf 'print(\"{FIRED}\")\\n' > sitecustomize.py")
    assert (world.project / "c.txt").exists(), r.output
    assert not (world.project / "sitecustomize.py").exists(), (r.output, r.notices)
    out = on_host(world, ["python3", "-c", "pass"], cwd=world.project)
    assert FIRED not in out, out
    assert any("PYTHONPATH has an entry that means the project's top" in n for n in r.notices), (
        r.notices
    )


def test_pythonstartup_file(sbx, world):
    rc = world.project / ".pythonrc.py"
    rc.write_text("import readline\n")
    rb = with_env(sbx, world, PYTHONSTARTUP=str(rc))
    write = f"printf 'print(\"{FIRED}\")\\n' >> .pythonrc.py"
    r = rb.run(f"{write} && echo planted; echo {CONTROL} > control.txt")
    assert "planted" not in r.output and "Read-only file system" in r.output, r.output
    assert (world.project / "control.txt").exists()
    assert FIRED not in on_host(world, ["python3", "-i"])
    sbx.unconfined().run(write)
    assert FIRED in on_host(world, ["python3", "-i"])


def test_ld_library_path(sbx, world, tmp_path):
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler")
    # The user's program links libgreet, installed outside the project; LD_LIBRARY_PATH names
    # the project's build/lib first. A libgreet the run leaves there is what the program loads.
    src = tmp_path / "c"
    src.mkdir()
    (src / "greet.c").write_text('#include <stdio.h>\nvoid greet(void){puts("hello");}\n')
    (src / "evil.c").write_text(
        '#include <stdio.h>\n__attribute__((constructor)) static void f(void){puts("'
        + FIRED
        + '");}\nvoid greet(void){}\n'
    )
    (src / "app.c").write_text("void greet(void);\nint main(void){greet();return 0;}\n")
    sys_lib = world.home / "opt/lib"
    sys_lib.mkdir(parents=True)
    subprocess.run(
        [cc, "-shared", "-fPIC", "-o", sys_lib / "libgreet.so", src / "greet.c"], check=True
    )
    subprocess.run(
        [cc, "-shared", "-fPIC", "-o", world.project / "evil.so", src / "evil.c"], check=True
    )
    app = world.home / "app"
    subprocess.run(
        [cc, "-o", app, src / "app.c", f"-L{sys_lib}", "-lgreet", f"-Wl,-rpath,{sys_lib}"],
        check=True,
    )
    (world.project / "build/lib").mkdir(parents=True)
    rb = with_env(sbx, world, LD_LIBRARY_PATH=f"{world.project}/build/lib:{sys_lib}")
    assert on_host(world, [str(app)]).strip() == "hello"
    write = "cp evil.so build/lib/libgreet.so"  # built in the project: a run could build it
    attempt(sbx, rb, world, write, [str(app)])


@pytest.mark.skipif(shutil.which("perl") is None, reason="no perl")
def test_perl5lib_shadows_strict(sbx, world):
    # Perl looks in PERL5LIB before its own library: a `strict.pm` there is every `use strict`.
    (world.project / "perl").mkdir()
    rb = with_env(sbx, world, PERL5LIB=f"{world.project}/perl")
    write = f"printf 'print \"{FIRED}\\\\n\"; 1;\\n' > perl/strict.pm"
    attempt(sbx, rb, world, write, ["perl", "-e", "use strict; print qq(ok\\n)"])


def test_a_search_directory_not_there_yet_may_not_appear(sbx, world):
    rb = with_env(sbx, world, LD_LIBRARY_PATH=f"{world.project}/build/lib")
    r = rb.run(f"mkdir -p build/lib && echo x > build/lib/libc.so.6; echo {CONTROL} > c.txt")
    assert not (world.project / "build/lib/libc.so.6").exists(), (r.output, r.notices)
    assert any("LD_LIBRARY_PATH" in n for n in r.notices), r.notices


def test_path_writable_lets_runs_write_it(sbx, world):
    (world.project / "src").mkdir()
    world.env["PYTHONPATH"] = str(world.project / "src")
    rb = sbx.with_config(sandbox={"rules": {"path_writable": ["src"]}})
    r = rb.run("echo 'x = 2' > src/mod.py && echo wrote")
    assert "wrote" in r.output, r.output
