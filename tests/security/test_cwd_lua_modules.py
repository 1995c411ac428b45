"""A Lua module a run leaves in the project is not loaded by the Neovim the user works in.

LuaJIT's default ``package.path`` begins with ``./?.lua`` (``package.cpath`` with ``./?.so``): a
``require`` of a module on no runtimepath looks in Neovim's working directory, the project. So
``pcall(require, "cmp")``, which CodeCompanion calls to see whether nvim-cmp is installed, or
``pcall(require, "codecompanion")`` in run_bash's own health check without CodeCompanion, would
run a ``cmp.lua`` or ``codecompanion.lua`` a sandboxed run wrote, with the user's rights. Loading
run_bash (its plugin file at startup, or ``require("run_bash")`` when CodeCompanion loads the
extension) drops those relative entries. The judge is a Neovim started in the project with the
user's environment, doing those requires after loading run_bash; the control is the same Neovim
without run_bash, where the run's file does run.
"""

from __future__ import annotations

import pytest

from tests.conftest import NVIM, run_nvim_script
from tests.security.conftest import CONTROL

pytestmark = pytest.mark.skipif(NVIM is None, reason="nvim not found")

# Modules asked for with pcall(require, …) when they may be missing: nvim-cmp and blink.cmp
# (CodeCompanion's completion provider), CodeCompanion (run_bash's health check).
PLANT = (
    "mkdir -p blink && for m in cmp blink/cmp codecompanion; do "
    'printf \'vim.fn.writefile({"%s"}, vim.env.RB_MARK, "a")\\n\' $m > $m.lua; done'
    f" && echo {CONTROL}"
)

LOADS = {
    "plugin file": 'vim.cmd.runtime("plugin/run_bash.lua")',
    "require": 'require("run_bash")',
    "none": "",
}


def judge(world, tmp_path, load: str) -> list[str]:
    """Start Neovim in the project as the user would (their environment), load run_bash the way
    ``load`` says, then require the modules; return what the planted files wrote."""
    mark = tmp_path / f"mark-{load.replace(' ', '-')}"
    script = (
        "vim.opt.rtp:prepend(vim.env.RB_ROOT)\n"
        f"{LOADS[load]}\n"
        "vim.fn.chdir(vim.env.RB_PROJECT)\n"
        'for _, m in ipairs({ "cmp", "blink.cmp", "codecompanion" }) do\n'
        "  pcall(require, m)\n"
        "end\n"
        "vim.cmd('qa!')\n"
    )
    env = {k: v for k, v in world.env.items() if k != "NVIM"}
    home = tmp_path / f"nvim-{load.replace(' ', '-')}"
    home.mkdir()
    run_nvim_script(home, script, 30, **env, RB_MARK=str(mark), RB_PROJECT=str(world.project))
    return mark.read_text().split() if mark.exists() else []


def test_a_module_a_run_writes_in_the_project_is_not_loaded_by_neovim(sbx, world, tmp_path):
    r = sbx.run(PLANT)
    assert CONTROL in r.output and (world.project / "cmp.lua").is_file()
    assert judge(world, tmp_path, "plugin file") == []
    assert judge(world, tmp_path, "require") == []
    # Control: a Neovim without run_bash runs what the run wrote.
    assert sorted(judge(world, tmp_path, "none")) == ["blink/cmp", "cmp", "codecompanion"]
