# libadvlock_pq: the libpq adapters, the only part of advlock that links libpq.
# Included by the top-level Makefile, whose variables and object rules it uses.

PQ_SRC     := $(wildcard src/adapters/libpq/*.c)
PQ_OBJ     := $(PQ_SRC:%.c=$(BUILD)/obj/%.o)
PQ_SAN_OBJ := $(PQ_SRC:%.c=$(BUILD)/san/obj/%.o)
# Recursive: asked only once the build dependencies are installed.
PQ_CPPFLAGS = -I$(shell pg_config --includedir 2>/dev/null || echo /usr/include/postgresql)
PQ_LIBS    := -lpq

# Debian packages, as package:probe (see scripts/ensure-deps.sh).
DEPS_PQ      := libpq-dev:postgresql/libpq-fe.h
DEPS_PQ_TEST := $(DEPS_PQ) libcmocka-dev:cmocka.h libuv1-dev:uv.h

PQ_LIBS_BUILT := $(BUILD)/libadvlock_pq.a $(BUILD)/libadvlock_pq.so

.PHONY: pq-libs pq-test examples deps-pq deps-pq-test install-pq uninstall-pq

all: pq-libs
pq-libs: $(PQ_LIBS_BUILT) $(BUILD)/advlock_pq.pc

$(PQ_OBJ) $(PQ_SAN_OBJ): CPPFLAGS += $(PQ_CPPFLAGS)
$(PQ_OBJ) $(PQ_SAN_OBJ): | deps-pq

$(BUILD)/libadvlock_pq.a: $(PQ_OBJ)
	$(AR) rcs $@ $^

$(BUILD)/libadvlock_pq.so.$(VERSION): $(PQ_OBJ) $(BUILD)/libadvlock.so
	$(CC) -shared -Wl,-soname,libadvlock_pq.so.$(SOVERSION) -Wl,--no-undefined $(SIBLING_RPATH) $(LDFLAGS) -o $@ \
	    $(PQ_OBJ) -L$(BUILD) -ladvlock $(PQ_LIBS)

$(BUILD)/libadvlock_pq.so: $(BUILD)/libadvlock_pq.so.$(VERSION)
	ln -sf libadvlock_pq.so.$(VERSION) $(BUILD)/libadvlock_pq.so.$(SOVERSION)
	ln -sf libadvlock_pq.so.$(SOVERSION) $@

# Regenerated on every run: PREFIX may differ from the last one.
$(BUILD)/advlock_pq.pc: advlock_pq.pc.in FORCE
	@mkdir -p $(@D)
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@LIBDIR@|$(LIBDIR)|' \
	    -e 's|@INCLUDEDIR@|$(INCLUDEDIR)|' -e 's|@VERSION@|$(VERSION)|' $< > $@

# ---- examples: one thread, many connections, on poll() and on libuv ----------

PQ_EXAMPLES := $(BUILD)/examples/poll_locks $(BUILD)/examples/libuv_lock $(BUILD)/examples/lockset_jobs
LIBS_poll_locks :=
LIBS_libuv_lock := -luv
LIBS_lockset_jobs :=

examples: $(PQ_EXAMPLES)

$(PQ_EXAMPLES): $(BUILD)/examples/%: examples/%.c $(BUILD)/libadvlock_pq.a $(BUILD)/libadvlock.a | deps-pq-test
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(PQ_CPPFLAGS) -std=c11 $(WARNINGS) $(CFLAGS) -o $@ $< \
	    $(BUILD)/libadvlock_pq.a $(BUILD)/libadvlock.a $(PQ_LIBS) $(LIBS_$*) $(CORE_LIBS)

# ---- integration tests (CMocka) against a throwaway PostgreSQL -------------
# Built with ASan + UBSan. test_server_stop stops and restarts the server, so
# it runs last.

# Named, not globbed: other suites keep their own programs in tests/integration.
PQ_TEST_SUPPORT := tests/integration/pg_test.c
PQ_TEST_NAMES := test_blocking test_async test_modes test_server_wait test_lost test_pq_session test_pq_lease \
    test_pq_fence test_pq_bound test_pq_lockset test_pq_rows \
    test_server_stop
PQ_TEST_BINS := $(PQ_TEST_NAMES:%=$(BUILD)/san/integration/%)
PQ_PROXY_TEST := $(BUILD)/san/integration/test_proxy
SESSION_END_TEST := $(BUILD)/san/integration/test_session_end
SCENARIOS_TEST := $(BUILD)/san/integration/test_scenarios
# The core alone: the tests need nothing else from libadvlock.
PQ_TEST_CORE_OBJ := $(filter $(BUILD)/san/obj/src/core/%,$(CORE_SAN_OBJ))

$(PQ_TEST_BINS) $(PQ_PROXY_TEST) $(SESSION_END_TEST) $(SCENARIOS_TEST): $(BUILD)/san/integration/%: tests/integration/%.c $(PQ_TEST_SUPPORT) \
                tests/integration/pg_test.h $(PQ_SAN_OBJ) $(PQ_TEST_CORE_OBJ) | deps-pq-test
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(PQ_CPPFLAGS) $(TEST_CFLAGS) $(SANITIZE) -o $@ \
	    $< $(PQ_TEST_SUPPORT) $(PQ_SAN_OBJ) $(PQ_TEST_CORE_OBJ) $(PQ_LIBS) $(TEST_LIBS) $(LDFLAGS_$*)

# test_pq_lockset fails the set's allocations on demand: its malloc and
# calloc calls (the set's objects are linked in) go through the test's.
LDFLAGS_test_pq_lockset := -Wl,--wrap=malloc -Wl,--wrap=calloc

pq-test: $(PQ_TEST_BINS) $(PQ_EXAMPLES)
	@tests/pg/with-postgres.sh scripts/run-tests.sh $(PQ_TEST_BINS) $(PQ_EXAMPLES)

# What pq-test and pq-proxy-test run, compiled only (valgrind-test builds it
# on every core first).
.PHONY: pq-test-programs
pq-test-programs: $(PQ_TEST_BINS) $(PQ_EXAMPLES) $(PQ_PROXY_TEST)

# The fake database's fidelity: the same statements sent to the fake and to
# a throwaway PostgreSQL, answer by answer (docs/simulation.md). It links the
# fake, not the adapters, and talks to the server through libpq directly.
FIDELITY_TEST := $(BUILD)/integration/test_fidelity

.PHONY: fidelity-test
$(FIDELITY_TEST): tests/integration/test_fidelity.c $(FAKE_OBJ) $(CORE_OBJ) | deps-pq-test
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(PQ_CPPFLAGS) $(TEST_CFLAGS) -o $@ $^ $(PQ_LIBS) $(CORE_LIBS)

fidelity-test: $(FIDELITY_TEST)
	@tests/pg/with-postgres.sh scripts/run-tests.sh $(FIDELITY_TEST)

# README's blocking example, as printed, built against the plain libraries
# (tests/integration/readme_blocking.sh; advlock names its key). A script,
# so not part of pq-test, which valgrind-test runs under memcheck.
.PHONY: readme-test
readme-test: $(PQ_LIBS_BUILT) $(BUILD)/libadvlock.a $(BUILD)/advlock | deps-pq-test
	@BUILD=$(BUILD) tests/pg/with-postgres.sh scripts/run-tests.sh tests/integration/readme_blocking.sh

# The session check through real PgBouncers (session and transaction
# pooling), with two server sessions in the transaction pool so that a
# client's statements can be sent to the one it did not claim. Built by the
# rule above.

.PHONY: pq-proxy-test
pq-proxy-test: $(PQ_PROXY_TEST) | deps-deploy
	@ADVLOCK_TEST_PGBOUNCER_TX_POOL=2 tests/pg/with-pgbouncer.sh scripts/run-tests.sh $(PQ_PROXY_TEST)

# A holder's session against the server's timeouts and its endings
# (terminate, restart), on the Unix socket and over TCP, on a server of its
# own (it sets timeouts for the whole server and restarts it): about 40 s.
# session-end-bounds runs 20 trials of each measurement and prints their
# p50 and max per driver and for advlock run (tests/cli/session_end.sh),
# failing past the SESSION_END_BOUND_MS aimed at (make test asserts 1 s, a
# shared machine's margin); the whole output is printed when it fails
# (about 8 min; not part of make test).
SESSION_END_BOUND_MS ?= 250
# $(call session_end_figures,LOG,COMMAND): runs COMMAND into LOG and prints
# its figures; the whole LOG, and COMMAND's status, when it fails.
session_end_figures = $(2) >$(1) 2>&1; rc=$$?; grep 'session end heard' $(1); \
    [ $$rc = 0 ] || { cat $(1); exit $$rc; }
.PHONY: session-end-test session-end-bounds
session-end-test: $(SESSION_END_TEST)
	@SESSION_END_TEST=$(SESSION_END_TEST) ADVLOCK_PG_LISTEN=$(PYTHON_TEST_TCP)/32 \
	    tests/pg/with-postgres.sh scripts/run-tests.sh tests/integration/session_end.sh

session-end-bounds: $(SESSION_END_TEST) $(BUILD)/advlock
	@SESSION_END_TEST=$(SESSION_END_TEST) ADVLOCK_SESSION_END_TRIALS=20 \
	    ADVLOCK_SESSION_END_BOUND_MS=$(SESSION_END_BOUND_MS) ADVLOCK_PG_LISTEN=$(PYTHON_TEST_TCP)/32 \
	    $(call session_end_figures,$(BUILD)/session-end-bounds.log,tests/pg/with-postgres.sh \
	    tests/integration/session_end.sh)
	@ADVLOCK=$(BUILD)/advlock ADVLOCK_SESSION_END_TRIALS=20 \
	    ADVLOCK_SESSION_END_BOUND_MS=$(SESSION_END_BOUND_MS) ADVLOCK_PG_LISTEN=$(PYTHON_TEST_TCP)/32 \
	    $(call session_end_figures,$(BUILD)/session-end-bounds-cli.log,tests/pg/with-postgres.sh \
	    tests/cli/session_end.sh)

# The connection scenarios (tests/scenarios/connection.tsv) through the C
# drivers, on one server with PgBouncer in front for the proxy's rows, then
# the standby's rows on a primary and its hot standby; the Python drivers
# run the same table in python-scenarios-test.
.PHONY: pq-scenarios-test
pq-scenarios-test: $(SCENARIOS_TEST) | deps-deploy
	@ADVLOCK_PG_LISTEN=$(PYTHON_TEST_TCP)/32 tests/pg/with-pgbouncer.sh scripts/run-tests.sh $(SCENARIOS_TEST)
	@ADVLOCK_SCENARIOS_NEEDS=standby tests/pg/with-standby.sh scripts/run-tests.sh $(SCENARIOS_TEST)

# First among the suites that wait (Makefile): about 50 s, as long as the longest.
WAITING_TESTS := session-end-test $(WAITING_TESTS)
waiting-tests: $(SESSION_END_TEST)
test: pq-test pq-proxy-test readme-test fidelity-test pq-scenarios-test
programs: $(PQ_TEST_BINS) $(PQ_PROXY_TEST) $(FIDELITY_TEST) $(SESSION_END_TEST) $(SCENARIOS_TEST)

# ---- dependencies, install --------------------------------------------------

deps-pq:
	@CC="$(CC)" scripts/ensure-deps.sh $(DEPS_PQ)

deps-pq-test:
	@CC="$(CC)" scripts/ensure-deps.sh $(DEPS_PQ_TEST)

install: install-pq
install-pq: pq-libs
	install -d $(DESTDIR)$(INCLUDEDIR) $(DESTDIR)$(LIBDIR)/pkgconfig
	install -m 644 include/advlock_pq.h $(DESTDIR)$(INCLUDEDIR)/
	install -m 644 $(BUILD)/libadvlock_pq.a $(DESTDIR)$(LIBDIR)/
	install -m 755 $(BUILD)/libadvlock_pq.so.$(VERSION) $(DESTDIR)$(LIBDIR)/
	ln -sf libadvlock_pq.so.$(VERSION) $(DESTDIR)$(LIBDIR)/libadvlock_pq.so.$(SOVERSION)
	ln -sf libadvlock_pq.so.$(SOVERSION) $(DESTDIR)$(LIBDIR)/libadvlock_pq.so
	install -m 644 $(BUILD)/advlock_pq.pc $(DESTDIR)$(LIBDIR)/pkgconfig/

uninstall: uninstall-pq
uninstall-pq:
	rm -f $(DESTDIR)$(INCLUDEDIR)/advlock_pq.h $(DESTDIR)$(LIBDIR)/libadvlock_pq.* \
	      $(DESTDIR)$(LIBDIR)/pkgconfig/advlock_pq.pc

# No circle of files that call each other in the libpq adapters either
# (part of make file-circles).
.PHONY: file-circles-pq
file-circles: file-circles-pq
file-circles-pq: $(PQ_OBJ)
	@scripts/run-tests.sh -c scripts/check-file-circles.sh $(PQ_OBJ)
