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
