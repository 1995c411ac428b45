"""Pause-list checker latency: median and p99 verdict time over realistic agent commands, one
20,000-character script, and single 50 KB words of several shapes (the worst is reported).

``run()`` returns rows for ``bench/run.py``; run this file directly to print them as a table.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT / "python") not in sys.path:
    sys.path.insert(0, str(ROOT / "python"))

from run_bash.checker import check  # noqa: E402

Row = dict[str, Any]

BASE_COMMANDS = [
    "ls -la",
    "git status",
    "git diff --stat HEAD~1",
    "git log --oneline -20",
    'git add -A && git commit -m "Fix the parser for case arms"',
    "git push origin main",
    "git push --force-with-lease origin topic",
    "git push --force",
    "git reset --hard HEAD~1",
    "git checkout -- src/app.py",
    "git stash drop",
    "pytest -q tests/unit",
    "python -m pytest tests/ -x -k 'not slow'",
    "make -j4 test",
    "npm test -- --watch=false",
    "npm run build && npm run lint",
    "npm publish",
    "pip install -e '.[dev]'",
    "python -m pip uninstall -y requests",
    "python3 -c 'import sys; print(sys.version)'",
    "sed -i 's/foo/bar/g' src/main.py",
    'find . -name "*.py" -not -path "./.venv/*"',
    'find . -name "*.py" | xargs grep -n "TODO"',
    "find . -name '*.pyc' -exec rm -f {} +",
    'grep -rn "def main" src/',
    "rg -n 'rm -rf' --type sh",
    'cat <<\'EOF\' > config.json\n{"name": "demo", "version": 1}\nEOF',
    'for f in src/*.py; do echo "$f"; wc -l "$f"; done',
    "for i in $(seq 1 5); do curl -s localhost:8000/health; done",
    'while read -r line; do echo "$line"; done < input.txt',
    "curl -s localhost:8000",
    "curl -fsSL https://example.com/install.sh | bash",
    "docker ps -a",
    "docker compose up -d --build",
    "docker rm -f web",
    "mkdir -p build/out && cp -r assets build/out/",
    "rm -rf build dist",
    "rm -f build/*.o",
    'export PATH="$HOME/.local/bin:$PATH"',
    "source .venv/bin/activate && pytest",
    "cargo build --release",
    "cargo test -- --nocapture",
    "go test ./...",
    "node -e 'console.log(process.version)'",
    "diff <(sort a.txt) <(sort b.txt)",
    "jq '.items[] | select(.size > 2) | .name' data.json",
    "awk '{print $1}' access.log | sort | uniq -c | sort -rn | head",
    "if [ -f package.json ]; then npm ci; fi",
    "[[ -d node_modules ]] || npm install",
    'case "$1" in start) ./run.sh;; stop) pkill -f run.sh;; *) echo usage;; esac',
    "echo $((1 + 2 * 3))",
    'arr=(one two three); for x in "${arr[@]}"; do echo "$x"; done',
    "ruff check . --fix && ruff format .",
    "timeout 30 npm test",
    "nohup python server.py > server.log 2>&1 &",
    "sleep 2 && curl -s localhost:8000/api",
    "ps aux | grep python | grep -v grep",
    "sudo apt-get install -y ripgrep",
    "sudo rm -rf /var/lib/apt/lists/*",
    "bash -c 'cd web && npm run dev'",
    'sh -c "git push -f origin main"',
    "chmod +x scripts/*.sh",
    "chmod -R 755 /usr/local/bin",
    "systemctl --user restart app.service",
    "kill -9 $(lsof -t -i :8000)",
    'VERSION=$(git describe --tags --always) && echo "$VERSION"',
    "tar -czf release.tar.gz dist/ && ls -lh release.tar.gz",
    "python - <<'EOF'\nimport json\nprint(json.dumps({'ok': True}))\nEOF",
    'eval "$(ssh-agent -s)"',
    "$EDITOR README.md",
    'python3 -c \'import subprocess; print(subprocess.check_output(["git", "status"]))\'',
    "node -e \"require('child_process').execSync('npm run build', {stdio: 'inherit'})\"",
    "perl -pi -e 's/foo/bar/g' src/*.txt",
    "aws --profile dev s3 ls s3://bucket/prefix/",
    "docker compose -f docker-compose.prod.yml up -d --build",
    "dotenv -e .env.local -- npm run dev",
    "tar -xzf release.tgz --to-command='sha256sum'",
    "cd web && rm -rf node_modules && npm ci",
    "git -c core.quotepath=off log --oneline -5",
    "ssh -o StrictHostKeyChecking=no deploy@host 'cd /srv/app && git pull'",
]
VARIANTS = [
    "{}",
    "cd repo && {}",
    "timeout 120 {}",
    "{} 2>&1 | tail -n 50",
]

SCRIPT_BLOCK = """\
#!/usr/bin/env bash
set -euo pipefail
log() { printf '[%s] %s\\n' "$(date +%T)" "$*" >&2; }
build_target() {
  local target="$1"
  case "$target" in
    web) (cd web && npm ci && npm run build) ;;
    api|worker) go build -o "bin/$target" "./cmd/$target" ;;
    *) log "unknown target: $target"; return 1 ;;
  esac
}
for t in web api worker; do
  if [[ -n "${SKIP:-}" && "$SKIP" == *"$t"* ]]; then
    log "skipping $t"
    continue
  fi
  build_target "$t" || { log "failed: $t"; exit 1; }
