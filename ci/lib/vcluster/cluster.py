"""The subcommands of ci/vcluster (the package docstring documents each, its layout and exit codes)."""

import fcntl
import os
import re
import shutil
import signal
import sys
import time

from . import mpirun_args
from .state import (BRIDGE, IFACE, MAX_NODES, NET, NODE_NS_PREFIX, OUR_NAMESPACE, PREFIXLEN, SWITCH_NS, Error,
                    Paths, State, UsageError, hosts_file, node)
from .system import System

# The inner shell that enters a node: `sh -c ENTER_NODE NAME HOSTNAME CMD...` sets the host name (in the UTS
# namespace of `unshare --uts`) and execs CMD, keeping its arguments as they are.
ENTER_NODE = 'hostname "$1" || exit 125; shift; exec "$@"'
# Writes 1 to the IPv6 switches of the namespace it runs in (missing when the kernel has no IPv6: ignored).
DISABLE_IPV6 = ('for f in /proc/sys/net/ipv6/conf/all/disable_ipv6 /proc/sys/net/ipv6/conf/default/disable_ipv6; '
                'do [ -w "$f" ] && echo 1 >"$f"; done; true')
LOCK_SECONDS = 30
TERM_GRACE_TENTHS = 20  # kill_all: SIGTERM, then SIGKILL after 2 s
RUN_GRACE_TENTHS = 30  # after mpirun: what is left of the run gets 3 s


class Interrupted(Exception):
    """A signal ended a subcommand that cleans up after itself (exit 128 + the signal)."""

    def __init__(self, signum):
        super().__init__(f"signal {signum}")
        self.code = 128 + signum


def raise_interrupted(signum):
    raise Interrupted(signum)


