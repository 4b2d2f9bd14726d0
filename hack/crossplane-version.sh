#!/usr/bin/env bash
# Builds Crossplane core at version $1 from the Go module proxy into
# .cache/matrix/$1/crossplane, in a wrapper module of its own there (its CRDs
# and Helm chart are read from that module, as test/harness does for the
# pinned one in tools/crossplane). For `make test-matrix`.
set -euo pipefail
v=$1
dir=$(cd "$(dirname "$0")/.." && pwd)/.cache/matrix/$v
[ -x "$dir/crossplane" ] && exit 0
mkdir -p "$dir"
cd "$dir"
cat > go.mod <<MOD
module peerrelay.test/matrix

go 1.26.8

godebug default=go1.26
MOD
cat > tools.go <<'GO'
//go:build tools

package matrix

import _ "github.com/crossplane/crossplane/v2/cmd/crossplane"
GO
go get "github.com/crossplane/crossplane/v2@$v"
# From v2.3 the API types are a module of their own, released with core.
proxy=$(go env GOPROXY | cut -d, -f1)
if curl -sf -o /dev/null "$proxy/github.com/crossplane/crossplane/apis/v2/@v/$v.info"; then
  go get "github.com/crossplane/crossplane/apis/v2@$v"
fi
go mod tidy
# The version lives in crossplane-runtime from v2.3, in core's own package before.
go build -ldflags "-X github.com/crossplane/crossplane-runtime/v2/pkg/version.version=$v -X github.com/crossplane/crossplane/v2/internal/version.version=$v" \
  -o crossplane github.com/crossplane/crossplane/v2/cmd/crossplane
