# The Python package (python/advlock): the core's libadvlock.so driven from
# asyncpg and psycopg 3 (docs/python.md). Included by the top-level Makefile.
#
#   make python-test     the pytest suite with Debian's /usr/bin/python3 against
#                        a throwaway PostgreSQL (part of `make test`)
#   make python-session-end-bounds  how soon each driver hears a session the
#                        server ends: p50/max over 20 trials each (not in make test)
#   make python-deploy-test  the drivers through the real PgBouncer (both pool
#                        modes) and on a real hot standby (part of `make test`)
#   make install-python  the package into PYTHON_SITEDIR (DESTDIR honoured)
#   make python-install-test  where it lands, and importing it from there
#   make python-wheel-test  the wheel (python/pyproject.toml) built and installed
#                        offline into a fresh venv, locking on a throwaway
#                        server; the other library-finding rules beside it
#   make bench-python    Python cycles/s beside the same driver by hand
#                        (part of `make bench`: build/bench.json)
#   make python-typecheck  mypy --strict on the package (part of `make test`)

# Debian's interpreter: another python3 first on PATH would not see Debian's
# python3-asyncpg and python3-psycopg.
PYTHON ?= /usr/bin/python3
# Where PYTHON itself reads packages under PREFIX (Debian's python3 reads
# /usr/local/lib/python3.X/dist-packages, not .../python3/...), or, for a
# prefix it does not read, the standard layout there (PYTHONPATH needed).
PYTHON_SITEDIR ?= $(shell $(PYTHON) -c 'import os, site, sys, sysconfig; p = os.path.normpath(sys.argv[1]); \
    print(next((d for d in site.getsitepackages() if os.path.dirname(os.path.dirname(os.path.dirname(d))) == p), \
               sysconfig.get_path("purelib", "posix_prefix", vars={"base": p})))' '$(PREFIX)')
DEPS_PYTHON := python3-asyncpg:py:asyncpg python3-psycopg:py:psycopg python3-pytest:py:pytest
PYTEST_ARGS ?= -q

# The package finds the libraries through ADVLOCK_LIBRARY (absolute: the
# tests and examples may run from any directory).
PYTHON_ENV = ADVLOCK_LIBRARY=$(abspath $(BUILD))/libadvlock.so \
             ADVLOCK_FAKE_LIBRARY=$(abspath $(BUILD))/libadvlock_fake.so \
             ADVLOCK_CLI=$(abspath $(BUILD))/advlock PYTHONDONTWRITEBYTECODE=1 \
             PYTHONPATH=$(CURDIR)/python

.PHONY: python-test python-deploy-test deps-python install-python uninstall-python bench-python

deps-python:
	@PYTHON=$(PYTHON) scripts/ensure-deps.sh $(DEPS_PYTHON)

# The deployment tests need their harness's servers; the main run skips them.
PYTHON_DEPLOY_TESTS := python/tests/test_deploy_pgbouncer.py python/tests/test_deploy_standby.py \
    python/tests/test_scenarios.py
PYTEST = $(PYTHON) -m pytest $(PYTEST_ARGS) -p no:cacheprovider

# The server listens on TCP too, on a loopback address of the run's own (all
# of 127.0.0.0/8 is the loopback), for the lease tests: a Unix socket needs
# no lease, so heartbeats run only over TCP.
PYTHON_TEST_TCP = $(shell od -An -N3 -tu1 /dev/urandom | \
    awk '{ print "127." $$1 % 250 + 1 "." $$2 "." $$3 % 250 + 1 }')

python-test: $(BUILD)/libadvlock.so $(BUILD)/libadvlock_fake.so $(BUILD)/advlock | deps-python
	@$(PYTHON_ENV) ADVLOCK_PG_LISTEN=$(PYTHON_TEST_TCP)/32 \
	    tests/pg/with-postgres.sh scripts/run-tests.sh -c $(PYTEST) \
	    $(addprefix --ignore=,$(PYTHON_DEPLOY_TESTS)) python/tests

# The bound on hearing a session the server ends (docs/python.md "A session
# the server ends"): SESSION_END_TRIALS trials of each driver, transport and
# ending, p50/max printed, each within 0.25 s. Not part of make test (about
# 8 minutes); make python-test runs one trial of each.
SESSION_END_TRIALS ?= 20

.PHONY: python-session-end-bounds
python-session-end-bounds: $(BUILD)/libadvlock.so | deps-python
	@$(PYTHON_ENV) ADVLOCK_PG_LISTEN=$(PYTHON_TEST_TCP)/32 SESSION_END_TRIALS=$(SESSION_END_TRIALS) \
	    SESSION_END_BOUND=0.25 tests/pg/with-postgres.sh $(PYTEST) -s -k heard_at_once \
	    python/tests/test_session_end.py

