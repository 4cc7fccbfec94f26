#!/usr/bin/env bash
# Replays every pod list of ../shared/traces/alibaba-gpu-v2023/ with every placement policy and
# seeds 42-51 through `lahar replay`, on all of the machine's cores, and writes the summary as
# Markdown (summary.md) beside the per-trace PNGs.
#
#   hack/replay_all.sh [OUT_DIR]            (default: replay-results)
#   TRACES=default,cpu050 POLICIES=fgd SEEDS=42-43 hack/replay_all.sh
#   BOUND=1 hack/replay_all.sh   (adds each trace's clairvoyant bound; needs scipy)
#   POLICIES=fgd-learned POLICY_ARGS="reserve=30" hack/replay_all.sh OUT   (policy arguments)
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${1:-replay-results}"
traces_dir="${TRACES_DIR:-${root}/../shared/traces}"
policies="${POLICIES:-random,dotprod,clustering,packing,bestfit,fgd,fgd-learned}"
seeds="${SEEDS:-42-51}"
jobs="${JOBS:-$(nproc)}"
bound_flag=()
if [[ -n "${BOUND:-}" && "${BOUND}" != "0" ]]; then
  bound_flag=(--bound)
fi
policy_args=()
for item in ${POLICY_ARGS:-}; do
  policy_args+=(--policy-arg "${item}")
done

if [[ ! -d "${traces_dir}/alibaba-gpu-v2023" ]]; then
  echo "error: ${traces_dir}/alibaba-gpu-v2023 not found (set TRACES_DIR)" >&2
  exit 2
fi

if [[ -n "${TRACES:-}" ]]; then
  IFS=, read -r -a traces <<< "${TRACES}"
else
  traces=()
  for csv in "${traces_dir}"/alibaba-gpu-v2023/openb_pod_list_*.csv; do
    name="$(basename "${csv}" .csv)"
    traces+=("${name#openb_pod_list_}")
  done
fi

# summary.md over the traces done so far: rewritten after each trace, so a grid stopped
# part-way still has the table of what ran.
write_summary() {
  python - "${out}" "${traces_dir}" "$@" > "${out}/summary.md.tmp" <<'PY'
import sys
from pathlib import Path

from scheduler.replay.metrics import paper_unallocated, read_paper_allocation, read_run_csv
from scheduler.replay.metrics import summarize
from scheduler.replay.bound import bound_medians, read_bound_csv

out, traces_dir, traces = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3:]
paper_csv = traces_dir / "fgd-results" / "analysis_allo_discrete.csv"
paper = read_paper_allocation(paper_csv) if paper_csv.is_file() else {}
print("| trace | policy | seeds | 95 % | 100 % | 110 % | 130 % |")
print("|---|---|---|---|---|---|---|")
for trace in traces:
    curves = [read_run_csv(p) for p in sorted((out / trace).glob("*.csv"))
              if p.name not in ("summary.csv", "bound.csv")]
    rows = summarize(curves)
    for policy in sorted({r.policy for r in rows}):
        cells, seeds = [], 0
        for level in (95, 100, 110, 130):
            row = next((r for r in rows if r.policy == policy and r.arrived_pct == level), None)
            theirs = paper_unallocated(paper, trace=trace, policy=policy, level=level)
            ours = f"{row.unallocated_pct_median:.2f}" if row else "–"
            seeds = max(seeds, row.seeds if row else 0)
            cells.append(ours + (f" ({theirs:.2f})" if theirs is not None else ""))
        print(f"| {trace} | {policy} | {seeds} | " + " | ".join(cells) + " |")
    bound_csv = out / trace / "bound.csv"
    if bound_csv.is_file():
        rows_b = read_bound_csv(bound_csv)
        medians = bound_medians(rows_b).get(trace, {})
        seeds_b = len({seed for _, seed, _ in rows_b})
        cells = [f"{medians[level]:.2f}" if level in medians else "–"
                 for level in (95, 100, 110, 130)]
        print(f"| {trace} | *bound* | {seeds_b} | " + " | ".join(cells) + " |")
PY
  mv "${out}/summary.md.tmp" "${out}/summary.md"
}

mkdir -p "${out}"
done_traces=()
for trace in "${traces[@]}"; do
  echo "== ${trace}" >&2
  python -m scheduler replay --trace "${trace}" --policy "${policies}" --seeds "${seeds}" \
    --jobs "${jobs}" --out "${out}/${trace}" --traces-dir "${traces_dir}" "${bound_flag[@]}" \
    "${policy_args[@]}"
  done_traces+=("${trace}")
  write_summary "${done_traces[@]}"
  echo "wrote ${out}/summary.md (${#done_traces[@]} of ${#traces[@]} traces)" >&2
done
