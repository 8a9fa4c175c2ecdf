#!/bin/bash
# On a machine with an NVIDIA GPU, from the course's root, with the course's packages importable
# (python3 -m pip install -r requirements.txt, or carried wheels on PYTHONPATH): the GPU paths of the
# course that a grader without a GPU never runs. Results go to $OUT (default: gpu-results/).
#   1. whether CUDA starts in processes forked from the zygotes' imports, under the sandbox's limits;
#   2. 07 and 08 run top to bottom alone (their measurements: the instructor guide's H200 tables);
#   3. the catalogue of the assignments whose answers or checks take a GPU path (02's WORKLOAD_KIND,
#      04, 07, 08, 10), judged as grading judges, beside the other GPU notebooks;
#   4. every hidden check against the reference solutions (pytest autograder/checks).
# About 6 minutes on one H200 with 16 cores (about 5 on a 2-core machine without a GPU, where the
# catalogue expects the SEEN_ON_A_GPU answers to pass and a timing check may stay undecided).
# The guide's "Measured on one H200" says what it found.
set -u
OUT=${OUT:-gpu-results}; mkdir -p "$OUT"
here=tests/gpu_machine
T0=$(date +%s)
t() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
export PYTHONPATH=${PYTHONPATH:+$PYTHONPATH:}$PWD PYTHONUNBUFFERED=1 MPLBACKEND=Agg COURSE_LEASE=$(mktemp -d)
trap 'rm -rf "$COURSE_LEASE"' EXIT  # the timing checks' lease on the machine, this run's alone
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  python3 -c "import sys, torch; print(sys.version); print('torch', torch.__version__, torch.cuda.is_available())"
  nproc; } > "$OUT/env.txt" 2>&1
notebook() {  # a notebook's cells, in at most $2 seconds; a line that says so when it is stopped
  timeout "$2" python3 $here/run_notebook.py "$1"
  [ $? -ne 124 ] || echo "==== $1: stopped at its time limit of $2 s"
}
timeout 120 python3 $here/fork_probe.py > "$OUT/fork_probe.log" 2>&1
t "forks and limits: $(grep -c '"available": true' "$OUT/fork_probe.log") of 5 children used CUDA (2 should, where there is a GPU)"
for a in 07_pytorch_devices 08_amp_tensor_cores; do notebook $a 150; done > "$OUT/nb_gpu.log" 2>&1
t "07, 08 alone"
( for a in 04_rng_reproducibility 07_pytorch_devices 08_amp_tensor_cores 10_model_pipeline_parallel; do
    timeout 270 python3 $here/judge_catalogue.py "$OUT/catalogue.jsonl" $a &
  done
  timeout 120 python3 $here/judge_catalogue.py "$OUT/catalogue.jsonl" 02_gil WORKLOAD_KIND &
  wait ) > "$OUT/catalogue.log" 2>&1 &
( notebook 12_collectives_sharding 200 ) > "$OUT/nb_12.log" 2>&1 &
( for a in 02_gil 04_rng_reproducibility 09_data_parallel 10_model_pipeline_parallel 11_profiling_scaling; do
    notebook $a 150; done ) > "$OUT/nb_other.log" 2>&1 &
wait
t "catalogue: $(grep -c '"verdict": "ok"' "$OUT/catalogue.jsonl") as expected, $(grep -c '"verdict": "BAD"' "$OUT/catalogue.jsonl") not"
timeout 100 python3 -m pytest -q -p no:cacheprovider autograder/checks -n 8 > "$OUT/checks.log" 2>&1
t "checks against the reference: $(tail -1 "$OUT/checks.log")"
grep -h "^====" "$OUT"/nb_*.log
