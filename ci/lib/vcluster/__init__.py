"""The virtual cluster of `ci/vcluster` (docs/fabrics.md 13): Open MPI across "nodes" that are Linux network
namespaces joined by a private bridge, on one machine, for multi-node tests. Run as root.

   ci/vcluster check [--netem]     can namespaces, veth, a bridge (and netem) be created here? 0 yes, 3 no
   ci/vcluster up N                create nodes 0..N-1 (refuses when a cluster is already up)
   ci/vcluster status              nodes, addresses, namespaces, link and qdisc state (exit 1: not up)
   ci/vcluster exec NODE CMD...    run CMD inside node NODE (index), host name nodeNODE
   ci/vcluster mpirun ARGS...      Open MPI's mpirun inside node0, ranks across all nodes
   ci/vcluster cut NODE            fault injection: take NODE's link down (switch side)
   ci/vcluster heal NODE           bring NODE's link back up
   ci/vcluster netem NODE SPEC...  tc netem on NODE's interface, e.g. `netem 1 delay 5ms loss 1%`
   ci/vcluster netem NODE off      remove it
   ci/vcluster shape NODE RATE     a token-bucket (tbf) rate limit with a short queue on NODE's interface, e.g.
                                   `shape 1 20mbit`: a slow link that drops what overflows the queue, where
                                   the kernel has no sch_netem; `shape NODE off` removes it
   ci/vcluster kill NODE PATTERN [--one]
                                   SIGKILL the processes of NODE whose command line matches PATTERN (a Python
                                   regular expression, which reads an ordinary ERE the same); --one: only the
                                   first match (lowest pid), e.g. one MPI rank of several
   ci/vcluster down                remove everything (never fails, also after a partial `up`); first
                                   SIGTERMs (2 s later SIGKILLs) every process still inside a node

Modules: `state` (names, addresses and the state file), `mpirun_args` (the scan of mpirun's option grammar and
the options added to it), `system` (every command, process and signal the cluster touches, behind one object
that unit tests replace), `cluster` (the subcommands), `cli` (arguments, messages and exit codes).

Layout (nothing is created in, or attached to, the root network namespace):

  eps-vc-switch   namespace holding the bridge br0 and the switch-side veth ends sw0..swN-1; no address,
                  IPv6 off, so the switch itself never sends anything.
  eps-vc-nodeK    one namespace per node: lo up and veth vc0 (peer swK in the switch), address
                  10.213.7.(K+1)/24, IPv6 off, NO default route: the only reachable addresses are the node's own
                  loopback and the other nodes. Both veth ends are created directly inside their namespaces,
                  never in the root namespace.
  /etc/netns/eps-vc-nodeK/{hosts,resolv.conf}
                  bind-mounted over /etc by `ip netns exec` inside the node: node0..nodeN-1 resolve to their
                  addresses, the resolver points at the node's own loopback (no DNS traffic at all).
  /run/eps-vcluster/state
                  what `up` built (read by every other subcommand and by the rsh agent).

Host names: every command entering a node runs under `unshare --uts` with the host name nodeK, so gethostname(),
MPI_Get_processor_name, Open MPI's session directories (/tmp/ompi.nodeK.*) and vader's shared-memory segments are
per node although the file system is shared.

mpirun: runs inside node0 with
  --host NET.1:S,NET.2:S,...             S = $VCLUSTER_SLOTS, else ceil(NP/N) for the -np NP found in ARGS, else 1
                                         (so `-np 4` on 2 nodes puts ranks 0,1 on node0, 2,3 on node1)
  --map-by :OVERSUBSCRIBE --wdir CWD     (ranks start in the caller's working directory)
  --mca plm rsh --mca plm_rsh_agent "<ci/vcluster> __agent" --mca plm_rsh_no_tree_spawn 1
  --mca oob_tcp_if_include vc0 --mca btl self,vader,tcp --mca btl_tcp_if_include vc0
  -x FI_TCP_IFACE=vc0 (libfabric's tcp provider) and -x for the environment (see below)
Each of these is left out when ARGS set the same thing (--host/-H/--hostfile/--machinefile, --map-by, --wdir, or
--mca with the same parameter name), so ARGS can override them. The rsh agent (ci/vcluster in the hidden mode
`__agent HOST CMD...`) maps HOST (an address, nodeK or the namespace name) to its node and runs the command there
like ssh would: the words of CMD are joined with spaces and given to `sh -c` (Open MPI quotes the orted command
line for a remote shell), as
  ip netns exec eps-vc-nodeK unshare --uts sh -c 'hostname nodeK; exec sh -c "$CMD"'

Environment: the "remote" orted daemons are started by the agent, a child of mpirun, so they inherit the caller's
whole environment (Open MPI passes --daemonize: the orted detaches from the agent but stays in its node's
namespaces); ranks inherit the orted's. In addition, to not depend on that, every exported variable named
EPSUITE_*, EPS_*, FI_*, UCX_*, GTEST_*, OMP_* and those listed in $VCLUSTER_ENV (space-separated names) is passed
explicitly with mpirun's -x. Set for mpirun and the ranks: OMPI_ALLOW_RUN_AS_ROOT=1,
OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1, FI_TCP_IFACE=vc0, SHELL=/bin/sh (Open MPI writes the orted prefix for the local
shell's syntax; the agent runs sh), and EPS_VC_RUN (an id tagging this run's processes);
OMPI_MCA_{oob,btl}_tcp_if_exclude are unset (Open MPI refuses include and exclude together). Inside a node
EPS_VC_NODE holds the node index (exec and agent). $VCLUSTER_DEBUG prints the mpirun line and each agent call.

mpirun runs in a session of its own, as every other node's orted does (Open MPI's rsh launcher starts them with
setsid): with the kernel's autogroup scheduling each session shares the CPUs as one group, so node 0's ranks left
in the caller's session would compete with everything else the caller runs while the other nodes' ranks had a
group each (found as a proxy transport whose node-0 ranks got 1 s of CPU in 25 s while node 1's spun waiting for
them). SIGINT, SIGTERM and SIGHUP to ci/vcluster are forwarded to it; stdin still reaches it. After mpirun ends,
every process left in a node namespace that carries this run's EPS_VC_RUN is SIGKILLed after a 3 s grace, so no
orphaned ranks stay behind.

Exit codes: 0 ok; 2 usage error (also a netem SPEC or shape RATE tc rejects); 3 environment (not root, missing
tools, namespaces/veth/bridge cannot be created, netem unavailable); 1 other failure (e.g. `up` while a cluster is
up, a subcommand other than up/check/down/status while none is up, `kill` matched nothing, a command of `up` that
failed); `mpirun` and `exec` pass through the command's exit code (128 + N for a signal N). The agent exits 255
(ssh's code for a connection failure) on an unknown host.

One cluster per machine at a time (fixed names); `up` and `down` hold a lock (flock of /run/eps-vcluster/lock)
against each other.
"""
