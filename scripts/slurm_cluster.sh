#!/bin/bash
# A real Slurm cluster of N nodes on this one machine, for the Slurm tests (tests/slurm/) and for
# trying mjrl's batch scripts by hand. Needs root; installs Debian's slurmctld, slurmd,
# slurm-client and munge when they are missing.
#
#   bash scripts/slurm_cluster.sh start [DIR] [NODES]   # default /tmp/mjrl-slurm, 2 nodes
#   bash scripts/slurm_cluster.sh stop [DIR]            # ends only the daemons `start` started
#   bash scripts/slurm_cluster.sh env [DIR]             # the SLURM_CONF line to export
#
# `start` writes DIR/slurm.conf, starts munged (unless one runs), slurmctld and one slurmd per
# node (`slurmd -N nodeI`, all on 127.0.0.1 with ports of their own: Debian builds Slurm with
# several slurmd per host), and returns once every node is idle. The nodes share this host, its
# ports and /tmp; `/etc/hosts` gets a line naming them, removed by `stop`. Slurm's commands find
# the cluster through SLURM_CONF=DIR/slurm.conf. Exit status 3 with one line on stderr: no
# cluster can start here (not root, no packages and no registry to install them from).
set -uo pipefail

cmd=${1:-}
DIR=${2:-/tmp/mjrl-slurm}
NODES=${3:-2}
CONF=$DIR/slurm.conf
HOSTS_MARK="# mjrl-slurm $DIR"

cannot() { echo "slurm cluster: cannot start here: $*" >&2; exit 3; }

install_packages() {
  command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v sbatch >/dev/null \
    && command -v munged >/dev/null && return 0
  command -v apt-get >/dev/null || cannot "Slurm is not installed and there is no apt-get"
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      slurmctld slurmd slurm-client munge; } >"$DIR/apt.log" 2>&1 \
    || cannot "apt-get could not install slurmctld slurmd slurm-client munge (see $DIR/apt.log)"
}

alive() {  # alive PID: running, not a zombie (dead daemons linger as zombies here)
  local state
  state=$(ps -o stat= -p "$1" 2>/dev/null) || return 1
  [[ -n $state && $state != Z* ]]
}

start_munge() {
  if [[ -S /run/munge/munge.socket.2 ]] && munge -n </dev/null >/dev/null 2>&1; then
    return 0  # someone else's munged: used, and left running by `stop`
  fi
  mkdir -p /run/munge /etc/munge /var/lib/munge /var/log/munge
  chown munge:munge /run/munge /etc/munge /var/lib/munge /var/log/munge
  chmod 0700 /etc/munge
  if [[ ! -s /etc/munge/munge.key ]]; then
    mungekey --create --keyfile=/etc/munge/munge.key >/dev/null 2>&1 || cannot "mungekey failed"
    chown munge:munge /etc/munge/munge.key
    chmod 0400 /etc/munge/munge.key
  fi
  runuser -u munge -- /usr/sbin/munged --pid-file=/run/munge/munged.pid || cannot "munged did not start"
  cp /run/munge/munged.pid "$DIR/munged.pid"
}

