#!/usr/bin/env bash
# deploy/Dockerfile's steps, run outside Docker (no Docker engine on the development machines):
#  1. the build stage's COPY lines copy their paths into a fresh SRC (so a file the install needs
#     but the Dockerfile does not copy fails here), then its RUN (deploy/image/install.sh) builds
#     the venv from SRC with PYTHON (python3.11);
#  2. the runtime stage: `avm serve` from that venv as an unprivileged user (nobody, when this runs
#     as root; the image's user is uid 10001) who cannot write the venv (as under Kubernetes'
#     readOnlyRootFilesystem), HOME and the data dir a fresh directory, the image's ENV (0.0.0.0, AVM_PORT),
#     the HEALTHCHECK's script until it passes, then SIGTERM: a clean shutdown within 30 s.
# Not proven here: the base image, apt/useradd steps, file ownership inside the image, the layer
# sizes (docs/cluster.md "Run it").
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dockerfile="$root/deploy/Dockerfile"
work="$(mktemp -d)"
pid=""
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
chmod 755 "$work"
src="$work/src"
mkdir -p "$src"

# 1. The build stage: its COPY lines (not --from), relative to WORKDIR /src.
awk '/^COPY / && !/--from/ {for (i = 2; i < NF; i++) print $i}' "$dockerfile" | while read -r path; do
  mkdir -p "$src/$(dirname "$path")"
  cp -a "$root/$path" "$src/$path"
done
find "$src" -name __pycache__ -prune -exec rm -rf {} +
run="$(grep -E '^RUN sh deploy/image/install.sh /src /opt/agentvm$' "$dockerfile")" \
  || { echo "the build stage's RUN line changed: update this script" >&2; exit 1; }
echo "==> $run (SRC=$src)"
start=$(date +%s)
(cd "$src" && PYTHON="${PYTHON:-python3.11}" sh deploy/image/install.sh "$src" "$work/venv")
echo "==> venv built in $(( $(date +%s) - start )) s, $(du -sm "$work/venv" | cut -f1) MB"

# 2. The runtime stage.
grep -q '^USER 10001:10001$' "$dockerfile" || { echo "the image must run as uid 10001" >&2; exit 1; }
grep -q 'CMD \["python", "/opt/agentvm/healthcheck.py"\]' "$dockerfile" || { echo "HEALTHCHECK changed" >&2; exit 1; }
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
mkdir -p "$work/data"
as_user=()
if [ "$(id -u)" -eq 0 ]; then
  chown nobody "$work/data"
  as_user=(setpriv --reuid=nobody --regid=nogroup --clear-groups)
fi
chmod 700 "$work/data"
if [ "${#as_user[@]}" -gt 0 ] && "${as_user[@]}" test -w "$work/venv/lib"; then
  echo "the venv is writable by the unprivileged user: not the read-only root of the image" >&2; exit 1
fi
env -i PATH="$work/venv/bin:/usr/bin:/bin" HOME="$work/data" PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 \
  AVM_HOST=0.0.0.0 AVM_PORT="$port" AVM_DATA_DIR="$work/data" \
  "${as_user[@]}" "$work/venv/bin/avm" serve >"$work/serve.log" 2>&1 &
pid=$!
for _ in $(seq 1 100); do
  if AVM_PORT="$port" "$work/venv/bin/python" "$work/venv/healthcheck.py" 2>/dev/null; then break; fi
  kill -0 "$pid" 2>/dev/null || { cat "$work/serve.log" >&2; echo "avm serve exited" >&2; exit 1; }
  sleep 0.2
done
AVM_PORT="$port" "$work/venv/bin/python" "$work/venv/healthcheck.py" || { cat "$work/serve.log" >&2; exit 1; }
echo "==> HEALTHCHECK passed (avm serve as uid $(ps -o uid= -p "$pid" | tr -d ' '), port $port)"
kill -TERM "$pid"
for _ in $(seq 1 300); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$pid" 2>/dev/null; then echo "avm serve did not stop within 30 s of SIGTERM" >&2; exit 1; fi
set +e; wait "$pid"; rc=$?; set -e
pid=""
# uvicorn shuts down (stops accepting, finishes open requests, runs the app's shutdown: the turn
# queue's consumer stops and hands its turns back), then re-raises SIGTERM: 143 after a clean stop.
if { [ "$rc" -ne 0 ] && [ "$rc" -ne 143 ]; } || ! grep -q '"Application shutdown complete."' "$work/serve.log"; then
  cat "$work/serve.log" >&2; echo "avm serve did not shut down cleanly on SIGTERM (exit $rc)" >&2; exit 1
fi
echo "==> SIGTERM: clean shutdown (exit $rc). The image's build and run steps passed outside Docker."
