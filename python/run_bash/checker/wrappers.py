"""Rows of the command table for commands that run other commands or code. Pure.

Wrappers that run the rest of their line (``sudo``, ``timeout``, ``dotenv --``, …), shells and
interpreters, task runners, commands whose options hold commands (``tar --to-command``,
``ssh -o ProxyCommand=``) and runners written in code (:mod:`.runners`, :mod:`.builtins`,
:mod:`.tasks`, :mod:`.interpreters`). :mod:`.table` merges them with the rows of the pause rules.
"""

from __future__ import annotations

from run_bash.checker import builtins, interpreters, runners, tasks
from run_bash.checker.model import SHELLS
from run_bash.checker.options import opts
from run_bash.checker.reading import (
    Code,
    Command,
    Custom,
    Each,
    Pause,
    Row,
    Shell,
    custom,
    runs_sub,
    subs,
    wrapper,
)
from run_bash.checker.words import wordlist

SIGNAL = "sends a signal to processes"
# Words a runner fills in (`{}` a file name, `{name}` a parameter).
PLACEHOLDERS = (r"\{\w*\}",)
# Interpreters whose one-liners may delete files or send signals: their rows judge that code.
CODE = frozenset(
    wordlist(
        "python pypy ipython ipython3 node nodejs tsx ts-node ts-node-esm deno bun ruby perl php "
        "lua luajit R Rscript julia go pytest py.test jest "
        "vitest mocha expect tclsh wish emacs emacsclient tmux sqlite3 psql mysql mariadb duckdb "
        "cqlsh clickhouse-client mongosh mongo mycli litecli pgcli usql sqlcmd snowsql trino "
        "beeline hive spark-sql cockroach bq"
    )
)
SSH = "-BbcDEeFIiJLlmOoPpQRSWw: -46AaCfGgKkMNnqsTtVvXxYy"
SSH_FILE = Custom(runners.ssh_config)
SSH_CODE = Code(
    "o", keys=("proxycommand", "localcommand", "knownhostscommand", "remotecommand"), sep="= "
)


