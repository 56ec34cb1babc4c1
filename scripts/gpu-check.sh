#!/usr/bin/env bash
# Checks bai's GPU code on a real NVIDIA machine (no Docker needed), as run for issue 38:
#   scripts/gpu-check.sh PATH/TO/bai [OUTDIR]
# 1. `bai gpus` (report and JSON) idle and under a matrix-multiply load (processes, SM use);
# 2. MPS as bai sets it up (scripts/mps.sh): a client in a mount namespace of its own, as a
#    session container sees it (pipes read-only at /tmp/nvidia-mps, the daemon's /dev/shm), with the
#    environment `bai gpus --mps-env` computes: its SM count, its pinned-memory limit (an
#    allocation under the limit succeeds, one over it fails), its speed against no limit; and
#    what a client that drops the environment gets (the documented limit of MPS); a daemon
#    killed and started again; EXCLUSIVE_PROCESS against a client that leaves MPS.
# Needs python3 with PyTorch for the loads.
set -uo pipefail
bai="$(realpath "$1")"
out="${2:-/tmp/gpu-check}"
here="$(cd "$(dirname "$0")" && pwd)"
mkdir -p "$out"
exec > >(tee "$out/gpu-check.log") 2>&1
# Where a driver lives outside the usual paths (some GPU images mount it at /usr/local/nvidia).
export PATH="$PATH:/usr/local/nvidia/bin"
export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:-}:/usr/local/nvidia/lib64:/usr/local/nvidia/lib"
step() { printf '\n== %s (%s)\n' "$*" "$(date +%T)"; }

step host
uname -srm
nvidia-smi --query-gpu=index,name,uuid,memory.total,driver_version,mig.mode.current,compute_mode --format=csv
"$bai" --version
echo "MPS control: $(command -v nvidia-cuda-mps-control || echo 'not found')"

step "bai gpus (defaults: cuda_shares_per_gpu = 1)"
"$bai" gpus
step "bai gpus with cuda_shares_per_gpu = 4"
BAI_CUDA_SHARES_PER_GPU=4 "$bai" gpus
"$bai" gpus --json > "$out/gpus.json"; echo "JSON: $(wc -c < "$out/gpus.json") bytes"

cat > /tmp/load.py <<'PY'
import os, sys, time, torch
secs = float(sys.argv[1])
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
torch.cuda.synchronize()
n, t = 0, time.time()
while time.time() - t < secs:
    b = a @ a
    n += 1
torch.cuda.synchronize()
dt = time.time() - t
print(f"pid {os.getpid()}: {n} matmuls in {dt:.1f} s = {2 * 8192**3 * n / dt / 1e12:.0f} TFLOP/s", flush=True)
PY
step "bai gpus under load (a matmul loop, pid shown)"
python3 /tmp/load.py 12 &
load=$!
sleep 7
"$bai" gpus | sed -n '1,12p'
wait $load

cat > /tmp/mps_client.py <<'PY'
import os, sys, torch
env = {k: v for k, v in os.environ.items() if k.startswith("CUDA_MPS")}
p = torch.cuda.get_device_properties(0)
print(f"pid {os.getpid()} env {env}")
print(f"  SMs visible: {p.multi_processor_count}, memory {p.total_memory >> 20} MiB")
limit = os.environ.get("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", "")
lim_mib = int(limit.split("=")[1].rstrip("M")) if limit else p.total_memory >> 20
for frac in (0.5, 1.5):
    mib = int(lim_mib * frac)
    try:
        x = torch.empty(mib << 20, dtype=torch.uint8, device="cuda")
        x.fill_(1); torch.cuda.synchronize()
        print(f"  allocating {mib} MiB ({frac} x limit): succeeded")
        del x; torch.cuda.empty_cache()
    except Exception as e:
        print(f"  allocating {mib} MiB ({frac} x limit): refused ({type(e).__name__}: {str(e).splitlines()[0][:120]})")
PY
step "MPS: start the daemon as scripts/mps.sh does"
mps=/tmp/bai-mps
BAI_MPS_SHM_SIZE=2g "$here/mps.sh" start "$mps" || { echo "MPS could not start here"; exit 0; }
# One daemon per device: this machine's first.
dev=$(ls -d "$mps"/*/ | head -1); dev=${dev%/}
ls -la "$dev/pipe"
BAI_GPU_MPS_DIR=$mps BAI_CUDA_SHARES_PER_GPU=4 "$bai" gpus | tail -3
env_q="$(BAI_CUDA_SHARES_PER_GPU=4 "$bai" gpus --mps-env 1)"
echo "bai gpus --mps-env 1 (of 4):"; echo "$env_q"

# A client as a session container sees MPS.
client() { # env-lines, command...
  local envs="$1"; shift
  unshare -m --propagation private sh -c '
    mkdir -p /tmp/nvidia-mps && mount --bind "$1/pipe" /tmp/nvidia-mps &&
    mount -o remount,ro,bind /tmp/nvidia-mps && mount --bind "$1/shm" /dev/shm && shift &&
    exec env $0 "$@"' "$(echo $envs)" "$dev" "$@"
}
step "MPS client with a quarter share: SMs and pinned memory"
client "$env_q" python3 /tmp/mps_client.py
step "two quarter-share clients at once, matmul speed (the full GPU did the figure above)"
client "$env_q" python3 /tmp/load.py 10 &
c1=$!
client "$env_q" python3 /tmp/load.py 10 &
c2=$!
sleep 6
echo "-- bai gpus while they run:"
"$bai" gpus | sed -n '1,14p'
wait $c1 $c2
step "a client that drops the limits (what MPS does not enforce)"
client "CUDA_MPS_PIPE_DIRECTORY=/tmp/nvidia-mps" python3 /tmp/mps_client.py
echo get_server_list | CUDA_MPS_PIPE_DIRECTORY=$dev/pipe nvidia-cuda-mps-control
tail -5 "$dev/log/control.log" 2>/dev/null
step "a daemon killed (its socket left behind): mps.sh starts a new one"
pkill -9 -f nvidia-cuda-mps-control; sleep 1
"$here/mps.sh" start "$mps"
client "$env_q" python3 /tmp/mps_client.py
"$here/mps.sh" stop "$mps"
step "BAI_MPS_EXCLUSIVE=1: a client leaving MPS gets no GPU; MPS clients still run"
BAI_MPS_EXCLUSIVE=1 "$here/mps.sh" start "$mps"
nvidia-smi --query-gpu=compute_mode --format=csv,noheader
client "$env_q" python3 /tmp/mps_client.py
client "CUDA_MPS_PIPE_DIRECTORY=/nonexistent" python3 /tmp/mps_client.py
"$here/mps.sh" stop "$mps"
nvidia-smi -c DEFAULT >/dev/null
step done
