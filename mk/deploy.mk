# Deployment tests (issue 11): advlock against the real components where
# session advisory locks break in the field: PgBouncer in transaction and
# session mode (tests/pg/with-pgbouncer.sh), a streaming hot standby and
# failover (tests/pg/with-standby.sh), under the load of tests/deploy/load.sh.
#
#   make deploy-test                    every tests/deploy test
#   make deploy-test DEPLOY_TESTS=tests/deploy/standby.sh
#   make deploy-probe                   the libpq probe for the design facts
#
# Not part of `make test` yet: they encode behaviour still being built
# (detection of transaction pooling, --xact, --allow-standby). Included by
# the top-level Makefile, whose variables it uses.

DEPLOY_TESTS ?=
DEPS_DEPLOY := pgbouncer:cmd:pgbouncer postgresql:cmd:pg_basebackup

.PHONY: deploy-test deploy-probe deps-deploy

deploy-test: $(BUILD)/advlock | deps-deploy
	@ADVLOCK=$(BUILD)/advlock tests/deploy/run.sh $(DEPLOY_TESTS)

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
