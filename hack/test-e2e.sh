#!/usr/bin/env bash
# Runs the e2e tests (test/e2e) as two shards of one test binary at once: `make test-e2e`.
#
# Most of the e2e time is waiting (pods starting, grace periods, leases expiring), and
# Go runs a package's tests that are not parallel one after the other. Shard 1 runs the
# tests that build clusters of their own (own API servers, `tranche up` clusters,
# simulated machines, etcd clusters); shard 0 runs every other test, those that share
# the package's cluster, in the order Go gives them. A test named in neither list runs
# in shard 0, so a new test is never left out. Each shard has its own shared cluster and
# its own namespace prefixes (E2E_SHARD, see runID in test/e2e/cluster_test.go).
#
# Usage: TRANCHE_BIN=/path/to/tranche hack/test-e2e.sh [extra test binary flags]
set -uo pipefail
cd "$(dirname "$0")/.."
: "${TRANCHE_BIN:?TRANCHE_BIN must name the tranche binary (make test-e2e builds it)}"
GO=${GO:-go}
TIMEOUT=${E2E_TIMEOUT:-20m}

# The tests of shard 1: each builds what it tests on, and uses no cluster of shard 0.
own=(
	TestAcceptanceSeveralMachines TestAggregatedAPIServiceProxy TestCompatWatchCompacted
	TestCustomResourcesServedAfterRestart TestElectedControlPlane TestEtcdQuorum
	TestGracefulDeletionAfterAgentRestart TestImageGCKeepsImagesInUse TestInFlightLimit
	TestInformerAcrossRestartAndCompaction TestJoinWithToken TestLeaseReleasedOnSIGTERM
	TestLinkCut TestLinkCutHostGW TestListContinueAfterCompaction TestLoadBalancerPoolL2
	TestMachineJoin TestMachinesHostGW TestMachinesLoadBalancer TestMachinesOverlay
	TestNetworkPolicyMatrix TestPodSecurityDefaults TestProxyModeChoice TestProxyModeIPTables
	TestReadmeMachines TestRegistriesFile TestRestartKeepsAllocations TestSimulatedLAN
	TestWorkloads
)
ownRE="^($(
	IFS='|'
	echo "${own[*]}"
))\$"

work=$(mktemp -d /tmp/trtest-e2e-XXXXXX)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done
	wait
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if ! $GO test -c -o "$work/e2e.test" ./test/e2e; then
	echo "test-e2e: building the e2e test binary failed" >&2
	exit 1
fi

start=$(date +%s)
shard() { # shard N -test.run|-test.skip
	local n=$1 sel=$2
	(
		cd test/e2e &&
			E2E_SHARD=$n TRANCHE_BIN=$TRANCHE_BIN "$work/e2e.test" -test.count=1 -test.timeout="$TIMEOUT" \
				"$sel" "$ownRE" "${@:3}" >"$work/shard$n.log" 2>&1
		echo $? >"$work/shard$n.rc"
		echo "test-e2e: shard $n ($( [ "$sel" = -test.run ] && echo "own clusters" || echo "shared cluster")) ended after $(($(date +%s) - start)) s, exit $(cat "$work/shard$n.rc")"
	) &
	pids+=($!)
}
shard 0 -test.skip "$@"
shard 1 -test.run "$@"
wait "${pids[@]}"
pids=()

rc=0
for n in 0 1; do
	echo "=== test-e2e shard $n ==="
	cat "$work/shard$n.log"
	[ "$(cat "$work/shard$n.rc" 2>/dev/null)" = 0 ] || rc=1
done
if [ $rc = 0 ]; then
	echo "ok  	test/e2e (2 shards)	$(($(date +%s) - start)) s"
else
	echo "FAIL	test/e2e (2 shards)	$(($(date +%s) - start)) s"
fi
exit $rc
