# The advlock command. It drives the libpq adapters and the fake database.

CLI_SRC := $(wildcard src/cli/*.c)
CLI_OBJ := $(CLI_SRC:%.c=$(BUILD)/obj/%.o)

# The profile's objects (PROFILE_SRC, Makefile) need no libpq: the campaign
# links them too.
$(filter-out $(PROFILE_SRC:%.c=$(BUILD)/obj/%.o),$(CLI_OBJ)): CPPFLAGS += $(PQ_CPPFLAGS)
$(filter-out $(PROFILE_SRC:%.c=$(BUILD)/obj/%.o),$(CLI_OBJ)): | deps-pq

# simulate runs the fake database and simulator (libadvlock_fake).
$(BUILD)/advlock: $(CLI_OBJ) $(BUILD)/libadvlock_pq.a $(BUILD)/libadvlock_fake.a $(BUILD)/libadvlock.a
	$(CC) $(LDFLAGS) -o $@ $(CLI_OBJ) $(BUILD)/libadvlock_pq.a $(BUILD)/libadvlock_fake.a $(BUILD)/libadvlock.a \
	    $(PQ_LIBS) $(CORE_LIBS)

all: $(BUILD)/advlock

# The profile parser's unit test (tests/unit/test_profile.c) links the parser
# and the built-in profile without libpq, and the fake for its checks.
$(BUILD)/tests/test_profile: $(PROFILE_SRC:%.c=$(BUILD)/obj/%.o) $(FAKE_OBJ)
$(BUILD)/san/tests/test_profile: $(PROFILE_SRC:%.c=$(BUILD)/san/obj/%.o) $(FAKE_SAN_OBJ)

# cli-test's parts that need a server, each on servers of its own, run side
# by side, WAITING_JOBS at a time ($(call together), Makefile): they mostly
# wait, on timeouts and leases; the longest first. cli-local-test, which
# computes, runs alone. bounds.sh stops the server's processes and
# saturates a PgBouncer session pool of one connection: its own PgBouncer,
# about 80 s alone.
CLI_TEST_PARTS := cli-bounds-test cli-names-test cli-server-test cli-json-test cli-fence-test \
    cli-lock-delay-test
.PHONY: cli-test deps-cli cli-local-test $(CLI_TEST_PARTS)
cli-test: cli-local-test $(BUILD)/advlock | deps-cli
	@$(call together,$(CLI_TEST_PARTS),$(WAITING_JOBS))
cli-local-test: $(BUILD)/advlock | deps-cli
	@ADVLOCK=$(BUILD)/advlock scripts/run-tests.sh tests/cli/key.sh tests/cli/simulate.sh tests/cli/docs.sh
cli-server-test: $(BUILD)/advlock | deps-cli
	@ADVLOCK=$(BUILD)/advlock tests/pg/with-postgres.sh scripts/run-tests.sh tests/cli/status.sh tests/cli/status_all.sh tests/cli/run.sh tests/cli/quickstart.sh tests/cli/session_name.sh \
	    tests/cli/calibrate.sh
# Its own server: it installs the fencing schema and crash-restarts the server.
cli-fence-test: $(BUILD)/advlock | deps-cli
	@ADVLOCK=$(BUILD)/advlock tests/pg/with-postgres.sh scripts/run-tests.sh tests/cli/fence.sh
# Its own server: it installs the schema and ends holders' sessions (about 20 s).
cli-lock-delay-test: $(BUILD)/advlock | deps-cli
	@ADVLOCK=$(BUILD)/advlock tests/pg/with-postgres.sh scripts/run-tests.sh tests/cli/lock_delay.sh
cli-bounds-test: $(BUILD)/advlock | deps-cli
	@ADVLOCK=$(BUILD)/advlock ADVLOCK_TEST_PGBOUNCER_SESSION_POOL=1 tests/pg/with-pgbouncer.sh \
	    scripts/run-tests.sh tests/cli/bounds.sh
# Several names: direct, over TCP (a lease), and through the session pool (about 25 s);
# a small lock table, for --capacity-share.
cli-names-test: $(BUILD)/advlock | deps-cli
	@ADVLOCK=$(BUILD)/advlock ADVLOCK_PG_LISTEN=127.0.0.1/32 \
	    ADVLOCK_PG_CONF="max_locks_per_transaction = 10" tests/pg/with-pgbouncer.sh \
	    scripts/run-tests.sh tests/cli/names.sh
# Its own server, on TCP too (a loopback address of its own, as python-test's): a lease.
cli-json-test: $(BUILD)/advlock | deps-cli
	@ADVLOCK=$(BUILD)/advlock ADVLOCK_PG_LISTEN=$(PYTHON_TEST_TCP)/32 tests/pg/with-postgres.sh \
	    scripts/run-tests.sh tests/cli/json.sh

# The server's own endings of a run's session (its timeouts, terminate,
# restarts), on the Unix socket and over TCP: a server of its own, as it
# sets server-wide timeouts and restarts it (about 60 s). session-end-bounds
# (mk/pq.mk) runs it with 20 trials.
.PHONY: cli-session-end-test
cli-session-end-test: $(BUILD)/advlock | deps-cli
	@ADVLOCK=$(BUILD)/advlock ADVLOCK_PG_LISTEN=$(PYTHON_TEST_TCP)/32 tests/pg/with-postgres.sh \
	    scripts/run-tests.sh tests/cli/session_end.sh

# Every statement the command sends is a row of the core's table: its
# objects call none of libpq's functions that take SQL text.
.PHONY: cli-sql-check
cli-sql-check: $(CLI_OBJ)
	@scripts/run-tests.sh -c scripts/check-cli-sql.sh $(CLI_OBJ)

# The longest first: bounds.sh, then session_end.sh (about 65 s).
WAITING_TESTS += cli-bounds-test cli-session-end-test $(filter-out cli-bounds-test,$(CLI_TEST_PARTS))
waiting-tests: $(BUILD)/advlock
test: cli-local-test cli-sql-check

# json.sh judges every line with Debian's Python's json module.
DEPS_CLI := python3:py:json
deps-cli:
	@PYTHON=/usr/bin/python3 scripts/ensure-deps.sh $(DEPS_CLI)

BINDIR ?= $(PREFIX)/bin
MANDIR ?= $(PREFIX)/share/man

.PHONY: install-cli
install: install-cli
# The installed page's footer names the version, include/advlock.h's.
install-cli: $(BUILD)/advlock
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(MANDIR)/man1
	install -m 755 $(BUILD)/advlock $(DESTDIR)$(BINDIR)/
	sed '/^\.TH /s/ "advlock" / "advlock $(VERSION)" /' docs/advlock.1 >$(DESTDIR)$(MANDIR)/man1/advlock.1
	chmod 644 $(DESTDIR)$(MANDIR)/man1/advlock.1
