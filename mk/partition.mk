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
# blip, a restart, the default lease; then the Python drivers' partitions
# (python/tests/partition_lease.py). make partition-test soaks advlock run
# with 100 partitions and prints the figures (not in make test: ~15 min).

LEASE_HOLDER := $(BUILD)/partition/lease_holder
PARTITION_LEASE_ENV = ADVLOCK=$(BUILD)/advlock LEASE_HOLDER=$(LEASE_HOLDER)

.PHONY: partition-lease-test partition-test

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
