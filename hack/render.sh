#!/usr/bin/env bash
# Renders every example through the real Crossplane renderer (crank render,
# Development runtime) against a locally started function-peerrelay, and
# prints every composed resource. No cluster needed.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${PEERRELAY_TOOLS_BIN:-$PWD/.cache/bin}
PORT=${RENDER_PORT:-9443}
PT_PORT=${RENDER_PT_PORT:-9444}

# Our function, and function-patch-and-transform for the pipeline example
# with a step before ours.
"$BIN/function-peerrelay" --insecure --address "127.0.0.1:$PORT" >"$BIN/../function-render.log" 2>&1 &
FN=$!
"$BIN/function-patch-and-transform" --insecure --address "127.0.0.1:$PT_PORT" >"$BIN/../pt-render.log" 2>&1 &
PT=$!
trap 'kill $FN $PT 2>/dev/null || true' EXIT

funcs=$(mktemp)
sed "s/127.0.0.1:9443/127.0.0.1:$PORT/; s/127.0.0.1:9444/127.0.0.1:$PT_PORT/" examples/render/functions.yaml >"$funcs"
for port in "$PORT" "$PT_PORT"; do
  for _ in $(seq 50); do
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
    sleep 0.1
  done
done

render() { # title, xr, composition, extra flags
  echo "# ===== $1: crossplane render $2 $3 ${*:4}"
  "$BIN/crank" render "$2" "$3" "$funcs" "${@:4}"
}
render "v2 PeerRelay" examples/peerrelay.yaml package/configuration/composition-v2.yaml
render "v2 PeerRelay, observed after the provider resolved endpoints" examples/peerrelay.yaml package/configuration/composition-v2.yaml \
  --observed-resources examples/render/observed.yaml --required-resources examples/render/pods.yaml
render "legacy XPeerRelay behind a claim" examples/render/xr-legacy.yaml package/configuration/composition-legacy.yaml
render "AWS Elastic IPs" examples/aws-eip.yaml package/configuration/composition-v2.yaml --required-resources examples/render/authkey-secret.yaml
render "AWS Elastic IPs, checked by the provider" examples/aws-eip.yaml package/configuration/composition-v2.yaml \
  --observed-resources examples/render/observed-aws-eip.yaml --required-resources examples/render/authkey-secret.yaml
render "AWS Elastic IPs allocated by Crossplane: first pass" examples/aws-allocate.yaml package/configuration/composition-v2.yaml --required-resources examples/render/authkey-secret.yaml
render "AWS Elastic IPs allocated by Crossplane: second pass" examples/aws-allocate.yaml package/configuration/composition-v2.yaml \
  --observed-resources examples/render/observed-aws-allocate.yaml --required-resources examples/render/authkey-secret.yaml
render "AWS Managed NLBs, per-replica zones: first pass" examples/aws-managed.yaml package/configuration/composition-v2.yaml --required-resources examples/render/authkey-secret.yaml
render "AWS Managed NLBs, per-replica zones: second pass" examples/aws-managed.yaml package/configuration/composition-v2.yaml \
  --observed-resources examples/render/observed-aws-allocate.yaml --required-resources examples/render/pods-aws-managed.yaml
render "AWS Managed NLBs for a legacy XPeerRelay" examples/render/xr-legacy-aws.yaml package/configuration/composition-legacy.yaml \
  --observed-resources examples/render/observed-aws-legacy.yaml
render "a pipeline with a step before ours" examples/peerrelay.yaml examples/render/composition-two-steps.yaml
rm -f "$funcs"
