# Sourced by scripts/bench/gpt-cpu and resnet-cpu: the current PyTorch from PyPI, in a virtual
# environment outside the source tree that both benchmarks share.
#
#   ensure_torch_venv <who> <venv> <python> [module...]
#
# Makes <venv> with <python> -m venv where it is missing and installs torch into it (CPU wheels
# from download.pytorch.org where reachable, else PyPI's default wheels, CUDA libraries
# included: several GB that run on the CPU alike); then installs each further module that does
# not import (torchvision), held to the torch already there so that pip does not replace it.
# Returns non-zero, having said why on stderr, where that cannot be done. <who> prefixes the
# messages.
# pip install into <venv>: CPU wheels from download.pytorch.org where reachable, else PyPI's.
pip_install_torch_wheels() {
  local venv=$1
  shift
  "$venv/bin/pip" install --timeout 20 --retries 1 \
      --index-url https://download.pytorch.org/whl/cpu "$@" >&2 ||
    "$venv/bin/pip" install "$@" >&2
}

ensure_torch_venv() {
  local who=$1 venv=$2 python=$3
  shift 3
  local py=$venv/bin/python
  if ! { [[ -x "$py" ]] && "$py" -c 'import torch' 2>/dev/null; }; then
    case "$(realpath -m "$venv")/" in
      "$(pwd -P)"/*) echo "$who: SINGULARITY_TORCH_VENV=$venv is inside the source tree" >&2
                     return 1 ;;
    esac
    echo "$who: installing PyTorch from PyPI into $venv (first use; several GB)..." >&2
    mkdir -p "$(dirname "$venv")" || return 1
    if ! "$python" -m venv "$venv" >&2; then
      echo "$who: '$python -m venv' failed (Debian needs python3-venv)" >&2
      return 1
    fi
    pip_install_torch_wheels "$venv" torch || return 1
    "$py" -c 'import torch' >&2 || return 1
  fi
  local module torch_version
  for module in "$@"; do
    "$py" -c "import $module" 2>/dev/null && continue
    torch_version=$("$py" -c 'import importlib.metadata as m; print(m.version("torch"))') || return 1
    echo "$who: installing $module for torch $torch_version into $venv..." >&2
    pip_install_torch_wheels "$venv" "$module" "torch==$torch_version" || return 1
    "$py" -c "import $module" >&2 || return 1
  done
}
