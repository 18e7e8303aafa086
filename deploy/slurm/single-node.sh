#!/usr/bin/env bash
# single-node.sh brings up (or tears down) a private Slurm on this host (one
# node, or several slurmd declaring nodes of their own): its own munged
# socket, slurmctld and slurmd, all state, logs and
# config in one directory, on ports chosen by the caller, so it never touches
# a system Slurm and several instances can coexist.
#
#   deploy/slurm/single-node.sh start DIR [CTLD_PORT SLURMD_PORT [CPUS [NODES]]]
#       writes DIR/slurm.conf, starts the daemons, waits until the node is
#       idle (at most 30 seconds), and prints
#       SLURM_CONF=DIR/slurm.conf. Daemon PIDs go to DIR/pids.
#       NODES > 1 declares that many Slurm nodes wn1..wnN, each with CPUS
#       CPUs and its own slurmd on this host (ports SLURMD_PORT,
#       SLURMD_PORT+1, ...), so multi-node job scripts (srun -N 2) run here;
#       every task still sees this host's name.
#   deploy/slurm/single-node.sh stop DIR
#       kills the daemons listed in DIR/pids (SIGTERM, then SIGKILL), then
#       any step daemon of this instance still running, with its tasks.
#
# Then: SLURM_CONF=DIR/slurm.conf srun --mpi=pmi2 -n 2 prog
# Needs root (SlurmdUser=root) and the Debian packages slurmd, slurmctld,
# slurm-client, slurm-wlm-basic-plugins and munge.
set -euo pipefail

cmd=${1:-}
dir=${2:-}
[ -n "$cmd" ] && [ -n "$dir" ] || { echo "usage: $0 start|stop DIR [CTLD_PORT SLURMD_PORT [CPUS [NODES]]]" >&2; exit 2; }

stop() {
	[ -f "$dir/pids" ] || return 0
	pids=$(cat "$dir/pids")
	for p in $pids; do kill -TERM "$p" 2>/dev/null || true; done
	for _ in $(seq 20); do
		alive=""
		for p in $pids; do kill -0 "$p" 2>/dev/null && alive="$alive $p"; done
		[ -z "$alive" ] && break
		sleep 0.1
	done
	for p in $pids; do kill -KILL "$p" 2>/dev/null || true; done
	rm -f "$dir/pids"
	sweep_steps
}

# sweep_steps kills the step daemons of this instance that outlive slurmd
# (they are reparented to init and keep running a step's tasks), with the
# tasks under them. They are recognised by slurmd's SLURM_CONF, which they
# inherit.
sweep_steps() {
	local p steps="" tree=""
	for p in $(pgrep -x slurmstepd 2>/dev/null); do
		tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "SLURM_CONF=$dir/slurm.conf" && steps="$steps $p"
	done
	[ -n "$steps" ] || return 0
	descendants() {
		local c
		for c in $(pgrep -P "$1" 2>/dev/null); do
			tree="$tree $c"
			descendants "$c"
		done
	}
	for p in $steps; do descendants "$p"; done
	for p in $tree $steps; do kill -KILL "$p" 2>/dev/null || true; done
}

case "$cmd" in
stop)
	stop
	exit 0
	;;
start) ;;
*)
	echo "$0: unknown command $cmd" >&2
	exit 2
	;;
esac

ctld_port=${3:-6817}
slurmd_port=${4:-6818}
cpus=${5:-4}
nodes=${6:-1}
wait_s=30
[ "$(id -u)" -eq 0 ] || { echo "$0: must run as root (SlurmdUser=root)" >&2; exit 1; }
for b in munged slurmctld slurmd srun sinfo; do
	command -v "$b" >/dev/null || [ -x "/usr/sbin/$b" ] || { echo "$0: $b not installed" >&2; exit 1; }
