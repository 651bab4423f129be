#!/usr/bin/env bash
# test/tools/librdkafka.sh — build a current librdkafka into a cached prefix
#
#   test/tools/librdkafka.sh [VERSION]    (default 2.12.1; known: 2.12.1, 2.15.1)
#   eval "$(test/tools/librdkafka.sh --env)"    exports PKG_CONFIG_PATH
#
# Prints the prefix (with --env: an export line for PKG_CONFIG_PATH), then
# `make PKG_CONFIG_PATH=<prefix>/lib/pkgconfig` builds kafka_sink against it
# (the Makefile adds an rpath, so the server loads this one, not Debian's).
#
# Where the source comes from (GitHub release tarballs are not reachable from
# this project's machines, developers' or CI's; the package registries are):
#  - 2.12.1: the crates.io crate rdkafka-sys carries librdkafka's source tree
#    (rdkafka-sys 4.10.0+2.12.1 = librdkafka 2.12.1; the newest rdkafka-sys).
#    cargo fetches the crate into its registry cache; the .crate file is a
#    gzip'ed tar that we unpack ourselves.
#  - 2.15.1: the npm package @confluentinc/kafka-javascript carries
#    librdkafka's whole source tree in deps/librdkafka (1.10.1 = librdkafka
#    2.15.1, its package.json's "librdkafka" field); `npm pack` fetches the
#    tarball without installing or building anything.
# Either way the version in the tree's rdkafka.h is checked before building.
#
# How it is built: with what Debian's librdkafka 2.0.2 package has (OpenSSL,
# Cyrus SASL for GSSAPI, zstd, lz4, zlib) plus libcurl: librdkafka fetches
# OAUTHBEARER tokens from an OIDC token endpoint (sasl.oauthbearer.method =
# oidc) with libcurl, and without it refuses that method.  Debian builds
# 2.0.2 without libcurl, so there OAUTHBEARER has no usable token source.
#
# The prefix is /var/cache/kafka_sink/librdkafka-VERSION (KS_RDKAFKA_CACHE
# overrides the parent): outside /root, world-readable, so the OS user that
# runs PostgreSQL (kstest in the tests) can load the .so.  A finished build
# leaves <prefix>/.ks_built; then this script only prints the prefix.
set -euo pipefail

want_env=0
if [ "${1:-}" = --env ]; then want_env=1; shift; fi
VER="${1:-${KS_RDKAFKA:-2.12.1}}"
CRATE_VER="" NPM_PKG=""
case "$VER" in
    2.12.1) CRATE_VER="4.10.0+2.12.1" ;;
    2.15.1) NPM_PKG="@confluentinc/kafka-javascript@1.10.1" ;;
    *) echo "librdkafka.sh: unknown librdkafka version '$VER' (known: 2.12.1, 2.15.1)" >&2; exit 2 ;;
esac
CACHE="${KS_RDKAFKA_CACHE:-/var/cache/kafka_sink}"
PREFIX="$CACHE/librdkafka-$VER"

out() {
    if [ $want_env = 1 ]; then
        echo "export PKG_CONFIG_PATH=$PREFIX/lib/pkgconfig"
    else
        echo "$PREFIX"
    fi
}
log() { echo "librdkafka.sh: $*" >&2; }

if [ -f "$PREFIX/.ks_built" ] && [ -f "$PREFIX/lib/pkgconfig/rdkafka.pc" ]; then
    out
    exit 0
fi

# the -dev packages of what we link (the harness's deps step installs them
# too; here for a standalone run)
need=()
for p in build-essential pkg-config python3 libssl-dev libsasl2-dev libzstd-dev liblz4-dev zlib1g-dev libcurl4-openssl-dev; do
    dpkg -s "$p" >/dev/null 2>&1 || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
    [ "$(id -u)" = 0 ] || { log "missing packages: ${need[*]}"; exit 1; }
    log "installing ${need[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
if [ -n "$CRATE_VER" ]; then
    command -v cargo >/dev/null || { log "cargo not found (rustup/cargo is needed to fetch the source crate)"; exit 1; }
else
    command -v npm >/dev/null || { log "npm not found (npm is needed to fetch $NPM_PKG)"; exit 1; }
fi

T0=$SECONDS
WORK="$(mktemp -d "${TMPDIR:-/tmp}/ks_rdkafka.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT

