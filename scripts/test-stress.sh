#!/usr/bin/env bash
# Runs `make test-go` RUNS times (default 3) in a row while one busy loop
# per core (STRESS_LOOPS, default nproc) keeps the machine saturated, and
# prints one line per run. Exits non-zero unless every run passed. The
# test services must be running (scripts/services-up.sh).
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
runs=${1:-3}
loops=${STRESS_LOOPS:-$(nproc)}
burners=()
stop() { [[ ${#burners[@]} -eq 0 ]] || kill "${burners[@]}" 2>/dev/null; }
trap stop EXIT
for _ in $(seq "$loops"); do
	(while :; do :; done) &
	burners+=("$!")
done
passed=0
for i in $(seq "$runs"); do
	start=$(date +%s)
	if make -C "$here/.." --no-print-directory test-go >"/tmp/floodgate-test-stress.$i.log" 2>&1; then
		passed=$((passed + 1))
		echo "run $i of $runs: pass ($(( $(date +%s) - start )) s, $loops busy loops)"
	else
		echo "run $i of $runs: FAIL ($(( $(date +%s) - start )) s); log: /tmp/floodgate-test-stress.$i.log"
		grep -E '^(--- FAIL|FAIL|panic)' "/tmp/floodgate-test-stress.$i.log" | head -20
	fi
done
echo "$passed of $runs runs passed under load"
[[ $passed -eq $runs ]]
