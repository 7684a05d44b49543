#!/usr/bin/env bash
# Installs everything pagellm needs to build and test on Debian 12. Idempotent: packages that
# are already present are skipped.
set -euo pipefail

APT_PACKAGES=(
  build-essential cmake ninja-build pkg-config clang libclang-rt-14-dev clang-format
  nlohmann-json3-dev libcpp-httplib-dev libcli11-dev libspdlog-dev libfmt-dev
  libsentencepiece-dev libpcre2-dev libssl-dev libgtest-dev libbenchmark-dev libyaml-cpp-dev
  python3 python3-numpy python3-jinja2 python3-sentencepiece python3-pytest python3-jsonschema
  pybind11-dev python3-dev python3-venv python3-pip python3-setuptools python3-wheel python3-tqdm
  libopenmpi-dev openmpi-bin
)
# Node.js and npm (for the official `openai` client in end-to-end tests): Debian's packages only
# when the machine has none; a machine with its own Node.js keeps it (Debian's npm conflicts).
command -v node >/dev/null 2>&1 || APT_PACKAGES+=(nodejs)
command -v npm >/dev/null 2>&1 || APT_PACKAGES+=(npm)

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  SUDO=""
  if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
  echo "setup: installing ${missing[*]}"
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
else
  echo "setup: all apt packages present"
fi

# The official OpenAI client, for end-to-end server tests.
here="$(cd "$(dirname "$0")/.." && pwd)"
if command -v npm >/dev/null 2>&1 && [ -f "$here/tests/e2e/package.json" ] &&
  [ ! -d "$here/tests/e2e/node_modules/openai" ]; then
  (cd "$here/tests/e2e" && npm install --no-audit --no-fund --loglevel=error)
fi
