# `make valgrind-test`: the integration suite and the examples, and the
# session check and verify through real PgBouncers (test_proxy: about 20 s
# more), built without
# sanitizers (valgrind and ASan do not mix) and with DWARF 4 (valgrind 3.19
# cannot read clang's DWARF 5), run under memcheck. Any error or definite or
# indirect leak fails the run; libcrypto's and libpq's own one-time
# allocations are described in tests/valgrind.supp.

VALGRIND := valgrind --error-exitcode=1 --leak-check=full --errors-for-leak-kinds=definite,indirect \
            --suppressions=$(CURDIR)/tests/valgrind.supp -q

.PHONY: valgrind-test
valgrind-test: | deps-valgrind
	TEST_RUNNER="$(VALGRIND)" $(MAKE) BUILD=$(BUILD)/vg SANITIZE= CFLAGS="-O1 -g -gdwarf-4" pq-test pq-proxy-test

.PHONY: deps-valgrind
DEPS_VALGRIND := valgrind:cmd:valgrind
deps-valgrind:
	@scripts/ensure-deps.sh $(DEPS_VALGRIND)
