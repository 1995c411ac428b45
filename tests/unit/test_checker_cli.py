"""`python -m run_bash check`: one verdict, --batch, --config."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from run_bash.checker_cli import main, run_batch

ROOT = Path(__file__).resolve().parents[2]


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_check_prints_verdict_and_exits_zero(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(["git push --force"], capsys)
    assert code == 0
    reason = "`git push --force` rewrites the remote branch's history"
    assert json.loads(out) == {
        "pause": True,
        "reason": reason,
        "rule": "git",
        "command": "git push --force",
        "effect": "irreversible",
        "hits": [
            {
                "reason": reason,
                "rule": "git",
                "command": "git push --force",
                "effect": "irreversible",
                "targets": None,
                "follows": False,
                "sources": [],
                "index": False,
                "overwrites": None,
                "prunes": None,
            }
        ],
    }


def test_check_says_the_class_of_each_reason(capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = _run(["rm -rf build"], capsys)
    verdict = json.loads(out)
    assert verdict["effect"] == "reversible"
    assert verdict["hits"][0]["targets"] == ["build"]
    _, out, _ = _run(["--text", "rm -rf build && git push -f"], capsys)
    assert out.splitlines()[0] == "pauses, irreversible:"
    assert "reversible (undo covers it): `rm -rf build`" in out and "[build]" in out
    assert "  irreversible: `git push -f`" in out
    _, out, _ = _run(["--text", "ls"], capsys)
    assert out.startswith("runs without asking")


def test_check_exits_zero_when_not_paused(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(["ls -la"], capsys)
    assert code == 0
    assert json.loads(out)["pause"] is False and json.loads(out)["rule"] is None


def test_check_joins_several_words(capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = _run(["--", "rm", "-rf", "x"], capsys)
    assert json.loads(out)["rule"] == "rm"


def test_config_file_pauselist_is_used(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = tmp_path / "opts.json"
    cfg.write_text(json.dumps({"pauselist": {"rm": False, "docker": {"subcommands": ["rm"]}}}))
    _, out, _ = _run(["--config", str(cfg), "rm -rf x"], capsys)
    assert json.loads(out)["pause"] is False
    _, out, _ = _run([f"--config={cfg}", "docker rm web"], capsys)
    assert json.loads(out)["rule"] == "docker"


def test_invalid_config_names_the_key(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = tmp_path / "opts.json"
    cfg.write_text(json.dumps({"pauselist": {"rm": 3}}))
    code, out, err = _run(["--config", str(cfg), "ls"], capsys)
    assert code == 2 and out == ""
    assert "`pauselist.rm` should be boolean, function or table" in err


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param([], id="no-command"),
        pytest.param(["--bogus", "ls"], id="unknown-option"),
        pytest.param(["--batch", "ls"], id="batch-with-command"),
        pytest.param(["--config"], id="config-without-file"),
        pytest.param(["--config", "/nonexistent/opts.json", "ls"], id="missing-config"),
    ],
)
def test_usage_errors_exit_two(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(argv, capsys)
    assert code == 2 and "usage:" in err


def test_batch_answers_each_line_in_order() -> None:
    lines = [
        json.dumps("rm -rf build"),
        "not json",
        json.dumps("ls"),
        json.dumps(42),
        json.dumps("echo 'line1\nline2'"),
        "",
        json.dumps("git push origin +main"),
    ]
    out = io.StringIO()
    run_batch(None, io.StringIO("\n".join(lines) + "\n"), out)
    verdicts = [json.loads(x) for x in out.getvalue().splitlines()]
    assert [v["pause"] for v in verdicts] == [True, True, False, True, False, True, True]
    assert "line 2" in verdicts[1]["reason"] and verdicts[1]["rule"] is None
    assert "line 6" in verdicts[5]["reason"]
    assert verdicts[6]["rule"] == "git"


def test_module_entry_point_runs_check() -> None:
    env = dict(os.environ, PYTHONPATH=str(ROOT / "python"))
    code = "import sys; from run_bash.checker_cli import main; sys.exit(main(sys.argv[1:]))"
    proc = subprocess.run(
        [sys.executable, "-c", code, "--batch"],
        input=json.dumps("sudo rm -rf /") + "\n" + json.dumps("pytest") + "\n",
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    first, second = (json.loads(line) for line in proc.stdout.splitlines())
    assert first["pause"] and first["command"] == "sudo rm -rf /"
    assert not second["pause"]


def test_help_example_runs_as_written_from_the_repository_root() -> None:
    help_text = (ROOT / "doc" / "run_bash.txt").read_text()
    start = help_text.index("*run_bash-cli-check*")
    block = help_text[help_text.index(">sh\n", start) + 4 :]
    script = block[: block.index("\n<")]
    if not (ROOT / ".venv" / "bin" / "python").exists():
        pytest.skip("the example uses .venv (make deps)")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run(
        ["bash", "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    lines = [json.loads(line) for line in out.stdout.splitlines()]
    assert [v["pause"] for v in lines] == [True, True, False], lines
    assert lines[0]["rule"] == "rm" and lines[1]["rule"] == "git"


def test_checker_error_pauses_and_is_reported_on_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    def broken(args: object) -> None:
        raise ValueError("bad rule")

    out = io.StringIO()
    run_batch({"make": broken}, io.StringIO('"make all"\n"ls"\n'), out)
    first, second = (json.loads(line) for line in out.getvalue().splitlines())
    assert first["pause"] and "error in the pause-list checker" in first["reason"]
    assert "ValueError" not in first["reason"]
    assert not second["pause"]
    assert "checker error: ValueError: bad rule" in capsys.readouterr().err
