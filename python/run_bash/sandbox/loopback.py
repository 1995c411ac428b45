"""Loopback ports: who listens on them, which ones a sandbox may bind, and the connect-time gate.

Used where a sandlock run shares the host's network (``sandbox.network.allow`` or
``allow_local_ports`` configured, see *run_bash-sandlock*): a loopback ``connect`` is decided when it
happens, not when the run starts, by ``LoopbackGate`` (sandlock's ``policy_fn``, run in the run's
launcher process). It lets through ports whose listening socket is held by a process of a run_bash
session (a descendant of the host: the host is a subreaper, so even daemonized servers stay its
descendants) and the ports the user allowed; a service the user starts after the run began is
refused. ``denied_binds`` keeps sandboxed servers off privileged ports and off the well-known ports of
local services whose clients would otherwise hand a sandboxed listener their credentials
(``denied_binds``).

Listeners are found with ``NETLINK_SOCK_DIAG`` (the kernel filters by state: tens of microseconds,
where reading ``/proc/net/tcp`` walks every socket of the host), in the caller's network namespace.
``listening_ports`` (the ports a session listens on, for ``:RunBashSessions``) reads
``/proc/<pid>/net/tcp`` instead when the session lives in another namespace (run_bash's own).
"""

from __future__ import annotations

import contextlib
import errno
import os
import socket
import struct
from collections.abc import Callable, Iterable

from run_bash.sandbox.proc import descendants

# Ports >= 1024 of services whose clients connect on their own, often sending a password or a
# command first (databases, brokers, orchestrators, debuggers, local model servers). A sandbox
# sharing the host's network may not listen on them (nor on any port below 1024).
WELL_KNOWN_SERVICE_PORTS: dict[int, str] = {
    1080: "SOCKS proxy",
    1433: "Microsoft SQL Server",
    1521: "Oracle",
    1883: "MQTT",
    2049: "NFS",
    2181: "ZooKeeper",
    2375: "Docker API",
    2376: "Docker API (TLS)",
    2379: "etcd",
    2380: "etcd peers",
    3306: "MySQL / MariaDB",
    3389: "RDP",
    4222: "NATS",
    5432: "PostgreSQL",
    5672: "AMQP (RabbitMQ)",
    5900: "VNC",
    5984: "CouchDB",
    6379: "Redis",
    6443: "Kubernetes API",
    7687: "Neo4j",
    8200: "Vault",
    8500: "Consul",
    9042: "Cassandra",
    9092: "Kafka",
    9200: "Elasticsearch",
    9222: "Chrome DevTools",
    9229: "Node.js inspector",
    11211: "memcached",
    11434: "Ollama",
    27017: "MongoDB",
}
FIRST_UNPRIVILEGED_PORT = 1024

NETLINK_SOCK_DIAG = 4
SOCK_DIAG_BY_FAMILY = 20
TCP_LISTEN = 10
NLM_F_REQUEST_DUMP = 0x1 | 0x300
NLMSG_ERROR, NLMSG_DONE = 2, 3


def denied_binds() -> list[str]:
    """sandlock ``net_deny_bind`` entries: every port below 1024 and the well-known service ports
    (listed as ranges a sandbox may not bind, not as the ports it may: sandlock turns an allow
    range into one Landlock rule per port, which costs over 100 ms per run)."""
    return [f"1-{FIRST_UNPRIVILEGED_PORT - 1}", *(str(p) for p in sorted(WELL_KNOWN_SERVICE_PORTS))]


def diag_socket() -> socket.socket:
    """A ``NETLINK_SOCK_DIAG`` socket of this network namespace (it keeps answering for the
    namespace it was made in, whoever uses it). Raises OSError."""
    return socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, NETLINK_SOCK_DIAG)


