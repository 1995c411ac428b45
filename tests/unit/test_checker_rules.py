"""Pause-list user rules: true/false, Lua-function markers, declarative tables, validation."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from run_bash.checker import LUA_FUNCTION, check
from run_bash.checker.rules import DEFAULT_RULES, validate_rules
from run_bash.config import parse_config
from run_bash.errors import ConfigError

P = pytest.param
ROOT = Path(__file__).resolve().parents[2]

NPM_PUBLISH = {"npm": {"subcommands": ["publish"]}}
DOCKER = {
    "docker": {
        "subcommands": {"rm": True, "system": {"subcommands": ["prune"]}, "push": False},
        "flags": ["--privileged"],
    }
}
TERRAFORM = {"terraform": {"subcommands": {"apply": {"flags": ["-auto-approve"]}}}}
RSYNC = {"rsync": {"flags": ["--delete", "-n"]}}
MV = {"mv": {"args": ["/", "/etc/*", "~/.ssh*"]}}

# (rules, command, paused, rule)
CASES = [
    P({"rm": False}, "rm -rf /", False, None, id="false-disables-default"),
    P({"kill": False}, "kill 1 && rm -rf x", True, "rm", id="false-keeps-other-defaults"),
    P({"make": True}, "make test", True, "make", id="true-always-pauses"),
    P({"make": True}, "sudo /usr/bin/make", True, "make", id="true-seen-through-wrappers"),
    P({"sudo": True}, "sudo ls", True, "sudo", id="true-on-a-wrapper"),
    P({"git": True}, "git status", True, "git", id="true-replaces-default-rule"),
    P({"mkfs.ext4": False}, "mkfs.ext4 /dev/x", False, None, id="specific-name-beats-family"),
    P({"mkfs": False}, "mkfs.xfs /dev/x", False, None, id="family-rule-disabled"),
    P(NPM_PUBLISH, "npm publish", True, "npm", id="decl-subcommand"),
    P(NPM_PUBLISH, "npm uninstall x", False, None, id="decl-replaces-default"),
    P(NPM_PUBLISH, "npm --prefix web publish", True, "npm", id="decl-subcommand-after-option"),
    P(NPM_PUBLISH, "npm $X", True, "npm", id="decl-unknown-subcommand-fails-closed"),
    P(DOCKER, "docker rm web", True, "docker", id="decl-subcommand-table-true"),
    P(DOCKER, "docker push img", False, None, id="decl-subcommand-table-false"),
    P(DOCKER, "docker system prune -af", True, "docker", id="decl-nested-subcommand"),
    P(DOCKER, "docker system df", False, None, id="decl-nested-subcommand-miss"),
    P(DOCKER, "docker -H tcp://h rm web", True, "docker", id="decl-known-value-option"),
    P(DOCKER, "docker run --privileged img", True, "docker", id="decl-flag"),
    P(DOCKER, "docker run --privileged=true img", True, "docker", id="decl-flag-with-value"),
    P(DOCKER, "docker run img --privileged", True, "docker", id="decl-flag-after-operand"),
    P(DOCKER, "docker run -- img --privileged", False, None, id="decl-flag-after-dashdash"),
    P(DOCKER, "docker ps", False, None, id="decl-miss"),
    P(TERRAFORM, "terraform apply -auto-approve", True, "terraform", id="decl-sub-and-flag"),
    P(TERRAFORM, "terraform apply", False, None, id="decl-sub-without-flag"),
    P(TERRAFORM, "terraform plan -auto-approve", False, None, id="decl-flag-other-sub"),
    P(RSYNC, "rsync -av --delete a/ b/", True, "rsync", id="decl-long-flag"),
    P(RSYNC, "rsync -av --del a/ b/", True, "rsync", id="decl-long-flag-prefix"),
    P(RSYNC, "rsync -avn a/ b/", True, "rsync", id="decl-short-flag-in-cluster"),
    P(RSYNC, "rsync -av a/ b/", False, None, id="decl-flags-miss"),
    P(RSYNC, "rsync $OPTS a/ b/", True, "rsync", id="decl-unknown-flag-fails-closed"),
    P(RSYNC, 'rsync -a "$SRC" b/', False, None, id="decl-quoted-variable-is-operand"),
    P(MV, "mv x /", True, "mv", id="decl-arg"),
    P(MV, "mv x /etc/hosts", True, "mv", id="decl-arg-glob"),
    P(MV, "mv x //etc/./hosts", True, "mv", id="decl-arg-normalized"),
    P(MV, "mv x ./etc/hosts", False, None, id="decl-arg-miss"),
    P(
        {"npm": {"subcommands": ["publish"], "reason": "publishes to npm"}},
        "npm publish",
        True,
        "npm",
        id="decl-custom-reason",
    ),
]


@pytest.mark.parametrize("rules, cmd, paused, rule", CASES)
def test_user_rule(rules: dict[str, Any], cmd: str, paused: bool, rule: str | None) -> None:
    verdict = check(cmd, rules)
    assert verdict.pause is paused, verdict
    assert verdict.rule == rule, verdict


def test_custom_reason_is_used() -> None:
    rules = {"npm": {"subcommands": ["publish"], "reason": "publishes to npm"}}
    assert check("npm publish", rules).reason == "`npm publish` publishes to npm"


def test_none_rules_means_defaults() -> None:
    assert check("rm -rf x", None).rule == "rm"
    assert check("rm -rf x", {}).rule == "rm"


def test_lua_function_rule_defers_to_lua() -> None:
    verdict = check("npm publish && make", {"npm": LUA_FUNCTION, "make": LUA_FUNCTION})
    assert not verdict.pause
    assert verdict.lua_rules == ["npm", "make"]
    assert ["npm", "publish"] in verdict.commands
    assert "Lua" in verdict.reason


def test_lua_function_rule_replaces_the_default() -> None:
    verdict = check("rm -rf x", {"rm": LUA_FUNCTION})
    assert not verdict.pause and verdict.lua_rules == ["rm"]


def test_lua_function_rule_sees_commands_through_wrappers() -> None:
    verdict = check("sudo -u x /usr/bin/npm publish", {"npm": LUA_FUNCTION})
    assert verdict.lua_rules == ["npm"]
    assert ["npm", "publish"] in verdict.commands


def test_lua_function_rule_only_listed_when_its_command_appears() -> None:
    assert check("ls", {"npm": LUA_FUNCTION}).lua_rules == []


def test_python_pause_still_wins_over_lua_rules() -> None:
    verdict = check("npm publish; rm -rf x", {"npm": LUA_FUNCTION})
    assert verdict.pause and verdict.rule == "rm"


@pytest.mark.parametrize(
    "rules, problem",
    [
        P({"rm": 1}, "`pauselist.rm` should be boolean, function or table", id="number"),
        P({"rm": "yes"}, "`pauselist.rm` should be boolean, function or table", id="string"),
        P({"rm": ["-r"]}, "`pauselist.rm` should be boolean, function or table", id="list"),
        P({"npm": {}}, "`pauselist.npm` should list subcommands, flags or args", id="empty"),
        P(
            {"npm": {"subcomands": ["x"]}},
            "unknown option `pauselist.npm.subcomands`",
            id="unknown-key",
        ),
        P({"npm": {"flags": "-f"}}, "`pauselist.npm.flags` should be list of strings", id="flags"),
        P({"npm": {"args": [1]}}, "`pauselist.npm.args` should be list of strings", id="args"),
        P(
            {"npm": {"subcommands": "publish"}},
            "`pauselist.npm.subcommands` should be list of strings or table",
            id="subcommands-string",
        ),
        P(
            {"npm": {"subcommands": {"publish": 1}}},
            "`pauselist.npm.subcommands.publish` should be boolean or table",
            id="subcommand-value",
        ),
        P(
            {"npm": {"subcommands": {"x": {"flag": ["-f"]}}}},
            "unknown option `pauselist.npm.subcommands.x.flag`",
            id="nested-unknown-key",
        ),
        P(
            {"npm": {"flags": ["-f"], "reason": 3}},
            "`pauselist.npm.reason` should be string",
            id="reason",
        ),
        P({"/bin/rm": True}, "`pauselist./bin/rm` should be a command name", id="path-name"),
    ],
)
def test_invalid_rule_is_reported_by_key(rules: dict[str, Any], problem: str) -> None:
    problems = validate_rules(rules)
    assert any(p.startswith(problem) for p in problems), problems


@pytest.mark.parametrize(
    "rules",
    [
        P({"rm": True, "kill": False, "npm": LUA_FUNCTION}, id="scalars"),
        P(NPM_PUBLISH, id="subcommand-list"),
        P(DOCKER, id="subcommand-table"),
        P(TERRAFORM, id="nested"),
        P(RSYNC, id="flags"),
        P(MV, id="args"),
        P({"npm": {"subcommands": {"1": "publish", "push": {"flags": ["-f"]}}}}, id="mixed-table"),
    ],
)
def test_valid_rules_have_no_problems(rules: dict[str, Any]) -> None:
    assert validate_rules(rules) == []


def test_mixed_lua_table_subcommands_match() -> None:
    rules = {"npm": {"subcommands": {"1": "publish", "dist-tag": {"subcommands": ["rm"]}}}}
    assert check("npm publish", rules).pause
    assert check("npm dist-tag rm pkg beta", rules).pause
    assert not check("npm dist-tag ls pkg", rules).pause


def test_config_reports_one_error_naming_the_key() -> None:
    with pytest.raises(ConfigError) as err:
        parse_config({"pauselist": {"rm": 42, "git": True}})
    text = str(err.value)
    assert "`pauselist.rm` should be boolean, function or table" in text
    assert "pauselist.git" not in text


def test_every_default_rule_is_named_after_a_command() -> None:
    assert set(DEFAULT_RULES) >= {
        "rm", "git", "dd", "mkfs", "shutdown", "reboot", "poweroff", "halt", "mount", "umount",
        "fdisk", "parted", "iptables", "ip6tables", "kill", "killall", "pkill", "chmod", "chown",
        "systemctl", "npm", "pip", "pip3", "cargo", "find",
    }  # fmt: skip


# New default rules: (command, rule) that must pause, and near misses that must not.
DEFAULTS_PAUSED = [
    P("git branch -D topic", "git", id="git-branch-D"),
    P("git branch --delete --force topic", "git", id="git-branch-delete-force"),
    P("git branch -d -f topic", "git", id="git-branch-d-f"),
    P("git checkout -f main", "git", id="git-checkout-f"),
    P("git checkout --force main", "git", id="git-checkout-force"),
    P("git checkout HEAD~1 src/app.py", "git", id="git-checkout-tree-path"),
    P("git checkout main -- src/app.py", "git", id="git-checkout-tree-dashdash-path"),
    P("git switch --discard-changes main", "git", id="git-switch-discard"),
    P("git switch -f main", "git", id="git-switch-f"),
    P("git restore .", "git", id="git-restore-dot"),
    P("git restore src/app.py", "git", id="git-restore-path"),
    P("git restore --worktree --staged x", "git", id="git-restore-worktree-staged"),
    P("git restore --source=HEAD~1 x", "git", id="git-restore-source"),
    P("git clean -f", "git", id="git-clean-f"),
    P("git clean --force", "git", id="git-clean-force"),
    P("git -c clean.requireForce=false clean", "git", id="git-clean-no-require-force"),
    P("git reflog expire --expire=now --all", "git", id="git-reflog-expire"),
    P("git reflog delete HEAD@{1}", "git", id="git-reflog-delete"),
    P("git gc --prune=now", "git", id="git-gc-prune-now"),
    P("git gc --prune=all", "git", id="git-gc-prune-all"),
    # Any date but git's own two weeks: `1.second.ago` is as good as `now`.
    P("git gc --prune=1.second.ago", "git", id="git-gc-prune-short-date"),
    P("git gc --prune=$WHEN", "git", id="git-gc-prune-runtime"),
    # gc's expiry set for the line: git gc, or the one a commit or fetch starts on its own.
    P("git -c gc.pruneExpire=now gc", "git", id="git-gc-prune-expire-config"),
    P("git -c gc.reflogExpireUnreachable=now commit -qm x", "git", id="git-reflog-expire-config"),
    P("git -c gc.refs/stash.reflogExpire=0 gc", "git", id="git-reflog-expire-pattern-config"),
    P(
        "GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=gc.pruneExpire GIT_CONFIG_VALUE_0=now git gc",
        "git",
        id="git-gc-prune-expire-env",
    ),
    P("git repack -a -d --cruft --cruft-expiration=now", "git", id="git-repack-cruft-expiration"),
    P("git repack -A -d --unpack-unreachable=now", "git", id="git-repack-unpack-unreachable"),
    P("git prune", "git", id="git-prune"),
    P("git update-ref -d refs/heads/x", "git", id="git-update-ref-d"),
    P("git update-ref refs/tags/v1 HEAD", "git", id="git-update-ref-tag"),
    P("git branch -M main", "git", id="git-branch-M"),  # the gate asks git whether main exists
    P("git update-ref --stdin < cmds", "git", id="git-update-ref-stdin"),
    P("git filter-branch --tree-filter x HEAD", "git", id="git-filter-branch"),
    P("git filter-repo --path x", "git", id="git-filter-repo"),
    P("git stash drop stash@{0}", "git", id="git-stash-drop"),
    P("git stash clear", "git", id="git-stash-clear"),
    P("truncate -s 0 app.log", "truncate", id="truncate"),
    P("shred -u secret", "shred", id="shred"),
    P("rsync -a --delete src/ dst/", "rsync", id="rsync-delete"),
    P("rsync -a --delete-after src/ dst/", "rsync", id="rsync-delete-after"),
    P("rsync -a --del src/ dst/", "rsync", id="rsync-del"),
    P("rsync -a --remove-source-files src/ dst/", "rsync", id="rsync-remove-source"),
    P("rimraf node_modules", "rimraf", id="rimraf"),
    P("op item delete 'GitHub token'", "op", id="op-item-delete"),
    P("pueue kill 3", "pueue", id="pueue-kill"),
    P("start-stop-daemon --stop --pidfile app.pid", "start-stop-daemon", id="ssd-stop"),
    P("python3 -c 'import shutil; shutil.rmtree(\"build\")'", "python", id="python-rmtree"),
    P('node -e \'require("fs").rmSync("dist", {recursive: true})\'', "node", id="node-rmsync"),
    P("nodejs -e 'process.kill(42)'", "nodejs", id="nodejs-kill"),
    P("deno eval 'Deno.removeSync(\"x\")'", "deno", id="deno-remove"),
    P('bun -e \'require("fs").unlinkSync("x")\'', "bun", id="bun-unlink"),
    P("ruby -e 'FileUtils.rm_rf(\"tmp\")'", "ruby", id="ruby-rm-rf"),
    P("perl -e 'unlink \"a.txt\"'", "perl", id="perl-unlink"),
    P("php -r 'unlink(\"a.txt\");'", "php", id="php-unlink"),
    P("lua -e 'os.remove(\"x\")'", "lua", id="lua-remove"),
    P("Rscript -e 'unlink(\"x\", recursive = TRUE)'", "Rscript", id="r-unlink"),
    P("R -e 'unlink(\"x\", recursive = TRUE)'", "R", id="r-cli-unlink"),
    P("luajit -e 'os.remove(\"x\")'", "luajit", id="luajit-remove"),
    P("pypy3 -c 'import shutil; shutil.rmtree(\"x\")'", "pypy", id="pypy-rmtree"),
    P("ipython -c 'import shutil; shutil.rmtree(\"x\")'", "ipython", id="ipython-rmtree"),
    P("ipython3 -c 'import os; os.remove(\"x\")'", "ipython3", id="ipython3-remove"),
    P('tsx -e \'require("fs").rmSync("x")\'', "tsx", id="tsx-rmsync"),
    P('ts-node -e \'require("fs").rmSync("x")\'', "ts-node", id="ts-node-rmsync"),
    P('ts-node-esm -e \'require("fs").rmSync("x")\'', "ts-node-esm", id="ts-node-esm-rmsync"),
    P("rclone purge remote:bucket", "rclone", id="new-rclone-purge"),
    P("rclone sync src remote:dst", "rclone", id="new-rclone-sync"),
    P("s3cmd del s3://b/x", "s3cmd", id="new-s3cmd-del"),
    P("pulumi destroy --yes", "pulumi", id="new-pulumi-destroy"),
    P("pulumi stack rm dev", "pulumi", id="new-pulumi-stack"),
    P("cdk destroy --force", "cdk", id="new-cdk-destroy"),
    P("serverless remove", "serverless", id="new-serverless-remove"),
    P("sls remove --stage prod", "sls", id="new-sls-remove"),
    P("sam delete --stack-name s", "sam", id="new-sam-delete"),
    P("eksctl delete cluster -n c", "eksctl", id="new-eksctl-delete"),
    P("kind delete cluster", "kind", id="new-kind-delete"),
    P("minikube delete", "minikube", id="new-minikube-delete"),
    P("vagrant destroy -f", "vagrant", id="new-vagrant-destroy"),
    P("heroku apps:destroy --app x", "heroku", id="new-heroku-apps-destroy"),
    P("fly apps destroy x", "fly", id="new-fly-apps"),
    P("flyctl volumes destroy v", "flyctl", id="new-flyctl-volumes"),
    P("doctl compute droplet delete d", "doctl", id="new-doctl-compute"),
    P("hcloud server delete s", "hcloud", id="new-hcloud-server"),
    P("linode-cli linodes delete 1", "linode-cli", id="new-linode-cli-linodes"),
    P("oci compute instance terminate --instance-id x", "oci", id="new-oci-compute"),
    P("vercel rm my-app", "vercel", id="new-vercel-rm"),
    P("netlify sites:delete", "netlify", id="new-netlify-sites-delete"),
    P(
        "firebase firestore:delete --all-collections",
        "firebase",
        id="new-firebase-firestore-delete",
    ),
    P("wrangler delete", "wrangler", id="new-wrangler-delete"),
    P("glab repo delete g/r", "glab", id="new-glab-repo"),
    P("pm2 delete all", "pm2", id="new-pm2-delete"),
    P("supervisorctl stop all", "supervisorctl", id="new-supervisorctl-stop"),
    P("launchctl bootout gui/501/com.x", "launchctl", id="new-launchctl-bootout"),
    P("skill -KILL -u bob", "skill", id="new-skill--KILL"),
    P("userdel bob", "userdel", id="new-userdel-bob"),
    P("groupdel devs", "groupdel", id="new-groupdel-devs"),
    P("usermod -aG docker bob", "usermod", id="new-usermod--aG"),
    P("passwd bob", "passwd", id="new-passwd-bob"),
    P("chpasswd < users.txt", "chpasswd", id="new-chpasswd-<"),
    P("rmmod foo", "rmmod", id="new-rmmod-foo"),
    P("insmod foo.ko", "insmod", id="new-insmod-foo.ko"),
    P("modprobe -r foo", "modprobe", id="new-modprobe--r"),
    P("swapoff -a", "swapoff", id="new-swapoff--a"),
    P("sysctl -w net.ipv4.ip_forward=1", "sysctl", id="new-sysctl--w"),
    P("hostnamectl set-hostname box", "hostnamectl", id="new-hostnamectl-set-hostname"),
    P("timedatectl set-timezone UTC", "timedatectl", id="new-timedatectl-set-timezone"),
    P("nmcli connection delete wifi", "nmcli", id="new-nmcli-connection"),
    P("tmux kill-server", "tmux", id="new-tmux-kill-server"),
    P("aws ec2 terminate-instances --instance-ids i-1", "aws", id="new-aws-ec2"),
    P("aws s3 sync . s3://b --delete", "aws", id="new-aws-s3"),
    P("gem uninstall rails", "gem", id="new-gem-uninstall"),
    P("julia -e 'rm(\"build\"; recursive=true)'", "julia", id="code-julia"),
    P(
        'cat > m.go <<\'EOF\'\npackage main\nimport "os"\nfunc main() { os.RemoveAll("build") }\nEOF\ngo run m.go',
        "go",
        id="code-go",
    ),
    P("expect -c 'file delete -force build'", "expect", id="code-expect"),
    P("tclsh <<'EOF'\nfile delete build\nEOF", "tclsh", id="code-tclsh"),
    P("wish <<'EOF'\nfile delete build\nEOF", "wish", id="code-wish"),
    P("emacs --batch --eval '(delete-directory \"build\" t)'", "emacs", id="code-emacs"),
    P("emacsclient --eval '(delete-file \"x\")'", "emacsclient", id="code-emacsclient"),
    P(
        "cat > test_x.py <<'EOF'\nimport shutil\nshutil.rmtree('build')\nEOF\npytest",
        "pytest",
        id="code-pytest",
    ),
    P(
        "cat > test_x.py <<'EOF'\nimport os\nos.remove('x')\nEOF\npy.test",
        "py.test",
        id="code-py.test",
    ),
    P(
        "cat > a.test.js <<'EOF'\nrequire('fs').rmSync('build', {recursive: true})\nEOF\njest",
        "jest",
        id="code-jest",
    ),
    P(
        "cat > a.test.js <<'EOF'\nrequire('fs').rmSync('build', {recursive: true})\nEOF\nvitest run",
        "vitest",
        id="code-vitest",
    ),
    P(
        "cat > a.test.js <<'EOF'\nrequire('fs').unlinkSync('x')\nEOF\nmocha",
        "mocha",
        id="code-mocha",
    ),
    P("nerdctl volume rm data", "nerdctl", id="code-nerdctl"),
    P("conda env remove -n x", "conda", id="new-conda-env"),
    P("pnpm publish", "pnpm", id="pnpm-publish"),
    P("yarn publish", "yarn", id="yarn-publish"),
    P("yarn npm publish", "yarn", id="yarn-npm-publish"),
    P("twine upload dist/*", "twine", id="twine-upload"),
    P("gem push x.gem", "gem", id="gem-push"),
    P("gem yank x -v 1.0", "gem", id="gem-yank"),
    P("cargo yank --version 1.0.0", "cargo", id="cargo-yank"),
    P("gh release delete v1", "gh", id="gh-release-delete"),
    P("gh repo delete owner/repo --yes", "gh", id="gh-repo-delete"),
    P("gh -R o/r release delete v1", "gh", id="gh-repo-option-release-delete"),
    P("docker system prune -af", "docker", id="docker-system-prune"),
    P("docker volume rm data", "docker", id="docker-volume-rm"),
    P("docker volume prune", "docker", id="docker-volume-prune"),
    P("docker -H tcp://h volume rm data", "docker", id="docker-option-volume-rm"),
    P("podman system reset", "podman", id="podman-system-reset"),
    P("kubectl delete pod web", "kubectl", id="kubectl-delete"),
    P("kubectl -n prod delete deploy x", "kubectl", id="kubectl-namespace-delete"),
    P("kubectl delete pod x --dry-run=none", "kubectl", id="kubectl-delete-dry-run-none"),
    P("terraform destroy -auto-approve", "terraform", id="terraform-destroy"),
    P("terraform apply -destroy", "terraform", id="terraform-apply-destroy"),
    P("terraform -chdir=infra destroy", "terraform", id="terraform-chdir-destroy"),
    P("tofu destroy", "tofu", id="tofu-destroy"),
    P("helm uninstall web", "helm", id="helm-uninstall"),
    P("helm -n prod delete web", "helm", id="helm-delete"),
    P("killall5 -9", "killall5", id="killall5"),
    P("fuser -k 8080/tcp", "fuser", id="fuser-k"),
    P("fuser -km /mnt", "fuser", id="fuser-km"),
    P("chgrp -R staff /etc", "chgrp", id="chgrp-system"),
    P("mke2fs /dev/sdb1", "mke2fs", id="mke2fs"),
    P("mkswap /dev/sdb2", "mkswap", id="mkswap"),
    P("wipefs -a /dev/sdb", "wipefs", id="wipefs"),
    P("sgdisk -Z /dev/sdb", "sgdisk", id="sgdisk"),
    P("blkdiscard /dev/sdb", "blkdiscard", id="blkdiscard"),
    P("nft flush ruleset", "nft", id="nft"),
    P("firewall-cmd --remove-service=ssh", "firewall-cmd", id="firewall-cmd"),
    P("sfdisk /dev/sdb < layout", "sfdisk", id="sfdisk"),
    P("gdisk /dev/sdb", "gdisk", id="gdisk"),
    P("ufw disable", "ufw", id="ufw"),
    P("init 0", "init", id="init-0"),
    P("init 6", "init", id="init-6"),
    P("telinit 1", "telinit", id="telinit"),
    P("loginctl poweroff", "loginctl", id="loginctl-poweroff"),
    P("loginctl reboot", "loginctl", id="loginctl-reboot"),
    P("uv pip uninstall requests", "uv", id="uv-pip-uninstall"),
    P("uv publish", "uv", id="uv-publish"),
    P("git rm -rf src/", "git", id="git-rm-force"),
    P("git worktree remove --force ../wt", "git", id="git-worktree-remove-force"),
    P("python -m twine upload dist/*", "twine", id="python-m-twine-upload"),
    P("poetry publish --build", "poetry", id="poetry-publish"),
    P("hatch publish", "hatch", id="hatch-publish"),
    P("flit publish", "flit", id="flit-publish"),
    P("pdm publish", "pdm", id="pdm-publish"),
    P("lerna publish from-git", "lerna", id="lerna-publish"),
    P("docker compose down -v", "docker", id="docker-compose-down-v"),
    P("docker-compose down --volumes", "docker-compose", id="docker-compose-v1-down"),
    P("podman compose down -v", "podman", id="podman-compose-down-v"),
    P("aws s3 rm s3://b/x --recursive", "aws", id="aws-s3-rm"),
    P("aws s3 rb s3://b --force", "aws", id="aws-s3-rb"),
    P("gsutil rm -r gs://b/x", "gsutil", id="gsutil-rm"),
    P("gcloud compute instances delete vm1", "gcloud", id="gcloud-delete"),
    P("az group delete -n rg", "az", id="az-delete"),
    P("crontab -r", "crontab", id="crontab-r"),
    P("crontab mycron.txt", "crontab", id="crontab-replace"),
    P("service nginx stop", "service", id="service-stop"),
    P("apt-get remove -y nginx", "apt-get", id="apt-get-remove"),
    P("apt purge nginx", "apt", id="apt-purge"),
    P("dnf remove nginx", "dnf", id="dnf-remove"),
    P("yum erase nginx", "yum", id="yum-erase"),
    P("pacman -Rns pkg", "pacman", id="pacman-remove"),
    P("brew uninstall node", "brew", id="brew-uninstall"),
    P("snap remove firefox", "snap", id="snap-remove"),
    P("conda remove numpy", "conda", id="conda-remove"),
    P("pipx uninstall black", "pipx", id="pipx-uninstall"),
    P("cargo uninstall ripgrep", "cargo", id="cargo-uninstall"),
    P("uv --directory x pip uninstall requests", "uv", id="uv-option-pip-uninstall"),
]
DEFAULTS_UNPAUSED = [
    P("git branch -d merged", id="git-branch-d"),
    P("git branch -m main", id="git-branch-m"),
    P("git branch -M main main", id="git-branch-M-onto-itself"),
    P("git checkout -b topic origin/main", id="git-checkout-b-start"),
    P("git checkout main", id="git-checkout-branch"),
    P("git checkout --", id="git-checkout-dashdash-alone"),
    P("git switch -c topic", id="git-switch-c"),
    P("git restore --staged x", id="git-restore-staged"),
    P("git clean -n", id="git-clean-n"),
    P("git clean -fn", id="git-clean-fn"),
    P("git clean", id="git-clean-requires-force"),
    P("git reflog", id="git-reflog"),
    P("git gc", id="git-gc"),
    P("git gc --prune=2.weeks.ago", id="git-gc-prune-date"),
    P("git gc --prune=never", id="git-gc-prune-never"),
    P("git -c gc.pruneExpire=never -c gc.reflogExpire=90.days.ago gc", id="git-gc-config-long"),
    P("git repack -a -d --cruft", id="git-repack-cruft"),
    P("git repack -A -d", id="git-repack-A"),
    P("git prune -n", id="git-prune-dry-run"),
    P("git update-ref refs/heads/x HEAD", id="git-update-ref"),
    P("rsync -av src/ dst/", id="rsync"),
    P("rsync -avn --delete src/ dst/", id="rsync-dry-run"),
    P("rsync --dry-run --delete src/ dst/", id="rsync-dry-run-long"),
    P("pnpm publish --dry-run", id="pnpm-publish-dry-run"),
    P("pnpm install", id="pnpm-install"),
    P("yarn add react", id="yarn-add"),
    P("twine check dist/*", id="twine-check"),
    P("gem install rails", id="gem-install"),
    P("cargo publish --dry-run", id="cargo-publish-dry-run"),
    P("gh release create v1", id="gh-release-create"),
    P("gh repo clone o/r", id="gh-repo-clone"),
    P("docker volume ls", id="docker-volume-ls"),
    P("docker system df", id="docker-system-df"),
    P("docker rm -f web", id="docker-rm-container"),
    P("kubectl get pods", id="kubectl-get"),
    P("kubectl delete pod x --dry-run=client", id="kubectl-delete-dry-run"),
    P("terraform plan -destroy", id="terraform-plan-destroy"),
    P("terraform apply -auto-approve", id="terraform-apply"),
    P("helm list -A", id="helm-list"),
    P("helm uninstall web --dry-run", id="helm-uninstall-dry-run"),
    P("fuser -v 8080/tcp", id="fuser-v"),
    P("chgrp staff ./build", id="chgrp-local"),
    P("init", id="init-alone"),
    P("loginctl list-sessions", id="loginctl-list"),
    P("uv pip install requests", id="uv-pip-install"),
    P("uv remove requests", id="uv-remove"),
    P("yarn remove left-pad", id="yarn-remove"),
    P("pnpm remove left-pad", id="pnpm-remove"),
    P("poetry remove requests", id="poetry-remove"),
    P("composer remove vendor/pkg", id="composer-remove"),
    P("git rm old.txt", id="git-rm"),
    P("git rm -r --cached build/", id="git-rm-cached"),
    P("git worktree add ../wt main", id="git-worktree-add"),
    P("poetry publish --dry-run", id="poetry-publish-dry-run"),
    P("docker compose down", id="docker-compose-down"),
    P("docker compose up -d", id="docker-compose-up"),
    P("aws s3 ls", id="aws-s3-ls"),
    P("aws s3 rm s3://b/x --dryrun", id="aws-s3-rm-dry-run"),
    P("gcloud compute instances list", id="gcloud-list"),
    P("crontab -l", id="crontab-list"),
    P("service nginx status", id="service-status"),
    P("apt-get install -y nginx", id="apt-get-install"),
    P("pacman -Syu", id="pacman-upgrade"),
    P("brew install node", id="brew-install"),
    P("conda install numpy", id="conda-install"),
]


@pytest.mark.parametrize("cmd, rule", DEFAULTS_PAUSED)
def test_new_default_rule_pauses(cmd: str, rule: str) -> None:
    verdict = check(cmd, strict=True)
    assert verdict.pause and verdict.rule == rule, verdict
    assert verdict.command and verdict.command in cmd, verdict
    assert verdict.reason.startswith(f"`{verdict.command}` "), verdict


@pytest.mark.parametrize("cmd", DEFAULTS_UNPAUSED)
def test_new_default_rule_near_miss_does_not_pause(cmd: str) -> None:
    verdict = check(cmd, strict=True)
    assert not verdict.pause, verdict


@pytest.mark.parametrize("cmd, rule", DEFAULTS_PAUSED)
def test_default_rule_turns_off_with_false(cmd: str, rule: str) -> None:
    verdict = check(cmd, {rule: False}, strict=True)
    assert not verdict.pause, verdict


def _examples() -> list[tuple[str, str]]:
    from tests.unit.test_checker import PAUSED
    from tests.unit.test_checker_families import PAUSES

    examples = [(p.values[0], p.values[1]) for p in (*PAUSED, *DEFAULTS_PAUSED)]
    return examples + [(cmd, rule) for cmd, rule, _ in PAUSES if rule]


def test_every_default_rule_has_an_example_that_pauses() -> None:
    covered = {rule for _, rule in _examples()}
    assert set(DEFAULT_RULES) <= covered, sorted(set(DEFAULT_RULES) - covered)


def test_default_rule_reasons_read_as_sentences() -> None:
    # The reason completes "`<command>` …": a lower-case verb phrase without a final stop.
    for cmd, _ in _examples():
        reason = check(cmd, strict=True).reason
        assert reason.startswith("`") and "` " in reason, reason
        tail = reason.split("` ", 1)[1]
        assert tail[:1].islower() and not tail.endswith("."), reason


def test_every_default_rule_is_documented_in_the_help() -> None:
    help_text = (ROOT / "doc" / "run_bash.txt").read_text()
    start = help_text.index("*run_bash-pauselist*")
    section = help_text[start : help_text.index("*run_bash-config-pauselist*")]
    words = set(section.replace(",", " ").replace("`", " ").split())
    missing = [name for name in DEFAULT_RULES if name not in words]
    assert not missing, missing
