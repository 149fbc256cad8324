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

# make test keeps make coverage's symbol and core-import checks working: the
# libraries built as make coverage builds them (a few seconds, at -O0, where
# calls the optimiser removes stay) pass them, and a planted unprefixed name
# fails the symbol check, there and in the normal build.
COV_LIBS_BUILD := $(BUILD)/cov-libs
COV_LIBS := libadvlock.a libadvlock.so libadvlock_fake.a libadvlock_fake.so libadvlock_pq.a libadvlock_pq.so
coverage-symbols-test: all
	@$(MAKE) -s BUILD=$(COV_LIBS_BUILD) $(COVERAGE_FLAGS) $(COV_LIBS:%=$(COV_LIBS_BUILD)/%) >/dev/null
	@scripts/run-tests.sh -c tests/build/check-symbols.sh $(BUILD) $(COV_LIBS_BUILD)
	@scripts/run-tests.sh -c scripts/check-core-imports.sh $(CORE_SRC:%.c=$(COV_LIBS_BUILD)/obj/%.o)

test: coverage-symbols-test
