# Debian packages (debian/): libadvlock1, libadvlock-dev, advlock and
# python3-advlock, built by dpkg-buildpackage with the project's own
# Makefile (scripts/build-deb.sh) and checked by lintian.
#
#   make deb        the packages, into $(BUILD)/deb/, from the files git
#                   tracks (untracked ones are left out, and counted)
#   make deb-test   builds them, installs them on this system, checks the
#                   command, the -dev files and the Python package as a
#                   user of them, and purges them (tests/deb/packages.sh;
#                   needs root, else skipped; packages of these names
#                   left by an earlier run are purged first; part of
#                   `make test`)
# Included by the top-level Makefile.

DEB_DIR := $(BUILD)/deb
DEPS_DEB := debhelper:cmd:dh dpkg-dev:cmd:dpkg-buildpackage dh-python:cmd:dh_python3 \
    lintian:cmd:lintian python3:cmd:/usr/bin/python3 pkg-config:cmd:pkg-config \
    libssl-dev:openssl/evp.h libpq-dev:postgresql/libpq-fe.h

DEPS_DEB_TEST := systemd:cmd:systemd-analyze

.PHONY: deb deb-test deps-deb deps-deb-test

deps-deb:
	@CC="$(CC)" scripts/ensure-deps.sh $(DEPS_DEB)

deps-deb-test:
	@CC="$(CC)" scripts/ensure-deps.sh $(DEPS_DEB_TEST)

deb: | deps-deb
	@scripts/build-deb.sh $(DEB_DIR)

# The build counts as a test of its own, so that `make test` goes on past a
# failed one (the package test then finds no packages, and fails too). The
# systemd example runs over TCP (its lease), on a loopback address of the
# run's own (mk/python.mk).
deb-test: | deps-deb deps-deb-test
	@scripts/run-tests.sh -c scripts/build-deb.sh $(DEB_DIR)
	@DEB_DIR=$(DEB_DIR) ADVLOCK_PG_LISTEN=$(PYTHON_TEST_TCP)/32 \
	    tests/pg/with-postgres.sh scripts/run-tests.sh tests/deb/packages.sh

test: deb-test
