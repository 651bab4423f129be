# kafka_sink — PGXS build
EXTENSION = kafka_sink
MODULE_big = kafka_sink
OBJS = \
	src/kafka_sink.o \
	src/guc.o \
	src/shmem.o \
	src/launcher.o \
	src/bgworker.o \
	src/worker.o \
	src/assignment.o \
	src/fill.o \
	src/mirror.o \
	src/consumer.o \
	src/producer.o \
	src/kafka_options.o \
	src/hosts.o \
	src/role_guard.o \
	src/target.o \
	src/decode.o \
	src/format.o \
	src/format_json.o \
	src/envelope_plain.o \
	src/envelope_debezium.o \
	src/envelope_debezium_avro.o \
	src/cdc_guard.o \
	src/jsonwalk.o \
	src/jsontree.o \
	src/apply.o \
	src/route.o \
	src/lineage.o \
	src/apply_heap.o \
	src/apply_sql.o \
	src/errclass.o \
	src/statements.o \
	src/reduce.o \
	src/checkpoint.o \
	src/bronze.o \
	src/quarantine.o \
	src/hops.o \
	src/dedupe.o \
	src/replay.o \
	src/catalog.o \
	src/catalog_guard.o \
	src/api.o \
	src/sqlcall.o \
	src/outbox.o \
	src/offsets.o \
	src/format_avro.o \
	src/avro_binary.o \
	src/schema_registry.o

# 0.1.0 is released and stays as it was.  The install script of this
# version is built from the parts in src/sql/, joined in the order listed
# here (as timescaledb keeps its SQL in parts; each part may use what the
# parts before it define).  The upgrade script from 0.1.0 is written by hand
# and must end in the same schema (test/e2e/upgrade.sh compares them).
EXTVERSION = 0.2.0
SQL_PARTS = \
	src/sql/00_roles.sql \
	src/sql/10_tables.sql \
	src/sql/20_security.sql \
	src/sql/30_c_functions.sql \
	src/sql/40_validators.sql \
	src/sql/50_api.sql \
	src/sql/51_create_pipeline.sql \
	src/sql/52_alter_pipeline.sql \
	src/sql/60_observability.sql \
	src/sql/70_lineage.sql \
	src/sql/80_metrics.sql \
	src/sql/90_grants.sql