def diag_listeners(
    family: int, nl: socket.socket | None = None
) -> dict[int, set[tuple[int, int]]] | None:
    """Listening TCP sockets of one address family in this network namespace (or the one ``nl``
    was made in): port -> {(inode, uid)}; None when netlink is unavailable."""
    req = struct.pack("=BBBBI", family, socket.IPPROTO_TCP, 0, 0, 1 << TCP_LISTEN) + bytes(48)
    msg = struct.pack("=IHHII", 16 + len(req), SOCK_DIAG_BY_FAMILY, NLM_F_REQUEST_DUMP, 1, 0) + req
    out: dict[int, set[tuple[int, int]]] = {}
    try:
        with contextlib.ExitStack() as stack:
            if nl is None:
                nl = stack.enter_context(diag_socket())
            else:  # a kept socket: drop what an earlier, abandoned dump left
                nl.setblocking(False)
                with contextlib.suppress(BlockingIOError):
                    while nl.recv(65536):
                        pass
            nl.settimeout(1.0)
            nl.sendto(msg, (0, 0))
            while True:
                data = nl.recv(65536)
                off = 0
                while off + 16 <= len(data):
                    length, kind = struct.unpack_from("=IH", data, off)
                    if length < 16 or kind == NLMSG_DONE:
                        return out
                    if kind == NLMSG_ERROR:
                        return None
                    body = off + 16  # struct inet_diag_msg
                    port = struct.unpack_from("!H", data, body + 4)[0]
                    uid, inode = struct.unpack_from("=II", data, body + 64)
                    out.setdefault(port, set()).add((inode, uid))
                    off += (length + 3) & ~3
    except OSError:
        return None
    return None


def namespace_listeners(nl: socket.socket) -> dict[int, set[int]] | None:
    """Listening TCP sockets (IPv4 and IPv6) of the network namespace ``nl`` was made in: port ->
    socket inodes; None when netlink does not answer."""
    ports: dict[int, set[int]] = {}
    for family in (socket.AF_INET, socket.AF_INET6):
        got = diag_listeners(family, nl)
        if got is None:
            return None
        for port, socks in got.items():
            ports.setdefault(port, set()).update(inode for inode, _uid in socks)
    return ports


def _proc_net_listeners(net_dir: str) -> dict[int, set[int]]:
    """Listening TCP sockets from ``<net_dir>/tcp{,6}`` (``/proc/<pid>/net`` shows the network
    namespace of ``pid``): port -> socket inodes."""
    ports: dict[int, set[int]] = {}
    for name in ("tcp", "tcp6"):
        try:
            with open(os.path.join(net_dir, name)) as f:
                lines = f.read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            parts = line.split()
            if len(parts) < 10 or parts[3] != "0A":  # 0A = LISTEN
                continue
            try:
                port = int(parts[1].rsplit(":", 1)[1], 16)
                inode = int(parts[9])
            except (IndexError, ValueError):
                continue
            ports.setdefault(port, set()).add(inode)
    return ports


def listeners() -> dict[int, set[int]]:
    """Listening TCP sockets in this network namespace: port -> socket inodes."""
    ports: dict[int, set[int]] = {}
    for family in (socket.AF_INET, socket.AF_INET6):
        got = diag_listeners(family)
        if got is None:
            return _proc_net_listeners("/proc/net")
        for port, socks in got.items():
            ports.setdefault(port, set()).update(inode for inode, _uid in socks)
    return ports


def socket_inodes(pids: Iterable[int]) -> set[int]:
    """Inodes of the sockets the processes ``pids`` hold open (those whose fds are readable)."""
    found: set[int] = set()
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if target.startswith("socket:["):
                try:
                    found.add(int(target[8:-1]))
                except ValueError:
                    pass
    return found


def listening_ports(pids: list[int]) -> list[int]:
    """TCP ports the processes ``pids`` (one session) listen on, in their network namespace."""
    mine = socket_inodes(pids)
    if not mine:
        return []
    for pid in pids:
        try:
            netns = os.readlink(f"/proc/{pid}/ns/net")
        except OSError:
            continue  # gone meanwhile
        if netns == os.readlink("/proc/self/ns/net"):
            table = listeners()
        else:
            table = _proc_net_listeners(f"/proc/{pid}/net")
        return sorted(port for port, inodes in table.items() if inodes & mine)
    return []


