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
# Its programs are compiled first, NPROC files at a time (Makefile); the
# tests then run one at a time, as pq-test and pq-proxy-test run them.
VALGRIND_MAKE := $(MAKE) BUILD=$(BUILD)/vg SANITIZE= CFLAGS="-O1 -g -gdwarf-4"
valgrind-test: | deps-valgrind
	$(VALGRIND_MAKE) -j$(NPROC) pq-test-programs
	TEST_RUNNER="$(VALGRIND)" $(VALGRIND_MAKE) pq-test pq-proxy-test

.PHONY: deps-valgrind
DEPS_VALGRIND := valgrind:cmd:valgrind
deps-valgrind:
	@scripts/ensure-deps.sh $(DEPS_VALGRIND)
