#!/usr/bin/env bash
# Run the end-to-end suite (tests/e2e) against the scheduler deployed on a throw-away kind
# cluster:
#
#   1. create a kind cluster from hack/kind-config.yaml (one control plane, two workers),
#   2. build the scheduler image with docker and load it into the cluster's nodes,
#   3. install the CRDs (conf/crds/) and the deployment (conf/deploy/) with that image,
#   4. turn GPU share on in the scheduler conf and deploy the node agent (conf/deploy/node-agent/)
#      with fake GPUs on the GPU workers: the real kubelet registers its device plugin and calls
#      its Allocate,
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
#   GPUS_PER_NODE     fake GPUs per GPU worker (default 2); GPU_MEMORY_MIB memory of each
#                     (default 16384).
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

NAMESPACE="lahar-system"
DEPLOYMENT="lahar-scheduler"
CONTAINER="scheduler"
SCHEDULER_NAME="volcano"
GPU_NODE_LABEL_KEY="lahar.dev/e2e-gpu"
GPU_NODE_LABEL="$GPU_NODE_LABEL_KEY=true"
CONF_MAP="lahar-scheduler-conf"
AGENT="lahar-node-agent"

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

# -- cluster, and cleanup on every way out ---------------------------------------------------
KUBECONFIG_FILE="$(mktemp "${TMPDIR:-/tmp}/lahar-e2e-kubeconfig.XXXXXX")"
CREATED_CLUSTER=0

diagnose() {
  log "scheduler state for diagnosis"
  kubectl get nodes -o wide || true
  kubectl get pods --all-namespaces -o wide || true
  kubectl -n "$NAMESPACE" describe deployment "$DEPLOYMENT" || true
  kubectl -n "$NAMESPACE" logs "deployment/$DEPLOYMENT" --all-containers --tail=200 || true
  kubectl -n "$NAMESPACE" logs "daemonset/$AGENT" --all-containers --tail=100 || true
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

# -- device sharing: GPU share on, the node agent with fake GPUs on the GPU workers ----------
# The workers have no GPU, so the node agent runs on fake cards (--fake-gpus): the same code as
# on a GPU node with NVML replaced. Its device plugin registers volcano.sh/gpu-memory with the
# real kubelet, its reporter writes volcano.sh/gpu-number into the node status, and its Allocate
# answers the kubelet with the card the scheduler chose (tests/e2e/test_node_agent.py).
log "turning GPU share on in the scheduler conf (conf/gpushare.conf)"
kubectl -n "$NAMESPACE" create configmap "$CONF_MAP" \
  --from-file=lahar-scheduler.conf="$ROOT/conf/gpushare.conf" --dry-run=client -o yaml \
  | kubectl apply -f -
kubectl -n "$NAMESPACE" rollout restart "deployment/$DEPLOYMENT"  # families are read at start
kubectl -n "$NAMESPACE" rollout status "deployment/$DEPLOYMENT" --timeout="$ROLLOUT_TIMEOUT"
read -r -a gpu_nodes <<<"$(kubectl get nodes -l "$GPU_NODE_LABEL" -o jsonpath='{.items[*].metadata.name}')"
((${#gpu_nodes[@]} > 0)) || die "no nodes labelled $GPU_NODE_LABEL (see hack/kind-config.yaml)"
log "installing the node agent with $GPUS_PER_NODE fake GPU(s) of ${GPU_MEMORY_MIB}Mi per GPU worker"
kubectl apply -f "$ROOT/conf/deploy/node-agent/"
args_path="/spec/template/spec/containers/0/args/-"
kubectl -n "$NAMESPACE" patch daemonset "$AGENT" --type=json -p "[
  {\"op\": \"add\", \"path\": \"$args_path\", \"value\": \"--fake-gpus=$GPUS_PER_NODE\"},
  {\"op\": \"add\", \"path\": \"$args_path\", \"value\": \"--fake-gpu-memory=${GPU_MEMORY_MIB}Mi\"},
  {\"op\": \"replace\", \"path\": \"/spec/template/spec/containers/0/image\", \"value\": \"$IMAGE\"},
  {\"op\": \"add\", \"path\": \"/spec/template/spec/nodeSelector/${GPU_NODE_LABEL_KEY//\//~1}\",
   \"value\": \"true\"}]"
kubectl -n "$NAMESPACE" rollout status "daemonset/$AGENT" --timeout="$ROLLOUT_TIMEOUT"
total_memory=$((GPUS_PER_NODE * GPU_MEMORY_MIB))
for node in "${gpu_nodes[@]}"; do
  log "waiting for $node to advertise its fake GPUs"
  kubectl wait --for=jsonpath='{.status.allocatable.volcano\.sh/gpu-memory}'="$total_memory" \
    --timeout=120s "node/$node"
  kubectl wait --for=jsonpath='{.status.allocatable.volcano\.sh/gpu-number}'="$GPUS_PER_NODE" \
    --timeout=60s "node/$node"
done

# -- tests ------------------------------------------------------------------------------------
log "running tests/e2e against the deployed scheduler"
cd "$ROOT"
LAHAR_E2E_DEPLOYED=1 \
LAHAR_E2E_NODE_AGENT=1 \
LAHAR_E2E_IMAGE="$IMAGE" \
LAHAR_E2E_SCHEDULER_NAME="$SCHEDULER_NAME" \
LAHAR_E2E_SCHEDULER_NAMESPACE="$NAMESPACE" \
LAHAR_E2E_SCHEDULER_DEPLOYMENT="$DEPLOYMENT" \
  "$PYTHON" -m pytest tests/e2e "$@"
log "e2e passed"
