# kafka_sink — PGXS build
EXTENSION = kafka_sink
MODULE_big = kafka_sink
OBJS = \
	src/kafka_sink.o \
	src/infra/guc.o \
	src/infra/shmem.o \
	src/workers/launcher.o \
	src/workers/scheduler.o \
	src/workers/bgworker.o \
	src/workers/worker.o \
	src/workers/assignment.o \
	src/workers/fill.o \
	src/workers/mirror.o \
	src/kafka/consumer.o \
	src/kafka/producer.o \
	src/kafka/kafka_options.o \
	src/kafka/hops.o \
	src/infra/hosts.o \
	src/infra/secret_ref.o \
	src/catalog/role_guard.o \
	src/decode/target.o \
	src/decode/decode.o \
	src/decode/meta.o \
	src/decode/format.o \
	src/decode/format_json.o \
	src/decode/envelope_plain.o \
	src/decode/envelope_debezium.o \
	src/decode/envelope_debezium_avro.o \
	src/apply/cdc_guard.o \
	src/infra/jsonwalk.o \
	src/infra/jsontree.o \
	src/apply/apply.o \
	src/apply/route.o \
	src/sqlapi/lineage.o \
	src/apply/apply_heap.o \
	src/apply/apply_sql.o \
	src/infra/errclass.o \
	src/apply/statements.o \
	src/apply/reduce.o \
	src/apply/history.o \
	src/apply/transform.o \
	src/apply/checkpoint.o \
	src/apply/bronze.o \
	src/apply/quarantine.o \
	src/apply/dedupe.o \
	src/sqlapi/replay.o \
	src/catalog/catalog.o \
	src/catalog/catalog_guard.o \
	src/catalog/database_ddl.o \
	src/sqlapi/api.o \
	src/infra/sqlcall.o \
	src/workers/outbox.o \
	src/infra/offsets.o \
	src/infra/spi.o \
	src/infra/citus.o \
	src/decode/format_avro.o \
	src/decode/avro_binary.o \
	src/decode/format_protobuf.o \
	src/decode/format_registry.o \
	src/decode/protobuf.o \
	src/decode/protobuf_parse.o \
	src/decode/schema_registry.o

# SQL is written once (src/sql/README.md).  0.1.0's install script and the
# 0.1.0 -> 0.2.0 step are released and stay as they were.  From 0.2.0 on,
# make assembles the scripts from the parts (src/sql/assemble.sh):
#  - the install script: SQL_PRE_INSTALL (tables, types, roles, policies:
#    what exists once), then SQL_PARTS (every function, procedure, view,
#    trigger, grant and comment, each once, as CREATE OR REPLACE);
#  - an update script from each older version of SQL_VERSIONS: the
#    hand-written schema changes of each step (src/sql/updates/<a>--<b>.sql:
#    tables, columns, constraints, types, data, the DROP of a released
#    signature), then the same SQL_PARTS.
# test/tools/check_sql_scripts.sh refuses definitions in the hand-written
# files; test/e2e/upgrade.sh compares upgraded and fresh schemas.
EXTVERSION = 0.3.0
SQL_VERSIONS = 0.2.0 0.3.0
SQL_PRE_INSTALL = \
	src/sql/pre_install/00_roles.sql \
	src/sql/pre_install/10_tables.sql \
	src/sql/pre_install/20_access.sql \
	src/sql/pre_install/70_types.sql
SQL_PARTS = \
	src/sql/20_catalog_guard.sql \
	src/sql/30_c_functions.sql \
	src/sql/40_validators.sql \
	src/sql/50_api.sql \
	src/sql/51_create_pipeline.sql \
	src/sql/52_alter_pipeline.sql \
	src/sql/60_observability.sql \
	src/sql/70_lineage.sql \
	src/sql/80_metrics.sql \
	src/sql/90_grants.sql
