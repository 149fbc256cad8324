# `make coverage`: the whole test suite on a gcc --coverage build in a tree of
# its own, then line and branch coverage per file of src/, with the gates:
# each area as a whole: the core >= 95 % of lines and >= 90 % of branches,
# the adapters >= 85 % of lines (per-file figures are printed too).

COVERAGE_FLAGS := CC="gcc --coverage" CFLAGS="-O0 -g" SANITIZE=

.PHONY: coverage coverage-symbols-test
coverage:
	rm -rf $(BUILD)/cov
	$(MAKE) BUILD=$(BUILD)/cov $(COVERAGE_FLAGS) test
	scripts/coverage-report.sh $(BUILD)/cov

# make test keeps make coverage working without running it: every program
# make test compiles is built as make coverage builds it (at -O0,
# where gcc's format and flow warnings differ and calls the optimiser removes
# stay), and its libraries pass the symbol and core-import checks, where a
# planted unprefixed name fails, as in the normal build. It compiles only,
# NPROC files at a time (Makefile).
COV_LIBS_BUILD := $(BUILD)/cov-libs
coverage-symbols-test: all
	@scripts/run-tests.sh -c sh -c '$(MAKE) -s -j$(NPROC) BUILD=$(COV_LIBS_BUILD) $(COVERAGE_FLAGS) programs \
	    && echo "coverage build: every program make test compiles"'
	@scripts/run-tests.sh -c tests/build/check-symbols.sh $(BUILD) $(COV_LIBS_BUILD)
	@scripts/run-tests.sh -c scripts/check-core-imports.sh $(CORE_SRC:%.c=$(COV_LIBS_BUILD)/obj/%.o)

test: coverage-symbols-test