# 1. the source tree: the crate through cargo (a throwaway project with that
# exact dependency), or the npm package through npm pack
if [ -n "$CRATE_VER" ]; then
    mkdir -p "$WORK/fetch/src"
    cat > "$WORK/fetch/Cargo.toml" <<EOF
[package]
name = "ks-rdkafka-fetch"
version = "0.0.0"
edition = "2021"
publish = false

[dependencies]
rdkafka-sys = { version = "=$CRATE_VER", default-features = false }
EOF
    echo 'fn main() {}' > "$WORK/fetch/src/main.rs"
    log "fetching rdkafka-sys $CRATE_VER with cargo"
    (cd "$WORK/fetch" && cargo fetch --quiet) >&2
    CARGO_HOME="${CARGO_HOME:-$HOME/.cargo}"
    from="$(find "$CARGO_HOME/registry/cache" -name "rdkafka-sys-$CRATE_VER.crate" -print -quit)"
    [ -n "$from" ] || { log "rdkafka-sys-$CRATE_VER.crate not in $CARGO_HOME/registry/cache"; exit 1; }
    tar -xzf "$from" -C "$WORK"
    SRC="$WORK/rdkafka-sys-$CRATE_VER/librdkafka"
else
    mkdir -p "$WORK/npm"
    log "fetching $NPM_PKG with npm pack"
    (cd "$WORK/npm" && npm pack --silent "$NPM_PKG") >/dev/null
    from="$(find "$WORK/npm" -name '*.tgz' -print -quit)"
    [ -n "$from" ] || { log "npm pack $NPM_PKG left no tarball"; exit 1; }
    tar -xzf "$from" -C "$WORK/npm"
    SRC="$WORK/npm/package/deps/librdkafka"
fi
[ -x "$SRC/configure" ] || { log "no librdkafka configure in $from"; exit 1; }
grep -q "RD_KAFKA_VERSION  *0x$(printf '%02x%02x%02x' ${VER//./ })" "$SRC/src/rdkafka.h" \
    || { log "$from does not carry librdkafka $VER"; exit 1; }

# 2. configure, make, make install into a staging prefix, then move it in
# place (a failed or interrupted build never leaves a half prefix)
mkdir -p "$CACHE"
chmod 755 "$CACHE"
STAGE="$CACHE/.librdkafka-$VER.$$"
rm -rf "$STAGE"
cd "$SRC"
log "configure (ssl, sasl, zstd, lz4, zlib, curl)"
./configure --prefix="$PREFIX" --enable-curl --enable-ssl --enable-gssapi \
    --enable-zstd --enable-lz4-ext --enable-zlib \
    > "$WORK/configure.log" 2>&1 \
    || { tail -n 40 "$WORK/configure.log" >&2; exit 1; }
# mklove reports features it looked for; fail if one we asked for is missing
for f in WITH_SSL WITH_SASL_CYRUS WITH_ZSTD WITH_LZ4_EXT WITH_ZLIB WITH_CURL; do
    grep -q "^#define $f 1" config.h || { log "configure did not enable $f"; tail -n 40 "$WORK/configure.log" >&2; exit 1; }
done
# only the C library (src/), not the C++ wrapper (src-cpp/)
log "make -j${KS_RDKAFKA_JOBS:-2} (a few minutes)"
make -C src -j"${KS_RDKAFKA_JOBS:-2}" > "$WORK/make.log" 2>&1 || { tail -n 40 "$WORK/make.log" >&2; exit 1; }
make -C src install DESTDIR="$STAGE" > "$WORK/install.log" 2>&1 \
    || { tail -n 40 "$WORK/install.log" >&2; exit 1; }
rm -rf "$PREFIX"
mv "$STAGE$PREFIX" "$PREFIX"
rm -rf "$STAGE"
# the static archives are 48 MB and nobody links them
rm -f "$PREFIX"/lib/*.a "$PREFIX/lib/pkgconfig/rdkafka-static.pc"
chmod -R o+rX "$PREFIX"
echo "librdkafka $VER from ${CRATE_VER:+crates.io rdkafka-sys $CRATE_VER}${NPM_PKG:+npm $NPM_PKG}, built $(date -u +%FT%TZ) in $((SECONDS - T0)) s" > "$PREFIX/.ks_built"
log "built librdkafka $VER into $PREFIX in $((SECONDS - T0)) s"
out
