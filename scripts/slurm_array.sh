#!/bin/bash
# Independent pieces of one sweep as a job array (README, "Several machines").
#
#   sbatch scripts/slurm_array.sh CONFIG.toml OUT_DIR
#   sbatch --dependency=afterany:JOBID --wrap "jaxbandit plot OUT_DIR"   # when all are done
#
# Array task I runs shard I of N of the sweep's cell groups (0-based: the array must
# be 0-(N-1)); the N tasks fill one OUT_DIR, on a filesystem every node sees. They
# may start at the same moment: the first creates the sweep's manifest, the others
# find it. A failed task resumes where it stopped when run again:
#   JAXBANDIT_SHARDS=N sbatch --array=I scripts/slurm_array.sh CONFIG.toml OUT_DIR
#
#SBATCH --job-name=jaxbandit-shard
#SBATCH --array=0-7
#SBATCH --ntasks=1
#SBATCH --cpus-per-task=8
#SBATCH --time=12:00:00
#SBATCH --output=%x-%A_%a.out

set -euo pipefail
CONFIG=${1:?usage: sbatch slurm_array.sh CONFIG.toml OUT_DIR}
OUT=${2:?usage: sbatch slurm_array.sh CONFIG.toml OUT_DIR}
# N from the array itself, so that changing --array is enough; rerunning one task
# (--array=I) needs JAXBANDIT_SHARDS=N, since that array has one task.
SHARDS=${JAXBANDIT_SHARDS:-${SLURM_ARRAY_TASK_COUNT:?run this script with sbatch --array=0-(N-1)}}

jaxbandit run "$CONFIG" --out "$OUT" --quiet --shard "${SLURM_ARRAY_TASK_ID}/${SHARDS}"
