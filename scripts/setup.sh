#!/usr/bin/env bash
# Installs galley's build and test dependencies from Debian packages (the
# Python venv for the tests is scripts/setup_venv.sh).
# Idempotent: packages already present are left alone; apt runs only when
# something is missing.
set -euo pipefail

PACKAGES=(
  build-essential cmake pkg-config ninja-build ccache dpkg-dev
  clang-14 libclang-rt-14-dev clang-tidy-14
  libturbojpeg0-dev libjpeg62-turbo-dev libexif-dev libwebp-dev libpng-dev libzstd-dev
  libopencv-core-dev libopencv-imgproc-dev libopencv-imgcodecs-dev
  libboost-dev libtbb-dev libacl1-dev
  nlohmann-json3-dev libspdlog-dev libtomlplusplus-dev libcli11-dev
  libxxhash-dev libmemcached-dev libssl-dev memcached sasl2-bin
  libcurl4-openssl-dev libpugixml-dev
  pybind11-dev python3-dev
  libgtest-dev libgmock-dev libbenchmark-dev liblz4-dev
  python3-torch python3-torchvision python3-numpy python3-pytest python3-pytest-xdist
  python3-matplotlib python3-pil
  debootstrap
  nasm autoconf automake libtool autopoint qemu-user-static binutils-aarch64-linux-gnu
  dataset-fashion-mnist
)

missing=()
for pkg in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$pkg")
  fi
done

if ((${#missing[@]} == 0)); then
  echo "setup: all ${#PACKAGES[@]} packages present"
  exit 0
fi

SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
