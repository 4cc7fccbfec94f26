#!/usr/bin/env bash
# Run the end-to-end suite (tests/e2e) against the scheduler deployed on a throw-away kind
# cluster:
#
#   1. create a kind cluster from hack/kind-config.yaml (one control plane, two workers),
#   2. build the scheduler image with docker and load it into the cluster's nodes,
#   3. install the CRDs (conf/crds/) and the deployment (conf/deploy/) with that image,
#   4. give the workers fake GPUs: extended resources patched into the node status, and the
#      vGPU register annotation a device plugin would write,
#   5. run `python -m pytest tests/e2e` with LAHAR_E2E_DEPLOYED=1,
#   6. delete the cluster on the way out, whether the run passed or not.
#
# Usage: hack/run-e2e-kind.sh [pytest arguments...]
#   e.g. hack/run-e2e-kind.sh -k gang -x
#
# Environment:
#   CLUSTER_NAME      kind cluster name (default lahar-e2e). An existing cluster of that
#                     name is reused and left in place.
#   KEEP_CLUSTER=1    keep the cluster afterwards (the script prints how to reach it).
#   IMAGE             image tag to build and deploy (default lahar:e2e).
#   KIND_NODE_IMAGE   node image for `kind create cluster --image` (default: kind's own).
#   PYTHON            interpreter with pytest and the project's dependencies (default python3).
#   ROLLOUT_TIMEOUT   how long to wait for the scheduler to become ready (default 180s).
#   GPUS_PER_NODE     fake GPUs per worker (default 2); GPU_MEMORY_MIB memory of each
#                     (default 16384); VGPU_SPLIT vGPUs per card (default 10).
#
# Requires: docker (with a running engine), kind, kubectl, and python with pytest.

set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CLUSTER_NAME="${CLUSTER_NAME:-lahar-e2e}"
KEEP_CLUSTER="${KEEP_CLUSTER:-0}"
IMAGE="${IMAGE:-lahar:e2e}"
KIND_NODE_IMAGE="${KIND_NODE_IMAGE:-}"
PYTHON="${PYTHON:-python3}"
ROLLOUT_TIMEOUT="${ROLLOUT_TIMEOUT:-180s}"
GPUS_PER_NODE="${GPUS_PER_NODE:-2}"
GPU_MEMORY_MIB="${GPU_MEMORY_MIB:-16384}"
VGPU_SPLIT="${VGPU_SPLIT:-10}"

NAMESPACE="lahar-system"
DEPLOYMENT="lahar-scheduler"
CONTAINER="scheduler"
SCHEDULER_NAME="volcano"
GPU_NODE_LABEL="lahar.dev/e2e-gpu=true"
GPU_TYPE="NVIDIA-Tesla-T4"