WRAPPERS: dict[str, Row] = {
    # wrappers: the rest of the line is a command
    "sudo": wrapper(
        "-aCcDgpRrTtUuh: -AbEeHiKklnPSsVv --auth-type= --chdir= --chroot= --close-from= "
        "--group= --host= --login-class= --other-user= --prompt= --role= --type= "
        "--command-timeout= --user= --askpass --background --edit --help --list "
        "--non-interactive --preserve-groups --remove-timestamp --reset-timestamp --shell "
        "--stdin --validate --version --login --set-home --bell --preserve-env[=]",
        env=True,
        shell="s i shell login",
        quoted=True,
        unless="e l v V K edit list validate version",
        chdir="D chdir",
    ),
    "doas": wrapper("-uC: -nsL", unless="C L"),
    "run0": wrapper(
        "-ugD: --user= --group= --nice= --chdir= --setenv= --property= "
        "--description= --slice= --unit= --machine= --background= --pty "
        "--no-ask-password --slice-inherit",
        chdir="D chdir",
    ),
    "pkexec": wrapper("--user= --disable-internal-agent --keep-cwd --version --help"),
    "nohup": wrapper(),
    "nice": wrapper("-n: -0123456789 --adjustment= --help --version"),
    "timeout": wrapper(
        "-sk: -v --signal= --kill-after= --preserve-status --foreground --verbose", skip=1
    ),
    "time": wrapper("-fo: -apqv --format= --output= --append --portability --quiet --verbose"),
    "command": Row(opts("-pvV", exhaustive=True), permute=False, runs=(Command(unless="v V"),)),
    "builtin": wrapper(),
    "stdbuf": wrapper("-ioe: --input= --output= --error= --help --version"),
    "ionice": wrapper(
        "-cnpPu: -th --class= --classdata= --pid= --pgid= --uid= --ignore --help --version",
        unless="p P u pid pgid uid",
    ),
    "setsid": wrapper("-cfw --ctty --fork --wait --help --version"),
    "chroot": wrapper(
        "--userspec= --groups= --skip-chdir --help --version", skip=1, elsewhere=True
    ),
    "chrt": wrapper(
        "-TPD: -abdfioerRmpvhV --sched-runtime= --sched-period= --sched-deadline= "
        "--all-tasks --batch --deadline --fifo --idle --other --rr --ext "
        "--reset-on-fork --max --pid --verbose --help --version",
        skip=1,
        unless="p pid m max h help V version",
    ),
    "taskset": wrapper(
        "-apcfhV --all-tasks --pid --cpu-list --help --version", skip=1, unless="p pid"
    ),
    "strace": wrapper(
        "-eoOpPsSuaXbEIU: -cCdDfFhiknqrtTvVwxyYzZ --trace= --signal= --status= "
        "--abbrev= --verbose= --raw= --read= --write= --fault= --inject= --kvm= "
        "--output= --attach= --trace-path= --string-limit= --summary-sort-by= "
        "--user= --columns= --env= --decode-fds= --seccomp-bpf= "
        "--summary-columns= --detach-on= --interruptible= --const-print-style= "
        "--secontext= --quiet= --timestamps= --trace-fds= --follow-forks "
        "--output-separately --summary --summary-only --summary-wall-clock "
        "--syscall-times --syscall-number --decode-pids --absolute-timestamps "
        "--relative-timestamps --no-abbrev --debug --help --version "
        "--instruction-pointer --stack-trace --successful-only --failed-only",
        unless="p attach h help V version",
    ),
    "ltrace": wrapper(
        "-aADeFlnopsuwx: -bcCfhiLrStTV --align= --demangle= --indent= "
        "--library= --output= --help --version",
        unless="p",
    ),
    "fakeroot": wrapper(
        "-lisb: -uhv --lib= --faked= --fd-base= --unknown-is-real --help --version", stdin=True
    ),
    "unshare": wrapper(
        "-RwSGl: -fuimnpUCTrch --map-user= --map-group= --map-users= "
        "--map-groups= --propagation= --setgroups= --root= --wd= --setuid= "
        "--setgid= --monotonic= --boottime= --load-interp= --fork "
        "--map-root-user --map-current-user --map-auto --keep-caps --help "
        "--version --mount[=] --uts[=] --ipc[=] --net[=] --pid[=] --user[=] "
        "--cgroup[=] --time[=] --kill-child[=] --mount-proc[=] "
        "--mount-binfmt[=]",
        stdin=True,
        chdir="w wd",
    ),
    "nsenter": wrapper(
        "-tSGW: -muinpUCTrw:: -aeFZch --target= --setuid= --setgid= --wdns= "
        "--all --env --no-fork --follow-context --join-cgroup "
        "--preserve-credentials --keep-caps --help --version --mount[=] "
        "--uts[=] --ipc[=] --net[=] --pid[=] --user[=] --cgroup[=] --time[=] "
        "--root[=] --wd[=]",
        stdin=True,
        elsewhere=True,
    ),
    # Without `--scope` the command is started by the service manager, outside the sandbox (a
    # service, or a timer with `--on-*`); it is judged as a command too.
    "systemd-run": Row(
        opts(
            "-upEHM: -dtPqGrSh --unit= --property= --description= --slice= "
            "--setenv= --working-directory= --uid= --gid= --nice= "
            "--service-type= --host= --machine= --on-active= --on-boot= "
            "--on-startup= --on-unit-active= --on-unit-inactive= "
            "--on-calendar= --on-clock-change= --on-timezone-change= "
            "--path-property= --socket-property= --timer-property= --json= "
            "--expand-environment= --same-dir --pty --pipe --quiet --collect "
            "--wait --shell --user --system --scope --remain-after-exit "
            "--send-sighup --no-block --no-ask-password --slice-inherit --help "
            "--version"
        ),
        permute=False,
        runs=(Command(unless="S shell", chdir="working-directory"),),
        pauses=(
            Pause(
                "starts a service of the service manager, which runs outside the sandbox",
                unless="scope h help version",
            ),
        ),
    ),
    "systemd-inhibit": wrapper(
        "--what= --who= --why= --mode= --list --no-pager --no-legend --help --version",
        unless="list",
    ),
    "setpriv": wrapper(
        "-d --reuid= --regid= --groups= --inh-caps= --ambient-caps= "
        "--bounding-set= --securebits= --pdeathsig= --selinux-label= "
        "--apparmor-profile= --landlock-access= --landlock-rule= --ruid= "
        "--euid= --rgid= --egid= --dump --clear-groups --keep-groups "
        "--init-groups --nnp --no-new-privs --reset-env --help --version"
    ),
    "gosu": wrapper(skip=1),
    "su-exec": wrapper(skip=1),
    "setuidgid": wrapper(skip=1),
    "envuidgid": wrapper(skip=1),
    "s6-setuidgid": wrapper(skip=1),
    "envdir": wrapper(skip=1),
    "s6-envdir": wrapper(skip=1),
    "chpst": wrapper("-uUbenlLmoptfcrd: -vP012"),
    "softlimit": wrapper("-mdsloapfcrt:"),
    "dumb-init": wrapper("-r: -cvVh --rewrite= --single-child --verbose"),
    "tini": wrapper("-pe: -hsvwgl"),
    "eatmydata": wrapper(),
    "catchsegv": wrapper(),
    "unbuffer": wrapper(),
    "xvfb-run": wrapper(
        "-efnpsw: -alh --error-file= --auth-file= --server-num= "
        "--xauth-protocol= --server-args= --wait= --auto-servernum "
        "--listen-tcp --help"
    ),
    "dbus-run-session": wrapper("--config-file= --dbus-daemon= --help"),
    "dbus-launch": wrapper(
        "--config-file= --autolaunch= --sh-syntax --csh-syntax "
        "--exit-with-session --exit-with-x11 --binary-syntax "
        "--close-stderr --version --help"
    ),
    "ssh-agent": wrapper("-aEPtO: -cDdsk"),
    "valgrind": Row(opts("-vqhd", exhaustive=True), permute=False, runs=(Command(),)),
    "prlimit": wrapper(
        "-po: -cdefilmnqrstuvxy:: -hV --pid= --output= --noheadings --raw "
        "--verbose --help --version --as[=] --core[=] --cpu[=] --data[=] "
        "--fsize[=] --locks[=] --memlock[=] --msgqueue[=] --nice[=] "
        "--nofile[=] --nproc[=] --rss[=] --rtprio[=] --rttime[=] "
        "--sigpending[=] --stack[=]",
        unless="p pid",
    ),
    "numactl": wrapper(
        "-imNCpP: -lsHaVh --interleave= --membind= --cpunodebind= "
        "--physcpubind= --preferred= --preferred-many= "
        "--weighted-interleave= --localalloc --show --hardware --all "
        "--balancing --huge --length --offset --shm --strict --touch",
        unless="s show H hardware",
    ),
    "cgexec": wrapper("-g: -rh --sticky"),
    "firejail": Row(opts(exhaustive=True), permute=False, runs=(Command(),)),
    "flatpak-spawn": wrapper(
        "--forward-fd= --env= --unset-env= --directory= --app-path= "
        "--usr-path= --sandbox-expose= --sandbox-expose-ro= "
        "--sandbox-flag= --host --watch-bus --clear-env --latest-version "
        "--sandbox --no-network --expose-pids --share-pids --verbose "
        "--help",
        chdir="directory",
    ),
    "distrobox-host-exec": wrapper(),
    "host-spawn": wrapper(),
    "toolbox": Row(subs=runs_sub("run", "-cdr: --container= --distro= --release=")),
    "faketime": wrapper("-m: -f --exclude-monotonic=", skip=1),
    "chronic": wrapper("-ev"),
    "ifne": wrapper("-n"),
    "nocache": wrapper("-n:"),
    "rlwrap": Row(
        opts("-abcCDefFgHiIlmnNoOpPqrRsStTvwWz:", exhaustive=True), permute=False, runs=(Command(),)
    ),
    "torsocks": wrapper("-uPaidh: --user= --pass= --address= --port= --isolate"),
    "proxychains": wrapper("-f: -q"),
    "proxychains4": wrapper("-f: -q"),
    "lckdo": wrapper("-qw", skip=1),
    "proot": wrapper("-rbwqkvimRS: -0Vh", elsewhere=True),
    "entr": wrapper("-acdnprsz", shell="s"),
    "cross-env": wrapper(env=True),
    "env-cmd": wrapper(
        "-fre: --file= --rc-file= --environments= --fallback --no-override "
        "--use-shell --expand-envs --silent --verbose",
        shell="use-shell",
    ),
    "dotenv": Row(
        opts("-efvp: -c:: --file= --quote= --export= --debug --quiet --no-expand --override"),
        subs={"run": wrapper("--override --no-override")},
        runs=(Command(unless="p", dashdash=True),),
    ),
    "dotenvx": Row(
        subs={
            "run": wrapper(
                "-fe: --env-file= --env= --overload --strict --convention= --quiet --verbose --debug "
                "--log-level= --ignore= --ops-off",
                dashdash=True,
            )
        }
    ),
    "op": Row(
        opts(
            "--account= --cache --config= --encoding= --format= --iso-timestamps --session= "
            "--debug --no-color"
        ),
        subs={
            "run": wrapper("--env-file= --no-masking", dashdash=True),
            **dict.fromkeys(
                ("item", "document", "vault", "user", "connect"),
                Row(subs=subs("deletes 1Password data", "delete remove")),
            ),
        },
    ),
    "aws-vault": Row(
        opts(
            "--backend= --keychain= --debug --prompt= --pass-dir= --pass-cmd= --pass-prefix= "
            "--file-dir="
        ),
        subs={
            "exec": wrapper(
                "-dt: -nj --duration= --mfa-token= --region= --no-session "
                "--json --server --ec2-server --ecs-server --lazy --stdout",
                skip=1,
                dashdash=True,
                stdin=True,
            )
        },
    ),
    "sshpass": wrapper("-fdpPe: -vhV"),
    "daemonize": wrapper("-aceoplEu: -v", chdir="c"),
    "retry": wrapper(dashdash=True),
    "schroot": wrapper(
        "-cudn: -pv --chroot= --user= --directory= --session-name= --option= "
        "--preserve-environment --automatic-session --begin-session "
        "--run-session --end-session",
        dashdash=True,
        elsewhere=True,
    ),
    "ld.so": Row(
        opts(
            "--library-path= --preload= --argv0= --audit= --glibc-hwcaps-prepend= "
            "--glibc-hwcaps-mask= --inhibit-cache --inhibit-rpath --verify --list "
            "--list-tunables --list-diagnostics --help"
        ),
        permute=False,
        runs=(Command(unless="list verify list-tunables list-diagnostics help"),),
    ),
    # runners of other kinds
    "watch": Row(
        opts(
            "-nqs: -bcCdegprtwx --interval= --equexit= --shotsdir= --exec --beep --color "
            "--no-color --errexit --chgexit --no-title --no-wrap --precise --no-rerun --help "
            "--version --differences[=]"
        ),
        permute=False,
        runs=(Shell(argv="x exec"),),
    ),
    "script": Row(
        opts(
            "-EIOBTmc: -t:: -aefqhV --echo= --log-in= --log-out= --log-io= --log-timing= "
            "--logging-format= --command= --append --return --flush --force --quiet --help "
            "--version --timing[=]"
        ),
        runs=(Code("c command"),),
    ),
    "nix-shell": Row(
        opts(
            "-AIE: -p --run= --command= --arg= --argstr= --attr= --pure --keep= --packages --expr"
        ),
        runs=(Code("run command"),),
    ),
    "npx": Row(
        opts(
            "-pcw: -yqn --package= --call= --shell= --workspace= --prefix= --registry= "
            "--cache= --userconfig= --loglevel= --yes --no --quiet --no-install "
            "--ignore-existing --include-workspace-root --workspaces --silent"
        ),
        permute=False,
        runs=(Code("c call"), Command(package=True)),
    ),
    "bunx": wrapper("-p: --package= --bun --silent", package=True),
    "pnpx": wrapper("-p: --package=", package=True),
    "bundle": Row(subs=runs_sub("exec")),
    "asdf": Row(subs=runs_sub("exec")),
    "direnv": Row(subs=runs_sub("exec", skip=1)),
    "mise": Row(subs={name: wrapper(dashdash=True) for name in ("exec", "x")}),
    "pee": Row(runs=(Each(),)),
    "make": custom(tasks.make),
    "gmake": custom(tasks.make),
    "just": custom(tasks.just),
    "task": custom(tasks.task),
    **{
        name: custom(fn)
        for name, fn in (
            ("env", runners.env),
            ("exec", runners.exec_),
            ("eval", runners.eval_),
            ("source", runners.source),
            (".", runners.source),
            ("trap", runners.trap),
            ("fd", runners.fd),
            ("fdfind", runners.fd),
            ("xargs", runners.xargs),
            ("parallel", runners.parallel),
            ("sem", runners.sem),
            ("flock", runners.flock),
            ("su", runners.su),
            ("runuser", runners.runuser),
            ("busybox", runners.busybox),
            ("toybox", runners.busybox),
            ("coreutils", runners.coreutils),
            ("nix", runners.nix),
            ("sg", runners.sg),
            ("bwrap", runners.bwrap),
            ("bind", runners.bind),
        )
    },
    **{
        name: Row(permute=False, runs=(Custom(fn),), code=True)
        for name, fn in (("screen", runners.screen), ("at", runners.at), ("batch", runners.at))
    },
    **{name: custom(fn) for name, fn in builtins.BUILTINS.items()},
    **dict.fromkeys(SHELLS, custom(runners.shell)),
    **{
        name: Row(permute=False, runs=(Custom(fn),), code=name in CODE)
        for name, fn in interpreters.RUNNERS.items()
        if name != "bun"
    },
    # options and variables that hold commands
    "ssh": Row(
        opts(SSH),
        permute=False,
        runs=(SSH_CODE, SSH_FILE, Custom(runners.remote_shell(opts(SSH), SSH_CODE))),
    ),
    "autossh": Row(
        opts("-M: " + SSH),
        permute=False,
        runs=(SSH_CODE, SSH_FILE, Custom(runners.remote_shell(opts("-M: " + SSH), SSH_CODE))),
    ),
    "scp": Row(opts("-cDFiJloPSX: -346ABCOpqRrTv"), runs=(SSH_CODE, SSH_FILE, Code("S"))),
    "sftp": Row(opts("-BbcDFiJlnoPRsSX: -46AaCfNpqrv"), runs=(SSH_CODE, SSH_FILE, Code("S"))),
    "sshfs": Row(opts("-opC: -fsdV"), runs=(Code("o", keys=("ssh_command",)),)),
    "mosh": Row(
        opts("-p: --ssh= --port= --predict= --server= --client= -4 -6 --local"),
        permute=False,
        runs=(Code("ssh"), Shell(skip=1, elsewhere=True)),
    ),
    "tar": Row(
        opts(
            "-fCITXbFgKLNVH: --file= --directory= --use-compress-program= --files-from= "
            "--exclude-from= --blocking-factor= --info-script= --new-volume-script= "
            "--listed-incremental= --starting-file= --tape-length= --newer= --after-date= "
            "--newer-mtime= --label= --format= --to-command= --checkpoint-action= "
            "--rsh-command= --rmt-command= --exclude= --owner= --group= --mode= --mtime= "
            "--transform= --xform= --index-file= --volno-file= --record-size= "
            "--sparse-version= --strip-components= --suffix= --quoting-style= --atime-preserve[=] "
            "--backup[=] --checkpoint[=] --occurrence[=] --acls --selinux --xattrs "
            "--remove-files -cxtrudAzZjJaOvkmpPsSWhiGM"
        ),
        pauses=(Pause("deletes the files it adds to the archive", when="remove-files"),),
        runs=(
            Code(
                "to-command use-compress-program I info-script new-volume-script F "
                "rsh-command rmt-command"
            ),
            Code("checkpoint-action", keys=("exec",)),
        ),
    ),
    "sort": Row(
        opts(
            "-kotST: --compress-program= --key= --output= --field-separator= "
            "--temporary-directory= --buffer-size= --parallel= --files0-from= "
            "--random-source= --sort="
        ),
        runs=(Code("compress-program"),),
    ),
    "man": Row(
        opts(
            "-PHCMLmSsepRE: --pager= --html[=] --config-file= --manpath= --locale= "
            "--systems= --sections= --extension= --preprocessor= --encoding="
        ),
        runs=(Code("P pager H html"),),
    ),
    # more runners of commands
    "watchexec": Row(
        opts(
            "-efwWidsEj: --exts= --filter= --watch= --watch-non-recursive= --ignore= "
            "--debounce= --delay-run= --signal= --stop-signal= --stop-timeout= --shell= "
            "--env= --workdir= --project-origin= --filter-file= --ignore-file= --fs-events= "
            "--poll[=] --on-busy-update= --emit-events-to= --color= --wrap-process= "
            "--log-file[=] --filter-prog= -crpnNqvo --clear --restart --postpone --notify "
            "--quiet --no-vcs-ignore --no-project-ignore --no-global-ignore "
            "--no-default-ignore --no-discover-ignore --ignore-nothing --no-meta "
            "--print-events --bell --timings --only-emit-events --manual"
        ),
        permute=False,
        runs=(Shell(),),
    ),
    "nodemon": Row(
        opts(
            "-xweidP: --exec= --watch= --ext= --ignore= --delay= --signal= "
            "--config= --cwd= --polling-interval= -VqLCI --verbose --quiet "
            "--legacy-watch --on-change-only --no-stdin --spawn --dump"
        ),
        runs=(Code("x exec"),),
    ),
    "hyperfine": Row(
        opts(
            "-wmMrspcPDLSuonN: --warmup= --min-runs= --max-runs= --runs= --setup= --prepare= "
            "--conclude= --cleanup= --parameter-scan= --parameter-step-size= "
            "--parameter-list= --shell= --style= --sort= --time-unit= --export-asciidoc= "
            "--export-csv= --export-json= --export-markdown= --export-orgmode= --output= "
            "--input= --command-name= --reference= -i --ignore-failure --show-output"
        ),
        runs=(
            Each(PLACEHOLDERS),
            Code("p prepare c cleanup s setup conclude reference", placeholders=PLACEHOLDERS),
        ),
    ),
    "pueue": Row(
        opts("-c: -p: --config= --profile= -v --verbose --color="),
        subs={
            "add": Row(
                opts(
                    "-wdgaol: -eisp --working-directory= --delay= --group= --after= "
                    "--priority= --label= --escape --immediate --stashed "
                    "--print-task-id --follow"
                ),
                permute=False,
                runs=(Shell(),),
            ),
            **subs("kills the tasks' processes", "kill"),
            **subs("kills every task and forgets them", "reset"),
        },
    ),
    "start-stop-daemon": Row(
        runners._SSD,
        pauses=(Pause(SIGNAL + " (`--stop`)", when="K stop"),),
        runs=(Custom(runners.start_stop_daemon),),
    ),
    "coverage": Row(subs={"run": custom(runners.coverage_run)}),
    "perf": Row(
        subs={
            name: wrapper(
                "-eoptCcFmGgjr: -aqvs --event= --output= --pid= --tid= "
                "--cpu= --count= --freq= --mmap-pages= --cgroup= "
                "--call-graph= --all-cpus --quiet --verbose",
                unless="p pid t tid",
            )
            for name in ("record", "stat", "trace")
        }
    ),
    "rr": Row(subs={"record": wrapper("-bcMnp: --bind-to-cpu= --env= -h -n", dashdash=True)}),
    "heaptrack": wrapper(
        "-po: --pid= --output= --record-only --use-inject --use-preload --raw --analyze -a",
        unless="p pid a analyze",
    ),
    "py-spy": Row(
        subs={
            name: wrapper(
                "-oprfdnsg: --output= --pid= --rate= --format= "
                "--duration= --subprocesses --native --gil --idle "
                "--nonblocking",
                dashdash=True,
                unless="p pid",
            )
            for name in ("record", "top")
        }
    ),
    "ip": Row(
        opts("-nbr: -jpcs46 --netns= --batch= -br -brief -json -pretty -color"),
        subs={"netns": Row(subs={"exec": wrapper(skip=1)})},
    ),
    "systemd-nspawn": wrapper(
        "-DMuSEdZLn: --directory= --machine= --user= --bind= --bind-ro= "
        "--setenv= --chdir= --image= --template= -bq --boot --quiet",
        unless="b boot",
        elsewhere=True,
    ),
    "machinectl": Row(subs={"shell": wrapper("-E: --setenv= --uid=", skip=1, elsewhere=True)}),
    "lxc": Row(
        subs={
            "exec": wrapper(
                "--env= --cwd= --user= --group= -T -t", skip=1, dashdash=True, elsewhere=True
            )
        }
    ),
    "distrobox": Row(
        subs={
            "enter": wrapper(
                "-n: --name= --additional-flags= -e -T -r --no-tty --root --no-workdir",
                dashdash=True,
            )
        }
    ),
    "distrobox-enter": wrapper(
        "-n: --name= --additional-flags= -e -T -r --no-tty --root --no-workdir", dashdash=True
    ),
    # more wrappers: the rest of the line is a command
    "caffeinate": wrapper("-tw: -disum"),
    "systemd-cat": wrapper("-tp: --identifier= --priority= --stderr-priority= --level-prefix="),
    **dict.fromkeys(
        ("setarch", "linux32", "linux64", "i386", "x86_64"),
        Row(
            opts(
                "-BFILRSTXZ --addr-no-randomize --fdpic-funcptrs --mmap-page-zero "
                "--addr-compat-layout --read-implies-exec --32bit --short-inode --whole-seconds "
                "--sticky-timeouts --3gb --4gb --uname-2.6 --verbose --list"
            ),
            permute=False,
            runs=(Command(unless="list"),),
        ),
    ),
    "cpulimit": wrapper(
        "-lpe: -zivkf --limit= --pid= --exe= --lazy --include-children", unless="p pid e exe"
    ),
    "trickle": wrapper("-udwtlnL: -sv"),
    "fakechroot": wrapper(
        "-lde: -sh --lib= --elfloader= --environment= --config-dir= --use-system-libs", stdin=True
    ),
    "devbox": Row(subs=runs_sub("run", "-c: --config= --pure", dashdash=True)),
    "rye": Row(subs=runs_sub("run")),
    **{
        name: Row(subs=runs_sub("run", "-np: --name= --prefix= --no-capture-output --live-stream"))
        for name in ("mamba", "micromamba")
    },
    **{
        name: Row(subs=runs_sub("exec"))
        for name in ("rbenv", "pyenv", "nodenv", "jenv", "goenv", "plenv", "phpenv")
    },
    "volta": Row(subs=runs_sub("run", "--node= --npm= --yarn= --bundled-npm --no-yarn --env=")),
    "fnm": Row(subs=runs_sub("exec", "--using=", dashdash=True)),
    "nvm": Row(subs=runs_sub("exec", skip=1)),
    "rvm": custom(runners.rvm),
    "scl": custom(runners.scl),
    "incus": Row(
        subs={"exec": wrapper("--env= --cwd= --user= --group= -T -t", skip=1, elsewhere=True)}
    ),
    "uftrace": Row(subs=runs_sub("record", "-dF: -N: --data= --filter= --notrace=")),
    "memray": Row(
        subs=runs_sub(
            "run",
            "-o: --output= -f --force --live --native --trace-python-allocators",
            prefix="python",
        )
    ),
    "scalene": wrapper("--outfile= --html --json --cli --cpu --gpu --memory", prefix="python"),
    "kernprof": wrapper(
        "-lvbo:s: --line-by-line --view --builtin --outfile= --setup=", prefix="python"
    ),
    "ansible": Row(
        opts(
            "-amiuebfMtTl: -kKvCbD --module-name= --args= --inventory= --user= "
            "--extra-vars= --become-user= --forks= --limit="
        ),
        runs=(Code("a args", elsewhere=True),),
    ),
    # secrets injectors, environments and schedulers that run the rest of their line
    "doppler": Row(
        subs={
            "run": Row(
                opts("-pc: --project= --config= --token= --command= --mount= --fallback= "),
                permute=False,
                runs=(Code("command"), Command(dashdash=True)),
            )
        }
    ),
    "infisical": Row(
        subs={
            "run": Row(
                opts("--env= --path= --projectId= --token= --command= --domain= --watch"),
                permute=False,
                runs=(Code("command"), Command(dashdash=True)),
            )
        }
    ),
    "chamber": Row(subs={"exec": wrapper("--pristine --strict -b: --backend=", dashdash=True)}),
    "sops": Row(subs={name: Row(runs=(Shell(skip=1),)) for name in ("exec-env", "exec-file")}),
    "envchain": wrapper("--set --noecho --list --unset", skip=1),
    "guix": Row(subs={n: wrapper(dashdash=True) for n in ("shell", "environment")}),
    "flox": Row(subs={"activate": wrapper("-d: --dir= -r: --remote=", dashdash=True)}),
    "tox": Row(subs={"exec": wrapper("-e: --env= -c: --conf=", dashdash=True)}),
    "reflex": wrapper(
        "-rRgG: --regex= --inverse-regex= --glob= --inverse-glob= -sdv", dashdash=True
    ),
    "devcontainer": Row(
        subs={
            "exec": wrapper(
                "--workspace-folder= --container-id= --id-label= --config= --remote-env= "
                "--docker-path= --log-level=",
                elsewhere=True,
            )
        }
    ),
    "limactl": Row(
        subs={
            n: wrapper("--workdir= --shell= --preserve-env", skip=1, elsewhere=True)
            for n in ("shell", "sh")
        }
    ),
    "lima": wrapper(elsewhere=True),
    "multipass": Row(
        subs={"exec": wrapper("-d: --working-directory= -n: --name=", skip=1, elsewhere=True)}
    ),
    "wsl": wrapper("-d: --distribution= -u: --user= --cd= -e --exec --shell-type=", elsewhere=True),
    **dict.fromkeys(
        ("mpirun", "mpiexec"),
        Row(
            opts(
                "--n= --np= --N= --c= --H= --host= --hostfile= --machinefile= --f= --x= "
                "--map-by= --bind-to= --ppn= --wdir= --oversubscribe --allow-run-as-root",
                go=True,
            ),
            permute=False,
            runs=(Command(),),
        ),
    ),
    "srun": wrapper(
        "-nNcptJAw: --ntasks= --nodes= --partition= --time= --job-name= --mem= "
        "--cpus-per-task= --gres= --account= --nodelist= --pty",
        elsewhere=True,
    ),
    "sbatch": Row(opts("--wrap="), runs=(Code("wrap", elsewhere=True),)),
    "pixi": Row(
        subs={
            **runs_sub("run", "-e: --environment= --manifest-path= --locked --frozen"),
            **runs_sub("exec", "-s: --spec= -c: --channel= --force-reinstall"),
        }
    ),
    **dict.fromkeys(
        ("pdsh", "clush"),
        Row(opts("-wxlRtufgb: -SN"), permute=False, runs=(Shell(elsewhere=True),)),
    ),
    "concurrently": Row(
        opts(
            "-nckps: --names= --prefix-colors= --prefix= --success= --restart-tries= "
            "--max-processes= --kill-others --kill-others-on-fail --raw --timings --group"
        ),
        runs=(Each(),),
    ),
    "xe": wrapper("-fjsANI: -aLvpFn0Rq"),
}
