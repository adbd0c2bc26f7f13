#!/usr/bin/env bash
# The "handoff" and "fleet-admit" scenarios of docs/benchmarks.md, at the
# engine's level: the benchmarks in fleet/bench_test.go, replicas in one
# process on the real PostgreSQL (WEIR_TEST_POSTGRES_DSN, or
# postgres://postgres@127.0.0.1:5432/test), each fleet-admit run followed by
# its pgbench baseline on the same database for as long. The summary gives
# the median of each figure over the -count runs, with its ratio or target
# on the same line.
#
#   scripts/bench-fleet.sh                            # 3 runs of 3s each, about 1.5 minutes
#   COUNT=1 BENCHTIME=1s scripts/bench-fleet.sh       # a quick look
#
# Without PostgreSQL the benchmarks are skipped, and the script says so.
set -euo pipefail
cd "$(dirname "$0")/.."

count=${COUNT:-3}
benchtime=${BENCHTIME:-3s}
out=$(mktemp)
trap 'rm -f "$out"' EXIT

echo "load average at the start: $(cut -d' ' -f1-3 /proc/loadavg)"
go test -run '^$' -bench 'Handoff|FleetAdmit' -benchtime "$benchtime" -count "$count" ./fleet/ | tee "$out"
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"

if ! grep -q '^Benchmark.*/' "$out"; then
	echo "no figures: is PostgreSQL running? (go test -v -run '^\$' -bench Handoff ./fleet/ says why)" >&2
	exit 1
fi

echo
echo "median of $count runs of $benchtime:"
awk '
function median(list,   n, v, i, j, t) {
	n = split(list, v, " ")
	if (n == 0) return "NaN"
	for (i = 2; i <= n; i++)
		for (j = i; j > 1 && v[j-1] + 0 > v[j] + 0; j--) { t = v[j]; v[j] = v[j-1]; v[j-1] = t }
	return n % 2 ? v[(n+1)/2] : (v[n/2] + v[n/2+1]) / 2
}
function m(name, unit) { return median(vals[name, unit]) }
function verdict(ok) { return ok ? "met" : "NOT MET" }
/^Benchmark/ {
	name = $1
	sub(/-[0-9]+$/, "", name)
	if (!(name in seen)) { seen[name] = 1; names[++nn] = name }
	for (i = 3; i < NF; i += 2) vals[name, $(i+1)] = vals[name, $(i+1)] " " $i
}
END {
	for (a = 1; a <= nn; a++) {
		n = names[a]
		if (n ~ /^BenchmarkHandoff/) {
			p50 = m(n, "p50-µs"); p99 = m(n, "p99-µs")
			printf "handoff %-40s p50 %8.1f µs  p99 %8.1f µs   (target p50 <= 5 ms, p99 <= 20 ms: %s)\n",
				(n ~ /replicas=3/ ? "3 replicas, neither of the two leads" : "2 replicas, one of them leads"),
				p50, p99, verdict(p50 <= 5000 && p99 <= 20000)
			if ((n, "to-leader-p50-µs") in vals)
				printf "        %-40s p50 %8.1f µs  p99 %8.1f µs\n        %-40s p50 %8.1f µs  p99 %8.1f µs\n",
					"  waiter on the leader", m(n, "to-leader-p50-µs"), m(n, "to-leader-p99-µs"),
					"  waiter on the follower", m(n, "to-follower-p50-µs"), m(n, "to-follower-p99-µs")
		} else if (n ~ /^BenchmarkFleetAdmit/) {
			shape = n; sub(/^BenchmarkFleetAdmit\//, "", shape)
			rate = m(n, "admissions/s"); tps = m(n, "pgbench-tps"); x = m(n, "x-pgbench")
			printf "fleet-admit (engine level) %-22s %9.0f admissions/s (leader %.0f, follower %.0f)  pgbench %6.0f tps  x-pgbench %.2fx   (target >= 1x: %s)\n",
				shape, rate, m(n, "on-leader/s"), m(n, "on-follower/s"), tps, x, verdict(x >= 1)
		}
	}
	print "(x-pgbench is the median of the runs'"'"' own ratios, each against the pgbench run right after it)"
}' "$out"
