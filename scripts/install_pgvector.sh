#!/usr/bin/env bash
# pgvector (the `vector` extension: HNSW indexes for the cluster host's knowledge search) for every
# PostgreSQL server installed from Debian's packages (/usr/lib/postgresql/<major>).
#  1. Debian's own postgresql-<major>-pgvector when apt has one with HNSW (pgvector >= 0.5);
#  2. otherwise Debian trixie's source package of pgvector 0.8.0 (bookworm's PostgreSQL 15 has no
#     pgvector package), fetched from deb.debian.org, its sha256 checked against the pin below,
#     built against that server with postgresql-server-dev-<major> (from Debian) and installed.
# Run as root (./dev runs it for `./dev test` when the extension is missing). Idempotent: a server
# that already has vector.control is left alone. Without pgvector the adapter still works (an exact
# scan, docs/embeddings.md); the pgvector tests fail under CI=true.
set -euo pipefail

version=0.8.0
orig="pgvector_${version}.orig.tar.gz"
orig_sha256=867a2c328d4928a5a9d6f052cd3bc78c7d60228a9b914ad32aa3db88e9de27b0  # from pgvector_0.8.0-1.dsc
pool="https://deb.debian.org/debian/pool/main/p/pgvector"

sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo -n"
apt_install() { $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$@" >/dev/null 2>&1 \
  || { $sudo apt-get update -q >/dev/null 2>&1 && $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$@" >/dev/null 2>&1; }; }

# Debian's package when its candidate version has HNSW (0.5 and later).
has_hnsw_package() {
  local candidate
  candidate="$(apt-cache policy "postgresql-$1-pgvector" 2>/dev/null | awk '/Candidate:/ {print $2}')"
  [ -n "$candidate" ] && [ "$candidate" != "(none)" ] && dpkg --compare-versions "$candidate" ge 0.5
}

build_from_source() {  # $1: the server's major version
  local major="$1" work
  apt_install "postgresql-server-dev-$major" make gcc curl \
    || { echo "could not install postgresql-server-dev-$major" >&2; return 1; }
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' RETURN
  curl -fsSL --retry 3 -o "$work/$orig" "$pool/$orig"
  echo "$orig_sha256  $work/$orig" | sha256sum -c --quiet - \
    || { echo "$orig: sha256 mismatch, not building it" >&2; return 1; }
  tar -xzf "$work/$orig" -C "$work"
  # OPTFLAGS="": no -march=native, so the library runs on any x86-64 machine the directory moves to
  make -s -C "$work/pgvector-$version" PG_CONFIG="/usr/lib/postgresql/$major/bin/pg_config" OPTFLAGS="" >/dev/null
  $sudo make -s -C "$work/pgvector-$version" PG_CONFIG="/usr/lib/postgresql/$major/bin/pg_config" OPTFLAGS="" install >/dev/null
}

status=0
for server in /usr/lib/postgresql/*/bin/postgres; do
  [ -e "$server" ] || continue
  major="$(basename "$(dirname "$(dirname "$server")")")"
  [ -f "/usr/share/postgresql/$major/extension/vector.control" ] && continue
  if has_hnsw_package "$major"; then
    echo "==> installing Debian's postgresql-$major-pgvector" >&2
    apt_install "postgresql-$major-pgvector" && continue
  fi
  echo "==> building pgvector $version for PostgreSQL $major (Debian's source package)" >&2
  build_from_source "$major" || status=1
done
exit "$status"
