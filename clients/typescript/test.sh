#!/usr/bin/env bash
# The TypeScript client's checks (`make test-clients` runs it with DELIBERATE_ADDRESS set to a real stack):
# dependencies as locked, generated code in step with protos/, type-check, then the tests (those that need the
# stack are skipped, saying so, when DELIBERATE_ADDRESS is unset). Needs Node >= 20 and npm; buf from $BUF, the
# PATH or the repository's .venv (make install).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cd "$here"
node -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 20 ? 0 : 1)' ||
  { echo "test.sh: Node >= 20 is needed, found $(node --version)" >&2; exit 1; }

# npm writes node_modules/.package-lock.json on install: older than the lockfile means stale.
if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  npm ci --no-audit --no-fund
fi

buf=${BUF:-$(command -v buf || echo "$root/.venv/bin/buf")}
[ -x "$buf" ] || { echo "test.sh: buf not found (set BUF, or run make install)" >&2; exit 1; }
generated=$(mktemp -d)
trap 'rm -rf "$generated"' EXIT
"$buf" generate --template buf.gen.yaml --output "$generated"
if ! diff -r "$generated/src/gen" src/gen; then
  echo "test.sh: src/gen drifted from protos/: run 'npm run generate' in clients/typescript (or make proto)" >&2
  exit 1
fi

npx tsc --noEmit
[ -n "${DELIBERATE_ADDRESS:-}" ] || echo "test.sh: DELIBERATE_ADDRESS is not set: the tests against a stack are skipped"
node --import tsx --test test/*.test.ts
