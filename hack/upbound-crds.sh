#!/usr/bin/env bash
# Fetches the Upbound AWS provider's CRDs for the managed resources the
# function composes (EIP, LB, LBTargetGroup, LBListener,
# LBTargetGroupAttachment) from the Go module proxy into .cache/upbound-crds,
# for the render test's server-side dry-run. The checksum database does not
# know this module, so the expected hash is pinned here instead.
set -euo pipefail
cd "$(dirname "$0")/.."
MOD=github.com/upbound/provider-aws
VERSION=v1.23.0
SUM="h1:ZtukIrSGYVIwh23+Bif7HEe2ZMQor37BWwN/nh49WiU="
OUT=.cache/upbound-crds
CRDS="ec2.aws.upbound.io_eips elbv2.aws.upbound.io_lbs elbv2.aws.upbound.io_lbtargetgroups elbv2.aws.upbound.io_lblisteners elbv2.aws.upbound.io_lbtargetgroupattachments"

if [ -f "$OUT/$VERSION" ]; then exit 0; fi
json=$(cd /tmp && GOFLAGS=-mod=mod GONOSUMDB=github.com/upbound go mod download -json "$MOD@$VERSION")
got=$(sed -n 's/.*"Sum": "\(.*\)".*/\1/p' <<<"$json")
if [ "$got" != "$SUM" ]; then
  echo "upbound-crds: $MOD@$VERSION has sum $got, want $SUM" >&2
  exit 1
fi
dir=$(sed -n 's/.*"Dir": "\(.*\)".*/\1/p' <<<"$json")
rm -rf "$OUT" && mkdir -p "$OUT"
for c in $CRDS; do cp "$dir/package/crds/$c.yaml" "$OUT/"; done
chmod u+w "$OUT"/*.yaml
touch "$OUT/$VERSION"
