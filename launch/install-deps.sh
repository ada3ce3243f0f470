#!/usr/bin/env bash
# Installs what ringtrain needs from Debian's packages, and says what it did.
#   launch/install-deps.sh          build and test dependencies, Fashion-MNIST
#   launch/install-deps.sh --peer   also what the benchmark peers need beyond that
# Not root and something missing: prints the exact apt-get line and exits 1.
set -euo pipefail

packages=(cmake g++ make pkg-config openmpi-bin libopenmpi-dev libhdf5-dev hdf5-tools
          catch2 libopenblas-dev libcli11-dev nlohmann-json3-dev libfmt-dev
          zlib1g-dev dataset-fashion-mnist iproute2 shellcheck clang-format gnuplot-nox
          procps xz-utils                          # tests: pgrep/pkill/ps; gpu-pack.sh and its test (xz)
          libjpeg-dev libpng-dev                   # convert images (libjpeg-turbo, libpng)
          libdnnl-dev ocl-icd-opencl-dev           # CPU convolutions (oneDNN, as PyTorch; its CMake config wants OpenCL)
          libsentencepiece-dev                     # convert text --tokenizer sentencepiece
          fortunes                                 # the language-model demo's English corpus
          python3-pil python3-sklearn              # image tests: PIL as the reference, real photos
          slurmctld slurmd slurm-client munge slurmdbd mariadb-server  # launch/slurm/local-cluster
          python3-torch python3-torchvision python3-h5py python3-numpy)  # the PyTorch reference tests
if [ "${1:-}" = "--peer" ]; then
  packages+=()  # the peers (PyTorch, torchvision, PIL) are in the list above
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
else
  if [ "$(id -u)" -ne 0 ]; then
    echo "install-deps: missing packages: ${missing[*]}" >&2
    echo "install-deps: run as root:" >&2
    echo "  sudo apt-get update && sudo apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
  echo "install-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  echo "install-deps: installed ${missing[*]}"
fi

# cuDNN's graph API (the convolutions' weight gradient, attention) is called
# through NVIDIA's header-only cudnn-frontend, which Debian does not package:
# its headers ship in the PyPI wheel. A pinned version is unpacked into deps/
# (ignored by git), where CMake looks; nothing is installed system-wide.
cudnn_frontend_version=1.32.0
install_cudnn_frontend() {
  local root dest
  root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
  dest="$root/deps/cudnn-frontend-$cudnn_frontend_version"
  if [ -f "$dest/include/cudnn_frontend.h" ]; then
    echo "install-deps: cudnn-frontend $cudnn_frontend_version present (deps/)"
    return
  fi
  local tmp
  tmp=$(mktemp -d)
  if ! python3 -m pip download --quiet --no-deps --only-binary=:all: -d "$tmp" \
      "nvidia-cudnn-frontend==$cudnn_frontend_version" >"$tmp/pip.log" 2>&1; then
    cat "$tmp/pip.log" >&2
    echo "install-deps: could not download the wheel nvidia-cudnn-frontend==$cudnn_frontend_version from PyPI (pip above)" >&2
    rm -rf "$tmp"
    exit 1
  fi
  mkdir -p "$tmp/unpacked" "$dest"
  python3 -m zipfile -e "$tmp"/nvidia_cudnn_frontend-*.whl "$tmp/unpacked"
  rm -rf "$dest/include" && cp -r "$tmp/unpacked/include" "$dest/include"
  cp "$tmp/unpacked"/nvidia_cudnn_frontend-*.dist-info/licenses/LICENSE* "$dest/" 2>/dev/null || true
  rm -rf "$tmp"
  echo "install-deps: unpacked cudnn-frontend $cudnn_frontend_version headers into deps/"
}

# The CUDA toolkit is not a Debian package here: it is found at /usr/local/cuda.
cuda=${CUDA_HOME:-/usr/local/cuda}
if [ -x "$cuda/bin/nvcc" ]; then
  have() { [ -e "$cuda/include/$1" ] && echo yes || echo no; }
  echo "install-deps: CUDA toolkit at $cuda ($("$cuda/bin/nvcc" --version | sed -n 's/.*release \([0-9.]*\).*/\1/p')), cuDNN: $(have cudnn.h), NCCL: $(have nccl.h)"
  install_cudnn_frontend
else
  echo "install-deps: no CUDA toolkit at $cuda: the build will be CPU-only"
fi