# The connection scenarios (tests/scenarios/connection.tsv) through the
# Python drivers, on one server with PgBouncer in front for the proxy's
# rows, then the standby's rows on a primary and its hot standby; the C
# drivers run the same table in pq-scenarios-test.
.PHONY: python-scenarios-test
python-scenarios-test: $(BUILD)/libadvlock.so | deps-python deps-deploy
	@$(PYTHON_ENV) ADVLOCK_PG_LISTEN=$(PYTHON_TEST_TCP)/32 tests/pg/with-pgbouncer.sh \
	    scripts/run-tests.sh -c $(PYTEST) python/tests/test_scenarios.py
	@$(PYTHON_ENV) ADVLOCK_SCENARIOS_NEEDS=standby tests/pg/with-standby.sh scripts/run-tests.sh \
	    -c $(PYTEST) python/tests/test_scenarios.py

# Each harness starts its own servers and removes them; each run counts as
# one test in make test's tally.
python-deploy-test: $(BUILD)/libadvlock.so | deps-python deps-deploy
	@$(PYTHON_ENV) tests/pg/with-pgbouncer.sh scripts/run-tests.sh -c $(PYTEST) \
	    python/tests/test_deploy_pgbouncer.py
	@$(PYTHON_ENV) tests/pg/with-standby.sh scripts/run-tests.sh -c $(PYTEST) \
	    python/tests/test_deploy_standby.py

# install-python lands where PYTHON reads, or says which PYTHONPATH to use.
.PHONY: python-install-test
python-install-test: all | deps-python
	@BUILD=$(BUILD) PYTHON=$(PYTHON) scripts/run-tests.sh -c scripts/check-install-python.sh

# The wheel is built with Debian's setuptools and wheel, offline (PyPI is
# not needed), and installed into a venv (python3-venv).
DEPS_WHEEL := python3-setuptools:py:setuptools python3-wheel:py:wheel python3-pip:py:pip \
              python3-venv:py:ensurepip

.PHONY: python-wheel-test deps-wheel
deps-wheel:
	@PYTHON=$(PYTHON) scripts/ensure-deps.sh $(DEPS_WHEEL)

python-wheel-test: $(BUILD)/libadvlock.so $(BUILD)/libadvlock_fake.so | deps-python deps-wheel
	@BUILD=$(BUILD) PYTHON=$(PYTHON) tests/pg/with-postgres.sh \
	    scripts/run-tests.sh -c scripts/check-wheel.sh

# The package's type hints, checked as python/pyproject.toml's [tool.mypy]
# says (--strict; asyncpg, which has no type information, is skipped;
# psycopg's own is used), with Debian's mypy.
DEPS_TYPECHECK := python3-mypy:py:mypy

.PHONY: python-typecheck deps-typecheck
deps-typecheck:
	@PYTHON=$(PYTHON) scripts/ensure-deps.sh $(DEPS_TYPECHECK)

python-typecheck: | deps-python deps-typecheck
	@scripts/run-tests.sh -c $(PYTHON) -m mypy --config-file python/pyproject.toml python/advlock

test: python-test python-deploy-test python-scenarios-test python-install-test python-wheel-test python-typecheck

install-python:
	@test -n "$(PYTHON_SITEDIR)" || { echo "install-python: $(PYTHON) did not say where it reads packages" >&2; exit 1; }
	install -d $(DESTDIR)$(PYTHON_SITEDIR)/advlock
	install -m 644 python/advlock/*.py python/advlock/py.typed $(DESTDIR)$(PYTHON_SITEDIR)/advlock/
	printf '"""Written by make install-python."""\nLIBDIR = "%s"\n' '$(LIBDIR)' \
	    > $(DESTDIR)$(PYTHON_SITEDIR)/advlock/_installed.py
	@$(PYTHON) -c 'import sys; sys.exit(sys.argv[1] not in sys.path)' '$(PYTHON_SITEDIR)' || \
	    echo "install-python: $(PYTHON) does not read $(PYTHON_SITEDIR): run it with PYTHONPATH=$(PYTHON_SITEDIR)"

uninstall-python:
	rm -rf $(DESTDIR)$(PYTHON_SITEDIR)/advlock

BENCH_PYTHON_SECONDS ?= 3

bench-python: $(BUILD)/libadvlock.so | deps-python
	@$(PYTHON_ENV) tests/pg/with-postgres.sh $(PYTHON) bench/python_cycles.py \
	    --seconds $(BENCH_PYTHON_SECONDS) --json $(BUILD)/bench-python.json
	@$(PYTHON) python/bench_merge.py $(BUILD)/bench-python.json $(BUILD)/bench.json

bench: bench-python

# The package's client CPU per cycle (not part of make test or make bench):
# with a client that answers at once (what the package itself costs), then
# each driver beside the same client's statements by hand on a server.
BENCH_PYTHON_CPU_CYCLES ?= 4000

.PHONY: bench-python-cpu
bench-python-cpu: $(BUILD)/libadvlock.so | deps-python
	@$(PYTHON_ENV) $(PYTHON) bench/python_cpu.py 20000
	@$(PYTHON_ENV) GLIBC_TUNABLES=glibc.malloc.mmap_threshold=1048576 tests/pg/with-postgres.sh \
	    $(PYTHON) bench/python_cpu_server.py $(BENCH_PYTHON_CPU_CYCLES)