class Cluster:
    def __init__(self, system=None, paths=None, self_path="ci/vcluster", out=None, err=None):
        self.system = system or System()
        self.paths = paths or Paths()
        self.self_path = self_path  # the ci/vcluster command, which mpirun calls as its rsh agent
        self.out = out or sys.stdout
        self.err = err or sys.stderr

    # --- output and preconditions ----------------------------------------------------------------------------
    def say(self, text):
        print(text, file=self.out, flush=True)

    def warn(self, text):
        print(text, file=self.err, flush=True)

    def need_root(self):
        if not self.system.is_root():
            raise Error(3, "must run as root (network namespaces, veth, bridge)")

    def need_tools(self, *tools):
        for tool in tools:
            if not self.system.has_tool(tool):
                raise Error(3, f"required tool '{tool}' not found")

    def must(self, argv, code=1, what=None):
        """Runs argv; Error(code, what or the command, with its stderr) when it fails. Returns its stdout."""
        done = self.system.run(argv)
        if done.returncode != 0:
            detail = done.stderr.strip().replace("\n", " ")
            raise Error(code, f"{what or ' '.join(argv)}{': ' + detail if detail else ''}")
        return done.stdout

    # --- namespaces and their processes ----------------------------------------------------------------------
    def namespaces(self):
        """Every network namespace of the machine (first word of each `ip netns list` line)."""
        listing = self.system.run(["ip", "netns", "list"]).stdout
        return [line.split()[0] for line in listing.splitlines() if line.split()]

    def our_namespaces(self):
        """Namespaces of ours that exist right now (also ones a partial `up` left without a state file)."""
        return [ns for ns in self.namespaces() if OUR_NAMESPACE.match(ns)]

    def pids_in(self, namespace):
        """Process ids living in the namespace (none when it does not exist)."""
        done = self.system.run(["ip", "netns", "pids", namespace])
        return [int(p) for p in done.stdout.split() if p.isdigit()] if done.returncode == 0 else []

    def kill_all(self, namespaces):
        """Every process in the namespaces: SIGTERM, up to 2 s grace, then SIGKILL."""
        pids = [pid for ns in namespaces for pid in self.pids_in(ns)]
        if not pids:
            return
        for pid in pids:
            self.system.kill(pid, signal.SIGTERM)
        for _ in range(TERM_GRACE_TENTHS):
            if not any(self.system.alive(pid) for pid in pids):
                return
            self.system.sleep(0.1)
        for pid in pids:
            self.system.kill(pid, signal.SIGKILL)

    def disable_ipv6(self, namespace):
        self.system.run(["ip", "netns", "exec", namespace, "sh", "-c", DISABLE_IPV6])

    # --- teardown and the lock -------------------------------------------------------------------------------
    def teardown(self):
        """Removes everything of ours whether or not the state file exists or `up` completed. Processes in the
        namespaces are killed first: a namespace (with its veth and address) lives on while a process is in it."""
        namespaces = self.our_namespaces()
        if namespaces:
            self.kill_all(namespaces)
            # Nodes first (their veth ends take the switch ports with them), then the switch.
            for ns in namespaces:
                if ns != SWITCH_NS:
                    self.system.run(["ip", "netns", "del", ns])
            self.system.run(["ip", "netns", "del", SWITCH_NS])
        if os.path.isdir(self.paths.etc_netns):
            for name in os.listdir(self.paths.etc_netns):
                if re.match(rf"{NODE_NS_PREFIX}[0-9]", name):
                    shutil.rmtree(os.path.join(self.paths.etc_netns, name), ignore_errors=True)
            try:
                os.rmdir(self.paths.etc_netns)  # only when empty
            except OSError:
                pass
        shutil.rmtree(self.paths.state_dir, ignore_errors=True)

    def take_lock(self):
        """The lock of `up` and `down` (held until this process ends); False when another holds it for 30 s."""
        os.makedirs(self.paths.state_dir, exist_ok=True)
        self._lock = open(self.paths.lock, "w")  # pylint: disable=consider-using-with  # held until exit
        deadline = time.monotonic() + LOCK_SECONDS
        while True:
            try:
                fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return True
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    return False
                self.system.sleep(0.1)

    # --- check -------------------------------------------------------------------------------------------------
    def check(self, args):
        if args not in ([], ["--netem"]):
            raise UsageError("check takes only --netem")
        self.need_root()
        self.need_tools("ip", "unshare")
        a, b = f"eps-vcchk{self.system.pid()}a", f"eps-vcchk{self.system.pid()}b"
        restore = self.system.on_signals(raise_interrupted)
        try:
            netem_ok = self._check_in(a, b)
        finally:
            restore()
            self.system.run(["ip", "netns", "del", a])
            self.system.run(["ip", "netns", "del", b])
        self._check_mpirun()
        return 3 if args == ["--netem"] and not netem_ok else 0

    def _check_in(self, a, b):
        """Builds a two-namespace bridge and veth in a, b; prints what works; True when netem does too."""
        def step(why, *commands):
            for argv in commands:
                done = self.system.run(argv)
                if done.returncode != 0:
                    detail = done.stderr.strip()
                    self.warn(f"vcluster check: unavailable: {why}{': ' + detail if detail else ''}")
                    raise Error(3, "")

        step("cannot create network namespaces", ["ip", "netns", "add", a], ["ip", "netns", "add", b])
        self.disable_ipv6(a)
        self.disable_ipv6(b)
        step("cannot create a bridge", ["ip", "-n", b, "link", "add", BRIDGE, "type", "bridge", "stp_state", "0",
                                        "forward_delay", "0"])
        step("cannot create a veth pair across namespaces",
             ["ip", "-n", a, "link", "add", IFACE, "type", "veth", "peer", "name", "p0", "netns", b])
        step("cannot configure the veth/bridge", ["ip", "-n", b, "link", "set", "p0", "master", BRIDGE],
             ["ip", "-n", b, "link", "set", "p0", "up"], ["ip", "-n", b, "link", "set", BRIDGE, "up"],
             ["ip", "-n", a, "link", "set", "lo", "up"],
             ["ip", "-n", a, "addr", "add", f"{NET}.1/{PREFIXLEN}", "dev", IFACE],
             ["ip", "-n", a, "link", "set", IFACE, "up"])
        step("cannot enter a namespace with its own host name (unshare --uts)",
             ["ip", "netns", "exec", a, "unshare", "--uts", "sh", "-c",
              'hostname vcluster-check && [ "$(hostname)" = vcluster-check ]'])
        self.say("vcluster check: namespaces, veth, bridge, host names: available")
        if not self.system.has_tool("tc"):
            self.say("vcluster check: netem: unavailable (no 'tc' command)")
            return False
        done = self.system.run(["ip", "netns", "exec", a, "tc", "qdisc", "add", "dev", IFACE, "root", "netem",
                                "delay", "1ms"])
        if done.returncode == 0:
            self.say("vcluster check: netem: available")
            return True
        detail = (done.stdout + done.stderr).strip().replace("\n", " ")
        self.say(f"vcluster check: netem: unavailable (sch_netem: {detail})")
        return False

    def _check_mpirun(self):
        version = self.system.run(["mpirun", "--version"]) if self.system.has_tool("mpirun") else None
        if version is not None and "Open MPI" in version.stdout:
            self.say(f"vcluster check: mpirun: {version.stdout.splitlines()[0]}")
        else:
            self.say("vcluster check: mpirun: no Open MPI mpirun in PATH ('ci/vcluster mpirun' will not work)")

    # --- up, down, status --------------------------------------------------------------------------------------
    def up(self, args):
        if len(args) != 1:
            raise UsageError("up takes exactly one argument, the node count")
        if not re.fullmatch(r"[0-9]+", args[0]) or not 1 <= int(args[0], 10) <= MAX_NODES:
            raise UsageError(f"node count must be 1..{MAX_NODES}, got '{args[0]}'")
        n = int(args[0], 10)
        self.need_root()
        self.need_tools("ip", "unshare")
        if not self.take_lock():
            raise Error(1, f"another 'ci/vcluster up/down' holds {self.paths.lock}")
        existing = self.our_namespaces()
        if os.path.exists(self.paths.state) or existing:
            what = " ".join(existing) or f"state file {self.paths.state}"
            raise Error(1, f"a virtual cluster is already up ({what}); 'up' never recreates it: run "
                           "'ci/vcluster down' first")
        # From here on, any failure or signal removes what was built.
        restore = self.system.on_signals(raise_interrupted)
        try:
            self._build(n)
        except BaseException:
            self.warn("vcluster: up failed; removing what was built")
            self.teardown()
            raise
        finally:
            restore()
        self.say(f"vcluster: up: {n} node(s) on {NET}.0/{PREFIXLEN} (iface {IFACE}), switch namespace {SWITCH_NS}")
        for k in range(n):
            self.say(f"  node{k}  {node(k).address}  {node(k).namespace}")
        return 0

    def _build(self, n):
        self.must(["ip", "netns", "add", SWITCH_NS], 3, f"cannot create network namespace {SWITCH_NS}")
        self.disable_ipv6(SWITCH_NS)
        self.must(["ip", "-n", SWITCH_NS, "link", "add", BRIDGE, "type", "bridge", "stp_state", "0", "forward_delay",
                   "0"], 3, f"cannot create a bridge in {SWITCH_NS}")
        self.must(["ip", "-n", SWITCH_NS, "link", "set", BRIDGE, "up"])
        os.makedirs(self.paths.etc_netns, exist_ok=True)
        for k in range(n):
            self._build_node(node(k), n)
        State.of(n).write(self.paths)

    def _build_node(self, nd, n):
        ns = nd.namespace
        self.must(["ip", "netns", "add", ns], 3, f"cannot create network namespace {ns}")
        self.disable_ipv6(ns)  # before the veth exists, so it inherits "default"
        self.must(["ip", "-n", ns, "link", "set", "lo", "up"])
        # Both ends are created inside namespaces: vc0 in the node, swK moved straight into the switch.
        self.must(["ip", "-n", ns, "link", "add", IFACE, "type", "veth", "peer", "name", nd.switch_port, "netns",
                   SWITCH_NS], 3, f"cannot create a veth pair for {ns}")
        self.must(["ip", "-n", ns, "addr", "add", f"{nd.address}/{PREFIXLEN}", "dev", IFACE])
        self.must(["ip", "-n", ns, "link", "set", IFACE, "up"])
        self.must(["ip", "-n", SWITCH_NS, "link", "set", nd.switch_port, "master", BRIDGE])
        self.must(["ip", "-n", SWITCH_NS, "link", "set", nd.switch_port, "up"])
        etc = os.path.join(self.paths.etc_netns, ns)
        os.makedirs(etc, exist_ok=True)
        with open(os.path.join(etc, "hosts"), "w", encoding="utf-8") as f:
            f.write(hosts_file(n))
        # glibc's resolver: only the node's own loopback (nothing listens there), never a real DNS server.
        with open(os.path.join(etc, "resolv.conf"), "w", encoding="utf-8") as f:
            f.write("nameserver 127.0.0.1\n")

    def down(self, args):
        if args:
            raise UsageError("down takes no arguments")
        self.need_root()
        if not self.system.has_tool("ip"):
            return 0  # never fails: without ip there is nothing of ours to remove
        try:
            locked = self.take_lock()
        except OSError:
            locked = False
        if not locked:
            self.warn(f"vcluster: down: could not take {self.paths.lock}; going on")
        self.teardown()
        self.say("vcluster: down")
        return 0

    def status(self, args):
        if args:
            raise UsageError("status takes no arguments")
        if not os.access(self.paths.state, os.R_OK):
            left = " ".join(self.our_namespaces())
            hint = f" (leftover namespaces: {left} - run 'ci/vcluster down')" if left else ""
            self.say(f"vcluster: not up{hint}")
            return 1
        state = State.load(self.paths)
        existing = set(self.namespaces())
        self.say(f"vcluster: {len(state.nodes)} node(s), switch namespace {SWITCH_NS} (bridge {BRIDGE}, no address), "
                 f"{NET}.0/{PREFIXLEN} on {IFACE}")
        row = "{:<5} {:<8} {:<14} {:<15} {:<10} {:<5} {}"
        self.say(row.format("node", "host", "address", "namespace", "namespace", "link", "qdisc"))
        for nd in state.nodes:
            link = self.system.run(["ip", "-n", SWITCH_NS, "-o", "link", "show", nd.switch_port]).stdout
            qdisc = self.system.run(["ip", "netns", "exec", nd.namespace, "tc", "qdisc", "show", "dev", IFACE,
                                     "root"]).stdout
            self.say(row.format(nd.index, nd.host, nd.address, nd.namespace,
                                "exists" if nd.namespace in existing else "MISSING",
                                "up" if re.search(r"[<,]UP[,>]", link) else "cut", qdisc_summary(qdisc) or "-"))
        return 0

    # --- running commands in the nodes -------------------------------------------------------------------------
    def enter(self, nd, name, command):
        """argv running `command` inside node nd with its host name (`name` labels the inner shell)."""
        return ["ip", "netns", "exec", nd.namespace, "unshare", "--uts", "sh", "-c", ENTER_NODE, name, nd.host,
                *command]

    def exec(self, args):
        if len(args) < 2:
            raise UsageError("exec needs NODE and a command")
        self.need_root()
        state = State.load(self.paths)
        nd = state.nodes[state.node_index(args[0])]
        self.system.exec(self.enter(nd, "vcluster-exec", args[1:]), dict(os.environ, EPS_VC_NODE=str(nd.index)))

    def agent(self, args):
        """Open MPI's rsh launcher agent, called by mpirun as `AGENT HOST WORD...` where the words form a command
        line for a remote shell (ssh semantics: joined with spaces, run by sh -c)."""
        while args and args[0].startswith("-"):
            args = args[1:]  # ssh-style options, if any: ignored
        if len(args) < 2:
            raise Error(255, "agent: usage: __agent HOST CMD...")
        host, command = args[0], " ".join(args[1:])
        nd = State.load(self.paths).find_host(host)
        if nd is None:
            raise Error(255, f"agent: unknown host '{host}' (not a node of the virtual cluster)")
        if os.environ.get("VCLUSTER_DEBUG"):
            self.warn(f"vcluster agent: host={host} -> {nd.namespace} ({nd.host}); sh -c: {command}")
        self.system.exec(self.enter(nd, "vcluster-agent", ["/bin/sh", "-c", command]),
                         dict(os.environ, EPS_VC_NODE=str(nd.index)))

    def mpirun(self, args, environ=None):
        if not args:
            raise UsageError("mpirun needs arguments (e.g. -np 4 PROGRAM)")
        self.need_root()
        self.need_tools("ip", "unshare", "mpirun")
        state = State.load(self.paths)
        environ = dict(os.environ if environ is None else environ)
        found = mpirun_args.scan(args)
        slots = mpirun_args.slots(found, len(state.nodes), environ.get("VCLUSTER_SLOTS", ""))
        run_id = f"{time.time_ns()}-{self.system.pid()}"
        environ.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", FI_TCP_IFACE=IFACE,
                       EPS_VC_RUN=run_id, SHELL="/bin/sh")
        for name in ("OMPI_MCA_oob_tcp_if_exclude", "OMPI_MCA_btl_tcp_if_exclude"):
            environ.pop(name, None)
        if re.search(r"\s", self.self_path):
            raise Error(3, f"the path of ci/vcluster contains white space: {self.self_path}")
        opts = mpirun_args.options(found, [nd.address for nd in state.nodes], slots, f"{self.self_path} __agent",
                                   os.getcwd(), mpirun_args.forwarded(environ, environ.get("VCLUSTER_ENV", "")))
        if environ.get("VCLUSTER_DEBUG"):
            self.warn(f"vcluster: node0: mpirun {' '.join(opts)} {' '.join(args)}")
        environ["EPS_VC_NODE"] = "0"
        process = self.system.spawn(self.enter(state.nodes[0], "vcluster-mpirun", ["mpirun", *opts, *args]), environ)
        restore = self.system.on_signals(process.send_signal)
        grace = 0  # on an exception: what is left of the run is killed at once
        try:
            code = process.wait()
            grace = RUN_GRACE_TENTHS
        finally:
            restore()
            self.reap_run(state, run_id, grace)
        return 128 - code if code < 0 else code

    def reap_run(self, state, run_id, grace_tenths):
        """SIGKILLs what is left in the nodes of run `run_id` (processes whose environment carries
        EPS_VC_RUN=run_id), after waiting up to grace_tenths tenths of a second for it to end by itself."""
        tag = f"EPS_VC_RUN={run_id}"
        for i in range(grace_tenths + 1):
            left = [pid for nd in state.nodes for pid in self.pids_in(nd.namespace)
                    if pid != self.system.pid() and tag in self.system.environ(pid)]
            if not left:
                return
            if i < grace_tenths:
                self.system.sleep(0.1)
        self.warn(f"vcluster: killing {len(left)} process(es) left in the nodes after mpirun: "
                  f"{' '.join(map(str, left))}")
        for pid in left:
            self.system.kill(pid, signal.SIGKILL)

    # --- faults --------------------------------------------------------------------------------------------------
    def cut_heal(self, what, args):
        if len(args) != 1:
            raise UsageError(f"{what} takes exactly one NODE")
        self.need_root()
        state = State.load(self.paths)
        nd = state.nodes[state.node_index(args[0])]
        self.must(["ip", "-n", SWITCH_NS, "link", "set", "dev", nd.switch_port, "down" if what == "cut" else "up"])
        if what == "cut":
            self.say(f"vcluster: node{nd.index} cut (switch port {nd.switch_port} down)")
        else:
            self.say(f"vcluster: node{nd.index} healed (switch port {nd.switch_port} up)")
        return 0

    def qdisc(self, nd, spec, what, unavailable):
        """Replaces nd's root qdisc by spec, or removes it for `off`: tc's refusal is exit 3 when `unavailable`
        (a pattern of tc's message) says the kernel lacks the qdisc, else 2 (a bad spec)."""
        tc = ["ip", "netns", "exec", nd.namespace, "tc", "qdisc"]
        if spec == ["off"]:
            self.system.run([*tc, "del", "dev", IFACE, "root"])  # no root qdisc of ours is not an error
            return
        done = self.system.run([*tc, "replace", "dev", IFACE, "root", *spec])
        if done.returncode != 0:
            detail = done.stderr.strip().replace("\n", " ")
            if re.search(unavailable, detail):
                raise Error(3, f"{what} unavailable: this kernel has no sch_{spec[0]} qdisc (tc: {detail})")
            raise Error(2, f"tc rejected the {what} '{' '.join(spec[1:])}': {detail}")

    def netem(self, args):
        if len(args) < 2:
            raise UsageError("netem needs NODE and a netem SPEC (e.g. delay 5ms loss 1%) or 'off'")
        self.need_root()
        self.need_tools("tc")
        state = State.load(self.paths)
        nd = state.nodes[state.node_index(args[0])]
        spec = args[1:]
        if " ".join(spec) == "off":
            self.qdisc(nd, ["off"], "netem", "")
            self.say(f"vcluster: node{nd.index} netem off")
            return 0
        self.qdisc(nd, ["netem", *spec], "netem", r"nknown|not supported|No such file")
        self.say(f"vcluster: node{nd.index} netem {' '.join(spec)}")
        return 0

    def shape(self, args):
        if len(args) != 2:
            raise UsageError("shape takes NODE and a RATE (e.g. 20mbit) or 'off'")
        self.need_root()
        self.need_tools("tc")
        state = State.load(self.paths)
        nd = state.nodes[state.node_index(args[0])]
        if args[1] == "off":
            self.qdisc(nd, ["off"], "shape", "")
            self.say(f"vcluster: node{nd.index} shape off")
            return 0
        # A short queue (limit) makes tbf drop what overflows it: loss that TCP must repair, as on a congested
        # link, without taking the link down.
        self.qdisc(nd, ["tbf", "rate", args[1], "burst", "16kb", "limit", "24kb"], "shape", r"nknown|not supported")
        self.say(f"vcluster: node{nd.index} shaped to {args[1]}")
        return 0

    def kill(self, args):
        if len(args) not in (2, 3):
            raise UsageError("kill takes NODE PATTERN [--one]")
        if len(args) == 3 and args[2] != "--one":
            raise UsageError(f"kill: third argument must be --one, got '{args[2]}'")
        self.need_root()
        state = State.load(self.paths)
        nd = state.nodes[state.node_index(args[0])]
        pattern = re.compile(args[1])
        killed = 0
        for pid in sorted(self.pids_in(nd.namespace)):
            cmdline = self.system.cmdline(pid) if pid != self.system.pid() else None
            if cmdline is None or not pattern.search(cmdline) or not self.system.kill(pid, signal.SIGKILL):
                continue
            self.say(f"vcluster: node{nd.index}: killed {pid}: {cmdline}")
            killed += 1
            if len(args) == 3:
                break
        if not killed:
            raise Error(1, f"node{nd.index}: no process matches '{args[1]}'")
        return 0


def qdisc_summary(shown):
    """The first line of `tc qdisc show dev IFACE root` without 'qdisc', the device, 'root' and the refcnt."""
    line = shown.splitlines()[0] if shown.strip() else ""
    line = re.sub(r"^qdisc ", "", line)
    line = re.sub(r" dev [^ ]+", "", line, count=1)
    line = re.sub(r" root", "", line, count=1)
    return re.sub(r" refcnt [0-9]+", "", line, count=1)
