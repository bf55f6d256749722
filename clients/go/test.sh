#!/usr/bin/env bash
# The Go client's checks, offline (Debian's Go packages; offline.sh): go vet, then go test. With
# DELIBERATE_ADDRESS (a running Scheduler's host:port; `make test-clients` starts a stack and sets it) the tests
# solve, stream, run out of time and send bad input against it; without it those tests skip and say so.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
"$here/offline.sh" go vet ./...
"$here/offline.sh" go test -count=1 -v ./deliberate/
