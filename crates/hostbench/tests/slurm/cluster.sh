#!/usr/bin/env bash
# A real Slurm cluster on one machine, for the fleet tests: one slurmctld and N slurmd, each slurmd
# in its own network namespace (its own address and hostname) on a bridge, with a private munged.
# The root network namespace is never touched: the bridge and slurmctld live in a namespace of
# their own, and every Slurm client must run as `nsenter --net=/run/netns/<prefix>ctl <cmd>`
# with SLURM_CONF=<state>/slurm.conf.
#
#   cluster.sh up   STATE PREFIX N SUBNET   e.g. up /tmp/hbs-1 hb1 3 198.51.100
#                   (CLUSTER_EXTRA_CONF=FILE: lines appended to slurm.conf)
#   cluster.sh down STATE PREFIX N
#
# STATE holds the config, logs and PID files; PREFIX names the namespaces (globally visible, so
# unique per cluster); SUBNET is a /24 the host does not route to (checked). Only PIDs recorded
# here are ever signalled. Recipe and pitfalls: ../shared/research/slurm-netns-cluster.md.
set -euo pipefail
cmd=$1 H=$2 P=$3 N=$4
CTL="nsenter --net=/run/netns/${P}ctl"

stop() {
    local p
    p=$(cat "$1" 2>/dev/null) || return 0
    kill "$p" 2>/dev/null || return 0
    for _ in $(seq 1 100); do kill -0 "$p" 2>/dev/null || return 0; sleep 0.1; done
    kill -9 "$p" 2>/dev/null || true
}

if [ "$cmd" = down ]; then
    for i in $(seq 1 "$N"); do stop "$H/node$i/pid.fg" & done
    wait
    stop "$H/ctl/pid.fg" & stop "$H/munge/munged.pid" & wait
    for i in $(seq 1 "$N"); do
        ip -n "${P}ctl" link del "vn$i" 2>/dev/null || true
        ip netns del "${P}n$i" 2>/dev/null || true
    done
    ip netns del "${P}ctl" 2>/dev/null || true
    exit 0
fi

NET=$5
[ "$cmd" = up ] || { echo "usage: cluster.sh up|down STATE PREFIX N [SUBNET]" >&2; exit 2; }
# The subnet must not be one the host already reaches directly (its own LAN): then a client in
# the wrong namespace could send test traffic onto a real network.
if ip route get "$NET.1" 2>/dev/null | head -1 | grep -qv ' via '; then
    echo "cluster.sh: $NET.0/24 is routed directly by this host; pick another subnet" >&2
    exit 2
fi
mkdir -p "$H/munge" "$H/ctl"
chmod 755 "$H" "$H/munge"    # munged refuses a socket directory others cannot traverse
[ -f "$H/munge/munge.key" ] || mungekey -c -k "$H/munge/munge.key"
munged -S "$H/munge/munge.sock" --key-file="$H/munge/munge.key" --pid-file="$H/munge/munged.pid" \
    --seed-file="$H/munge/munged.seed" --log-file="$H/munge/munged.log"

{
    cat <<CONF
ClusterName=hbtest
SlurmctldHost=hbctl($NET.254)
SlurmctldPort=6817
SlurmdPort=6818
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$H/munge/munge.sock
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/backfill
ReturnToService=2
SlurmdTimeout=5
MessageTimeout=5
SlurmUser=root
SlurmdUser=root
MpiDefault=none
MailProg=/bin/true
StateSaveLocation=$H/ctl
SlurmctldPidFile=$H/ctl/slurmctld.pid
SlurmctldLogFile=$H/ctl/slurmctld.log
SlurmdSpoolDir=$H/%n
SlurmdPidFile=$H/%n/slurmd.pid
SlurmdLogFile=$H/%n/slurmd.log
CONF
    for i in $(seq 1 "$N"); do
        echo "NodeName=node$i NodeAddr=$NET.$i CPUs=1 RealMemory=1000 State=UNKNOWN"
    done
    echo "PartitionName=all Nodes=node[1-$N] Default=YES MaxTime=INFINITE State=UP"
    # A test's own lines (e.g. HealthCheckProgram), from the file CLUSTER_EXTRA_CONF names.
    if [ -n "${CLUSTER_EXTRA_CONF:-}" ]; then cat "$CLUSTER_EXTRA_CONF"; fi
} >"$H/slurm.conf"
export SLURM_CONF=$H/slurm.conf

ip netns add "${P}ctl"
ip -n "${P}ctl" link set lo up
ip -n "${P}ctl" link add br0 type bridge
ip -n "${P}ctl" addr add "$NET.254/24" dev br0
ip -n "${P}ctl" link set br0 up
for i in $(seq 1 "$N"); do
    ip netns add "${P}n$i"
    ip -n "${P}ctl" link add "vn$i" type veth peer name eth0 netns "${P}n$i"
    ip -n "${P}ctl" link set "vn$i" master br0 up
    ip -n "${P}n$i" addr add "$NET.$i/24" dev eth0
    ip -n "${P}n$i" link set eth0 up
    ip -n "${P}n$i" link set lo up
done
$CTL ip route get "$NET.1" | grep -q 'dev br0' || { echo "cluster.sh: $NET.1 not on the bridge" >&2; exit 1; }

# slurmctld must run on a host named as SlurmctldHost says: a UTS namespace of its own.
$CTL unshare --uts sh -c "hostname hbctl; exec slurmctld -D -c" >"$H/ctl/stderr" 2>&1 &
echo $! >"$H/ctl/pid.fg"
for i in $(seq 1 "$N"); do
    mkdir -p "$H/node$i/cg"
    # `ip netns exec` would remount /sys without the cgroup tree slurmd needs; a fresh sysfs
    # in a private mount namespace shows the node its own NIC, with the cgroup tree moved back.
    nsenter --net="/run/netns/${P}n$i" unshare --uts --mount --propagation private sh -c "
        hostname node$i
        mount --rbind /sys/fs/cgroup $H/node$i/cg
        mount -t sysfs sysfs /sys
        mount --move $H/node$i/cg /sys/fs/cgroup
        exec slurmd -D -N node$i" >"$H/node$i/stderr" 2>&1 &
    echo $! >"$H/node$i/pid.fg"
done
for _ in $(seq 1 150); do
    [ "$($CTL sinfo -h -o '%T %D' 2>/dev/null)" = "idle $N" ] && exit 0
    sleep 0.2
done
echo "cluster.sh: the nodes did not come up idle: $($CTL sinfo -h 2>&1 | head -3)" >&2
exit 1
