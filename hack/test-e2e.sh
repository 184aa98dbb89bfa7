#!/usr/bin/env bash
# Runs the e2e tests (test/e2e) as three shards of one test binary at once: `make test-e2e`.
#
# Most of the e2e time is waiting (pods starting, grace periods, leases expiring), and
# Go runs a package's tests that are not parallel one after the other. The tests that
# build clusters of their own (own API servers, `tranche up` clusters, simulated
# machines, etcd clusters) run in shards 1 (those that are not parallel) and 2 (the
# parallel ones, two at a time); every other test, on the package's shared cluster, runs
# in shard 0, so a new test is never left out, but for a few long ones in shard 2 that
# even out the shards' times. Each shard has its own shared cluster and
# its own namespace prefixes (E2E_RUN_ID, see runID in test/e2e/cluster_test.go).
# (Four shards, the shared-cluster tests in two halves, were faster by two minutes but
# loaded the two cores to 22-24 with the unit tests beside them, and tests failed on
# timing; three kept it near 12.)
#
# Usage: TRANCHE_BIN=/path/to/tranche hack/test-e2e.sh [extra test binary flags]
set -uo pipefail
cd "$(dirname "$0")/.."
: "${TRANCHE_BIN:?TRANCHE_BIN must name the tranche binary (make test-e2e builds it)}"
GO=${GO:-go}
# A shard still running after E2E_TIMEOUT minutes gets SIGTERM, on which the test binary
# prints its goroutines and stops the clusters it started (go test's own timeout, a
# little later, would panic without cleaning up).
TIMEOUT=${E2E_TIMEOUT:-20}

# Shard 1: tests on clusters of their own that run one after the other.
ownSeq=(
	TestAggregatedAPIServiceProxy TestCompatWatchCompacted TestCustomResourcesServedAfterRestart
	TestElectedControlPlane TestImageGCKeepsImagesInUse TestInFlightLimit
	TestInformerAcrossRestartAndCompaction TestJoinWithToken TestListContinueAfterCompaction
	TestMachinesHostGW TestMachinesOverlay TestNetworkPolicyMatrix TestPodSecurityDefaults
	TestProxyModeChoice TestProxyModeIPTables TestRegistriesFile TestRestartKeepsAllocations
	TestSimulatedLAN
)
# Shard 2: tests on clusters of their own that call t.Parallel.
ownPar=(
	TestAcceptanceSeveralMachines TestEtcdQuorum TestGracefulDeletionAfterAgentRestart TestMachineCertificateRotation
	TestLeaseReleasedOnSIGTERM TestLinkCut TestLinkCutHostGW TestLoadBalancerPoolL2
	TestMachineJoin TestMachinesLoadBalancer TestReadmeMachines TestUpDetachInterrupted TestWorkloads
)
# Tests on the shared cluster that run in shard 2 (on a shared cluster of its own),
# before its parallel tests start: with all of them in shard 0, it took 1206 s at the
# load of the unit tests beside it (the other two 810 and 554 s) and hit its timeout.
shared2=(
	TestAppsStatefulSetScaleDownHalts TestHPAScalesDeployment TestNodeLifecycle
	TestSampleAPIServer TestTopPods
)
ownPar+=("${shared2[@]}")
# These use the shared cluster but, as TestProxyModeIPTables' does, it publishes NodePort
# 30080 (seed 003's) on the host's 127.0.0.1, which one cluster at a time can hold: they
# take turns with it in shard 1 (on a shared cluster of shard 1's own).
hostPort=(TestHostPublisher TestServiceProxy)
ownSeq+=("${hostPort[@]}")
anchored() { # the regular expression matching exactly the names given
	local IFS='|'
	echo "^($*)\$"
}

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
names=("shared cluster" "own clusters, one at a time" "own clusters, parallel, and a few on a shared one")
shard() { # shard N ARGS...
	local n=$1
	shift
	# The shard's namespace prefixes end in its run id (runID in the tests).
	local id=$(($$ % 250 * 4 + n))
	(
		cd test/e2e &&
			E2E_RUN_ID=$id TRANCHE_BIN=$TRANCHE_BIN timeout --signal=TERM --kill-after=2m "${TIMEOUT}m" \
				"$work/e2e.test" -test.count=1 -test.timeout="$((TIMEOUT + 3))m" "$@" >"$work/shard$n.log" 2>&1
		echo $? >"$work/shard$n.rc"
		echo "test-e2e: shard $n (${names[$n]}) ended after $(($(date +%s) - start)) s, exit $(cat "$work/shard$n.rc")"
		sweep "$n" "$id"
	) &
	pids+=($!)
}
# sweep removes the network namespaces a shard left (none, unless it was killed or a
# test's cleanup failed) and says so: a leftover is a defect to fix.
sweep() { # sweep N ID
	local ns
	for ns in $(ip netns list | awk '{print $1}' | grep -E "^[a-z]+$2-"); do
		echo "test-e2e: shard $1 left network namespace $ns; deleting it" >&2
		ip netns delete "$ns"
	done
}
shard 0 -test.skip "$(anchored "${ownSeq[@]}" "${ownPar[@]}")" "$@"
shard 1 -test.run "$(anchored "${ownSeq[@]}")" "$@"
shard 2 -test.run "$(anchored "${ownPar[@]}")" "$@"
wait "${pids[@]}"
pids=()

rc=0
for n in 0 1 2; do
	echo "=== test-e2e shard $n ==="
	cat "$work/shard$n.log"
	[ "$(cat "$work/shard$n.rc" 2>/dev/null)" = 0 ] || rc=1
done
if [ $rc = 0 ]; then
	echo "ok  	test/e2e (3 shards)	$(($(date +%s) - start)) s"
else
	echo "FAIL	test/e2e (3 shards)	$(($(date +%s) - start)) s"
fi
exit $rc