done
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
mkdir -p "$dir/munge" "$dir/state" "$dir/spool" "$dir/log"
chown munge:munge "$dir/munge" 2>/dev/null || chown munge "$dir/munge"
chmod 755 "$dir/munge"
chmod 755 "$dir"
runuser -u munge -- test -x "$dir/munge" || {
	echo "$0: the munge user cannot reach $dir (a parent directory is private); use a world-traversable directory" >&2
	exit 1
}
: >"$dir/pids"

# Private munged: own socket, pid, seed and log files, the system key.
runuser -u munge -- /usr/sbin/munged --socket="$dir/munge/munge.socket" \
	--pid-file="$dir/munge/munged.pid" --seed-file="$dir/munge/seed" \
	--log-file="$dir/munge/munged.log" --key-file=/etc/munge/munge.key
for _ in $(seq 50); do [ -s "$dir/munge/munged.pid" ] && break; sleep 0.1; done
[ -s "$dir/munge/munged.pid" ] || { echo "$0: munged did not start:" >&2; cat "$dir/munge/munged.log" >&2; exit 1; }
cat "$dir/munge/munged.pid" >>"$dir/pids"
echo >>"$dir/pids"

cat >"$dir/slurm.conf" <<CONF
ClusterName=weft
SlurmctldHost=localhost
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge/munge.socket
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
SlurmdParameters=config_overrides
InactiveLimit=0
KillWait=2
MessageTimeout=10
CONF
if [ "$nodes" -eq 1 ]; then
	names=localhost
	echo "NodeName=localhost NodeAddr=127.0.0.1 CPUs=$cpus State=UNKNOWN" >>"$dir/slurm.conf"
else
	# Several slurmd on one host: per-node pid, spool and log files (%n).
	sed -i -e "s|^SlurmdSpoolDir=.*|SlurmdSpoolDir=$dir/spool/%n|" \
		-e "s|^SlurmdPidFile=.*|SlurmdPidFile=$dir/slurmd-%n.pid|" \
		-e "s|^SlurmdLogFile=.*|SlurmdLogFile=$dir/log/slurmd-%n.log|" "$dir/slurm.conf"
	names=""
	for k in $(seq "$nodes"); do
		echo "NodeName=wn$k NodeHostname=localhost NodeAddr=127.0.0.1 Port=$((slurmd_port + k - 1)) CPUs=$cpus State=UNKNOWN" >>"$dir/slurm.conf"
		names="$names${names:+,}wn$k"
	done
fi
echo "PartitionName=debug Nodes=$names Default=YES MaxTime=INFINITE State=UP" >>"$dir/slurm.conf"

export SLURM_CONF="$dir/slurm.conf"
/usr/sbin/slurmctld -i -D >"$dir/log/slurmctld.out" 2>&1 &
echo $! >>"$dir/pids"
if [ "$nodes" -eq 1 ]; then
	/usr/sbin/slurmd -D >"$dir/log/slurmd.out" 2>&1 &
	echo $! >>"$dir/pids"
else
	for k in $(seq "$nodes"); do
		/usr/sbin/slurmd -D -N "wn$k" >"$dir/log/slurmd-wn$k.out" 2>&1 &
		echo $! >>"$dir/pids"
	done
fi

deadline=$((SECONDS + wait_s))
until [ "$(sinfo -h -N -o '%T' 2>/dev/null | grep -cx idle)" -ge "$nodes" ]; do
	if [ $SECONDS -ge $deadline ]; then
		echo "$0: not all $nodes node(s) idle after ${wait_s}s; logs:" >&2
		tail -n 20 "$dir/log/"* "$dir/munge/munged.log" >&2 || true
		stop
		exit 1
	fi
	for p in $(cat "$dir/pids"); do
		kill -0 "$p" 2>/dev/null || {
			echo "$0: daemon $p exited; logs:" >&2
			tail -n 20 "$dir/log/"* >&2 || true
			stop
			exit 1
		}
	done
	sleep 0.1
done
echo "SLURM_CONF=$dir/slurm.conf"
