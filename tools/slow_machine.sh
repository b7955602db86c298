#!/usr/bin/env bash
# tools/slow_machine.sh PERCENT COMMAND...: runs COMMAND with its CPU time limited to PERCENT of
# one CPU in all (a cgroup v1 CPU quota over a 10 ms period, so the throttling's pauses stay
# short), to see how long a throughput-bound command would take on a slower machine: on a
# 2-core machine, 41 is two cores at about 1/4.9 of their speed. It slows throughput only, not
# cache or memory latency: an emulation, not the slow machine. Needs root and cgroup v1's cpu
# controller at /sys/fs/cgroup/cpu (docs/RELIABILITY.md, "The test suite's time").
set -euo pipefail
if [ $# -lt 2 ] || ! [[ $1 =~ ^[0-9]+$ ]] || [ "$1" -lt 1 ]; then
    echo "usage: tools/slow_machine.sh PERCENT COMMAND... (PERCENT of one CPU, a whole number)" >&2
    exit 2
fi
root=/sys/fs/cgroup/cpu
if [ ! -w "$root" ] || [ ! -e "$root/cpu.cfs_quota_us" ]; then
    echo "tools/slow_machine.sh: needs root and cgroup v1's cpu controller at $root" >&2
    exit 1
fi
percent=$1
shift
group=$root/canis_slow_$$
mkdir "$group"
cleanup() {
    for pid in $(cat "$group/cgroup.procs" 2>/dev/null); do
        echo "$pid" >"$root/cgroup.procs" 2>/dev/null || true
    done
    rmdir "$group" 2>/dev/null || true
}
trap cleanup EXIT
echo 10000 >"$group/cpu.cfs_period_us"
echo $((percent * 100)) >"$group/cpu.cfs_quota_us"
# The command's shell joins the group first, so everything it starts is limited too.
bash -c 'echo $$ >"$1/cgroup.procs"; shift; exec "$@"' _ "$group" "$@"
