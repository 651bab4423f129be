# kafka_sink — PGXS build
EXTENSION = kafka_sink
MODULE_big = kafka_sink
OBJS = \
	src/kafka_sink.o \
	src/guc.o \
	src/shmem.o \
	src/launcher.o \
	src/worker.o \
	src/consumer.o \
	src/kafka_options.o \
	src/decode.o \
	src/jsonwalk.o \
	src/apply.o \
	src/catalog.o \
	src/catalog_guard.o \
	src/api.o \
	src/outbox.o \
	src/format.o \
	src/format_avro.o \
	src/avro_binary.o \
	src/schema_registry.o

# 0.1.0 is released and stays as it was; each later install script is the
# released base followed by the update scripts (see kafka_sink--0.1.0--0.2.0.sql)
EXTVERSION = 0.2.0
DATA = kafka_sink--0.1.0.sql kafka_sink--0.1.0--0.2.0.sql
DATA_built = kafka_sink--$(EXTVERSION).sql
PGFILEDESC = "kafka_sink - exactly-once Kafka sink"

REGRESS = create validation kafka_options
REGRESS_OPTS = --dbname=kafka_sink_regress

PG_CONFIG ?= pg_config
RDKAFKA_CFLAGS := $(shell pkg-config --cflags rdkafka)
RDKAFKA_LIBS := $(shell pkg-config --libs rdkafka)

PG_CPPFLAGS = -I$(srcdir)/src $(RDKAFKA_CFLAGS) -isystem $(shell $(PG_CONFIG) --includedir-server)
PG_CPPFLAGS += -DKS_VERSION=\"$(EXTVERSION)\"
PG_CFLAGS = -Wall -Wextra
CURL_CFLAGS := $(shell pkg-config --cflags libcurl)
CURL_LIBS := $(shell pkg-config --libs libcurl)
PG_CPPFLAGS += $(CURL_CFLAGS)
SHLIB_LINK = $(RDKAFKA_LIBS) $(CURL_LIBS)

PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

kafka_sink--$(EXTVERSION).sql: kafka_sink--0.1.0.sql kafka_sink--0.1.0--0.2.0.sql
	{ echo '-- kafka_sink $(EXTVERSION): built by make from the files below; edit those.'; \
	  for f in $^; do echo; echo "-- ---- $$f ----"; grep -v '^\\echo ' $$f; done; } > $@

.PHONY: test demo bench
test:
	bash test/run_tests.sh
demo:
	bash test/demo.sh

# PGXS does not track header dependencies unless PostgreSQL was configured
# with --enable-depend; every object depends on the shared header.
$(OBJS): src/kafka_sink.h src/jsonwalk.h src/kafka_options.h src/format.h src/avro_binary.h

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
