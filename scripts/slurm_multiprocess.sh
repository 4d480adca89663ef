#!/bin/bash
# One sweep as one program over several nodes (README, "Several machines").
#
#   sbatch scripts/slurm_multiprocess.sh CONFIG.toml OUT_DIR
#
# srun starts one task per node; each runs the same command, and `--distributed`
# lets JAX read the coordinator, the number of processes and this process's index
# from SLURM. OUT_DIR must be on a filesystem every node sees: process 0 writes
# results and checkpoints, and every process reads the checkpoint it resumes from.
# If a node fails, the other processes stop with an error; submit the same job again
# to resume from the last checkpoint.
#
#SBATCH --job-name=jaxbandit-sweep
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=1
#SBATCH --cpus-per-task=16
#SBATCH --time=24:00:00
#SBATCH --output=%x-%j.out
# With GPUs, one per task:
##SBATCH --gpus-per-task=1

set -euo pipefail
CONFIG=${1:?usage: sbatch slurm_multiprocess.sh CONFIG.toml OUT_DIR}
OUT=${2:?usage: sbatch slurm_multiprocess.sh CONFIG.toml OUT_DIR}

# --heartbeat-timeout: how long a silent (frozen) process may stay silent before the
# others are stopped; --join-timeout: how long to wait for every task to start.
srun jaxbandit run "$CONFIG" --out "$OUT" --quiet --distributed \
    --heartbeat-timeout 300 --join-timeout 600