log() { printf '==> %s\n' "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

# -- tools ------------------------------------------------------------------------------------
missing=()
for tool in docker kind kubectl "$PYTHON"; do
  command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
if ((${#missing[@]} > 0)); then
  die "missing required tool(s): ${missing[*]}
  docker:  https://docs.docker.com/get-docker/
  kind:    go install sigs.k8s.io/kind@latest   (or your package manager)
  kubectl: https://kubernetes.io/docs/tasks/tools/
  python:  set PYTHON to an interpreter with the project installed: pip install -e '.[test]'"
fi
docker info >/dev/null 2>&1 || die "docker is installed but its engine does not answer (is the daemon running?)"
"$PYTHON" -c 'import pytest, kubernetes' 2>/dev/null \
  || die "$PYTHON lacks pytest or kubernetes; run: $PYTHON -m pip install -e '${ROOT}[test]'"
[[ "$GPUS_PER_NODE" =~ ^[1-9][0-9]*$ ]] || die "GPUS_PER_NODE must be a positive integer"
[[ "$GPU_MEMORY_MIB" =~ ^[1-9][0-9]*$ ]] || die "GPU_MEMORY_MIB must be a positive integer"
[[ "$VGPU_SPLIT" =~ ^[1-9][0-9]*$ ]] || die "VGPU_SPLIT must be a positive integer"

# -- cluster, and cleanup on every way out ---------------------------------------------------
KUBECONFIG_FILE="$(mktemp "${TMPDIR:-/tmp}/lahar-e2e-kubeconfig.XXXXXX")"
CREATED_CLUSTER=0

diagnose() {
  log "scheduler state for diagnosis"
  kubectl get nodes -o wide || true
  kubectl get pods --all-namespaces -o wide || true
  kubectl -n "$NAMESPACE" describe deployment "$DEPLOYMENT" || true
  kubectl -n "$NAMESPACE" logs "deployment/$DEPLOYMENT" --all-containers --tail=200 || true
}

cleanup() {
  local status=$?
  trap - EXIT INT TERM
  if ((status != 0)) && [[ -s "$KUBECONFIG_FILE" ]]; then
    diagnose
  fi
  if [[ "$KEEP_CLUSTER" == "1" ]]; then
    log "keeping cluster $CLUSTER_NAME; use it with: export KUBECONFIG=$KUBECONFIG_FILE"
    log "delete it with: kind delete cluster --name $CLUSTER_NAME"
  elif ((CREATED_CLUSTER)); then
    log "deleting cluster $CLUSTER_NAME"
    kind delete cluster --name "$CLUSTER_NAME" || true
    rm -f "$KUBECONFIG_FILE"
  else
    rm -f "$KUBECONFIG_FILE"
  fi
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if kind get clusters 2>/dev/null | grep -qx "$CLUSTER_NAME"; then
  log "reusing existing kind cluster $CLUSTER_NAME (it will be left in place)"
  kind get kubeconfig --name "$CLUSTER_NAME" >"$KUBECONFIG_FILE"
else
  log "creating kind cluster $CLUSTER_NAME"
  create_args=(--name "$CLUSTER_NAME" --config "$ROOT/hack/kind-config.yaml"
               --kubeconfig "$KUBECONFIG_FILE" --wait 180s)
  if [[ -n "$KIND_NODE_IMAGE" ]]; then
    create_args+=(--image "$KIND_NODE_IMAGE")
  fi
  CREATED_CLUSTER=1
  kind create cluster "${create_args[@]}"
fi
export KUBECONFIG="$KUBECONFIG_FILE"

# -- image ------------------------------------------------------------------------------------
log "building image $IMAGE"
DOCKER_BUILDKIT=1 docker build --tag "$IMAGE" "$ROOT"
log "loading $IMAGE into the cluster's nodes"
kind load docker-image "$IMAGE" --name "$CLUSTER_NAME"

# -- scheduler --------------------------------------------------------------------------------
log "installing CRDs"
kubectl apply -f "$ROOT/conf/crds/"
kubectl wait --for=condition=Established --timeout=60s \
  crd/podgroups.scheduling.volcano.sh crd/queues.scheduling.volcano.sh \
  crd/devices.scheduling.koordinator.sh
log "installing the scheduler"
kubectl apply -f "$ROOT/conf/deploy/"
kubectl -n "$NAMESPACE" set image "deployment/$DEPLOYMENT" "$CONTAINER=$IMAGE"
kubectl -n "$NAMESPACE" rollout status "deployment/$DEPLOYMENT" --timeout="$ROLLOUT_TIMEOUT"

# -- fake GPUs on the workers -----------------------------------------------------------------
# GPU share reads volcano.sh/gpu-memory (MiB over all cards) and volcano.sh/gpu-number
# (cards); vGPU reads volcano.sh/vgpu-number (cards x split), -memory (MiB) and -cores
# (100 per card), plus the register annotation: one `UUID,split,memoryMiB,type,health,mode`
# entry per card, each ending in ':'. The kubelet keeps extended resources it does not manage.
read -r -a gpu_nodes <<<"$(kubectl get nodes -l "$GPU_NODE_LABEL" -o jsonpath='{.items[*].metadata.name}')"
((${#gpu_nodes[@]} > 0)) || die "no nodes labelled $GPU_NODE_LABEL (see hack/kind-config.yaml)"
total_memory=$((GPUS_PER_NODE * GPU_MEMORY_MIB))
vgpu_number=$((GPUS_PER_NODE * VGPU_SPLIT))
vgpu_cores=$((GPUS_PER_NODE * 100))
resources="\"volcano.sh/gpu-memory\":\"$total_memory\",\"volcano.sh/gpu-number\":\"$GPUS_PER_NODE\""
resources+=",\"volcano.sh/vgpu-number\":\"$vgpu_number\",\"volcano.sh/vgpu-memory\":\"$total_memory\""
resources+=",\"volcano.sh/vgpu-cores\":\"$vgpu_cores\""
for node in "${gpu_nodes[@]}"; do
  register=""
  for ((card = 0; card < GPUS_PER_NODE; card++)); do
    register+="GPU-${node}-${card},${VGPU_SPLIT},${GPU_MEMORY_MIB},${GPU_TYPE},true,hami-core:"
  done
  log "advertising $GPUS_PER_NODE fake GPU(s) on $node"
  kubectl annotate node "$node" --overwrite "volcano.sh/node-vgpu-register=$register"
  kubectl patch node "$node" --subresource=status --type=merge \
    -p "{\"status\":{\"capacity\":{$resources},\"allocatable\":{$resources}}}"
done
for node in "${gpu_nodes[@]}"; do
  kubectl wait --for=jsonpath='{.status.allocatable.volcano\.sh/gpu-number}'="$GPUS_PER_NODE" \
    --timeout=30s "node/$node"
done

# -- tests ------------------------------------------------------------------------------------
log "running tests/e2e against the deployed scheduler"
cd "$ROOT"
LAHAR_E2E_DEPLOYED=1 \
LAHAR_E2E_SCHEDULER_NAME="$SCHEDULER_NAME" \
LAHAR_E2E_SCHEDULER_NAMESPACE="$NAMESPACE" \
LAHAR_E2E_SCHEDULER_DEPLOYMENT="$DEPLOYMENT" \
  "$PYTHON" -m pytest tests/e2e "$@"
log "e2e passed"