SQL_UPDATES = $(wildcard src/sql/updates/*.sql)
# a part that is not listed would silently be left out of the scripts
SQL_PARTS_UNLISTED := $(filter-out $(SQL_PARTS) $(SQL_PRE_INSTALL),$(wildcard src/sql/*.sql src/sql/pre_install/*.sql))
ifneq ($(SQL_PARTS_UNLISTED),)
$(error src/sql parts not listed in SQL_PARTS or SQL_PRE_INSTALL: $(SQL_PARTS_UNLISTED))
endif
ifneq ($(lastword $(SQL_VERSIONS)),$(EXTVERSION))
$(error SQL_VERSIONS must end with EXTVERSION ($(EXTVERSION)))
endif
UPDATE_SCRIPTS = $(foreach v,$(filter-out $(EXTVERSION),$(SQL_VERSIONS)),kafka_sink--$(v)--$(EXTVERSION).sql)
DATA = kafka_sink--0.1.0.sql kafka_sink--0.1.0--0.2.0.sql
DATA_built = kafka_sink--$(EXTVERSION).sql $(UPDATE_SCRIPTS)
PGFILEDESC = "kafka_sink - exactly-once Kafka sink"

REGRESS = create validation kafka_options secret_refs versions create_refusals internal_functions lineage batching_knobs dead_letter comments review_outbox_status review_unserved_database review_catalog_lock cdc_envelope routing cdc_typmods cdc_statements cdc_position headers transform soft_deletes write_modes
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

# the stage folders (src/README.md): each module includes its headers by name
STAGES = infra catalog kafka decode apply workers sqlapi
PG_CPPFLAGS = -I$(srcdir)/src $(foreach s,$(STAGES),-I$(srcdir)/src/$(s)) $(RDKAFKA_CFLAGS) -isystem $(shell $(PG_CONFIG) --includedir-server)
PG_CPPFLAGS += -DKS_VERSION=\"$(EXTVERSION)\"
PG_CFLAGS = -Wall -Wextra
CURL_CFLAGS := $(shell pkg-config --cflags libcurl)
CURL_LIBS := $(shell pkg-config --libs libcurl)
PG_CPPFLAGS += $(CURL_CFLAGS)
SHLIB_LINK = $(RDKAFKA_LIBS) $(CURL_LIBS)

PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

kafka_sink--$(EXTVERSION).sql: $(SQL_PRE_INSTALL) $(SQL_PARTS) src/sql/assemble.sh Makefile
	sh src/sql/assemble.sh install $(EXTVERSION) $(SQL_PRE_INSTALL) -- $(SQL_PARTS) > $@.tmp && mv $@.tmp $@

kafka_sink--%--$(EXTVERSION).sql: $(SQL_UPDATES) $(SQL_PARTS) src/sql/assemble.sh Makefile
	sh src/sql/assemble.sh update $* $(EXTVERSION) "$(SQL_VERSIONS)" -- $(SQL_PARTS) > $@.tmp && mv $@.tmp $@

# (PGXS's own installcheck recipe plus a temporary instance; pg_regress
# refuses to run initdb as root, so run it as an ordinary user)
.PHONY: installcheck-temp
installcheck-temp:
	$(pg_regress_installcheck) $(REGRESS_TEMP_OPTS) $(REGRESS_OPTS) $(REGRESS)

# make dist: the PGXN archive, kafka_sink-<version>.zip, of the tracked
# files as the working tree has them (git stash create: uncommitted changes
# included, untracked files not); `pgxn install ./kafka_sink-0.3.0.zip`
# builds and installs it (test/e2e/package.sh)
.PHONY: dist
dist:
	ref=$$(git stash create 2>/dev/null); \
	git archive --format=zip --prefix=$(EXTENSION)-$(EXTVERSION)/ -o $(EXTENSION)-$(EXTVERSION).zip $${ref:-HEAD}

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

# libFuzzer target for src/infra/jsonwalk.c: builds with clang and fuzzes for
# FUZZ_SECONDS (default 60); see test/fuzz/run.sh
.PHONY: fuzz
fuzz:
	bash test/fuzz/run.sh

# the benchmark: ours vs a psql-only baseline and a Python consumer, latency,
# worker CPU and memory, a profile; BENCH_EVENTS=200000 for a quick run.
# See test/bench/run.sh and docs/performance.md.
bench:
	bash test/bench/run.sh
