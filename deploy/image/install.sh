#!/bin/sh
# The image's build step (deploy/Dockerfile's build stage), also run outside Docker by
# scripts/check_image_steps.sh: a venv at VENV with AgentVM and the cluster extra, installed from
# the sources at SRC with the Lambda layer's pins as constraints (what the tests run against).
#   install.sh SRC VENV
set -eu
src="$1"
venv="$2"
"${PYTHON:-python3}" -m venv "$venv"
"$venv/bin/pip" install --no-cache-dir --quiet --upgrade pip
"$venv/bin/pip" install --no-cache-dir --quiet -c "$src/layers/deps/requirements.txt" "${src}[cluster]"
cp "$src/deploy/image/healthcheck.py" "$venv/healthcheck.py"
"$venv/bin/avm" --help >/dev/null
