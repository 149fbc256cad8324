# advlock — build, test, install. See README.md.

VERSION   := 0.1.0
SOVERSION := 0
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

# libadvlock: the core plus the fake clock and database (no libpq, no I/O).
CORE_SRC  := $(wildcard src/core/*.c src/adapters/fake/*.c src/sim/*.c)
CORE_LIBS := -lcrypto -lpthread

# Debian packages each step needs, as package:probe (see scripts/ensure-deps.sh).
DEPS_BUILD := libssl-dev:openssl/evp.h
DEPS_TEST  := $(DEPS_BUILD) libcmocka-dev:cmocka.h locales:cmd:localedef pkg-config:cmd:pkg-config

.PHONY: all test unit-tests core-imports install-check run FORCE install uninstall clean deps-build deps-test
.DELETE_ON_ERROR:

all: $(BUILD)/libadvlock.a $(BUILD)/libadvlock.so

# ---- objects: one tree per flavour (plain, sanitized) ----------------------

$(BUILD)/obj/%.o: %.c | deps-build
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(LIB_CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/san/obj/%.o: %.c | deps-build
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(LIB_CFLAGS) $(SANITIZE) -MMD -MP -c $< -o $@

CORE_OBJ     := $(CORE_SRC:%.c=$(BUILD)/obj/%.o)
PURE_CORE_OBJ := $(patsubst %.c,$(BUILD)/obj/%.o,$(wildcard src/core/*.c))
CORE_SAN_OBJ := $(CORE_SRC:%.c=$(BUILD)/san/obj/%.o)

# ---- libraries --------------------------------------------------------------

$(BUILD)/libadvlock.a: $(CORE_OBJ)
	$(AR) rcs $@ $^

$(BUILD)/libadvlock.so.$(VERSION): $(CORE_OBJ)
	$(CC) -shared -Wl,-soname,libadvlock.so.$(SOVERSION) -Wl,--no-undefined -o $@ $^ $(CORE_LIBS)

$(BUILD)/libadvlock.so: $(BUILD)/libadvlock.so.$(VERSION)
	ln -sf libadvlock.so.$(VERSION) $(BUILD)/libadvlock.so.$(SOVERSION)
	ln -sf libadvlock.so.$(SOVERSION) $@

# Regenerated on every run: PREFIX may differ from the last one.
$(BUILD)/advlock.pc: advlock.pc.in FORCE
	@mkdir -p $(@D)
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@LIBDIR@|$(LIBDIR)|' \
	    -e 's|@INCLUDEDIR@|$(INCLUDEDIR)|' -e 's|@VERSION@|$(VERSION)|' $< > $@

# ---- unit tests (CMocka), plain and under ASan + UBSan ----------------------

UNIT_TESTS := $(patsubst tests/unit/%.c,%,$(wildcard tests/unit/test_*.c))
TEST_CFLAGS := -std=c11 $(WARNINGS) $(CFLAGS) -DVECTOR_DIR='"$(CURDIR)/tests/vectors"'
TEST_LIBS := -lcmocka $(CORE_LIBS)
# test_no_malloc counts every allocation the project's own code makes.
LDFLAGS_test_no_malloc := -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc

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

unit-tests: $(UNIT_BINS) $(BUILD)/locale/de_DE.UTF-8
	@LOCPATH=$(CURDIR)/$(BUILD)/locale scripts/run-tests.sh $(UNIT_BINS)

core-imports: $(PURE_CORE_OBJ)
	@scripts/check-core-imports.sh $^

install-check: all
	@scripts/check-install.sh

test: all core-imports unit-tests install-check

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

install: all $(BUILD)/advlock.pc
	install -d $(DESTDIR)$(INCLUDEDIR) $(DESTDIR)$(LIBDIR)/pkgconfig
	install -m 644 include/advlock.h $(DESTDIR)$(INCLUDEDIR)/
	install -m 644 $(BUILD)/libadvlock.a $(DESTDIR)$(LIBDIR)/
	install -m 755 $(BUILD)/libadvlock.so.$(VERSION) $(DESTDIR)$(LIBDIR)/
	ln -sf libadvlock.so.$(VERSION) $(DESTDIR)$(LIBDIR)/libadvlock.so.$(SOVERSION)
	ln -sf libadvlock.so.$(SOVERSION) $(DESTDIR)$(LIBDIR)/libadvlock.so
	install -m 644 $(BUILD)/advlock.pc $(DESTDIR)$(LIBDIR)/pkgconfig/

uninstall:
	rm -f $(DESTDIR)$(INCLUDEDIR)/advlock.h $(DESTDIR)$(LIBDIR)/libadvlock.* \
	      $(DESTDIR)$(LIBDIR)/pkgconfig/advlock.pc

clean:
	rm -rf $(BUILD)

# Each adapter's targets live in a fragment of its own; they add to `test`.
include $(wildcard mk/*.mk)

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