def is_local(host: str) -> bool:
    """True for addresses that reach this machine's own services: loopback, the unspecified address
    (a connect to 0.0.0.0 goes to loopback) and their IPv4-mapped IPv6 forms."""
    # Imported here, not with this module: the host asks only for ``network.allow`` entries (1 ms
    # of its start); the fork server imports it before its runs' connect checks (``serve``).
    import ipaddress

    try:
        addr = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        addr = addr.ipv4_mapped
    return addr.is_loopback or addr.is_unspecified


def local_ports_allowed(allow: Iterable[str]) -> tuple[set[int], bool]:
    """Loopback ports that ``network.allow`` entries grant (``"localhost:5432"``, ``"*:443"``), and
    whether one of them grants every port (``"127.0.0.1:*"``)."""
    ports: set[int] = set()
    every = False
    for entry in allow:
        host, _, port = entry.rpartition(":")
        host = host.strip("[]")
        if host not in ("*", "localhost") and not is_local(host.split("/", 1)[0]):
            continue
        if port == "*":
            every = True
        elif port.isdigit():
            ports.add(int(port))
    return ports, every


def listener_inodes(port: int) -> set[int] | None:
    """Inodes of the TCP sockets listening on ``port`` in this network namespace; None when
    netlink is unavailable."""
    inodes: set[int] = set()
    for family in (socket.AF_INET, socket.AF_INET6):
        got = diag_listeners(family)
        if got is None:
            return None
        inodes.update(inode for inode, _uid in got.get(port, ()))
    return inodes


def owned_inodes(port: int, owner: int) -> set[int]:
    """The listening sockets on ``port`` that a descendant of ``owner`` holds. Needs the right to
    read those processes' fds: the run_bash host's own user, outside their user namespaces."""
    inodes = listener_inodes(port)
    if not inodes:
        return set()
    return socket_inodes(descendants(owner)) & inodes


class LoopbackGate:
    """sandlock ``policy_fn``: refuse a loopback ``connect`` unless run_bash's sessions own the
    listener or the user allowed the port.

    ``owner`` is the host's pid: a listener held by one of its descendants belongs to a run_bash
    session. ``ask(port)`` finds those (``owned_inodes``) where other runs' fds are readable (the
    namespace launcher's fork server: a run's own process may not read the fds of a run in another
    user namespace). A listener whose owner cannot be read (another user's, a privileged process)
    is refused. Listening sockets verified once are remembered by inode (inodes are not reused
    while the socket exists).
    """

    def __init__(
        self,
        owner: int,
        allowed: Iterable[int] = (),
        every: bool = False,
        ask: Callable[[int], set[int]] | None = None,
    ) -> None:
        self.owner = owner
        self.allowed = frozenset(allowed)
        self.every = every
        self.ask = ask or (lambda port: owned_inodes(port, owner))
        self._verified: set[int] = set()

    def __call__(self, event: object, _ctx: object = None) -> int:
        syscall = getattr(event, "syscall", "")
        host = getattr(event, "host", None)
        port = int(getattr(event, "port", 0) or 0)
        if syscall not in ("connect", "sendto") or not host or not is_local(host):
            return 0
        if self.every or port in self.allowed or self.owned(port):
            return 0
        return errno.ECONNREFUSED

    def owned(self, port: int) -> bool:
        """True when a process of a run_bash session listens on ``port``."""
        inodes = listener_inodes(port)
        if not inodes:
            return False
        if inodes & self._verified:
            return True
        held = self.ask(port) & inodes
        self._verified.update(held)
        return bool(held)


def connect_loopback(port: int) -> socket.socket:
    """A TCP connection to ``port`` on this namespace's loopback (IPv4, else IPv6)."""
    errors: list[OSError] = []
    for family, host in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.settimeout(5)
        try:
            sock.connect((host, port))
            return sock
        except OSError as e:
            sock.close()
            errors.append(e)
    raise errors[0]
