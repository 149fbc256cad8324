# advlock — build, test, install. See README.md.

# The version is written once, in include/advlock.h; scripts/version.sh reads it.
VERSION   := $(shell scripts/version.sh)
ifeq ($(VERSION),)
$(error scripts/version.sh found no version in include/advlock.h)
endif
SOVERSION := 1
PREFIX    ?= /usr/local
LIBDIR    ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
DESTDIR   ?=
BUILD     ?= build

CFLAGS    ?= -O2 -g
WARNINGS  := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
             -Wpointer-arith -Wformat=2 -Wundef -Wvla
CPPFLAGS  += -Iinclude -D_POSIX_C_SOURCE=200809L
LIB_CFLAGS := -std=c11 $(WARNINGS) $(CFLAGS) -fPIC -fvisibility=hidden
SANITIZE  := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer

# libadvlock: the core alone (no libpq, no I/O). libadvlock_fake: the fake
# clock and PostgreSQL lock manager (src/adapters/fake) and the simulation
# driver on top of them (src/sim); it needs libadvlock. See docs/architecture.md.
CORE_SRC  := $(wildcard src/core/*.c)
FAKE_SRC  := $(wildcard src/adapters/fake/*.c src/sim/*.c)
# The profile parser and the built-in measured profile (src/cli, no libpq):
# the command's, and the simulation campaign's world model (mk/fake.mk,
# mk/determinism.mk), so both simulate the same measured world.
PROFILE_SRC := src/cli/profile.c src/cli/profile_default.c
CORE_LIBS := -lcrypto -lpthread

# Debian packages each step needs, as package:probe (see scripts/ensure-deps.sh).
DEPS_BUILD := libssl-dev:openssl/evp.h
DEPS_TEST  := $(DEPS_BUILD) libcmocka-dev:cmocka.h locales:cmd:localedef pkg-config:cmd:pkg-config

# Quiet by default: one short line per file built, and the whole command
# only when it fails (scripts/quiet-shell.sh); V=1 shows every command.
# Tests likewise: a line per passing program (scripts/run-tests.sh).
export V ?= 0
ifneq ($(V),1)
SHELL := $(CURDIR)/scripts/quiet-shell.sh
.SILENT:
endif

.PHONY: all test unit-tests core-imports file-circles file-circles-test symbols-check install-check quiet-build-check docs-check apt-lock-test run FORCE install uninstall clean deps-build deps-test
.DELETE_ON_ERROR:

all: $(BUILD)/libadvlock.a $(BUILD)/libadvlock.so $(BUILD)/libadvlock_fake.a $(BUILD)/libadvlock_fake.so

# Suites that mostly wait (timeouts, leases, restarts), each on servers of
# its own, run side by side: $(call together,TARGETS) makes TARGETS in a
# make of its own, all at once, each target's output printed whole when it
# ends (-O), so the lines of one suite stay together. JOBS caps how many
# run at once ($(call together,TARGETS,JOBS)); the CPU-bound ones pass
# $(NPROC). tests/README.md ("How make test runs") lists what runs so.
NPROC := $(shell nproc 2>/dev/null || echo 2)
together = $(MAKE) --no-print-directory -O -j$(or $(2),$(words $(1))) $(1)

# ---- objects: one tree per flavour (plain, sanitized) ----------------------

$(BUILD)/obj/%.o: %.c | deps-build
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(LIB_CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/san/obj/%.o: %.c | deps-build
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(LIB_CFLAGS) $(SANITIZE) -MMD -MP -c $< -o $@

CORE_OBJ     := $(CORE_SRC:%.c=$(BUILD)/obj/%.o)
CORE_SAN_OBJ := $(CORE_SRC:%.c=$(BUILD)/san/obj/%.o)
FAKE_OBJ     := $(FAKE_SRC:%.c=$(BUILD)/obj/%.o)
FAKE_SAN_OBJ := $(FAKE_SRC:%.c=$(BUILD)/san/obj/%.o)

# ---- libraries --------------------------------------------------------------

$(BUILD)/libadvlock.a: $(CORE_OBJ)
	$(AR) rcs $@ $^

$(BUILD)/libadvlock.so.$(VERSION): $(CORE_OBJ)
	$(CC) -shared -Wl,-soname,libadvlock.so.$(SOVERSION) -Wl,--no-undefined $(LDFLAGS) -o $@ $^ $(CORE_LIBS)

$(BUILD)/libadvlock.so: $(BUILD)/libadvlock.so.$(VERSION)
	ln -sf libadvlock.so.$(VERSION) $(BUILD)/libadvlock.so.$(SOVERSION)
	ln -sf libadvlock.so.$(SOVERSION) $@

$(BUILD)/libadvlock_fake.a: $(FAKE_OBJ)
	$(AR) rcs $@ $^

# The libraries that need libadvlock find it beside themselves ($ORIGIN): a
# program's own rpath does not reach its libraries' dependencies, and with
# --as-needed the program itself does not name libadvlock. A package for
# the loader's own directories may set it empty.
SIBLING_RPATH ?= -Wl,-rpath,'$$ORIGIN'

$(BUILD)/libadvlock_fake.so.$(VERSION): $(FAKE_OBJ) $(BUILD)/libadvlock.so
	$(CC) -shared -Wl,-soname,libadvlock_fake.so.$(SOVERSION) -Wl,--no-undefined $(SIBLING_RPATH) $(LDFLAGS) -o $@ \
	    $(FAKE_OBJ) -L$(BUILD) -ladvlock

$(BUILD)/libadvlock_fake.so: $(BUILD)/libadvlock_fake.so.$(VERSION)
	ln -sf libadvlock_fake.so.$(VERSION) $(BUILD)/libadvlock_fake.so.$(SOVERSION)
	ln -sf libadvlock_fake.so.$(SOVERSION) $@

# Regenerated on every run: PREFIX may differ from the last one.
$(BUILD)/advlock.pc $(BUILD)/advlock_fake.pc: $(BUILD)/%.pc: %.pc.in FORCE
	@mkdir -p $(@D)
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@LIBDIR@|$(LIBDIR)|' \
	    -e 's|@INCLUDEDIR@|$(INCLUDEDIR)|' -e 's|@VERSION@|$(VERSION)|' $< > $@

# ---- unit tests (CMocka), plain and under ASan + UBSan ----------------------

UNIT_TESTS := $(patsubst tests/unit/%.c,%,$(wildcard tests/unit/test_*.c))
TEST_CFLAGS := -std=c11 $(WARNINGS) $(CFLAGS) -DVECTOR_DIR='"$(CURDIR)/tests/vectors"'
TEST_LIBS := -lcmocka $(CORE_LIBS)
# test_no_malloc counts every allocation the project's own code makes.
LDFLAGS_test_no_malloc := -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc

# The fake's tests (test_fake_*) and the simulator's (test_sim_*) link their
# objects too; every other unit test links the core alone.
FAKE_UNIT_TESTS := $(filter test_fake_% test_sim_%,$(UNIT_TESTS))
$(FAKE_UNIT_TESTS:%=$(BUILD)/tests/%): $(FAKE_OBJ)
$(FAKE_UNIT_TESTS:%=$(BUILD)/san/tests/%): $(FAKE_SAN_OBJ)

$(BUILD)/tests/%: tests/unit/%.c $(CORE_OBJ) | deps-test
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(TEST_CFLAGS) -o $@ $^ $(LDFLAGS_$*) $(TEST_LIBS)

$(BUILD)/san/tests/%: tests/unit/%.c $(CORE_SAN_OBJ) | deps-test
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(TEST_CFLAGS) $(SANITIZE) -o $@ $^ $(LDFLAGS_$*) $(TEST_LIBS)

# A comma-decimal locale for the message tests, built without root.
$(BUILD)/locale/de_DE.UTF-8: | deps-test
	@mkdir -p $(@D)
	localedef -i de_DE -f UTF-8 $@ 2>/dev/null || test -d $@

UNIT_BINS := $(UNIT_TESTS:%=$(BUILD)/tests/%) $(UNIT_TESTS:%=$(BUILD)/san/tests/%)

# Every C program `make test` compiles, built and not run: the fragments in
# mk/ add theirs. make coverage builds them at -O0 with gcc --coverage, where
# warnings the optimiser hides at -O2 appear (mk/coverage.mk).
.PHONY: programs
programs: all $(UNIT_BINS)

# `make test` goes on past a failed suite and ends with one line, the sum of
# every suite's tally, failing if any test failed: each suite adds its tally
# to TEST_COUNTS (scripts/run-tests.sh does it), emptied as make starts;
# `make test-versions` (mk/versions.mk) likewise.
ifneq ($(filter test test-versions,$(MAKECMDGOALS)),)
export TEST_COUNTS := $(CURDIR)/$(BUILD)/test-counts
$(shell mkdir -p $(BUILD) && rm -f $(TEST_COUNTS))
endif

unit-tests: $(UNIT_BINS) $(BUILD)/locale/de_DE.UTF-8
	@LOCPATH=$(CURDIR)/$(BUILD)/locale scripts/run-tests.sh $(UNIT_BINS)

core-imports: $(CORE_OBJ)
	@scripts/run-tests.sh -c scripts/check-core-imports.sh $^

# No circle of files that call each other (scripts/check-file-circles.sh), in
# the core, and in the fake with the simulator (mk/pq.mk adds the libpq
# adapters).
file-circles: $(CORE_OBJ) $(FAKE_OBJ)
	@scripts/run-tests.sh -c scripts/check-file-circles.sh $(CORE_OBJ)
	@scripts/run-tests.sh -c scripts/check-file-circles.sh $(FAKE_OBJ)

# ... and the check finds a circle planted in three files of its own.
file-circles-test:
	@scripts/run-tests.sh tests/build/file-circles.sh

# Every installed library exports and shows only advlock_ names, and the
# core library holds none of the fake's.
symbols-check: all
	@scripts/run-tests.sh -c scripts/check-symbols.sh $(BUILD)

install-check: all
	@BUILD=$(BUILD) scripts/run-tests.sh -c scripts/check-install.sh

quiet-build-check:
	@scripts/run-tests.sh -c scripts/check-quiet-build.sh

# Installs wait for another apt or dpkg instead of failing (scripts/apt-get.sh).
apt-lock-test:
	@scripts/run-tests.sh tests/build/apt-lock.sh

# The writing rules a script can check (scripts/check-docs.sh).
docs-check:
	@scripts/run-tests.sh -c scripts/check-docs.sh

# The suites of make test that mostly wait, each on servers of its own, run
# side by side ($(call together)): the fragments in mk/ add them to
# WAITING_TESTS, and what they need built to waiting-tests' prerequisites,
# so that it is built first, one at a time, as the rest of make test.
# WAITING_JOBS of them at a time: their timeouts and leases have margins for
# a busy machine, not for one where every suite starts processes at once.
WAITING_TESTS :=
WAITING_JOBS ?= 3
.PHONY: waiting-tests
waiting-tests:
	@$(call together,$(WAITING_TESTS),$(WAITING_JOBS))

# The fragments in mk/ add their suites as prerequisites; this line comes last.
test: all core-imports file-circles file-circles-test unit-tests symbols-check install-check quiet-build-check docs-check apt-lock-test \
    waiting-tests
	@scripts/test-summary.sh $(TEST_COUNTS)

# ---- the main job -----------------------------------------------------------

$(BUILD)/examples/%: examples/%.c $(BUILD)/libadvlock.a
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) -std=c11 $(WARNINGS) $(CFLAGS) -o $@ $< $(BUILD)/libadvlock.a $(CORE_LIBS)

# Eight clients racing for one migration lock on the fake database: the lock
# at work in virtual time, with no server to set up.
run: all
	$(BUILD)/advlock simulate --clients 8 --hold 250

# ---- dependencies, install --------------------------------------------------

deps-build:
	@CC="$(CC)" scripts/ensure-deps.sh $(DEPS_BUILD)

deps-test:
	@CC="$(CC)" scripts/ensure-deps.sh $(DEPS_TEST)

# Every Debian package any step may install, one a line (README.md names
# each: scripts/check-docs.sh checks it).
.PHONY: deps-list
deps-list:
	@printf '%s\n' $(foreach v,$(filter DEPS_%,$(.VARIABLES)),$(foreach d,$($(v)),$(firstword $(subst :, ,$(d))))) | sort -u

# libadvlock and libadvlock_fake, each with its header and pkg-config file
# (libadvlock_pq's are installed by mk/pq.mk).
install: all $(BUILD)/advlock.pc $(BUILD)/advlock_fake.pc
	install -d $(DESTDIR)$(INCLUDEDIR) $(DESTDIR)$(LIBDIR)/pkgconfig
	install -m 644 include/advlock.h include/advlock_fake.h $(DESTDIR)$(INCLUDEDIR)/
	for lib in libadvlock libadvlock_fake; do \
	    install -m 644 $(BUILD)/$$lib.a $(DESTDIR)$(LIBDIR)/ && \
	    install -m 755 $(BUILD)/$$lib.so.$(VERSION) $(DESTDIR)$(LIBDIR)/ && \
	    ln -sf $$lib.so.$(VERSION) $(DESTDIR)$(LIBDIR)/$$lib.so.$(SOVERSION) && \
	    ln -sf $$lib.so.$(SOVERSION) $(DESTDIR)$(LIBDIR)/$$lib.so || exit 1; \
	done
	install -m 644 $(BUILD)/advlock.pc $(BUILD)/advlock_fake.pc $(DESTDIR)$(LIBDIR)/pkgconfig/

uninstall:
	rm -f $(DESTDIR)$(INCLUDEDIR)/advlock.h $(DESTDIR)$(INCLUDEDIR)/advlock_fake.h \
	      $(DESTDIR)$(LIBDIR)/libadvlock.a $(DESTDIR)$(LIBDIR)/libadvlock.so* \
	      $(DESTDIR)$(LIBDIR)/libadvlock_fake.* \
	      $(DESTDIR)$(LIBDIR)/pkgconfig/advlock.pc $(DESTDIR)$(LIBDIR)/pkgconfig/advlock_fake.pc

clean:
	rm -rf $(BUILD)

# Each adapter's targets live in a fragment of its own; they add to `test`.
include $(wildcard mk/*.mk)

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
