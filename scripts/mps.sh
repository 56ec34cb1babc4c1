#!/usr/bin/env bash
# Starts (or stops) NVIDIA's MPS control daemons the way bai enforces fractional GPUs with them:
#   sudo scripts/mps.sh start [DIR]   (DIR default /run/bai-mps; then set gpu_mps_dir = DIR)
#   sudo scripts/mps.sh stop  [DIR]
# One daemon per device (each MIG instance, else each GPU), seeing only that device
# (CUDA_VISIBLE_DEVICES=<UUID>), in DIR/<UUID>/: `pipe` holds its pipes (mounted read-only
# into a session at /tmp/nvidia-mps), `shm` is a tmpfs that is its /dev/shm (mounted into the
# session at /dev/shm: MPS clients and their server share memory there), `log` its logs. Each
# daemon runs in a mount namespace of its own, so the host's /dev/shm is never shared.
# BAI_MPS_EXCLUSIVE=1 also sets each GPU's compute mode to EXCLUSIVE_PROCESS: code in a
# session that leaves MPS (points CUDA at another pipe directory) then gets no context on the
# device instead of all of it. A session given a whole GPU is no MPS client and cannot use such
# a GPU while its MPS server runs: set it on GPUs kept for fractional sessions. Needs root,
# util-linux's unshare, nvidia-smi and nvidia-cuda-mps-control (the driver's utilities).
set -euo pipefail
cmd="${1:-}"
dir="${2:-/run/bai-mps}"
shm_size="${BAI_MPS_SHM_SIZE:-4g}"

# The devices bai offers: a GPU's MIG instances where it has some, else the GPU.
devices() {
  nvidia-smi -L | awk '
    /^GPU / { if (gpu != "" && !mig) print gpu; match($0, /UUID: [^)]*/); gpu = substr($0, RSTART + 6, RLENGTH - 6); mig = 0; next }
    /MIG/   { match($0, /UUID: [^)]*/); print substr($0, RSTART + 6, RLENGTH - 6); mig = 1 }
    END     { if (gpu != "" && !mig) print gpu }'
}

# Whether the daemon of DEVICE-DIR answers (a live daemon, not a stale socket).
answers() {
  [ -S "$1/pipe/control" ] &&
    echo get_server_list | CUDA_MPS_PIPE_DIRECTORY="$1/pipe" timeout 5 nvidia-cuda-mps-control >/dev/null 2>&1
}

case "$cmd" in
start)
  command -v nvidia-cuda-mps-control >/dev/null || { echo "nvidia-cuda-mps-control not found (NVIDIA driver utilities)" >&2; exit 1; }
  mkdir -p "$dir"
  chmod 0755 "$dir"
  for uuid in $(devices); do
    case "$uuid" in *[!A-Za-z0-9-]*|'') echo "odd device UUID '$uuid'" >&2; exit 1 ;; esac
    d="$dir/$uuid"
    if answers "$d"; then echo "MPS already running for $uuid"; continue; fi
    mkdir -p "$d/pipe" "$d/shm" "$d/log"
    rm -f "$d/pipe/control" "$d/pipe/control_privileged"
    mountpoint -q "$d/shm" || mount -t tmpfs -o "size=$shm_size,mode=1777" tmpfs "$d/shm"
    # Sessions run as uid 1000 (`work`): the daemon starts their MPS server with that uid.
    chmod 0755 "$d" "$d/pipe"
    if [ "${BAI_MPS_EXCLUSIVE:-0}" = 1 ] && [ "${uuid#GPU-}" != "$uuid" ]; then
      nvidia-smi -i "$uuid" -c EXCLUSIVE_PROCESS >/dev/null
    fi
    unshare -m --propagation private sh -c '
      mount --bind "$1/shm" /dev/shm &&
      CUDA_VISIBLE_DEVICES="$2" CUDA_MPS_PIPE_DIRECTORY="$1/pipe" CUDA_MPS_LOG_DIRECTORY="$1/log" \
        nvidia-cuda-mps-control -d' mps "$d" "$uuid"
    for _ in $(seq 50); do answers "$d" && break; sleep 0.1; done
    answers "$d" || { echo "the MPS control daemon for $uuid did not start; see $d/log/control.log" >&2; exit 1; }
    echo "MPS control daemon for $uuid running in $d"
  done
  echo "set gpu_mps_dir = \"$dir\""
  ;;
stop)
  rc=0
  for d in "$dir"/*/; do
    d="${d%/}"
    [ -d "$d/pipe" ] || continue
    if answers "$d"; then
      echo quit | CUDA_MPS_PIPE_DIRECTORY="$d/pipe" nvidia-cuda-mps-control || rc=1
    fi
    if mountpoint -q "$d/shm"; then
      # The daemon may take a moment to leave.
      for _ in $(seq 50); do umount "$d/shm" 2>/dev/null && break; sleep 0.1; done
      mountpoint -q "$d/shm" && { echo "could not unmount $d/shm" >&2; rc=1; }
    fi
    echo "MPS stopped in $d"
  done
  exit "$rc"
  ;;
*)
  echo "usage: $0 start|stop [DIR]" >&2; exit 2 ;;
esac
