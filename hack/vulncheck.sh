#!/usr/bin/env bash
# govulncheck against the Go vulnerability database as the module proxy
# serves it (golang.org/x/vulndb, indexed offline; vuln.go.dev cannot be
# reached here). Fails when a module we depend on has a reachable
# vulnerability; findings in the Go standard library are reported, since
# only a newer Go release than this machine's fixes them.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${PEERRELAY_TOOLS_BIN:-$PWD/.cache/bin}
DB=$PWD/.cache/vulndb
osv=$(cd tools/vulndb && go list -m -f '{{.Dir}}' golang.org/x/vulndb)/data/osv
if [ ! -f "$DB/index/db.json" ] || [ "$osv" -nt "$DB/index/db.json" ]; then
  rm -rf "$DB"
  "$BIN/indexdb" -vulns "$osv" -out "$DB"
fi
out=$("$BIN/govulncheck" -db "file://$DB" ./... 2>&1) || true
echo "$out" | grep -E '^(Vulnerability #|    [A-Z]|  Module|  Standard library|    Found in|    Fixed in)' || true
summary=$(echo "$out" | grep -E '^(Your code is affected|No vulnerabilities found)' || echo "govulncheck gave no summary")
echo "$summary"
case "$summary" in
  "No vulnerabilities found"*) exit 0 ;;
  *"from the Go standard library."*) echo "only the standard library is affected: fixed by a newer Go than 1.26.8"; exit 0 ;;
  *) echo "a dependency has a reachable vulnerability: upgrade it"; exit 1 ;;
esac
