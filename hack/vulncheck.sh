#!/usr/bin/env bash
# govulncheck against the Go vulnerability database as the module proxy
# serves it (golang.org/x/vulndb, indexed offline; vuln.go.dev cannot be
# reached here). Fails when a module we depend on has a reachable
# vulnerability, but for the one accepted below; findings in the Go
# standard library are reported, since only a newer Go release than this
# machine's fixes them.
#
# hack/xpkgsign, the release's signing tool, is checked on its own: cosign
# brings in golang.org/x/crypto/openpgp (GO-2026-5932: unmaintained, fixed
# only by its removal from x/crypto), through rekor's PGP key type, and
# checked with everything else govulncheck's call graph lends its types to
# every io.Reader and error in the tree (function-peerrelay's main "reached"
# it through kong's error). In xpkgsign it is accepted: the one real call
# path is cosign's transparency-log check (tlogValidateEntry → rekor's PGP
# verification), which xpkgsign turns off (IgnoreTlog, no Rekor client);
# the other traces are the packages' inits and those same interface calls
# (a base64 decoder, ed25519's random source). No shipped image holds it.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${PEERRELAY_TOOLS_BIN:-$PWD/.cache/bin}
DB=$PWD/.cache/vulndb

osv=$(cd tools/vulndb && go list -m -f '{{.Dir}}' golang.org/x/vulndb)/data/osv
if [ ! -f "$DB/index/db.json" ] || [ "$osv" -nt "$DB/index/db.json" ]; then
  rm -rf "$DB"
  "$BIN/indexdb" -vulns "$osv" -out "$DB"
fi

# check PACKAGES: govulncheck of the packages; fails on a finding in a
# module other than $accepted (an ID, or empty).
check() {
  local out summary
  out=$("$BIN/govulncheck" -db "file://$DB" "$@" 2>&1) || true
  echo "$out" | grep -E '^(Vulnerability #|    [A-Z]|  Module|  Standard library|    Found in|    Fixed in)' || true
  summary=$(echo "$out" | grep -E '^(Your code is affected|No vulnerabilities found)' || echo "govulncheck gave no summary")
  echo "$summary"
  case "$summary" in
    "No vulnerabilities found"*) return 0 ;;
    "Your code is affected"*) ;;
    *) return 1 ;;
  esac
  echo "$out" | awk -v accepted="$accepted" '
    function flush() {
      if (id == "" || !module) return
      if (id == accepted) { print id ": accepted (hack/vulncheck.sh says why)"; return }
      print id ": a dependency has a reachable vulnerability: upgrade it"; failed = 1
    }
    /^Vulnerability #/ { flush(); id = $3; module = 0; next }
    /^  Module:/ { module = 1 }
    END { flush(); exit failed }'
}
accepted=""
check $(go list ./... | grep -v '/hack/xpkgsign$')
accepted=GO-2026-5932
check ./hack/xpkgsign
echo "no dependency has a reachable vulnerability but the accepted one; the standard library's are fixed by a newer Go than 1.26.8"
