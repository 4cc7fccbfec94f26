#!/usr/bin/env bash
# Regenerate the Python stubs of the kubelet device plugin API (v1beta1) from
# scheduler/devices/node/kubeletapi/api.proto. The output is byte-identical for one
# grpcio-tools version, pinned here; --check regenerates into a temporary tree and fails
# when the checked-in stubs differ (what CI or a reviewer runs).
#
#   pip install 'grpcio-tools==1.85.1'
#   hack/gen-deviceplugin-api.sh [--check]
set -euo pipefail
cd "$(dirname "$0")/.."

TOOLS_VERSION=1.85.1
PROTO=scheduler/devices/node/kubeletapi/api.proto
OUTPUTS=(api_pb2.py api_pb2.pyi api_pb2_grpc.py)

have=$(python -c 'import importlib.metadata as m; print(m.version("grpcio-tools"))' 2>/dev/null || true)
if [[ "$have" != "$TOOLS_VERSION" ]]; then
  echo "error: grpcio-tools $TOOLS_VERSION is needed (found: ${have:-none}); pip install 'grpcio-tools==$TOOLS_VERSION'" >&2
  exit 1
fi

generate() {  # generate DESTINATION_ROOT
  python -m grpc_tools.protoc -I. --python_out="$1" --pyi_out="$1" --grpc_python_out="$1" "$PROTO"
}

if [[ "${1:-}" == "--check" ]]; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  generate "$tmp"
  status=0
  for name in "${OUTPUTS[@]}"; do
    if ! cmp -s "$tmp/$(dirname "$PROTO")/$name" "$(dirname "$PROTO")/$name"; then
      echo "stale: $(dirname "$PROTO")/$name (run hack/gen-deviceplugin-api.sh)" >&2
      status=1
    fi
  done
  exit $status
fi

generate .
echo "generated ${OUTPUTS[*]} in $(dirname "$PROTO")"
