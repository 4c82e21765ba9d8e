#!/usr/bin/env bash
# The golden files that need a current PyTorch from PyPI (torch.optim.Muon is in 2.9 and later;
# Debian's torch is older), recomputed and compared with the committed ones:
#   run_torch_check.sh SCRIPT
# under $SINGULARITY_TORCH_VENV (default ~/.cache/singularity/torch-venv: python3 -m venv VENV &&
# VENV/bin/pip install torch numpy safetensors, about 4 GB). Exit 77 (skipped) without it.
set -uo pipefail
script="$1"
venv="${SINGULARITY_TORCH_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/singularity/torch-venv}"
if ! "$venv/bin/python" -c "import torch, safetensors; assert hasattr(torch.optim, 'Muon')" 2>/dev/null; then
  echo "skipped: no venv with torch >= 2.9 and safetensors at $venv (make one as this script's header says, or set SINGULARITY_TORCH_VENV)"
  exit 77
fi
exec "$venv/bin/python" "$script" --check
