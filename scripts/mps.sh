#!/usr/bin/env bash
# Starts (or stops) NVIDIA's MPS control daemon the way bai enforces fractional GPUs with it:
#   sudo scripts/mps.sh start [DIR]   (DIR default /run/bai-mps; then set gpu_mps_dir = DIR)
#   sudo scripts/mps.sh stop  [DIR]
# DIR/pipe holds the daemon's pipes (mounted into sessions at /tmp/nvidia-mps); DIR/shm is a
# tmpfs that is the daemon's /dev/shm (mounted into sessions at /dev/shm: MPS clients and the
# server share memory there). The daemon runs in a mount namespace of its own so the host's
# /dev/shm is never shared with sessions. Needs root, util-linux's unshare and the driver's
# nvidia-cuda-mps-control. Keep the GPUs' compute mode at Default.
set -euo pipefail
cmd="${1:-}"
dir="${2:-/run/bai-mps}"
shm_size="${BAI_MPS_SHM_SIZE:-4g}"
case "$cmd" in
start)
  command -v nvidia-cuda-mps-control >/dev/null || { echo "nvidia-cuda-mps-control not found (NVIDIA driver utilities)" >&2; exit 1; }
  if [ -S "$dir/pipe/control" ]; then echo "MPS already running in $dir"; exit 0; fi
  mkdir -p "$dir/pipe" "$dir/shm" "$dir/log"
  mountpoint -q "$dir/shm" || mount -t tmpfs -o "size=$shm_size,mode=1777" tmpfs "$dir/shm"
  # Sessions run as uid 1000 (`work`): their MPS server is started with that uid and must be
  # able to use the pipes.
  chmod 0755 "$dir" "$dir/pipe"
  unshare -m --propagation private sh -c '
    mount --bind "$1/shm" /dev/shm &&
    CUDA_MPS_PIPE_DIRECTORY="$1/pipe" CUDA_MPS_LOG_DIRECTORY="$1/log" nvidia-cuda-mps-control -d' mps "$dir"
  for _ in $(seq 50); do [ -S "$dir/pipe/control" ] && break; sleep 0.1; done
  [ -S "$dir/pipe/control" ] || { echo "the MPS control daemon did not start; see $dir/log/control.log" >&2; exit 1; }
  echo "MPS control daemon running in $dir (set gpu_mps_dir = \"$dir\")"
  ;;
stop)
  if [ -S "$dir/pipe/control" ]; then
    echo quit | CUDA_MPS_PIPE_DIRECTORY="$dir/pipe" nvidia-cuda-mps-control || true
  fi
  mountpoint -q "$dir/shm" && umount "$dir/shm" || true
  echo "MPS stopped in $dir"
  ;;
*)
  echo "usage: $0 start|stop [DIR]" >&2; exit 2 ;;
esac
