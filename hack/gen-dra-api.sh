#!/usr/bin/env bash
# Regenerate the Python stubs of the kubelet APIs a DRA driver speaks (plugin registration,
# DRA v1 and v1beta1) from scheduler/devices/node/dra/kubeletapi/*.proto. The output is
# byte-identical for one grpcio-tools version, pinned here; --check regenerates into a
# temporary tree and fails when the checked-in stubs differ (what CI or a reviewer runs).
#
#   pip install 'grpcio-tools==1.85.1'
#   hack/gen-dra-api.sh [--check]
set -euo pipefail
cd "$(dirname "$0")/.."

TOOLS_VERSION=1.85.1
DIR=scheduler/devices/node/dra/kubeletapi
PROTOS=("$DIR/registration.proto" "$DIR/dra_v1.proto" "$DIR/dra_v1beta1.proto")

have=$(python -c 'import importlib.metadata as m; print(m.version("grpcio-tools"))' 2>/dev/null || true)
if [[ "$have" != "$TOOLS_VERSION" ]]; then
  echo "error: grpcio-tools $TOOLS_VERSION is needed (found: ${have:-none}); pip install 'grpcio-tools==$TOOLS_VERSION'" >&2
  exit 1
fi

generate() {  # generate DESTINATION_ROOT
  python -m grpc_tools.protoc -I. --python_out="$1" --pyi_out="$1" --grpc_python_out="$1" "${PROTOS[@]}"
}

outputs() {
  for proto in "${PROTOS[@]}"; do
    base=$(basename "$proto" .proto)
    echo "${base}_pb2.py ${base}_pb2.pyi ${base}_pb2_grpc.py"
  done
}

if [[ "${1:-}" == "--check" ]]; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  generate "$tmp"
  status=0
  for name in $(outputs); do
    if ! cmp -s "$tmp/$DIR/$name" "$DIR/$name"; then
      echo "stale: $DIR/$name (run hack/gen-dra-api.sh)" >&2
      status=1
    fi
  done
  exit $status
fi

generate .
echo "generated $(outputs | tr '\n' ' ')in $DIR"
