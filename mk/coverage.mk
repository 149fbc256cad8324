# `make coverage`: the whole test suite on a gcc --coverage build in a tree of
# its own, then line and branch coverage per file of src/, with the gates:
# each area as a whole: the core >= 95 % of lines and >= 90 % of branches,
# the adapters >= 85 % of lines (per-file figures are printed too).

.PHONY: coverage
coverage:
	rm -rf $(BUILD)/cov
	$(MAKE) BUILD=$(BUILD)/cov CC="gcc --coverage" CFLAGS="-O0 -g" SANITIZE= test
	scripts/coverage-report.sh $(BUILD)/cov
