#!/usr/bin/env bash
# make test: the unit tests and the e2e tests at once.
#
# The e2e tests spend most of their time waiting (pods starting, grace periods, leases
# expiring): in a run alone they kept the two cores about half busy. The unit tests'
# time is mostly building and linking some 130 test binaries. So the unit tests run
# beside the e2e shards (hack/test-e2e.sh), their builds at the lowest CPU priority
# (nice 19) so that they take what the e2e tests leave, their test binaries at the
# normal priority (go test -exec 'nice -n -19' undoes the 19 for them), since some
# unit tests time leases and retries and must not wait behind a build.
#
# Usage: TRANCHE_BIN=/path/to/tranche hack/test.sh
set -uo pipefail
cd "$(dirname "$0")/.."
: "${TRANCHE_BIN:?TRANCHE_BIN must name the tranche binary (make test builds it)}"
GO=${GO:-go}
export GO TRANCHE_BIN

rcfile=$(mktemp /tmp/trtest-unit-XXXXXX)
unit=
cleanup() {
	[ -n "$unit" ] && kill -TERM -- "-$unit" 2>/dev/null
	rm -f "$rcfile"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

start=$(date +%s)
pkgs=$($GO list ./... | grep -v /test/e2e) || exit 1
# Its own process group, so that an interrupted run stops the whole go test.
set -m
(
	nice -n 19 $GO test -count=1 -timeout 10m -exec 'nice -n -19' $pkgs
	echo $? >"$rcfile"
	echo "test: unit tests ended after $(($(date +%s) - start)) s"
) &
unit=$!
set +m

./hack/test-e2e.sh
e2e=$?
wait "$unit"
unit=
urc=$(cat "$rcfile")
echo "test: unit tests exit ${urc:-?}, e2e tests exit $e2e, $(($(date +%s) - start)) s in all"
[ "$urc" = 0 ] && [ "$e2e" = 0 ]
