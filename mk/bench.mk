# Benchmarks against the physical limits (bench/, docs/performance.md).
#
#   make bench    every program in bench/ against a throwaway PostgreSQL;
#                 prints the table and writes build/bench.json (< 5 minutes)
#
# `make bench` is not part of `make test`: on a shared, noisy machine a
# benchmark can assert nothing. `make test` does build every program and run
# each once with tiny sizes (bench-smoke, a few seconds, no figures checked),
# so that a change to the library's API or behaviour cannot leave them
# broken. Included by the top-level Makefile, whose variables it uses.

BENCH_DIR := $(BUILD)/bench
# -gdwarf-4: valgrind 3.19 cannot read every DWARF 5 form clang writes, and
# callgrind should see the benchmark's own functions.
BENCH_CFLAGS := -std=c11 $(WARNINGS) $(CFLAGS) -gdwarf-4
# Seconds of the contention run (the issue's 20 s; `make bench
# BENCH_CONTENTION_SECONDS=5` for a quicker look).
BENCH_CONTENTION_SECONDS ?= 20

BENCH_CORE_PROGRAMS := key_derivation core_cost
BENCH_PQ_PROGRAMS   := uncontended_cycles event_loop_scale contention
BENCH_PROGRAMS := $(BENCH_CORE_PROGRAMS:%=$(BENCH_DIR)/%) $(BENCH_PQ_PROGRAMS:%=$(BENCH_DIR)/%) \
                  $(BENCH_DIR)/report

# Issue 6 is adding backoff jitter and server-side waiting to the core as
# options. Until bench/contention.c selects them (see PENDING there), the
# run notes whether advlock.h mentions them yet; no API is assumed here.
BENCH_CORE_MENTIONS_JITTER := $(if $(shell grep -il jitter include/advlock.h 2>/dev/null),1,0)
BENCH_CORE_MENTIONS_WAIT := $(if $(shell grep -lw 'pg_advisory_lock' include/advlock.h 2>/dev/null),1,0)

DEPS_BENCH := valgrind:cmd:valgrind valgrind:cmd:callgrind_annotate

.PHONY: bench bench-programs bench-smoke deps-bench

$(BENCH_DIR)/obj/%.o: bench/%.c bench/bench.h | deps-build
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(BENCH_CFLAGS) -MMD -MP -c $< -o $@

$(BENCH_PQ_PROGRAMS:%=$(BENCH_DIR)/obj/%.o) $(BENCH_DIR)/obj/bench_pq.o: CPPFLAGS += $(PQ_CPPFLAGS)
$(BENCH_PQ_PROGRAMS:%=$(BENCH_DIR)/obj/%.o) $(BENCH_DIR)/obj/bench_pq.o: | deps-pq
$(BENCH_DIR)/obj/contention.o: CPPFLAGS += \
    -DBENCH_CORE_MENTIONS_JITTER=$(BENCH_CORE_MENTIONS_JITTER) \
    -DBENCH_CORE_MENTIONS_WAIT=$(BENCH_CORE_MENTIONS_WAIT)

$(BENCH_CORE_PROGRAMS:%=$(BENCH_DIR)/%): $(BENCH_DIR)/%: $(BENCH_DIR)/obj/%.o \
        $(BENCH_DIR)/obj/bench.o $(BUILD)/libadvlock.a
	$(CC) $(LDFLAGS_BENCH) -o $@ $^ $(CORE_LIBS) -lm

$(BENCH_PQ_PROGRAMS:%=$(BENCH_DIR)/%): $(BENCH_DIR)/%: $(BENCH_DIR)/obj/%.o \
        $(BENCH_DIR)/obj/bench_pq.o $(BENCH_DIR)/obj/bench.o \
        $(BUILD)/libadvlock_pq.a $(BUILD)/libadvlock.a
	$(CC) -o $@ $^ $(PQ_LIBS) $(CORE_LIBS) -lm

# Bound at load time, so no measured call pays for lazy symbol binding.
$(BENCH_DIR)/core_cost: LDFLAGS_BENCH := -Wl,-z,now

$(BENCH_DIR)/report: $(BENCH_DIR)/obj/report.o $(BENCH_DIR)/obj/bench.o
	$(CC) -o $@ $^ -lm

bench-programs: $(BENCH_PROGRAMS)

bench: $(BENCH_PROGRAMS) | deps-bench
	@BENCH_CONTENTION_SECONDS=$(BENCH_CONTENTION_SECONDS) \
	    tests/pg/with-postgres.sh bench/run.sh $(BENCH_DIR) $(BUILD)/bench.json

bench-smoke: $(BENCH_PROGRAMS)
	@tests/pg/with-postgres.sh bench/run.sh --smoke $(BENCH_DIR) $(BENCH_DIR)/smoke.json

test: bench-smoke

deps-bench:
	@CC="$(CC)" scripts/ensure-deps.sh $(DEPS_BENCH)