# a part that is not listed would silently be left out of the install script
SQL_PARTS_UNLISTED := $(filter-out $(SQL_PARTS),$(wildcard src/sql/*.sql))
ifneq ($(SQL_PARTS_UNLISTED),)
$(error src/sql parts not listed in SQL_PARTS: $(SQL_PARTS_UNLISTED))
endif
DATA = kafka_sink--0.1.0.sql kafka_sink--0.1.0--0.2.0.sql
DATA_built = kafka_sink--$(EXTVERSION).sql
PGFILEDESC = "kafka_sink - exactly-once Kafka sink"

REGRESS = create validation kafka_options versions create_refusals internal_functions lineage batching_knobs dead_letter comments review_outbox_status review_unserved_database review_catalog_lock cdc_envelope routing cdc_typmods cdc_statements cdc_position
REGRESS_OPTS = --dbname=kafka_sink_regress
# make installcheck runs against a server that is up (test/run_tests.sh
# regress starts one with the module preloaded); make installcheck-temp
# needs none: pg_regress starts a throwaway instance in tmp_check/ from the
# installed PostgreSQL (bindir of PG_CONFIG) with test/regress.conf
# (shared_preload_libraries = 'kafka_sink') and stops it at the end.  Run
# make install first: the instance loads the installed module.
REGRESS_TEMP_OPTS = --temp-instance=./tmp_check --temp-config=$(srcdir)/test/regress.conf

PG_CONFIG ?= pg_config
override autodepend := yes
# librdkafka from pkg-config: PKG_CONFIG_PATH=<prefix>/lib/pkgconfig selects
# another than the system's (test/tools/librdkafka.sh builds 2.12.1 into
# /var/cache/kafka_sink/librdkafka-2.12.1).  Outside the system library
# directories the module gets an rpath to it, or the server would load the
# system's librdkafka at run time (same soname, librdkafka.so.1) whatever it
# was compiled against; RDKAFKA_RPATH=no leaves it out (e.g. for packagers).
# (its headers as system headers: 2.12.1's rdkafka.h trips -Wextra)
RDKAFKA_CFLAGS := $(patsubst -I%,-isystem %,$(shell pkg-config --cflags rdkafka))
RDKAFKA_LIBS := $(shell pkg-config --libs rdkafka)
RDKAFKA_LIBDIR := $(shell pkg-config --variable=libdir rdkafka)
RDKAFKA_MULTIARCH := $(shell $(CC) -print-multiarch 2>/dev/null)
RDKAFKA_SYSTEM_LIBDIRS := /lib /lib64 /usr/lib /usr/lib64 \
	$(if $(RDKAFKA_MULTIARCH),/lib/$(RDKAFKA_MULTIARCH) /usr/lib/$(RDKAFKA_MULTIARCH))
ifneq ($(RDKAFKA_RPATH),no)
ifneq ($(RDKAFKA_LIBDIR),)
ifeq ($(filter $(patsubst %/,%,$(RDKAFKA_LIBDIR)),$(RDKAFKA_SYSTEM_LIBDIRS)),)
RDKAFKA_LIBS += -Wl,-rpath,$(RDKAFKA_LIBDIR)
endif
endif
endif

PG_CPPFLAGS = -I$(srcdir)/src $(RDKAFKA_CFLAGS) -isystem $(shell $(PG_CONFIG) --includedir-server)
PG_CPPFLAGS += -DKS_VERSION=\"$(EXTVERSION)\"
PG_CFLAGS = -Wall -Wextra
CURL_CFLAGS := $(shell pkg-config --cflags libcurl)
CURL_LIBS := $(shell pkg-config --libs libcurl)
PG_CPPFLAGS += $(CURL_CFLAGS)
SHLIB_LINK = $(RDKAFKA_LIBS) $(CURL_LIBS)

PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

kafka_sink--$(EXTVERSION).sql: $(SQL_PARTS) Makefile
	{ echo '-- kafka_sink $(EXTVERSION): built by make from src/sql/ (SQL_PARTS in the Makefile); edit those.'; \
	  echo; printf '%s\n' '\echo Use "CREATE EXTENSION kafka_sink" to load this file. \quit'; \
	  for f in $(SQL_PARTS); do echo; echo "-- ---- $$f ----"; echo; cat $$f; done; } > $@

# (PGXS's own installcheck recipe plus a temporary instance; pg_regress
# refuses to run initdb as root, so run it as an ordinary user)
.PHONY: installcheck-temp
installcheck-temp:
	$(pg_regress_installcheck) $(REGRESS_TEMP_OPTS) $(REGRESS_OPTS) $(REGRESS)

.PHONY: test demo bench
test:
	bash test/run_tests.sh
demo:
	bash test/demo.sh

# rebuild everything when another librdkafka is chosen (PKG_CONFIG_PATH):
# the objects saw its headers, the module carries its rpath
RDKAFKA_STAMP := .rdkafka-build
$(shell echo '$(RDKAFKA_CFLAGS) $(RDKAFKA_LIBS)' | cmp -s - $(RDKAFKA_STAMP) 2>/dev/null || echo '$(RDKAFKA_CFLAGS) $(RDKAFKA_LIBS)' > $(RDKAFKA_STAMP))
$(OBJS): $(RDKAFKA_STAMP)
EXTRA_CLEAN = $(RDKAFKA_STAMP)

# Header dependencies: PGXS tracks them only when PostgreSQL was configured
# with --enable-depend (autodepend); turned on here, each object gets
# .deps/<name>.Po from gcc -MMD -MP, so a change to a header rebuilds the
# objects that include it, and only those.

# libFuzzer target for src/jsonwalk.c: builds with clang and fuzzes for
# FUZZ_SECONDS (default 60); see test/fuzz/run.sh
.PHONY: fuzz
fuzz:
	bash test/fuzz/run.sh

# the benchmark: ours vs a psql-only baseline and a Python consumer, latency,
# worker CPU and memory, a profile; BENCH_EVENTS=200000 for a quick run.
# See test/bench/run.sh and docs/performance.md.
bench:
	bash test/bench/run.sh
