# Benchmarks against the physical limits (bench/, docs/performance.md).
#
#   make bench    every program in bench/ against a throwaway PostgreSQL;
#                 prints the table and writes build/bench.json (< 5 minutes)
#   make bench-lockset-growth  a lock set's rate (C and Python) with 1,000 and
#                 10,000 locks held, on a server whose lock table holds them
#                 (about 2 minutes; docs/performance.md, "A lock set as it grows")
#
# `make bench` is not part of `make test`: on a shared, noisy machine a
# benchmark can assert nothing. `make test` does build every program and run
# each once with tiny sizes (bench-smoke, a few seconds, no figures checked),
# so that a change to the library's API or behaviour cannot leave them
# broken. Included by the top-level Makefile, whose variables it uses.

BENCH_DIR := $(BUILD)/bench
# -gdwarf-4: valgrind 3.19 gives up on the DWARF 5 that clang writes
# (make CC=clang bench), and callgrind runs two of these programs.
BENCH_CFLAGS := -std=c11 $(WARNINGS) $(CFLAGS) -gdwarf-4
# Bound at load time, so no call callgrind measures pays for lazy binding.
BENCH_LDFLAGS := -Wl,-z,now
# Seconds of the contention run (20 s by default; `make bench
# BENCH_CONTENTION_SECONDS=5` for a quicker look).
BENCH_CONTENTION_SECONDS ?= 20

BENCH_CORE_PROGRAMS := key_derivation core_cost
# sizes includes advlock_pq.h (sizeof advlock_pq) but calls nothing.
BENCH_PQ_PROGRAMS   := uncontended_cycles event_loop_scale contention sizes many_locks
BENCH_PROGRAMS := $(BENCH_CORE_PROGRAMS:%=$(BENCH_DIR)/%) $(BENCH_PQ_PROGRAMS:%=$(BENCH_DIR)/%) \
                  $(BENCH_DIR)/report

DEPS_BENCH := valgrind:cmd:valgrind valgrind:cmd:callgrind_annotate

.PHONY: bench bench-programs bench-smoke bench-lockset-growth deps-bench

$(BENCH_DIR)/obj/%.o: bench/%.c bench/bench.h | deps-build
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(BENCH_CFLAGS) -MMD -MP -c $< -o $@

$(BENCH_PQ_PROGRAMS:%=$(BENCH_DIR)/obj/%.o) $(BENCH_DIR)/obj/bench_pq.o: CPPFLAGS += $(PQ_CPPFLAGS)
$(BENCH_PQ_PROGRAMS:%=$(BENCH_DIR)/obj/%.o) $(BENCH_DIR)/obj/bench_pq.o: | deps-pq

# The two programs that run under callgrind link the library's sources
# compiled exactly as for the libraries (LIB_CFLAGS), plus DWARF 4 debug
# information (see BENCH_CFLAGS). The others link the libraries themselves;
# core_cost's fake database comes from libadvlock_fake (it is not measured).
BENCH_LIB_CORE_OBJ := $(CORE_SRC:%.c=$(BENCH_DIR)/lib/%.o)
BENCH_LIB_PQ_OBJ   := $(patsubst %.c,$(BENCH_DIR)/lib/%.o,$(wildcard src/adapters/libpq/*.c))

$(BENCH_DIR)/lib/%.o: %.c | deps-build
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(LIB_CFLAGS) -gdwarf-4 -MMD -MP -c $< -o $@

$(BENCH_LIB_PQ_OBJ): CPPFLAGS += $(PQ_CPPFLAGS)
$(BENCH_LIB_PQ_OBJ): | deps-pq

$(BENCH_DIR)/key_derivation: $(BENCH_DIR)/obj/key_derivation.o $(BENCH_DIR)/obj/bench.o \
        $(BUILD)/libadvlock.a
	$(CC) -o $@ $^ $(CORE_LIBS) -lm

$(BENCH_DIR)/core_cost: $(BENCH_DIR)/obj/core_cost.o $(BENCH_DIR)/obj/bench.o $(BENCH_LIB_CORE_OBJ) \
        $(BUILD)/libadvlock_fake.a
	$(CC) $(BENCH_LDFLAGS) -o $@ $^ $(CORE_LIBS) -lm

$(BENCH_DIR)/uncontended_cycles: $(BENCH_DIR)/obj/uncontended_cycles.o \
        $(BENCH_DIR)/obj/bench_pq.o $(BENCH_DIR)/obj/bench.o $(BENCH_LIB_PQ_OBJ) \
        $(BENCH_LIB_CORE_OBJ)
	$(CC) $(BENCH_LDFLAGS) -o $@ $^ $(PQ_LIBS) $(CORE_LIBS) -lm

$(BENCH_DIR)/event_loop_scale $(BENCH_DIR)/contention $(BENCH_DIR)/many_locks: $(BENCH_DIR)/%: $(BENCH_DIR)/obj/%.o \
        $(BENCH_DIR)/obj/bench_pq.o $(BENCH_DIR)/obj/bench.o \
        $(BUILD)/libadvlock_pq.a $(BUILD)/libadvlock.a
	$(CC) -o $@ $^ $(PQ_LIBS) $(CORE_LIBS) -lm

$(BENCH_DIR)/report $(BENCH_DIR)/sizes: $(BENCH_DIR)/%: $(BENCH_DIR)/obj/%.o $(BENCH_DIR)/obj/bench.o
	$(CC) -o $@ $^ -lm

bench-programs: $(BENCH_PROGRAMS)

bench: $(BENCH_PROGRAMS) $(BUILD)/advlock | deps-bench
	@BENCH_CONTENTION_SECONDS=$(BENCH_CONTENTION_SECONDS) ADVLOCK=$(BUILD)/advlock \
	    tests/pg/with-postgres.sh bench/run.sh $(BENCH_DIR) $(BUILD)/bench.json
	@# The Python drivers' figures (mk/python.mk, run first) join the table.
	@if [ -f $(BUILD)/bench-python.json ]; then \
	    $(PYTHON) python/bench_merge.py $(BUILD)/bench-python.json $(BUILD)/bench.json; fi

# Both levels, the C set's and the Python set's, on one server; figures
# also in build/bench-lockset-growth.json.
BENCH_GROWTH_HELD ?= 1000,10000
bench-lockset-growth: $(BENCH_DIR)/many_locks $(BUILD)/libadvlock.so | deps-python
	@ADVLOCK_PG_CONF="max_locks_per_transaction = 512" $(PYTHON_ENV) tests/pg/with-postgres.sh \
	    sh -c 'for held in $$(echo $(BENCH_GROWTH_HELD) | tr , " "); do \
	        $(BENCH_DIR)/many_locks --held $$held --rounds 7 || exit 1; done; \
	        $(PYTHON) bench/lockset_growth.py --held $(BENCH_GROWTH_HELD) \
	            --json $(BUILD)/bench-lockset-growth.json'

bench-smoke: $(BENCH_PROGRAMS) $(BUILD)/advlock
	@ADVLOCK=$(BUILD)/advlock tests/pg/with-postgres.sh scripts/run-tests.sh -c bench/run.sh --smoke $(BENCH_DIR) \
	    $(BENCH_DIR)/smoke.json

test: bench-smoke
programs: $(BENCH_PROGRAMS)

deps-bench:
	@CC="$(CC)" scripts/ensure-deps.sh $(DEPS_BENCH)
