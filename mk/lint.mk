# Static analysis and formatting: `make lint` checks, `make format` fixes.
# clang-tidy's checks are chosen in .clang-tidy, the style in .clang-format.

LINT_SOURCES = $(shell git ls-files '*.c' '*.h' 2>/dev/null)
LINT_DEFINES := -Iinclude -I$(shell pg_config --includedir 2>/dev/null || echo /usr/include/postgresql) \
                -D_POSIX_C_SOURCE=200809L -DVECTOR_DIR='"tests/vectors"'

.PHONY: lint lint-cppcheck lint-tidy lint-format format deps-lint

DEPS_LINT := cppcheck:cmd:cppcheck clang-tidy:cmd:clang-tidy clang-format:cmd:clang-format

deps-lint:
	@scripts/ensure-deps.sh $(DEPS_LINT)

lint: lint-format lint-cppcheck lint-tidy

# Both checkers work on NPROC files at a time (Makefile); every file is
# still checked once, with the same checks.
lint-cppcheck: | deps-lint deps-pq-test
	cppcheck -j$(NPROC) --enable=warning,performance,portability --error-exitcode=1 --quiet \
	    --inline-suppr --std=c11 $(LINT_DEFINES) $(filter %.c,$(LINT_SOURCES))
	@echo "cppcheck: clean"

lint-tidy: | deps-lint deps-pq-test
	@printf '%s\n' $(filter %.c,$(LINT_SOURCES)) \
	    | xargs -P$(NPROC) -n8 sh -c 'clang-tidy --quiet "$$@" -- -std=c11 $(subst ','\'',$(LINT_DEFINES)) 2>/dev/null' clang-tidy \
	    | grep -E 'warning:|error:' && exit 1 || echo "clang-tidy: clean"

lint-format: | deps-lint
	@bad=$$(for f in $(LINT_SOURCES); do clang-format "$$f" | cmp -s - "$$f" || echo "$$f"; done); \
	if [ -n "$$bad" ]; then echo "not formatted (run make format):"; echo "$$bad"; exit 1; fi; \
	echo "clang-format: clean"

format: | deps-lint
	clang-format -i $(LINT_SOURCES)
