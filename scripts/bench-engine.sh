#!/usr/bin/env bash
# The "engine" scenario of docs/benchmarks.md: the memory admission engine's
# benchmarks (admission/bench_test.go). Each line carries its figure and its
# ratio to a baseline measured in the same run; the summary gives the median
# of each metric over the -count runs.
#
#   scripts/bench-engine.sh            # 5 runs of 1s each, about 3 minutes
#   COUNT=1 BENCHTIME=200ms scripts/bench-engine.sh   # a quick look
set -euo pipefail
cd "$(dirname "$0")/.."

count=${COUNT:-5}
benchtime=${BENCHTIME:-1s}
out=$(mktemp)
trap 'rm -f "$out"' EXIT

go test -run XXX -bench 'AcquireRelease|QueuedStep|WaiterMemory' -benchmem \
	-benchtime "$benchtime" -count "$count" ./admission/ | tee "$out"

echo
echo "median of $count:"
awk '
function median(list,   n, v, i, j, t) {
	n = split(list, v, " ")
	for (i = 2; i <= n; i++)
		for (j = i; j > 1 && v[j-1] + 0 > v[j] + 0; j--) { t = v[j]; v[j] = v[j-1]; v[j-1] = t }
	return n % 2 ? v[(n+1)/2] : (v[n/2] + v[n/2+1]) / 2
}
/^Benchmark/ {
	if (!($1 in seen)) { seen[$1] = 1; names[++nn] = $1 }
	for (i = 3; i < NF; i += 2) {
		k = $1 SUBSEP $(i+1)
		if (!(k in vals)) units[$1] = units[$1] " " $(i+1)
		vals[k] = vals[k] " " $i
	}
}
END {
	for (a = 1; a <= nn; a++) {
		line = names[a]
		nu = split(units[names[a]], u, " ")
		for (b = 1; b <= nu; b++) line = line sprintf("  %.4g %s", median(vals[names[a], u[b]]), u[b])
		print line
	}
}' "$out"