write_conf() {
  local i cpus memory host
  cpus=$(nproc)
  memory=$(($(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 / NODES))
  host=$(hostname -s)
  rm -rf "$DIR/state" "$DIR/spool"  # a fresh cluster: no job of an earlier one comes back
  mkdir -p "$DIR/state" "$DIR/spool"
  cat >"$CONF" <<EOF
# Written by scripts/slurm_cluster.sh: $NODES nodes on this host.
ClusterName=mjrl
SlurmctldHost=localhost
SlurmctldPort=6817
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
# A requeued job may start again once the credential expires (120 s by default).
AuthInfo=cred_expire=10
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/backfill
SchedulerParameters=batch_sched_delay=0,sched_interval=1,bf_interval=1
SlurmdParameters=config_overrides
# Job ids go on from the last cluster's (mjrl continues a run by its job id), not from 1.
FirstJobId=$(( $(date +%s) % 10000000 ))
ReturnToService=2
KillWait=5
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
# Preemption as a cluster does it: a job of the "high" partition requeues those of "low".
PreemptType=preempt/partition_prio
PreemptMode=REQUEUE
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool/%n
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/slurmd-%n.pid
SlurmctldLogFile=$DIR/slurmctld.log
SlurmdLogFile=$DIR/slurmd-%n.log
EOF
  for i in $(seq 1 "$NODES"); do
    echo "NodeName=node$i NodeHostname=$host NodeAddr=127.0.0.1 Port=$((17000 + i)) CPUs=$cpus RealMemory=$memory" >>"$CONF"
  done
  cat >>"$CONF" <<EOF
PartitionName=debug Nodes=node[1-$NODES] Default=YES MaxTime=INFINITE State=UP PriorityTier=1 PreemptMode=OFF
PartitionName=low Nodes=node[1-$NODES] MaxTime=INFINITE State=UP PriorityTier=1 PreemptMode=REQUEUE
PartitionName=high Nodes=node[1-$NODES] MaxTime=INFINITE State=UP PriorityTier=2
EOF
}

name_nodes() {
  sed -i "\|$HOSTS_MARK|d" /etc/hosts
  echo "127.0.0.1 $(seq -f 'node%g' -s ' ' 1 "$NODES") $HOSTS_MARK" >>/etc/hosts
}

wait_idle() {
  local i idle
  for i in $(seq 1 100); do
    idle=$(SLURM_CONF=$CONF sinfo -h -N -o '%N %t' 2>/dev/null | awk '$2 == "idle"' | sort -u | wc -l)
    [[ $idle -ge $NODES ]] && return 0
    sleep 0.2
  done
  SLURM_CONF=$CONF sinfo -N >&2
  cannot "the nodes did not become idle in 20 s (logs in $DIR)"
}

start() {
  [[ $(id -u) == 0 ]] || cannot "Slurm's daemons need root"
  stop_daemons 2>/dev/null
  mkdir -p "$DIR"
  install_packages
  start_munge
  write_conf
  name_nodes
  slurmctld -f "$CONF" || cannot "slurmctld did not start (see $DIR/slurmctld.log)"
  local i
  for i in $(seq 1 "$NODES"); do
    slurmd -f "$CONF" -N "node$i" || cannot "slurmd node$i did not start (see $DIR/slurmd-node$i.log)"
  done
  wait_idle
  echo "slurm cluster: $NODES nodes idle; export SLURM_CONF=$CONF"
}

cancel_jobs() {
  # Jobs still on the cluster (a test that failed half-way) end with it: their processes would
  # outlive the daemons.
  local i
  [[ -f $DIR/slurmctld.pid ]] && alive "$(cat "$DIR/slurmctld.pid")" || return 0
  SLURM_CONF=$CONF scancel --quiet --user="$(id -un)" 2>/dev/null || return 0
  for i in $(seq 1 150); do  # KillWait is 5 s
    [[ -z $(SLURM_CONF=$CONF squeue --noheader 2>/dev/null) ]] && return 0
    sleep 0.1
  done
}

stop_daemons() {
  local pidfile pid i
  cancel_jobs
  for pidfile in "$DIR"/slurmd-*.pid "$DIR"/slurmctld.pid "$DIR"/munged.pid; do
    [[ -f $pidfile ]] || continue
    pid=$(cat "$pidfile")
    if [[ -n $pid ]] && alive "$pid"; then
      kill "$pid" 2>/dev/null
      for i in $(seq 1 50); do alive "$pid" || break; sleep 0.1; done
      alive "$pid" && kill -9 "$pid" 2>/dev/null
    fi
    rm -f "$pidfile"
  done
  sed -i "\|$HOSTS_MARK|d" /etc/hosts 2>/dev/null
  return 0
}

case $cmd in
  start) start ;;
  stop) stop_daemons; echo "slurm cluster: stopped" ;;
  env) echo "export SLURM_CONF=$CONF" ;;
  *) echo "usage: bash scripts/slurm_cluster.sh start|stop|env [DIR] [NODES]" >&2; exit 2 ;;
esac
