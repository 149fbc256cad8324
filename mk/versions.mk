# The server version matrix: the suites whose answers depend on the server,
# against each PostgreSQL major version advlock supports besides Debian's 15
# (which `make test` covers whole), each server the build tests/pg/server-builds
# pins (tests/pg/install-server.sh installs it on first use, outside the
# tree); and PostgreSQL 13, which must be refused with the minimum version.
#
#   make test-versions                  PG_VERSIONS (default 14 16 17 18), then 13
#   make test-versions PG_VERSIONS=17   one version
#
# Per version, a subset that keeps each under three minutes on two cores
# (tests/README.md, "Server versions"): the libpq adapters'
# integration suites (blocking, nonblocking, the session check, fencing, the
# lock set, server-side waits, the server's timeouts and endings of a
# holder's session: transaction_timeout from 17), a shorter fidelity run (the fake's answers
# beside this server's), the command's fencing tests (tests/cli/fence.sh),
# the Python drivers' tests of locking, fencing, the session check and the
# lease's setup over TCP, and the partition suite's lease cases (advlock run
# and the nonblocking adapter, one partition each). Included by the
# top-level Makefile.

PG_VERSIONS ?= 14 16 17 18
PG_VERSION_REFUSED := 13

# test_session_end last: it restarts the server (one trial per ending here).
VERSION_PQ_BINS := $(addprefix $(BUILD)/san/integration/,test_blocking test_async test_pq_session \
    test_pq_fence test_pq_lockset test_server_wait test_session_end)
VERSION_FIDELITY_SEQUENCES ?= 40
VERSION_PYTHON_TESTS := python/tests/test_drivers.py python/tests/test_fence.py \
    python/tests/test_session.py python/tests/test_lease.py
VERSION_PYTHON_SELECT := not test_lease or setup_applies

.PHONY: test-versions
# The versions run side by side (each on servers of its own, $(call together),
# Makefile), all at once or VERSION_JOBS at a time: they mostly wait, on
# timeouts, leases and restarts. Each version's lines come together, when it
# ends. `make test-version-17` runs one version alone.
VERSION_JOBS ?=
VERSION_NEEDS := $(VERSION_PQ_BINS) $(FIDELITY_TEST) $(BUILD)/advlock $(LEASE_HOLDER) \
                 $(BUILD)/libadvlock.so $(BUILD)/libadvlock_fake.so
test-versions: $(VERSION_NEEDS) | deps-python deps-partition
	@$(call together,$(PG_VERSIONS:%=test-version-%) test-version-refused,$(VERSION_JOBS))
	@scripts/test-summary.sh $(TEST_COUNTS)

test-version-%: $(VERSION_NEEDS) | deps-python deps-partition
	@started=$$(date +%s); \
	PG_VERSION=$* ADVLOCK_SESSION_END_TRIALS=1 tests/pg/with-postgres.sh \
	    scripts/run-tests.sh $(VERSION_PQ_BINS) || exit 1; \
	PG_VERSION=$* tests/pg/with-postgres.sh scripts/run-tests.sh -c \
	    $(FIDELITY_TEST) --sequences $(VERSION_FIDELITY_SEQUENCES) || exit 1; \
	PG_VERSION=$* ADVLOCK=$(BUILD)/advlock tests/pg/with-postgres.sh \
	    scripts/run-tests.sh tests/cli/fence.sh || exit 1; \
	PG_VERSION=$* $(PYTHON_ENV) ADVLOCK_PG_LISTEN=$(PYTHON_TEST_TCP)/32 tests/pg/with-postgres.sh \
	    scripts/run-tests.sh -c $(PYTEST) -k '$(VERSION_PYTHON_SELECT)' $(VERSION_PYTHON_TESTS) || exit 1; \
	PG_VERSION=$* $(PARTITION_LEASE_ENV) LEASE_CLI=1 LEASE_ASYNC=1 \
	    scripts/run-tests.sh -c tests/partition/lease.sh cli async || exit 1; \
	echo "PostgreSQL $*: $$(( $$(date +%s) - started )) s"

test-version-refused: $(BUILD)/advlock $(BUILD)/libadvlock.so | deps-python
	@echo "PostgreSQL $(PG_VERSION_REFUSED) (refused):"
	@PG_VERSION=$(PG_VERSION_REFUSED) ADVLOCK=$(BUILD)/advlock tests/pg/with-postgres.sh \
	    scripts/run-tests.sh tests/cli/old_server.sh
	@PG_VERSION=$(PG_VERSION_REFUSED) $(PYTHON_ENV) tests/pg/with-postgres.sh \
	    scripts/run-tests.sh -c $(PYTEST) python/tests/test_old_server.py
