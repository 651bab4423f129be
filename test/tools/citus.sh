#!/usr/bin/env bash
# test/tools/citus.sh — build Citus for the tests, cached; install it into
# the PostgreSQL tree in use.
#
#   test/tools/citus.sh build             build (once per machine and PG tree)
#   test/tools/citus.sh install BINDIR    build if needed, then copy the
#                                         built files into the tree of BINDIR:
#                                         $PG_CONFIG's own, or a copy of it
#                                         (KS_PRIVATE_PG's, whose bindir ends
#                                         in $PG_CONFIG's)
#   test/tools/citus.sh available         exit 0 when the vendor source exists
#
# Citus is in no package registry this project reaches; its source tarball
# (13.2.2, AGPL-3.0, tests only: kafka_sink neither links nor ships it) is
# kept in <project root>/../shared/vendor (KS_VENDOR overrides), with a
# one-line patch for PostgreSQL 15.20 (which exports have_createdb_privilege,
# a function 13.2.2 also defines; applied when the server headers declare
# it).  A machine without the vendor directory has no Citus: `available`
# says so and the Citus e2e script skips.
#
# The build lives in /var/cache/kafka_sink/citus-13.2.2-pg<version>
# (KS_CITUS_CACHE overrides the parent), keyed by the PostgreSQL version of
# $PG_CONFIG (and its path, for a tree other than Debian's); `make install DESTDIR=<cache>/stage` leaves the files a tree
# needs (citus.so, citus_columnar.so, their control and script files) under
# stage/, and a finished build leaves .ks_built.  Installing is a copy of
# stage/ into the tree (or DESTDIR): seconds, no compiler.  The build takes
# about 10 minutes on 2 cores (make -j2).
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
VENDOR="${KS_VENDOR:-$REPO/../shared/vendor}"
CITUS_VER=13.2.2
TARBALL="$VENDOR/citus-$CITUS_VER.tar.gz"
PATCH="$VENDOR/citus-$CITUS_VER-pg15.20.patch"
PG_CONFIG="${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}"
log() { echo "citus.sh: $*" >&2; }

cmd="${1:-build}"
if [ ! -f "$TARBALL" ]; then
    log "no Citus source ($TARBALL): Citus tests are skipped on this machine"
    exit 3
fi
[ "$cmd" = available ] && exit 0

pgver="$("$PG_CONFIG" --version | awk '{print $2}')"
case "$pgver" in
    15.*|16.*|17.*) ;;
    *) log "Citus $CITUS_VER supports PostgreSQL 15-17, not $pgver"; exit 3 ;;
esac
key="pg$pgver"
# a tree of test/tools/pg_binaries.sh lives in a checkout: its paths are in stage/
[ "$PG_CONFIG" = /usr/lib/postgresql/15/bin/pg_config ] \
    || key="$key-$(printf '%s' "$PG_CONFIG" | cksum | cut -d' ' -f1)"
CACHE="${KS_CITUS_CACHE:-/var/cache/kafka_sink}/citus-$CITUS_VER-$key"

build() {
    if [ -f "$CACHE/.ks_built" ]; then return 0; fi
    local need=() p
    for p in build-essential libkrb5-dev liblz4-dev libzstd-dev libcurl4-openssl-dev libssl-dev libreadline-dev zlib1g-dev; do
        dpkg -s "$p" >/dev/null 2>&1 || need+=("$p")
    done
    if [ ${#need[@]} -gt 0 ]; then
        [ "$(id -u)" = 0 ] || { log "missing packages: ${need[*]}"; exit 1; }
        log "installing ${need[*]}"
        DEBIAN_FRONTEND=noninteractive apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
    fi
    local t0=$SECONDS
    rm -rf "$CACHE"
    mkdir -p "$CACHE"
    log "building Citus $CITUS_VER against PostgreSQL $pgver in $CACHE (about 10 minutes)"
    tar xzf "$TARBALL" -C "$CACHE"
    if grep -qs 'have_createdb_privilege' "$("$PG_CONFIG" --includedir-server)/commands/dbcommands.h"; then
        (cd "$CACHE" && patch -s -p0 < "$PATCH")
    fi
    (
        cd "$CACHE/citus-$CITUS_VER"
        ./configure -q PG_CONFIG="$PG_CONFIG" >"$CACHE/build.log" 2>&1
        make -s -j2 >>"$CACHE/build.log" 2>&1
        make -s install DESTDIR="$CACHE/stage" >>"$CACHE/build.log" 2>&1
    ) || { log "build failed, see $CACHE/build.log"; tail -20 "$CACHE/build.log" >&2; exit 1; }
    chmod -R o+rX "$CACHE"
    touch "$CACHE/.ks_built"
    log "built in $((SECONDS - t0))s"
}

case "$cmd" in
    build) build ;;
    install)
        build
        bindir="${2:?usage: citus.sh install BINDIR}"
        sysbin="$("$PG_CONFIG" --bindir)"
        case "$bindir" in
            "$sysbin") dest=/ ;;
            *"$sysbin") dest="${bindir%"$sysbin"}" ;;
            *) log "$bindir is neither $sysbin nor a copy of it"; exit 2 ;;
        esac
        # stage/ holds the files under the tree's absolute paths
        cp -a "$CACHE/stage/." "$dest/"
        ;;
    *) log "usage: citus.sh build|install [DESTDIR]|available"; exit 2 ;;
esac
