# shellcheck shell=bash
# Shared by the slurm suite's tests (sourced, with the binary and the source root as $1 and $2):
# - exit 77 (skipped), saying why, where a test cluster cannot run: not root, slurm-wlm or munge
#   missing, or its daemons do not start (the message names the daemon's log);
# - a scratch directory with a throw-away cluster in it (scripts/slurm-cluster), stopped on every
#   exit: success, failure, SIGTERM (meson's timeout) or SIGINT. If the test is killed outright
#   (meson sends SIGKILL 0.5 s after SIGTERM), the cluster's watchdog stops it once this shell
#   has gone. The directory is kept, with the daemons' logs, when a test fails;
# - checks counted as in tests/e2e/run_lib.sh, and helpers to follow jobs without accounting.
bin=$(readlink -f "$1")
source_root="$2"
cluster_script="$source_root/scripts/slurm-cluster"
template="$source_root/scripts/slurm/train.sbatch"

skip() { echo "SKIP: $*"; exit 77; }
[[ $(id -u) -eq 0 ]] || skip "not root: the test cluster's daemons (munged, slurmctld, slurmd) run as root"
for tool in munged mungekey slurmctld slurmd sbatch srun squeue scontrol scancel sinfo; do
  command -v "$tool" > /dev/null || skip "$tool not found: install slurm-wlm and munge (scripts/setup)"
done

# Under /tmp whatever TMPDIR says: munge's socket path must fit in 108 bytes.
work=$(mktemp -d /tmp/slurm-test.XXXXXX)
cluster="$work/cluster"
test_start=$(date +%s)
cleanup() {
  local rc=$?
  trap - EXIT TERM INT
  "$cluster_script" stop "$cluster" 2>&1 | sed 's/^/  /'
  if [[ $rc -ne 0 ]]; then
    echo "kept for inspection: $work (daemon logs in $cluster/log)"
  else
    rm -rf "$work"
  fi
  echo "test time: $(( $(date +%s) - test_start )) s"
  exit "$rc"
}
trap cleanup EXIT
trap 'echo "interrupted: stopping the test cluster"; exit 143' TERM INT
cd "$work" || exit 1

cluster_start=$(date +%s.%N)
if ! "$cluster_script" start "$cluster" --owner $$ > cluster-start.log 2>&1; then
  cat cluster-start.log
  skip "the test cluster did not start: $(grep '^slurm-cluster: ' cluster-start.log | tail -n 1 | sed 's/^slurm-cluster: //')"
fi
echo "cluster started in $(awk -v s="$cluster_start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }') s"
# shellcheck disable=SC1091
source "$cluster/env"

checks=0 failures=0 failed_this=0
check() { checks=$((checks + 1)); failed_this=0; }
fail() {
  echo "FAIL: $*"
  if [[ $failed_this -eq 0 ]]; then failures=$((failures + 1)); failed_this=1; fi
}
finish() {
  echo "$(( checks - failures )) passed, $failures failed"
  [[ $failures -eq 0 ]]
}

# Every client command runs under `timeout`: a controller that died must fail the test, not hang
# it.
# The state of job (or array task) $1: RUNNING, PENDING, COMPLETED, FAILED, ... ("" once the
# controller has forgotten it: MinJobAge is 300 s on the test cluster).
job_state() { timeout 10 scontrol show job "$1" 2> /dev/null | grep -o 'JobState=[A-Z_]*' | head -n 1 | cut -d= -f2; }
# "EXIT:SIGNAL" of job $1, e.g. 0:0.
job_exit() { timeout 10 scontrol show job "$1" 2> /dev/null | grep -o ' ExitCode=[0-9:]*' | head -n 1 | cut -d= -f2; }
ended() {
  case $1 in
    COMPLETED | FAILED | CANCELLED | TIMEOUT | NODE_FAIL | PREEMPTED | OUT_OF_MEMORY | BOOT_FAIL | DEADLINE | "") return 0 ;;
    *) return 1 ;;
  esac
}
# Waits at most $2 seconds for job $1 to end, printing each state change with the seconds since
# the call; leaves the last state in $state. (It runs in this shell, not in a $(...) subshell,
# so that a SIGTERM's trap runs within half a second.)
wait_job() {
  local job=$1 limit=$2 start prev=
  start=$(date +%s)
  while :; do
    state=$(job_state "$job")
    [[ $state != "$prev" ]] && echo "  job $job: ${state:-gone} at +$(( $(date +%s) - start )) s"
    prev=$state
    if ended "$state" || (( $(date +%s) - start >= limit )); then break; fi
    sleep 0.5
  done
}
