# shellcheck shell=bash
# Shared by the side-by-side harnesses in scripts/bench (sourced, not run).
#
# bench_run FILE CMD...: log CMD with a UTC timestamp to "$log" (the run's commands.log, which
# BENCHMARKS.md quotes), run it with its output in FILE, and on failure say so on stderr and in the
# log without stopping the rounds (one failed command must not cost the measurements around it).
# A harness may define bench_before FILE / bench_after FILE (e.g. to snapshot device counters
# around each command); they default to nothing.
# shellcheck disable=SC2154 # $log is the sourcing script's
bench_run() {
  local file=$1
  shift
  echo "[$(date -u +%T)] $*" >>"$log"
  local rc=0
  if declare -F bench_before >/dev/null; then bench_before "$file"; fi
  "$@" >"$file" 2>&1 || rc=$?
  if declare -F bench_after >/dev/null; then bench_after "$file"; fi
  if ((rc)); then echo "  FAILED (exit $rc): $* (output in $file)" | tee -a "$log" >&2; fi
  return 0
}
