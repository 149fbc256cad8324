# The partition harness (tests/partition/lib.sh): a holder in a network
# namespace reaching a real PostgreSQL over a veth pair, cut off silently by
# nftables.
#
#   make partition-selftest     the harness checks itself (in make test)
#   make partition-reproduce    advlock run under a silent partition today:
#                               the holder's stop, the server's release, the
#                               overlap (a few minutes; not in make test)
#
# Both need root (network namespaces); without it the self-test is counted
# as skipped. Included by the top-level Makefile, whose variables it uses.

DEPS_PARTITION := nftables:cmd:nft iproute2:cmd:ip

.PHONY: partition-selftest partition-reproduce deps-partition

partition-selftest: | deps-partition
	@scripts/run-tests.sh tests/partition/selftest.sh

test: partition-selftest

partition-reproduce: $(BUILD)/advlock | deps-partition
	ADVLOCK=$(BUILD)/advlock tests/partition/reproduce.sh

# Only root can make namespaces, and install: without root the tests skip.
deps-partition:
	@[ "$$(id -u)" -ne 0 ] || CC="$(CC)" scripts/ensure-deps.sh $(DEPS_PARTITION)

# ---- leases under partitions (tests/partition/lease.sh) -----------------------
# In make test: 6 advlock run partitions, 2 with the nonblocking adapter, a
# blip, a restart, the default lease; under --lock-delay, 3 partitions then
# ended by the server for each ending (pg_terminate_backend; a crash and
# restart; a crash of the primary and its synchronous standby promoted, a
# pair of servers per partition) and 1 without it for each (about 1 min
# each of the last two); then the Python drivers' partitions
# (python/tests/partition_lease.py). make partition-test soaks advlock run
# with 100 partitions and prints the figures (not in make test: ~15 min);
# make partition-delay-test, DELAY_RUNS (default 30) lock-delay partitions
# of each ending (~15 min).

LEASE_HOLDER := $(BUILD)/partition/lease_holder
PARTITION_LEASE_ENV = ADVLOCK=$(BUILD)/advlock LEASE_HOLDER=$(LEASE_HOLDER)

.PHONY: partition-lease-test partition-test partition-delay-test

$(LEASE_HOLDER): tests/partition/lease_holder.c $(BUILD)/libadvlock_pq.a $(BUILD)/libadvlock.a | deps-pq
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(PQ_CPPFLAGS) -std=c11 $(WARNINGS) $(CFLAGS) -o $@ $< \
	    $(BUILD)/libadvlock_pq.a $(BUILD)/libadvlock.a $(PQ_LIBS) $(CORE_LIBS)

partition-lease-test: $(BUILD)/advlock $(LEASE_HOLDER) $(BUILD)/libadvlock.so | deps-partition
	@$(PARTITION_LEASE_ENV) scripts/run-tests.sh tests/partition/lease.sh
	@$(PYTHON_ENV) scripts/run-tests.sh -c tests/partition/with-partition.sh \
	    /usr/bin/python3 python/tests/partition_lease.py

test: partition-lease-test
programs: $(LEASE_HOLDER)

partition-test: $(BUILD)/advlock | deps-partition
	$(PARTITION_LEASE_ENV) LEASE_CLI=100 tests/partition/lease.sh cli

DELAY_RUNS ?= 30

partition-delay-test: $(BUILD)/advlock | deps-partition
	ADVLOCK=$(BUILD)/advlock LEASE_DELAY=$(DELAY_RUNS) tests/partition/lease.sh \
	    delay delay-restart delay-failover

# ---- leases behind PgBouncer under partitions (tests/partition/pgbouncer.sh) ---
# In make test: the start-up warning, one cut-off run with a contender
# through the same PgBouncer and a SIGTERM while the command is stopped, a
# SIGTERM while a verify is out after the command's end (about 30 s). make partition-proxy-measure repeats the cut-off run PROXY_RUNS
# times (default 10) and prints the figures (not in make test: ~2 min).
# PgBouncer comes with deps-deploy (mk/deploy.mk).

PROXY_RUNS ?= 10

.PHONY: partition-proxy-test partition-proxy-measure

partition-proxy-test: $(BUILD)/advlock | deps-partition deps-deploy
	@ADVLOCK=$(BUILD)/advlock scripts/run-tests.sh tests/partition/pgbouncer.sh

test: partition-proxy-test

partition-proxy-measure: $(BUILD)/advlock | deps-partition deps-deploy
	ADVLOCK=$(BUILD)/advlock PROXY_RUNS=$(PROXY_RUNS) tests/partition/pgbouncer.sh stop
