# Deployment tests: advlock against the real components where
# session advisory locks break in the field: PgBouncer in transaction and
# session mode (tests/pg/with-pgbouncer.sh), a streaming hot standby and
# failover (tests/pg/with-standby.sh), under the load of tests/deploy/load.sh.
#
#   make deploy-test                    every tests/deploy test
#   make deploy-test DEPLOY_TESTS=tests/deploy/standby.sh
#   make deploy-probe                   the libpq probe for the design facts
#
# `make test` runs all of DEPLOY_TESTS_IN_TEST, each one test in its
# tally. Included by the top-level Makefile, whose variables it uses.

DEPLOY_TESTS ?=
DEPS_DEPLOY := pgbouncer:cmd:pgbouncer postgresql:cmd:pg_basebackup

.PHONY: deploy-test deploy-probe deps-deploy

deploy-test: $(BUILD)/advlock | deps-deploy
	@ADVLOCK=$(BUILD)/advlock tests/deploy/run.sh $(DEPLOY_TESTS)

DEPLOY_TESTS_IN_TEST := tests/deploy/pgbouncer-session.sh tests/deploy/pgbouncer-tx-xact.sh \
    tests/deploy/pgbouncer-tx-session.sh tests/deploy/pgbouncer-tx-verify.sh \
    tests/deploy/pgbouncer-session-noreset.sh tests/deploy/pgbouncer-tx-mixed.sh \
    tests/deploy/standby.sh tests/deploy/failover.sh tests/deploy/fence-failover.sh

# run.sh, as each test's runner, starts the harness its "# harness:" line
# names; run-tests.sh counts each test once in make test's summary. The
# session-mode test runs its two loads (PgBouncer, direct) at 8 clients x 8
# rounds to keep make test short; the --xact load keeps the full 8 x 20.
.PHONY: deploy-test-in-test
deploy-test-in-test: $(BUILD)/advlock | deps-deploy
	@ADVLOCK=$(BUILD)/advlock TEST_RUNNER=tests/deploy/run.sh ADVLOCK_DEPLOY_ROUNDS=8 \
	    scripts/run-tests.sh $(filter %/pgbouncer-session.sh,$(DEPLOY_TESTS_IN_TEST))
	@ADVLOCK=$(BUILD)/advlock TEST_RUNNER=tests/deploy/run.sh \
	    scripts/run-tests.sh $(filter-out %/pgbouncer-session.sh,$(DEPLOY_TESTS_IN_TEST))

test: deploy-test-in-test

$(BUILD)/deploy/probe: tests/deploy/probe.c | deps-pq
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(PQ_CPPFLAGS) -std=c11 $(WARNINGS) $(CFLAGS) -o $@ $< $(PQ_LIBS)

deploy-probe: $(BUILD)/deploy/probe

# pgbouncer and pg_basebackup live outside PATH on Debian (/usr/sbin,
# /usr/lib/postgresql/*/bin): the harnesses find them and install them when
# missing; this only installs pgbouncer up front.
deps-deploy:
	@PATH="$$PATH:/usr/sbin:$$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | tail -n 1)" \
	    CC="$(CC)" scripts/ensure-deps.sh $(DEPS_DEPLOY)