done
count=$(( $(find . -name '*.go' | wc -l) + 1 ))
cat > build/summary.json <<EOF
{"targets": 3, "files": $count, "commit": "$(git rev-parse --short HEAD)"}
EOF
cat > build/notes.md <<'EOF'
Do not run `rm -rf /` or `git push --force` here.
EOF
while read -r name size; do
  echo "$name: $size"
done < <(du -s build/* | awk '{print $2, $1}')
arr=(alpha beta gamma)
echo "${#arr[@]} items: ${arr[*]}"
"""


def big_script(min_chars: int = 20_000) -> str:
    """A realistic build script of at least ``min_chars`` characters."""
    parts: list[str] = []
    size = 0
    i = 0
    while size < min_chars:
        block = SCRIPT_BLOCK.replace("build_target", f"build_target_{i}")
        parts.append(block)
        size += len(block)
        i += 1
    return "\n".join(parts)


WORD_BYTES = 50_000


def big_words(size: int = WORD_BYTES) -> dict[str, str]:
    """Command lines whose one word is ``size`` characters long, in shapes that once cost time
    quadratic in the word's length (brace expansion, extglob groups, array literals, …)."""
    return {
        "plain": "echo " + "x" * size,
        "single-quoted": "echo '" + "x" * size + "'",
        "escaped": "echo " + "\\x" * (size // 2),
        "expansions": "echo " + "$a" * (size // 2),
        "braces": "echo " + "{a,b}" * (size // 5),
        "open braces": "echo " + "{" * size,
        "extglob groups": "shopt -s extglob\nls " + "@(x)" * (size // 4),
        "array literal": "a=(" + "x " * (size // 2) + ")",
        "subscript": "a[" + "1+" * (size // 2) + "1]=2",
        "ansi-c": "echo $'" + "\\x41" * (size // 4) + "'",
    }


def corpus() -> list[str]:
    """A few hundred realistic agent commands."""
    return [v.format(c) if "{}" in v else c for c in BASE_COMMANDS for v in VARIANTS]


def _time_ms(cmd: str) -> float:
    t = time.perf_counter()
    check(cmd)
    return (time.perf_counter() - t) * 1000


def run(rounds: int = 5) -> list[Row]:
    """Measure verdict latencies; return rows for the bench table."""
    cmds = corpus()
    for cmd in cmds:  # warm-up: imports, regex compilation, caches
        check(cmd)
    samples = sorted(_time_ms(cmd) for _ in range(rounds) for cmd in cmds)
    median = statistics.median(samples)
    p99 = samples[min(len(samples) - 1, int(len(samples) * 0.99))]
    script = big_script()
    big = statistics.median(_time_ms(script) for _ in range(max(2 * rounds + 1, 11)))
    words = {
        name: statistics.median(_time_ms(cmd) for _ in range(5))
        for name, cmd in big_words().items()
    }
    worst = max(words, key=lambda k: words[k])
    return [
        {
            "name": f"checker verdict, median ({len(cmds)} agent commands)",
            "value": median,
            "unit": "ms",
            "goal": "< 0.5 ms",
        },
        {
            "name": "checker verdict, p99",
            "value": p99,
            "unit": "ms",
            "goal": "< 5 ms",
        },
        {
            "name": f"checker verdict, {len(script):,}-char script",
            "value": big,
            "unit": "ms",
            "goal": "< 50 ms",
        },
        {
            "name": f"checker verdict, {WORD_BYTES // 1000} KB single word",
            "value": words[worst],
            "unit": "ms",
            "goal": "< 50 ms",
            "note": f"worst of {len(words)} shapes: {worst}",
        },
    ]


def main() -> int:
    """Print the rows as a table."""
    rows = run()
    width = max(len(r["name"]) for r in rows)
    for r in rows:
        note = f"  — {r['note']}" if r.get("note") else ""
        print(f"{r['name']:<{width}}  {r['value']:8.3f} {r['unit']}  (goal {r['goal']}){note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
