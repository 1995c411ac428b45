"""The command table: what each known command is, runs and risks, in one declarative place. Pure.

One :class:`~.reading.Row` per command (the shape is documented in :mod:`.reading`): its
options and which take a value, its subcommands, what it runs (the rest of the line, shell code,
options holding commands or scripts) and its default pause rules with their effect class. Adding
a tool is adding a row here and a test.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import lru_cache

from run_bash.checker import checks, gitcode, interpreters, runners, tasks, wrappers
from run_bash.checker.model import REVERSIBLE
from run_bash.checker.options import opts
from run_bash.checker.reading import (
    Code,
    Command,
    Custom,
    Pause,
    Row,
    Shell,
    always,
    custom,
    runs_sub,
    subs,
    wrapper,
)
from run_bash.checker.words import wordlist

R = REVERSIBLE

PUBLISH = "publishes a package to the registry"
REGISTRY = "changes what the registry serves or who may publish to it"
UNINSTALL = "removes installed packages"
DISK = "erases or rewrites a disk's partitions or filesystem signatures"
FIREWALL = "changes firewall rules"
SIGNAL = "sends a signal to processes"
SERVICE = "stops or restarts a system service"
DOWN_VOLUMES = "deletes the project's volumes and their data"
CLOUD = "deletes cloud resources"
REDIS_SCRIPT = "runs or manages Lua code on the Redis server, which may delete its data"
CACHE = "deletes the package cache every project shares, outside the project"
_REDIS_SCRIPTS = "eval eval_ro evalsha evalsha_ro fcall fcall_ro script function"
# -- git ------------------------------------------------------------------------------------------


def _git_sub(spec: str, check: object = None, **kw: object) -> Row:
    pause = Pause("", check=check) if check else None  # type: ignore[arg-type]
    return Row(opts(spec), pauses=(pause,) if pause else (), **kw)  # type: ignore[arg-type]


GIT = Row(
    gitcode.GIT_GLOBAL,
    runs=(Custom(gitcode.git),),
    subs={
        "push": _git_sub(
            "-o: -fnuvq4d6 --all --branches --mirror --delete --tags --dry-run --porcelain --force "
            "--force-with-lease[=] --force-if-includes --repo= --set-upstream --thin "
            "--receive-pack= --exec= --prune --verify --follow-tags --signed[=] --atomic "
            "--push-option= --ipv4 --ipv6 --recurse-submodules= --quiet --verbose --progress "
            "--no-force --no-force-with-lease --no-dry-run --no-verify --no-thin --no-signed",
            checks.git_push,
        ),
        "reset": _git_sub(
            "-qNp --hard --soft --mixed --merge --keep --quiet --patch --intent-to-add "
            "--pathspec-from-file= --pathspec-file-nul --recurse-submodules[=] --refresh "
            "--no-refresh --no-quiet",
            checks.git_reset,
        ),
        "clean": _git_sub(
            "-e: -dfinqxX --force --dry-run --quiet --interactive --exclude=", checks.git_clean
        ),
        "checkout": _git_sub(
            "-bB: -qfmpl --quiet --progress --force --ours --theirs --track[=] --guess --detach "
            "--orphan= --ignore-skip-worktree-bits --merge --conflict= --patch "
            "--ignore-other-worktrees --overwrite-ignore --recurse-submodules[=] --overlay "
            "--pathspec-from-file= --pathspec-file-nul --no-guess --no-track --no-overlay",
            checks.git_checkout,
        ),
        "switch": Row(
            opts(
                "-cC: -fmdtq --create= --force-create= --detach --guess --discard-changes --force "
                "--merge --conflict= --quiet --progress --track[=] --orphan= "
                "--ignore-other-worktrees --recurse-submodules[=] --no-guess --no-track"
            ),
            pauses=(
                Pause(
                    "discards uncommitted changes",
                    when="f force discard-changes",
                    may="discard uncommitted changes",
                ),
            ),
        ),
        "restore": _git_sub(
            "-s: -SWpqm --source= --staged --worktree --patch --ours --theirs --merge "
            "--conflict= --ignore-unmerged --ignore-skip-worktree-bits --recurse-submodules[=] "
            "--overlay --quiet --progress --pathspec-from-file= --pathspec-file-nul --no-overlay",
            checks.git_restore,
        ),
        "stash": Row(subs=subs("deletes stashed changes", "drop clear")),
        "branch": _git_sub(
            "-u: -dDfmMcCrlavqt --delete --force --move --copy --list --remotes --all --verbose "
            "--quiet --track[=] --set-upstream-to= --unset-upstream --contains[=] --merged[=] "
            "--no-merged[=] --points-at= --format= --sort= --color[=] --column[=] --abbrev[=] "
            "--edit-description --show-current --create-reflog --recurse-submodules "
            "--ignore-case --omit-empty --no-color --no-column",
            checks.git_branch,
        ),
        "reflog": Row(
            subs=subs("deletes reflog entries, the way back to lost commits", "expire delete drop")
        ),
        "gc": _git_sub(
            "-q --prune[=] --no-prune --aggressive --auto --quiet --force --keep-largest-pack "
            "--cruft --no-cruft --max-cruft-size=",
            checks.git_gc,
        ),
        "prune": Row(
            opts("-nv --dry-run --verbose --progress --expire="),
            pauses=(Pause("deletes unreachable commits", unless="n dry-run"),),
        ),
        "update-ref": Row(
            opts("-m: -dz --stdin --no-deref --create-reflog", abbrev=False),
            pauses=(
                Pause(
                    "deletes a ref, which can lose the commits only it points to",
                    when="d",
                    may="delete a ref",
                ),
                Pause("changes refs read from its input, possibly deleting them", when="stdin"),
                Pause("", check=checks.git_update_ref),
            ),
        ),
        # Tags pruned or overwritten (`--prune-tags`, `--force` with `--tags` or a refspec).
        "fetch": _git_sub(
            "-jo: -vqamftnpPku46 --all --set-upstream --append --atomic --upload-pack= --force "
            "--multiple --tags --no-tags --jobs= --prefetch --prune --prune-tags --no-prune "
            "--no-prune-tags --recurse-submodules[=] --no-recurse-submodules --dry-run "
            "--porcelain --write-fetch-head --no-write-fetch-head --keep --update-head-ok "
            "--progress --depth= --shallow-since= --shallow-exclude= --deepen= --unshallow "
            "--refetch --update-shallow --refmap= --server-option= --ipv4 --ipv6 "
            "--negotiation-tip= --negotiate-only --filter= --auto-maintenance --auto-gc "
            "--no-auto-maintenance --no-auto-gc --show-forced-updates --no-show-forced-updates "
            "--write-commit-graph --no-write-commit-graph --stdin --quiet --verbose --no-force",
            checks.git_fetch,
        ),
        "pull": _git_sub(
            "-sXo: -j:: -r:: -S:: -vqnafptk46 --verbose --quiet --progress "
            "--recurse-submodules[=] --no-recurse-submodules --rebase[=] --no-rebase --stat "
            "--no-stat --log[=] --no-log --signoff[=] --no-signoff --squash --no-squash "
            "--commit --no-commit --edit --no-edit --cleanup= --ff --no-ff --ff-only --verify "
            "--no-verify --verify-signatures --no-verify-signatures --autostash --no-autostash "
            "--strategy= --strategy-option= --gpg-sign[=] --no-gpg-sign "
            "--allow-unrelated-histories --all --append --upload-pack= --force --no-force "
            "--tags --no-tags --prune --no-prune --jobs[=] --dry-run --keep --depth= "
            "--shallow-since= --shallow-exclude= --deepen= --unshallow --update-shallow "
            "--refmap= --server-option= --ipv4 --ipv6 --negotiation-tip= --show-forced-updates "
            "--no-show-forced-updates --set-upstream",
            checks.git_fetch,
        ),
        "tag": _git_sub(
            "-mFu: -asdflvne --annotate --sign --delete --force --list --verify --message= "
            "--file= --local-user= --cleanup= --sort= --contains[=] --no-contains[=] "
            "--merged[=] --no-merged[=] --points-at= --format= --color[=] --column[=] "
            "--ignore-case --create-reflog --edit --no-sign --trailer=",
            checks.git_tag,
        ),
        "replace": Row(
            opts(
                "-dfle --delete --force --list --edit --graft --convert-graft-file --raw --format="
            ),
            pauses=(
                Pause(
                    "deletes or overwrites a replacement ref, which has no reflog",
                    when="d delete f force",
                ),
            ),
        ),
        "repack": Row(
            opts(
                "-abdfFklnqAI --window= --depth= --threads= --max-pack-size= --keep-pack= "
                "--geometric= --cruft --cruft-expiration= --write-midx --local --quiet "
                "--unpack-unreachable= --keep-unreachable --pack-kept-objects --expire-to= "
                "--max-cruft-size= --combine-cruft-below-size= --filter= --filter-to= "
                "--write-bitmap-index"
            ),
            pauses=(
                Pause("deletes unreachable objects that were packed", check=checks.git_repack),
            ),
        ),
        "lfs": Row(
            subs={
                "prune": Row(
                    opts(
                        "-dcv --dry-run --verify-remote --no-verify-remote --force --recent "
                        "--verbose --when-unverified= --verify-unreachable"
                    ),
                    pauses=(Pause("deletes local Git LFS objects", unless="d dry-run"),),
                ),
                # `migrate import|export` rewrite every commit that holds the files
                # (`--no-rewrite` adds one commit instead); `migrate info` only reads.
                "migrate": Row(
                    subs={
                        name: Row(
                            opts(
                                "-I:X: --include= --exclude= --include-ref= --exclude-ref= "
                                "--everything --no-rewrite --above= --object-map= --verbose "
                                "--skip-fetch --fixup --yes -m: --message="
                            ),
                            pauses=(
                                Pause("rewrites the repository's history", unless="no-rewrite"),
                            ),
                        )
                        for name in ("import", "export")
                    }
                ),
            }
        ),
        "rm": Row(
            opts(
                "-rfnq --force --cached --dry-run --quiet --ignore-unmatch --sparse "
                "--pathspec-from-file= --pathspec-file-nul"
            ),
            pauses=(
                Pause(
                    "deletes files even with uncommitted changes",
                    when="f force",
                    unless="cached n dry-run",
                ),
            ),
        ),
        "worktree": Row(
            subs={
                "remove": Row(
                    opts("-f --force"),
                    pauses=(
                        Pause("deletes a worktree even with uncommitted changes", when="f force"),
                    ),
                )
            }
        ),
        # Plumbing with the effect of the porcelain above.
        "send-pack": Row(
            opts(
                "-q --receive-pack= --exec= --all --mirror --dry-run --force --verbose --thin "
                "--atomic --stdin --signed[=] --push-option= --force-with-lease[=] "
                "--force-if-includes --no-signed --quiet --progress"
            ),
            pauses=(
                Pause("", check=checks.git_push),
                Pause("pushes refs read from its input, possibly forced", when="stdin"),
            ),
        ),
        "read-tree": _git_sub(
            "-mnuiv --reset --prefix= --index-output= --exclude-per-directory= --trivial "
            "--aggressive --dry-run --empty --no-sparse-checkout --recurse-submodules[=] "
            "--no-recurse-submodules --quiet",
            checks.git_read_tree,
        ),
        "checkout-index": Row(
            opts(
                "-uqafn --index --all --force --quiet --no-create --stage= --prefix= --temp "
                "--stdin -z --ignore-skip-worktree-bits"
            ),
            pauses=(Pause("overwrites files with uncommitted changes", when="f force"),),
        ),
        "submodule": Row(
            opts("-q --quiet --cached"),
            subs={
                "deinit": Row(
                    opts("-fq --force --all --quiet"),
                    pauses=(
                        Pause(
                            "deletes submodule working trees even with uncommitted changes",
                            when="f force",
                        ),
                    ),
                )
            },
        ),
        "remote": Row(
            opts("-v --verbose"),
            subs={
                "add": Row(
                    opts("-t:m: -f --fetch --tags --no-tags --track= --master= --mirror[=]"),
                    pauses=(
                        Pause(
                            "makes later pushes or fetches mirror the remote, overwriting and "
                            "deleting refs",
                            when="mirror",
                        ),
                        Pause("", check=checks.git_remote_add),
                    ),
                ),
                # Fetches: the configuration may prune tags (`fetch.pruneTags`).
                "update": _git_sub("-p --prune", checks.git_remote_update),
            },
        ),
        "symbolic-ref": Row(
            opts("-m: -dqs --delete --quiet --short --recurse --no-recurse"),
            pauses=(
                Pause("deletes a symbolic ref, which keeps no reflog", when="d delete"),
                Pause("", check=checks.git_symbolic_ref),
            ),
        ),
        "filter-branch": always("rewrites the repository's history"),
        "filter-repo": always("rewrites the repository's history"),
    },
)
# -- services, processes, disks -------------------------------------------------------------------

SYSTEMCTL = Row(
    opts(
        "-tpsHMnoP: -aqlrfiN --type= --property= --signal= --host= --machine= --lines= --output= "
        "--state= --kill-whom= --kill-value= --root= --image= --job-mode= --what= --timestamp= "
        "--message= --boot-loader-menu= --boot-loader-entry= --reboot-argument= "
        "--preset-mode= --check-inhibitors= --drop-in= --when= --image-policy= --root-shift= "
        "--user --system --now --no-block --no-wall --no-reload --no-ask-password --force --quiet "
        "--runtime --global --all --full --no-pager --no-legend --dry-run",
        abbrev=False,
    ),
    pauses=(
        Pause(
            "",
            check=checks.operation_not(
                "starts or changes services, which run outside the sandbox",
                "status show cat help list-* is-* get-default show-environment log-level "
                "log-target service-log-level service-log-target whoami daemon-reload",
                at=0,
            ),
        ),
    ),
    subs={
        **subs("stops a system service", "stop"),
        **subs(
            "restarts a system service",
            "restart try-restart reload-or-restart try-reload-or-restart condrestart force-reload",
        ),
        **subs("disables a system service", "disable"),
        **subs("masks a system service", "mask"),
        **subs("kills a system service", "kill"),
        **subs("switches the system to another target, stopping services", "isolate default"),
        **subs("suspends the machine", "suspend"),
        **subs("hibernates the machine", "hibernate hybrid-sleep suspend-then-hibernate"),
        **subs("switches the machine to another root file system", "switch-root"),
        **subs("reboots the machine", "reboot soft-reboot kexec"),
        **subs("powers the machine off", "poweroff"),
        **subs("halts the machine", "halt"),
        **subs("switches the machine to rescue mode", "rescue"),
        **subs("switches the machine to emergency mode", "emergency"),
    },
)
LOGINCTL = Row(
    opts(
        "-HMpsno: -al --host= --machine= --property= --signal= --kill-whom= --lines= --output= "
        "--no-pager --no-legend --no-ask-password --all --full --value",
        abbrev=False,
    ),
    subs={
        **subs("powers the machine off", "poweroff"),
        **subs("reboots the machine", "reboot kexec"),
        **subs("halts the machine", "halt"),
        **subs("suspends the machine", "suspend"),
        **subs("hibernates the machine", "hibernate"),
        **subs("ends a login session, killing its processes", "terminate-session"),
        **subs("ends a user's sessions, killing their processes", "terminate-user"),
        **subs("sends a signal to a login session's processes", "kill-session"),
        **subs("sends a signal to a user's processes", "kill-user"),
    },
)
INIT = Row(
    pauses=(
        Pause("powers the machine off", operands=("0",), may="change the runlevel"),
        Pause("reboots the machine", operands=("6",), may="change the runlevel"),
        Pause(
            "switches the machine's runlevel, stopping services",
            operands=("[12345sS]",),
            may="change the runlevel",
        ),
    )
)
SERVICE_ROW = Row(
    opts("--status-all --full-restart"),
    skip=1,
    subs=subs(SERVICE, "stop restart force-reload condrestart try-restart"),
    pauses=(Pause(SERVICE, when="full-restart"),),
)
# SysV init scripts: `/etc/init.d/NAME ACTION` is `service NAME ACTION`.
INIT_SCRIPT_DIRS = frozenset({"/etc/init.d", "/etc/rc.d/init.d", "/etc/rc.d"})

# -- packages and registries ----------------------------------------------------------------------

_NPM_COMMANDS = wordlist(
    "access adduser audit bugs cache ci completion config dedupe deprecate diff dist-tag "
    "docs doctor edit exec explain explore find-dupes fund get help help-search hook init "
    "install install-ci-test install-test link ll login logout ls org outdated owner pack "
    "ping pkg prefix profile prune publish query rebuild repo restart root run run-script "
    "sbom search set shrinkwrap star stars start stop team test token undeprecate "
    "uninstall unpublish unstar update version view whoami"
)


def _npm_aliases() -> dict[str, str]:
    aliases = dict.fromkeys(("un", "r", "rm", "remove", "unlink"), "uninstall")
    aliases.update(
        {
            "i": "install",
            "in": "install",
            "add": "install",
            "t": "test",
            "tst": "test",
            "run-script": "run",
            "rum": "run",
            "urn": "run",
            "x": "exec",
            "isntall": "install",
            "it": "install-test",
            "cit": "install-ci-test",
        }
    )
    # npm accepts unique prefixes of its command names (`npm publ`).
    for target in ("publish", "unpublish", "uninstall"):
        for k in range(2, len(target)):
            prefix = target[:k]
            if [c for c in _NPM_COMMANDS if c.startswith(prefix)] == [target]:
                aliases.setdefault(prefix, target)
    return aliases


def _scripts(tool: str, names: str) -> dict[str, Row]:
    """Subcommands that run scripts of a ``package.json`` the line writes."""
    runner = tasks.package_scripts
    return {n: Row(permute=False, runs=(Custom(runner(tool, n)),)) for n in wordlist(names)}


_NPM_EXEC = Row(
    opts("-pcw: -yq --package= --call= --workspace= --yes --no --include-workspace-root"),
    permute=False,
    runs=(Code("c call"), Command(package=True)),
)
NPM = Row(
    opts(
        "-wC: -gqsdy --prefix= --registry= --userconfig= --globalconfig= --cache= --loglevel= "
        "--workspace= --tag= --otp= --access= --scope= --location= --auth-type= --omit= "
        "--include= --install-strategy= --before= --global --workspaces --silent --dry-run",
        abbrev=False,
    ),
    alias=_npm_aliases(),
    subs={
        **subs(PUBLISH, "publish", dry_run=True),
        **subs("removes a published package from the registry", "unpublish", dry_run=True),
        **subs(UNINSTALL, "uninstall", dry_run=True),
        **subs("marks published versions deprecated for everyone", "deprecate", dry_run=True),
        "dist-tag": Row(subs=subs(REGISTRY, "add rm set", dry_run=True)),
        "owner": Row(subs=subs(REGISTRY, "add rm", dry_run=True)),
        "access": Row(subs=subs(REGISTRY, "set grant revoke", dry_run=True)),
        "team": Row(subs=subs(REGISTRY, "destroy rm", dry_run=True)),
        "org": Row(subs=subs(REGISTRY, "rm set", dry_run=True)),
        "token": Row(subs=subs("revokes a registry token", "revoke")),
        "cache": Row(subs=subs(CACHE, "clean clear rm")),
        "exec": _NPM_EXEC,
        **_scripts(
            "npm", "run test start stop restart install ci pack install-test install-ci-test"
        ),
        "explore": wrapper(skip=1),
    },
)
PNPM = Row(
    opts("-Cw: -r --dir= --filter= --workspace= --recursive --silent --dry-run"),
    subs={
        **subs(PUBLISH, "publish", dry_run=True),
        "dlx": Row(
            opts("-p: -sc --package= --silent --shell-mode"),
            permute=False,
            runs=(Command(package=True, shell="c shell-mode"),),
        ),
        "exec": Row(
            opts("-C: -rc --filter= --dir= --recursive --parallel --shell-mode --no-bail"),
            permute=False,
            runs=(Command(shell="c shell-mode"),),
        ),
        **_scripts("pnpm", "run test start install i add"),
        # `pnpm recursive CMD` (also `multi`, `m`) is `pnpm -r CMD`.
        **dict.fromkeys(("recursive", "multi", "m"), wrapper(prefix="pnpm")),
    },
)
YARN = Row(
    opts("--cwd="),
    subs={
        **subs(PUBLISH, "publish", dry_run=True),
        "npm": Row(
            subs={
                **subs(PUBLISH, "publish", dry_run=True),
                "tag": Row(subs=subs(REGISTRY, "add remove")),
            }
        ),
        "dlx": Row(opts("-p: -q --package= --quiet"), permute=False, runs=(Command(package=True),)),
        "exec": Row(permute=False, runs=(Shell(),)),
        "cache": Row(subs=subs(CACHE, "clean")),
        **_scripts("yarn", "run test start install add"),
        # `yarn workspace NAME CMD…` and `yarn workspaces foreach … CMD…` run `yarn CMD…`.
        "workspace": wrapper(skip=1, prefix="yarn"),
        "workspaces": Row(
            subs={
                "foreach": wrapper(
                    "-j: --from= --include= --exclude= --since[=] --jobs= -ARWvpit --all "
                    "--recursive --worktree --verbose --parallel --interlaced --topological "
                    "--topological-dev --no-private --dry-run",
                    prefix="yarn",
                )
            }
        ),
    },
)
BUN = Row(
    opts("-e:p: --eval= --print= --cwd= --silent"),
    code=True,
    runs=(Custom(interpreters.RUNNERS["bun"]),),
    subs={
        **subs(PUBLISH, "publish", dry_run=True),
        "x": Row(opts("-p: --package= --bun"), permute=False, runs=(Command(package=True),)),
        "exec": Row(permute=False, runs=(Shell(),)),
        "pm": Row(subs={"cache": Row(subs=subs(CACHE, "rm"))}),
        **_scripts("bun", "run test install i add"),
    },
)
_PIP_GLOBAL = (
    "--python= --log= --proxy= --retries= --timeout= --exists-action= --trusted-host= --cert= "
    "--client-cert= --cache-dir= --keyring-provider= --use-feature= --use-deprecated= "
    "--resume-retries= -vqy --verbose --quiet --isolated --require-virtualenv "
    "--no-cache-dir --disable-pip-version-check --no-color --no-input"
)
PIP = Row(
    opts(_PIP_GLOBAL, abbrev=False),
    subs={**subs(UNINSTALL, "uninstall"), "cache": Row(subs=subs(CACHE, "purge remove"))},
)
_UV_RUN = opts(
    "-wp: --with= --with-editable= --with-requirements= --python= --package= --extra= --group= "
    "--env-file= --directory= --project= --index= --default-index= --index-url= "
    "--extra-index-url= --find-links= --only-group= --no-group= --isolated --no-project "
    "--frozen --locked --no-sync --all-extras --all-packages --no-dev --dev --active "
    "--no-env-file --quiet --verbose --offline"
)
_UV_TOOL_RUN = opts("-wp: --with= --from= --python= --isolated")
UV = Row(
    opts(
        "-qvn --directory= --project= --cache-dir= --config-file= --color= --python= --quiet "
        "--verbose --offline --no-cache --native-tls",
        abbrev=False,
    ),
    subs={
        "pip": Row(subs=subs(UNINSTALL, "uninstall")),
        "tool": Row(
            subs={
                **subs(UNINSTALL, "uninstall"),
                "run": Row(_UV_TOOL_RUN, permute=False, runs=(Command(package=True),)),
            }
        ),
        **subs("publishes packages to PyPI", "publish", dry_run=True),
        "run": Row(_UV_RUN, permute=False, runs=(Command(),)),
        "cache": Row(subs=subs(CACHE, "clean")),
    },
)


DOCKER_GLOBAL = (
    "-cHl: -Dv --config= --context= --host= --log-level= --tlscacert= --tlscert= --tlskey= "
    "--debug --tls --tlsverify --version"
)
COMPOSE = Row(
    opts(
        "-fp: --file= --project-name= --profile= --env-file= --project-directory= --parallel= "
        "--ansi= --progress= --compatibility --dry-run --all-resources --verbose"
    ),
    subs={
        "down": Row(
            opts("-vt: --volumes --rmi= --timeout= --remove-orphans -v"),
            pauses=(Pause(DOWN_VOLUMES, when="v volumes", may="delete volumes"),),
        ),
        "rm": Row(
            opts("-fsv --force --stop --volumes"),
            pauses=(Pause(DOWN_VOLUMES, when="v volumes", may="delete volumes"),),
        ),
        "kill": Row(pauses=(Pause(SIGNAL),)),
        **subs("publishes the services' images to a registry", "push"),
        "run": Row(
            runners.CONTAINER_RUN,
            permute=False,
            runs=(Command(skip=1, elsewhere=True), Custom(runners.container_run)),
        ),
        "exec": Row(
            runners.CONTAINER_RUN,
            permute=False,
            runs=(Command(skip=1, elsewhere=True),),
            pauses=(Pause(runners.HOST_RIGHTS, when="privileged"),),
        ),
    },
)
_CONTAINER = Row(
    opts(
        "-u: -w: -e: --user= --workdir= --env= --env-file= -itd --interactive "
        "--tty --detach --privileged"
    ),
    permute=False,
    runs=(Command(skip=1, elsewhere=True),),
    pauses=(Pause(runners.HOST_RIGHTS, when="privileged"),),
)


_CONTAINER_RUN = Row(
    runners.CONTAINER_RUN,
    permute=False,
    runs=(Command(skip=1, elsewhere=True, unless="entrypoint"), Custom(runners.container_run)),
)

_CONTAINER_RM = Row(
    opts("-fvl --force --volumes --link"),
    pauses=(Pause("deletes the container's anonymous volumes and their data", when="v volumes"),),
)
IMAGES_GONE = "deletes images, which may exist nowhere else"
PUSH_IMAGE = "publishes an image to a registry"
_KILL = Row(pauses=(Pause(SIGNAL),))
_BUILD = Row(
    opts("-ftoq: --push --output= --tag= --file= --target= --platform= --build-arg= --quiet"),
    pauses=(
        Pause(PUSH_IMAGE, when="push"),
        Pause(
            "", check=checks.option_value(PUSH_IMAGE, "o output", "*type=registry*", "*push=true*")
        ),
    ),
)


def _docker(extra: Mapping[str, Row], spec: str = "") -> Row:
    return Row(
        opts(DOCKER_GLOBAL + spec, abbrev=False),
        subs={
            "compose": COMPOSE,
            "system": Row(
                subs=subs("deletes unused containers, images, networks and build cache", "prune")
            ),
            "volume": Row(subs=subs("deletes volumes and their data", "rm remove prune")),
            "exec": _CONTAINER,
            "run": _CONTAINER_RUN,
            "create": _CONTAINER_RUN,  # what it is given runs when the container starts
            "rm": _CONTAINER_RM,
            "kill": _KILL,
            **subs(IMAGES_GONE, "rmi"),
            **subs(PUSH_IMAGE, "push"),
            "build": _BUILD,
            # `docker container exec|run|rm` are `docker exec|run|rm` spelled out.
            "container": Row(
                subs={
                    "exec": _CONTAINER,
                    "run": _CONTAINER_RUN,
                    "create": _CONTAINER_RUN,
                    "rm": _CONTAINER_RM,
                    "remove": _CONTAINER_RM,
                    "kill": _KILL,
                    **subs("deletes stopped containers and their files", "prune"),
                }
            ),
            "image": Row(subs={**subs(IMAGES_GONE, "rm remove prune"), **subs(PUSH_IMAGE, "push")}),
            "manifest": Row(subs=subs(PUSH_IMAGE, "push")),
            "buildx": Row(
                opts("--builder="),
                subs={"build": _BUILD, **subs("deletes build cache or builders", "prune rm")},
            ),
            "builder": Row(subs={"build": _BUILD, **subs("deletes the build cache", "prune")}),
            "network": Row(subs=subs("deletes networks", "rm remove prune")),
            **{
                group: Row(subs=subs(f"deletes swarm {group}s", "rm remove"))
                for group in ("service", "stack", "secret", "config", "plugin", "node")
            },
            "swarm": Row(subs=subs("leaves the swarm, dropping its state", "leave")),
            **extra,
        },
    )


_KUBECTL_GLOBAL = (
    "-nsc: --namespace= --context= --cluster= --server= --kubeconfig= --user= --token= --as= "
    "--as-group= --cache-dir= --request-timeout= --v= --insecure-skip-tls-verify"
)
_KUBECTL_EXEC = opts(
    "-cf: -itq --container= --filename= --pod-running-timeout= --stdin --tty --quiet "
    + _KUBECTL_GLOBAL,
    abbrev=False,
)
_KUBECTL_RUN = opts(
    "-ciqtf: --image= --restart= --env= --labels= --port= --overrides= --image-pull-policy= "
    "--container= --target= --copy-to= --profile= --filename= --namespace= --dry-run[=] "
    "--command --rm --attach --stdin --tty --quiet --privileged --expose --share-processes "
    "--replace --same-node --set-image= --annotations= --serviceaccount= " + _KUBECTL_GLOBAL,
    abbrev=False,
)
KUBECTL = Row(
    opts(_KUBECTL_GLOBAL, abbrev=False),
    subs={
        **subs("deletes Kubernetes resources", "delete", dry_run=True),
        **subs("evicts every pod from a node", "drain", dry_run=True),
        "replace": Row(
            pauses=(
                Pause("deletes and recreates Kubernetes resources", when="force", dry_run=True),
            )
        ),
        "apply": Row(
            pauses=(Pause("deletes resources the files do not list", when="prune", dry_run=True),)
        ),
        # Flags anywhere before `--` (pflag), the command after it.
        "exec": Row(_KUBECTL_EXEC, runs=(Custom(runners.exec_in(_KUBECTL_EXEC)),)),
        # `kubectl run NAME --image=… -- CMD` and `kubectl debug TARGET … -- CMD`: in the cluster.
        **{
            name: Row(_KUBECTL_RUN, runs=(Custom(runners.exec_in(_KUBECTL_RUN)),))
            for name in ("run", "debug")
        },
    },
)
HELM = Row(
    opts(
        "-n: --namespace= --kube-context= --kubeconfig= --registry-config= --repository-cache= "
        "--repository-config= --burst-limit= --kube-apiserver= --kube-as-group= "
        "--kube-as-user= --kube-ca-file= --kube-token= --kube-tls-server-name= --debug",
        abbrev=False,
    ),
    subs={
        **subs("uninstalls a Helm release", "uninstall delete del un", dry_run=True),
        **subs("publishes a chart to a registry", "push"),
    },
)
AWS = Row(
    opts(
        "--profile= --region= --output= --endpoint-url= --query= --color= --ca-bundle= "
        "--cli-read-timeout= --cli-connect-timeout= --cli-binary-format= --debug "
        "--no-verify-ssl --no-paginate --no-sign-request --no-cli-pager --cli-auto-prompt "
        "--no-cli-auto-prompt --dryrun",
        abbrev=False,
    ),
    pauses=(
        Pause(
            "",
            check=checks.operation(
                CLOUD,
                "delete-*",
                "batch-delete-*",
                "terminate-*",
                "deregister-*",
                "purge-*",
                "remove-*",
                "schedule-*-deletion",
            ),
        ),
        Pause(
            "",
            check=checks.operation(
                "runs commands on other machines",
                "send-command",
                "start-session",
                "execute-command",
            ),
        ),
    ),
    subs={
        "s3": Row(
            inherit=True,
            subs={
                **subs("deletes objects from S3", "rm", dry_run=True),
                **subs("deletes an S3 bucket", "rb", dry_run=True),
                **subs("moves objects, deleting the source", "mv", dry_run=True),
                "sync": Row(
                    pauses=(
                        Pause(
                            "deletes objects the source does not have", when="delete", dry_run=True
                        ),
                    )
                ),
            },
        )
    },
)
TERRAFORM = Row(
    opts("-chdir= -help -version", go=True),
    subs={
        **subs("destroys the infrastructure Terraform manages", "destroy"),
        "state": Row(subs=subs("forgets resources, which Terraform then no longer manages", "rm")),
        "workspace": Row(subs=subs("deletes a workspace and its state", "delete")),
        "apply": Row(
            opts(
                "-destroy -auto-approve -input= -lock= -var= -var-file= -target= -parallelism= "
                "-replace= -refresh= -state= -state-out= -backup= -compact-warnings -json "
                "-no-color",
                go=True,
            ),
            pauses=(
                Pause("destroys the infrastructure Terraform manages", when="destroy"),
                Pause(
                    "destroys and recreates the named resources, losing their data", when="replace"
                ),
            ),
        ),
    },
)
CLOUD_DELETE = Row(
    pauses=(
        Pause(
            "deletes cloud resources",
            operands=("delete", "*-delete", "delete-*", "purge"),
            may="delete cloud resources",
        ),
    )
)
GCLOUD = Row(
    # `gcloud compute ssh VM --command CMD` (also `cloud-shell ssh`, `tpu-vm ssh`) runs CMD there.
    opts("--command=", abbrev=False),
    runs=(Code("command", elsewhere=True),),
    pauses=(
        *CLOUD_DELETE.pauses,
        Pause("", check=checks.operation("deletes objects from Cloud Storage", "rm", "mv")),
    ),
)
CARGO = Row(
    runners.CARGO_GLOBAL,
    toolchain=True,
    runs=(Custom(runners.cargo),),
    subs={
        **subs("publishes a crate to crates.io", "publish", dry_run=True),
        **subs("withdraws a published crate version from crates.io", "yank", dry_run=True),
        **subs(UNINSTALL, "uninstall", dry_run=True),
        "owner": Row(
            opts("-a:r: --add= --remove= --token= --registry= --index="),
            pauses=(Pause(REGISTRY, when="a r add remove"),),
        ),
    },
)
GH = Row(
    opts("-R: --repo= --hostname="),
    pauses=(
        Pause(
            "",
            check=checks.operation(
                "deletes or archives GitHub resources", "delete", "delete-*", "archive"
            ),
        ),
    ),
    subs={
        "release": Row(opts("-R: --repo="), subs=subs("deletes a GitHub release", "delete")),
        "repo": Row(subs=subs("deletes a GitHub repository", "delete")),
        "api": Row(
            opts(
                "-XfFHqtp: --method= --field= --raw-field= --header= --input= --jq= --template= "
                "--hostname= --preview= --cache= --paginate --include --silent --verbose --slurp"
            ),
            pauses=(
                Pause("", check=checks.http_method("X", "method")),
                # `PATCH …/git/refs/heads/NAME -F force=true` moves a branch to any commit.
                Pause(
                    "",
                    check=checks.field(
                        "force-updates a remote branch, rewriting its history",
                        "force-update a remote branch",
                        "f F field raw-field",
                        "force",
                        "true",
                    ),
                ),
            ),
        ),
    },
)
HTTP_DELETE_ROW = {
    "curl": Row(pauses=(Pause("", check=checks.http_method("X", "request")),)),
    "wget": Row(pauses=(Pause("", check=checks.http_method("", "method")),)),
    **dict.fromkeys(
        ("http", "https", "httpie", "xh", "xhs"),
        Row(pauses=(Pause("", check=checks.http_method("", "", operand=True)),)),
    ),
}


def _packages(verbs: str, spec: str = "", *, simulate: str = "", **extra: Row) -> Row:
    row = Row(
        opts(spec), pauses=(Pause(UNINSTALL, unless=simulate),) if simulate else (Pause(UNINSTALL),)
    )
    return Row(opts(spec), subs={**dict.fromkeys(verbs.split(), row), **extra})


_APT_CODE = Code(
    "o option",
    keys=("*pre-invoke*", "*post-invoke*", "dpkg::pre-install-pkgs*", "*::tools::options*"),
)
_APT = (
    "-oct: -ysqduf --option= --config-file= --target-release= --yes --assume-yes "
    "--simulate --just-print --dry-run --recon --no-act --quiet --download-only --fix-broken "
    "--purge --auto-remove --no-install-recommends"
)


def _apt() -> Row:
    row = _packages(
        "remove purge autoremove", _APT, simulate="s simulate just-print dry-run recon no-act"
    )
    return Row(row.opts, subs=row.subs, runs=(_APT_CODE,))


# -- more tools that delete, remove or stop what cannot be taken back -----------------------------

STOPS = "stops or restarts processes it manages"
DBUS = "calls a service outside the sandbox over D-Bus, which may do anything it offers"
SETTINGS = "changes desktop settings outside the sandbox"
DATABASE = "deletes a database or its data"


def _anycase(word: str) -> str:
    """A glob matching ``word`` in any case (``FLUSHALL``, ``flushall``)."""
    return "".join(f"[{c.lower()}{c.upper()}]" if c.isalpha() else c for c in word)


# Rails tasks that drop databases or their tables (`db:schema:load` recreates every table).
_RAILS_DB = (
    "db:drop*",
    "db:reset",
    "db:purge*",
    "db:migrate:reset",
    "db:schema:load",
    "db:structure:load",
    "db:truncate_all",
    "db:seed:replant",
)


def verbs(reason: str, *patterns: str) -> Row:
    """A tool that pauses when one of its operands is a verb matching ``patterns``."""
    return Row(pauses=(Pause(reason, operands=patterns, may=f"run a verb that {reason}"),))


MORE: dict[str, Row] = {
    "rclone": Row(
        opts(
            "-nvqPc: --dry-run --config= --transfers= --checkers= --log-file= --log-level= "
            "--include= --exclude= --filter= --bwlimit= --progress --interactive -i"
        ),
        subs={
            **subs(
                "deletes files at a remote",
                "purge delete deletefile rmdir rmdirs cleanup",
                dry_run=True,
            ),
            **subs(
                "deletes files at the destination that the source does not have",
                "sync",
                dry_run=True,
            ),
            **subs("deletes the source files after copying them", "move moveto", dry_run=True),
        },
    ),
    "s3cmd": Row(
        subs={
            **subs("deletes objects or buckets from S3", "del rm rb"),
            "sync": Row(
                pauses=(
                    Pause(
                        "deletes objects the source does not have",
                        when="delete-removed",
                        dry_run=True,
                    ),
                )
            ),
        }
    ),
    "pulumi": Row(
        opts("-C: --cwd= --stack= -s: --non-interactive --yes -y"),
        subs={
            **subs("destroys the infrastructure Pulumi manages", "destroy down"),
            "stack": Row(subs=subs("deletes a Pulumi stack", "rm")),
            "state": Row(subs=subs("deletes resources from the stack's state", "delete")),
            **{
                name: Row(
                    opts("--replace= --target-replace= -y --yes -s: --stack= -m: --message="),
                    pauses=(
                        Pause(
                            "destroys and recreates the named resources, losing their data",
                            when="replace target-replace",
                        ),
                    ),
                )
                for name in ("up", "update")
            },
        },
    ),
    "cdk": Row(subs=subs("destroys the stacks CDK deployed", "destroy")),
    "serverless": Row(subs=subs("removes the deployed service", "remove")),
    "sls": Row(subs=subs("removes the deployed service", "remove")),
    "sam": Row(subs=subs("deletes the deployed stack", "delete")),
    "eksctl": Row(subs=subs(CLOUD, "delete")),
    "kind": Row(subs=subs("deletes local clusters", "delete")),
    "minikube": Row(subs=subs("deletes the local cluster and its data", "delete")),
    "vagrant": Row(
        subs={
            **subs("destroys the virtual machine and its disks", "destroy"),
            "ssh": Row(opts("-c: --command="), runs=(Code("c command", elsewhere=True),)),
        }
    ),
    "heroku": Row(
        pauses=verbs(
            CLOUD,
            "*:destroy",
            "*:delete",
            "destroy",
            "pg:reset",
            "apps:destroy",
            "*:unset",
            "ps:kill",
            "ps:stop",
        ).pauses,
        subs={
            name: Row(
                opts("-a: --app= -r: --remote= -s: --size= -e: --env= -x --exit-code --no-tty"),
                runs=(Shell(elsewhere=True),),
            )
            for name in ("run", "run:detached", "run:inside")
        },
    ),
    **dict.fromkeys(
        ("fly", "flyctl"),
        Row(
            pauses=verbs(CLOUD, "destroy", "delete", "unset").pauses,
            subs={
                "ssh": Row(
                    subs={
                        "console": Row(
                            opts("-aCs: --app= --command= --select --pty -u: --user="),
                            runs=(Code("C command", elsewhere=True),),
                        )
                    }
                )
            },
        ),
    ),
    "doctl": Row(
        opts("-t: -c: -o: --access-token= --context= --config= --output= --api-url= -v --verbose"),
        pauses=verbs(CLOUD, "delete", "rm", "delete-*").pauses,
        subs={
            "registry": Row(
                subs={
                    "garbage-collection": Row(
                        subs=subs("deletes the registry's unreferenced images for good", "start")
                    )
                },
                alias={"gc": "garbage-collection"},
            ),
            "compute": Row(
                subs={
                    "ssh": Row(
                        opts(
                            "--ssh-command= --ssh-user= --ssh-key-path= --ssh-port= "
                            "--ssh-agent-forwarding --ssh-private-ip"
                        ),
                        runs=(Code("ssh-command", elsewhere=True),),
                    )
                }
            ),
        },
    ),
    "hcloud": verbs(CLOUD, "delete"),
    "linode-cli": verbs(CLOUD, "delete", "*-delete"),
    "oci": verbs(CLOUD, "delete", "terminate"),
    "vercel": verbs(CLOUD, "rm", "remove"),
    "netlify": verbs(CLOUD, "*:delete", "sites:delete", "env:unset"),
    # more clouds, clusters and stores that delete through a verb
    **dict.fromkeys(
        (
            "argocd",
            "flux",
            "openstack",
            "k3d",
            "neonctl",
            "pscale",
            "planetscale",
            "skaffold",
            "civo",
            "scw",
            "exoscale",
            "upcloud",
            "vultr-cli",
            "ibmcloud",
            "aliyun",
            "koyeb",
            "render",
            "railway",
            "okteto",
            "northflank",
            "clever",
            "porter",
            "scalingo",
        ),
        verbs(CLOUD, "delete", "destroy", "rm", "remove", "uninstall", "down"),
    ),
    "istioctl": verbs(CLOUD, "uninstall", "delete"),
    "tilt": verbs("deletes the resources it deployed", "down", "delete"),
    "b2": verbs("deletes files or buckets from B2", "delete-*", "rm", "hide-file"),
    "mc": verbs("deletes objects or buckets", "rm", "rb"),
    "vault": verbs("deletes or revokes secrets", "delete", "destroy", "disable", "revoke"),
    "consul": verbs("deletes keys or services", "delete", "deregister"),
    "etcdctl": verbs("deletes keys", "del", "defrag", "compact"),
    "nomad": verbs("stops or deletes jobs", "stop", "delete", "purge"),
    "firebase": verbs(CLOUD, "*:delete"),
    "wrangler": verbs(CLOUD, "delete"),
    "glab": Row(
        opts("-R: --repo="),
        pauses=(
            Pause("", check=checks.operation("deletes GitLab resources", "delete", "delete-*")),
        ),
        subs={
            "repo": Row(subs=subs("deletes a GitLab project", "delete")),
            "release": Row(subs=subs("deletes a GitLab release", "delete")),
            "api": Row(pauses=(Pause("", check=checks.http_method("X", "method")),)),
        },
    ),
    "tea": verbs("deletes a repository or its resources", "delete"),
    # `hub` is git with GitHub commands: `hub push -f` is `git push -f`.
    "hub": Row(
        pauses=(Pause("", check=checks.operation("deletes a GitHub repository", "delete", at=0)),),
        permute=False,
        runs=(Custom(runners.hub),),
    ),
    "bfg": always("rewrites the repository's history"),
    "git-filter-repo": always("rewrites the repository's history"),
    "pipenv": Row(subs=runs_sub("run")),
    "pm2": Row(subs=subs(STOPS, "delete del kill stop restart reload")),
    "supervisorctl": Row(subs=subs(STOPS, "stop restart shutdown remove")),
    # Every other verb starts, loads or changes jobs, which run outside the sandbox.
    "launchctl": Row(
        pauses=(
            Pause(
                "",
                check=checks.operation_not(
                    "starts or changes services, which run outside the sandbox",
                    "list print print-cache print-disabled print-token blame dumpstate "
                    "dumpjpcategory help version managerpid manageruid managername error "
                    "hostinfo resolveport getenv procinfo plist examine",
                    at=0,
                ),
            ),
        ),
        subs=subs(STOPS, "bootout unload kill remove stop"),
    ),
    "skill": always(SIGNAL),
    "userdel": always("deletes a user account"),
    "deluser": always("deletes a user account"),
    "groupdel": always("deletes a group"),
    "delgroup": always("deletes a group"),
    "kexec": always("loads or boots another kernel"),
    "terragrunt": Row(TERRAFORM.opts, subs={**TERRAFORM.subs, "run-all": Row(subs=TERRAFORM.subs)}),
    "cdktf": Row(subs=subs("destroys the stacks it deployed", "destroy")),
    "helmfile": Row(subs=subs("uninstalls the Helm releases it manages", "destroy delete")),
    "dropdb": always("deletes a database"),
    "mysqladmin": verbs("deletes a database or stops the server", "drop", "shutdown", "kill"),
    "mariadb-admin": verbs("deletes a database or stops the server", "drop", "shutdown", "kill"),
    "pg_dropcluster": always("deletes a PostgreSQL cluster and its data"),
    "dbmate": Row(subs=subs(DATABASE, "drop")),
    "sequelize": verbs(DATABASE, "db:drop"),
    "typeorm": verbs(DATABASE, "schema:drop"),
    "migrate": verbs(DATABASE, "drop"),
    "goose": Row(subs=subs(DATABASE, "reset")),
    "supabase": Row(
        subs={
            "db": Row(subs=subs(DATABASE, "reset")),
            "projects": Row(subs=subs(CLOUD, "delete")),
        }
    ),
    "dropuser": always("deletes a database role"),
    "redis-cli": Row(
        runners.REDIS_CLI,
        runs=(Custom(runners.redis_cli),),
        pauses=(
            Pause(
                "",
                check=checks.operation(
                    DATABASE, *map(_anycase, wordlist("flushall flushdb del unlink getdel")), at=0
                ),
            ),
            Pause("", check=checks.operation("stops the Redis server", _anycase("shutdown"), at=0)),
            # `CONFIG SET dir …` with `SAVE` writes files anywhere the server may.
            Pause(
                "",
                check=checks.operation(
                    "changes the Redis server's configuration",
                    _anycase("set"),
                    _anycase("rewrite"),
                    at=1,
                    after=_anycase("config"),
                ),
            ),
            Pause(REDIS_SCRIPT, when="eval"),
            Pause(
                "",
                check=checks.operation(
                    REDIS_SCRIPT, *map(_anycase, wordlist(_REDIS_SCRIPTS)), at=0
                ),
            ),
        ),
    ),
    "prisma": Row(
        subs={
            "migrate": Row(subs=subs(DATABASE, "reset")),
            "db": Row(
                subs={
                    "push": Row(
                        opts("--force-reset --accept-data-loss --schema= --skip-generate"),
                        pauses=(Pause(DATABASE, when="force-reset accept-data-loss"),),
                    )
                }
            ),
        }
    ),
    "rails": verbs(DATABASE, *_RAILS_DB),
    "rake": verbs(DATABASE, *_RAILS_DB),
    # Django's `manage.py` (also `python manage.py`), Laravel's `artisan` (also `php artisan`)
    "manage.py": verbs(DATABASE, "flush", "reset_db"),
    "artisan": verbs(DATABASE, "migrate:fresh", "migrate:reset", "migrate:refresh", "db:wipe"),
    "alembic": Row(
        opts("-c:n:x: --config= --name= --raiseerr -q --quiet"),
        subs={
            "downgrade": Row(opts("--sql --tag="), pauses=(Pause(DATABASE, operands=("base",)),))
        },
    ),
    "usermod": always("changes a user account"),
    "passwd": always("changes a password"),
    "chpasswd": always("changes passwords"),
    "rmmod": always("removes a kernel module"),
    "insmod": always("loads a kernel module"),
    "modprobe": always("loads or removes kernel modules"),
    "swapoff": always("turns swap space off"),
    "sysctl": Row(
        pauses=(
            Pause("changes kernel parameters", when="w write"),
            Pause("changes kernel parameters", operands=("*=*",)),
        )
    ),
    # services reached over D-Bus run outside the sandbox
    "busctl": Row(
        opts("-HM: --user --system --host= --machine= --no-pager --no-legend --quiet -q"),
        subs=subs(DBUS, "call set-property emit"),
    ),
    "gdbus": Row(subs=subs(DBUS, "call emit")),
    "dbus-send": always(DBUS),
    "qdbus": Row(pauses=(Pause("", check=checks.operation(DBUS, "*", at=2)),)),
    "gsettings": Row(subs=subs(SETTINGS, "set reset reset-recursively")),
    "dconf": Row(subs=subs(SETTINGS, "write reset load update compile")),
    "hostnamectl": verbs("changes the machine's name", "set-*"),
    "timedatectl": verbs("changes the system clock or time zone", "set-*"),
    "nmcli": verbs("changes network connections", "delete", "down", "off"),
}

_FIREWALL_LIST = Row(
    pauses=(
        Pause(
            "",
            check=checks.unless_only_reads(
                FIREWALL,
                "LSnvxh",
                "--list --list-rules --numeric --verbose --exact --line-numbers --help --version",
                "-t --table",
                operands=True,
            ),
        ),
    )
)

CONDA = _packages(
    "remove uninstall",
    env=Row(subs=subs("deletes a conda environment", "remove")),
    run=Row(
        opts("-np: --name= --prefix= --cwd= --no-capture-output --live-stream"),
        permute=False,
        runs=(Command(),),
    ),
)


# -- the table ------------------------------------------------------------------------------------

TABLE: dict[str, Row] = {
    **wrappers.WRAPPERS,
    # deletes, overwrites, file system
    "rm": Row(
        opts(
            "-dfirRvI --force --interactive[=] --one-file-system --no-preserve-root "
            "--preserve-root[=] --recursive --dir --verbose --help --version",
            exhaustive=True,
        ),
        pauses=(
            Pause(
                "deletes files and directories recursively",
                when="r R recursive",
                effect=R,
                targets="operands",
                may="delete recursively",
            ),
        ),
    ),
    "rimraf": Row(
        opts("-vG --glob --preserve-root --no-preserve-root --verbose"),
        pauses=(Pause("deletes files and directories recursively", effect=R, targets="operands"),),
    ),
    # the same from an npm package: `del-cli` (also installed as `del`)
    **dict.fromkeys(
        ("del-cli", "del"),
        Row(
            opts("-fd --force --dry-run --dot --verbose"),
            pauses=(
                Pause(
                    "deletes files and directories recursively",
                    unless="d dry-run",
                    effect=R,
                    targets="operands",
                ),
            ),
        ),
    ),
    # npm packages that kill processes: by port (`kill-port 3000`) or by name (`fkill node`)
    **dict.fromkeys(("kill-port", "fkill", "fkill-cli", "cross-port-killer"), always(SIGNAL)),
    "find": Row(pauses=(Pause("", check=checks.find_delete),), runs=(Custom(runners.find),)),
    "truncate": Row(
        opts("-cos: -r: --no-create --io-blocks --reference= --size="),
        pauses=(
            Pause("", check=checks.overwrite("cuts files to a new size, discarding their data")),
        ),
    ),
    "shred": Row(
        opts(
            "-n:s: -fuvxz --iterations= --random-source= --size= --remove[=] --verbose "
            "--exact --zero --force"
        ),
        pauses=(Pause("", check=checks.overwrite("overwrites files to destroy their data")),),
    ),
    "rsync": Row(
        opts(
            "-eBfTM: --rsh= --rsync-path= --filter= --exclude= --include= --exclude-from= "
            "--include-from= --files-from= --temp-dir= --compare-dest= --copy-dest= "
            "--link-dest= --block-size= --max-delete= --max-size= --min-size= --partial-dir= "
            "--backup-dir= --suffix= --chmod= --chown= --usermap= --groupmap= --timeout= "
            "--contimeout= --port= --sockopts= --out-format= --log-file= --log-file-format= "
            "--password-file= --bwlimit= --write-batch= --only-write-batch= --read-batch= "
            "--protocol= --iconv= --checksum-choice= --compress-choice= --compress-level= "
            "--skip-compress= --modify-window= --info= --debug= --stop-after= --stop-at= "
            "--remote-option= --address= --outbuf= --delete --del --delete-before "
            "--delete-during --delete-delay --delete-after --delete-excluded "
            "--delete-missing-args --remove-source-files --remove-sent-files --dry-run"
        ),
        pauses=(
            Pause(
                "deletes files at the destination that the source does not have",
                when="del delete delete-before delete-during delete-delay delete-after "
                "delete-excluded delete-missing-args",
                unless="n dry-run",
                may="delete files at the destination",
            ),
            Pause(
                "deletes the source files after copying them",
                when="remove-source-files remove-sent-files",
                unless="n dry-run",
            ),
        ),
        # `--rsync-path` is shell code the remote host runs (`sudo rsync`, `cd d && rsync`).
        runs=(Code("e rsh"), Code("rsync-path", elsewhere=True)),
    ),
    "chmod": Row(
        opts(
            "-cfvR --changes --silent --quiet --verbose --no-preserve-root --preserve-root "
            "--reference= --recursive"
        ),
        pauses=(Pause("", check=checks.owner("permissions")),),
    ),
    "chown": Row(
        opts(
            "-cfvhRHLP --changes --silent --quiet --verbose --dereference --no-dereference "
            "--from= --no-preserve-root --preserve-root --reference= --recursive"
        ),
        pauses=(Pause("", check=checks.owner("ownership")),),
    ),
    "chgrp": Row(
        opts(
            "-cfvhRHLP --changes --silent --quiet --verbose --dereference --no-dereference "
            "--no-preserve-root --preserve-root --reference= --recursive"
        ),
        pauses=(Pause("", check=checks.owner("the group")),),
    ),
    "zip": Row(
        opts("-bnOPstxZi: -m --move"),
        pauses=(Pause("deletes the files it adds to the archive", when="m move"),),
        runs=(Custom(interpreters.RUNNERS["zip"]),),
    ),
    "dd": Row(pauses=(Pause("", check=checks.raw_copy),)),
    "mkfs": always("creates a filesystem, erasing the device"),
    "mke2fs": always("creates a filesystem, erasing the device"),
    "mkswap": always("formats a device as swap, erasing it"),
    "wipefs": always(DISK),
    "sgdisk": always(DISK),
    "sfdisk": always("edits disk partitions"),
    "gdisk": always("edits disk partitions"),
    "fdisk": always("edits disk partitions"),
    "parted": always("edits disk partitions"),
    "blkdiscard": always("discards every block of a device, erasing it"),
    "mount": Row(
        pauses=(
            Pause(
                "",
                check=checks.unless_only_reads(
                    "changes mounted filesystems",
                    "lhvV",
                    "--help --version --show-labels",
                    "-t --types",
                ),
            ),
        )
    ),
    "umount": always("changes mounted filesystems"),
    # the machine, services, processes
    "shutdown": always("shuts the machine down"),
    "reboot": always("reboots the machine"),
    "poweroff": always("powers the machine off"),
    "halt": always("halts the machine"),
    "init": INIT,
    "telinit": INIT,
    "systemctl": SYSTEMCTL,
    "loginctl": LOGINCTL,
    "service": SERVICE_ROW,
    **dict.fromkeys(("iptables", "ip6tables", "iptables-legacy", "iptables-nft"), _FIREWALL_LIST),
    **dict.fromkeys(("iptables-restore", "ip6tables-restore", "iptables-apply"), always(FIREWALL)),
    "nft": Row(
        pauses=(
            Pause(
                "",
                check=checks.unless_only_reads(
                    FIREWALL,
                    "ansjyhvNSTtc",
                    "--handle --numeric --stateless --json --help --version --terse",
                    verbs="list describe",
                    operands=True,
                ),
            ),
        )
    ),
    "ufw": Row(
        pauses=(
            Pause(
                "",
                check=checks.unless_only_reads(
                    FIREWALL,
                    "",
                    "--help --version",
                    verbs="status show version app",
                    operands=True,
                ),
            ),
        )
    ),
    "firewall-cmd": Row(
        pauses=(
            Pause(
                "",
                check=checks.unless_only_reads(
                    FIREWALL,
                    "hVq",
                    "--help --version --quiet --state --list-* --get-* "
                    "--query-* --info-* --zone* --permanent",
                ),
            ),
        )
    ),
    "kill": Row(pauses=(Pause("", check=checks.signal(SIGNAL, "-l -L --list --table --help")),)),
    "killall": Row(
        pauses=(
            Pause(
                "",
                check=checks.signal(
                    "sends a signal to processes by name", "-l --list -V --version --help"
                ),
            ),
        )
    ),
    "pkill": Row(
        pauses=(
            Pause(
                "",
                check=checks.signal("sends a signal to processes by name", "-V --version --help"),
            ),
        )
    ),
    "xkill": always("kills the client of a window"),
    # interpreters of languages the checker does not read, given code as text
    **{
        name: Row(
            pauses=(Pause("", check=checks.unread_code(lang, options, prefixes=pre)),),
            runs=(Custom(runners.unread_input(lang)),),
            code=True,
        )
        for names, lang, options, pre in (
            (
                "pwsh powershell pwsh.exe powershell.exe",
                "PowerShell",
                "-c -e -ec /c",
                "-com -enc /com /enc",
            ),
            ("cmd.exe", "cmd.exe", "/c /k /r", ""),
            ("osascript", "AppleScript", "-e", ""),
            ("groovy", "Groovy", "-e", ""),
            ("scala scala-cli", "Scala", "-e --execute-script --execute-scala", ""),
            ("kotlin kotlinc", "Kotlin", "-e -expression", ""),
            ("elixir iex", "Elixir", "-e --eval", ""),
            ("erl", "Erlang", "-eval", ""),
            ("escript", "Erlang", "-e", ""),
            ("guile", "Scheme", "-c -e", ""),
            ("racket", "Racket", "-e --eval", ""),
            ("sbcl ecl clisp", "Lisp", "--eval -x -eval", ""),
            ("clojure clj bb", "Clojure", "-e --eval", ""),
            ("crystal", "Crystal", "eval", ""),
            ("nim", "Nim", "--eval", ""),
            ("nu nushell xonsh elvish", "shell", "-c --commands", ""),
            ("raku rakudo perl6", "Raku", "-e", ""),
            ("fennel janet hy", "Lisp", "-e --eval -c", ""),
            ("ocaml", "OCaml", "-e", ""),
            ("zx", "JavaScript (zx)", "-e --eval", ""),
            ("jshell", "Java", "", ""),
        )
        for name in names.split()
    },
    # servers and service supervisors stopped or signalled through their own tools
    "nginx": Row(
        opts("-s:c:g:p:e: -tTqvV?h"),
        pauses=(Pause("sends a signal to the running server", when="s"),),
    ),
    "pg_ctl": verbs(SERVICE, "stop", "restart", "kill"),
    "pg_ctlcluster": verbs(SERVICE, "stop", "restart"),
    "apachectl": verbs(SERVICE, "stop", "restart", "graceful", "graceful-stop"),
    "apache2ctl": verbs(SERVICE, "stop", "restart", "graceful", "graceful-stop"),
    "rc-service": SERVICE_ROW,
    "initctl": Row(subs=subs(SERVICE, "stop restart reload")),
    "sv": Row(
        opts("-w: -v"),
        pauses=(
            Pause(
                "",
                check=checks.operation(
                    SERVICE,
                    "down",
                    "stop",
                    "kill",
                    "term",
                    "hup",
                    "restart",
                    "force-*",
                    "shutdown",
                    "exit",
                    "d",
                    "k",
                    "t",
                    "h",
                    "x",
                    at=0,
                ),
            ),
        ),
    ),
    "s6-svc": Row(
        opts("-T: -abqhkti12pcyrodDuUxOwd"),
        pauses=(Pause(SIGNAL, when="a b q h k t i 1 2 p c y r d D x O"),),
    ),
    "uwsgi": Row(
        opts("--stop= --reload= --kill= --brutal-reload="),
        pauses=(Pause(SIGNAL, when="stop reload kill brutal-reload"),),
    ),
    "killall5": always("sends a signal to every process"),
    "fuser": Row(
        opts(
            "-n: -aikmMsuvw46 --all --interactive --kill --mount --ismountpoint --silent "
            "--user --verbose --writeonly --namespace="
        ),
        pauses=(
            Pause(
                "kills the processes using the named files or ports",
                when="k kill",
                may="kill processes",
            ),
        ),
    ),
    "crontab": Row(
        opts("-u: -T -lreis", exhaustive=True),
        pauses=(
            Pause("removes the user's scheduled jobs", when="r"),
            Pause(
                "replaces the user's scheduled jobs, which run outside the sandbox", unless="l r T"
            ),
        ),
    ),
    # packages and registries
    "npm": NPM,
    "pnpm": PNPM,
    "yarn": YARN,
    "bun": BUN,
    "pip": PIP,
    "pip3": PIP,
    "uv": UV,
    "uvx": Row(_UV_TOOL_RUN, permute=False, runs=(Command(package=True),)),
    "poetry": Row(
        opts("-CP: -qvn --directory= --project= --quiet --verbose --no-interaction"),
        subs={
            **subs("publishes a package to PyPI", "publish", dry_run=True),
            **runs_sub("run"),
            "cache": Row(subs=subs(CACHE, "clear")),
        },
    ),
    "hatch": Row(
        opts("-ep: --env= --project= --data-dir= --cache-dir= --config= -v -q"),
        subs={**subs("publishes packages to PyPI", "publish"), **runs_sub("run")},
    ),
    "flit": Row(subs=subs("publishes a package to PyPI", "publish")),
    # Rush monorepos: `rush publish` only bumps versions unless `--publish` is given.
    "rush": Row(
        opts("-d -q --debug --quiet"),
        subs={
            "publish": Row(
                opts(
                    "-b:r:n:t:v:c: -apf --apply --publish --target-branch= --registry= "
                    "--npm-auth-token= --tag= --version-policy= --commit= --set-access-level= "
                    "--release-folder= --prerelease-name= --suffix= --add-commit-details "
                    "--regenerate-changelogs --pack --include-all --partial-prerelease --force "
                    "--apply-git-tags-on-pack --ignore-git-hooks"
                ),
                pauses=(Pause("publishes packages to the registry", when="p publish"),),
            )
        },
    ),
    "pdm": Row(
        opts("-p: --project= -v -q"),
        subs={**subs("publishes a package to PyPI", "publish"), **runs_sub("run")},
    ),
    "lerna": Row(
        subs={
            **subs("publishes packages to the registry", "publish"),
            # `lerna exec [options] -- CMD`: CMD in every package.
            "exec": wrapper(
                "--scope= --ignore= --since[=] --concurrency= --profile-location= --stream "
                "--parallel --no-bail --bail --no-prefix --profile --include-dependents "
                "--include-dependencies --no-private --exclude-dependents"
            ),
        }
    ),
    # `corepack npm|pnpm|yarn[@VERSION] …` runs that package manager.
    "corepack": custom(runners.corepack),
    "twine": Row(subs=subs("uploads packages to PyPI", "upload")),
    # more registries: publishing and deleting published packages
    **dict.fromkeys(
        ("mvn", "mvnw"), verbs(PUBLISH, "deploy", "*:deploy", "*:deploy-file", "release:perform")
    ),
    **dict.fromkeys(
        ("gradle", "gradlew"),
        verbs(
            PUBLISH,
            *(
                f"{s}{t}"
                for s in ("", "*:")
                for t in (
                    "publish",
                    "publishPlugins",
                    "publishTo[!M]*",
                    "publishToMaven[!L]*",
                    "publishAllPublicationsTo*",
                    "uploadArchives",
                    "closeAndReleaseRepository",
                )
            ),
        ),
    ),
    "dotnet": Row(
        subs={
            "nuget": Row(subs=subs(PUBLISH, "push delete")),
            "script": Row(subs=subs("runs C# code the checker cannot read", "eval")),
        }
    ),
    "nuget": Row(subs=subs(PUBLISH, "push delete")),
    "jsr": Row(subs=subs(PUBLISH, "publish", dry_run=True)),
    **dict.fromkeys(("vsce", "ovsx"), Row(subs=subs(PUBLISH, "publish unpublish"))),
    "snapcraft": Row(subs=subs(PUBLISH, "upload push release close promote")),
    "mix": Row(
        subs={
            **subs(PUBLISH, "hex.publish hex.retire hex.owner"),
            **subs(DATABASE, "ecto.drop ecto.reset"),
        }
    ),
    "pub": Row(subs=subs(PUBLISH, "publish", dry_run=True)),
    **dict.fromkeys(
        ("dart", "flutter"), Row(subs={"pub": Row(subs=subs(PUBLISH, "publish", dry_run=True))})
    ),
    "pod": Row(subs={"trunk": Row(subs=subs(PUBLISH, "push delete deprecate"))}),
    "crane": Row(subs=subs("deletes an image from its registry", "delete")),
    "skopeo": Row(subs=subs("deletes an image from its registry", "delete")),
    "regctl": Row(
        subs={
            k: Row(subs=subs("deletes from a registry", "delete rm"))
            for k in ("tag", "image", "manifest", "blob", "repo")
        }
    ),
    "changeset": Row(subs=subs(PUBLISH, "publish")),
    "semantic-release": Row(pauses=(Pause(PUBLISH, dry_run=True),)),
    "np": Row(pauses=(Pause(PUBLISH, unless="preview"),)),
    "anaconda": Row(subs=subs(PUBLISH, "upload remove")),
    "oras": Row(subs=subs(PUBLISH, "push delete")),
    "swift": Row(subs={"package-registry": Row(subs=subs(PUBLISH, "publish"))}),
    **dict.fromkeys(("jf", "jfrog"), verbs("deletes from a registry", "del", "delete")),
    "influx": verbs(DATABASE, "delete"),
    "flatpak": _packages("uninstall remove"),
    "gem": Row(
        subs={
            **subs(UNINSTALL, "uninstall"),
            **subs("publishes a gem to RubyGems", "push"),
            **subs("removes a published gem version from RubyGems", "yank"),
            "owner": Row(
                opts("-a:r: --add= --remove= -k: --key= --otp= --host="),
                pauses=(Pause(REGISTRY, when="a r add remove"),),
            ),
        }
    ),
    "cargo": CARGO,
    "pipx": Row(
        opts("--verbose --quiet -v -q"),
        subs={
            **subs(UNINSTALL, "uninstall uninstall-all"),
            "run": Row(
                opts("--spec= --python= --index-url= --pip-args= --no-cache --verbose"),
                permute=False,
                runs=(Command(package=True),),
            ),
        },
    ),
    "apt": _apt(),
    "apt-get": _apt(),
    "dnf": _packages(
        "remove erase autoremove",
        "-cx: --setopt= --installroot= --releasever= "
        "--enablerepo= --disablerepo= -y -q --assumeyes",
    ),
    "yum": _packages(
        "remove erase autoremove",
        "-cx: --setopt= --installroot= --releasever= "
        "--enablerepo= --disablerepo= -y -q --assumeyes",
    ),
    "brew": _packages(
        "uninstall remove rm",
        services=Row(
            pauses=(
                Pause(
                    "",
                    check=checks.operation_not(
                        "starts, stops or restarts services, which run outside the sandbox",
                        "list info",
                        at=0,
                    ),
                ),
            )
        ),
    ),
    "snap": _packages("remove"),
    **dict.fromkeys(("conda", "mamba", "micromamba"), CONDA),
    "pacman": Row(
        opts(
            "-brt: --dbpath= --root= --config= --cachedir= --arch= --logfile= --gpgdir= "
            "--hookdir= --color= --assume-installed= --overwrite= --ignore= --ignoregroup= "
            "--print-format= --remove --sync --query --upgrade"
        ),
        pauses=(Pause(UNINSTALL, when="R remove", may="remove packages"),),
    ),
    # containers and clouds
    "docker": _docker({}),
    "podman": _docker(
        {
            "system": Row(
                subs=subs("deletes unused containers, images, networks and build cache", "prune")
                | subs("deletes every container, image and volume", "reset")
            ),
            "pod": Row(
                subs={**subs("deletes pods and their containers", "rm prune"), "kill": _KILL}
            ),
            "machine": Row(
                subs={
                    **subs(
                        "deletes the virtual machine with its containers, images and volumes",
                        "rm reset",
                    ),
                    # `ssh [NAME] [CMD…]`: whether the first word names a machine is only known
                    # at run time, so both readings are judged.
                    "ssh": Row(
                        opts("--username="),
                        permute=False,
                        runs=(Shell(elsewhere=True), Shell(skip=1, elsewhere=True)),
                    ),
                }
            ),
        },
        " --connection= --url= --identity= --root= --runroot= --remote --storage-driver=",
    ),
    "docker-compose": COMPOSE,
    "nerdctl": _docker({}),
    **MORE,
    "tmux": Row(permute=False, runs=(Custom(runners.tmux),), code=True),
    "kubectl": KUBECTL,
    "oc": KUBECTL,
    "helm": HELM,
    "go": Row(
        permute=False,
        code=True,
        runs=(Custom(interpreters.RUNNERS["go"]),),
        subs={
            "clean": Row(
                opts("-i -n -r -x -cache -testcache -modcache -fuzzcache", go=True),
                pauses=(Pause(CACHE, when="cache modcache fuzzcache", unless="n"),),
            )
        },
    ),
    "terraform": TERRAFORM,
    "tofu": TERRAFORM,
    "aws": AWS,
    "gsutil": Row(
        opts("-o:u:h: -mqD"),
        subs={
            **subs("deletes objects from Cloud Storage", "rm"),
            **subs("deletes a Cloud Storage bucket", "rb"),
            **subs("moves objects, deleting the source", "mv"),
            "rsync": Row(
                opts("-ajx: -cCdeinpPrRUu"),
                pauses=(
                    Pause(
                        "deletes files at the destination that the source does not have",
                        when="d",
                        unless="n",
                    ),
                ),
            ),
        },
    ),
    "gcloud": GCLOUD,
    # `az vm run-command invoke --scripts CMD` runs CMD on the machine.
    "az": Row(
        opts("--scripts=", abbrev=False),
        pauses=CLOUD_DELETE.pauses,
        runs=(Code("scripts", elsewhere=True),),
    ),
    "gh": GH,
    **HTTP_DELETE_ROW,
    # version control
    "git": GIT,
}

_LOADER = re.compile(r"ld(?:-linux[\w.-]*|-musl[\w.-]*)?\.so(?:\.\d+)*")
_VERSIONED = re.compile(r"([a-z][a-z-]*?)(\d+)?(?:\.\d+)*")


@lru_cache(maxsize=4096)
def lookup_names(name: str) -> tuple[str, ...]:
    """Rule and row names to try for a command name, most specific first: ``mkfs.ext4`` →
    ``mkfs``, ``pip3.12`` → ``pip3``, ``pip``; ``python3.12`` → ``python3``, ``python``."""
    names = [name]
    if name.startswith("mkfs."):
        names.append("mkfs")
    m = _VERSIONED.fullmatch(name)
    if m and m.group(0) != m.group(1):
        if m.group(2) and f"{m.group(1)}{m.group(2)}" != name:
            names.append(m.group(1) + m.group(2))
        names.append(m.group(1))
    return tuple(names)


@lru_cache(maxsize=4096)
def row_for(name: str) -> Row | None:
    """The table's row for a command name (a version suffix and ``mkfs.*`` fall back)."""
    for key in lookup_names(name):
        row = TABLE.get(key)
        if row is not None:
            return row
    if _LOADER.fullmatch(name):
        return TABLE["ld.so"]  # the dynamic loader runs the program named after its options
    return None
