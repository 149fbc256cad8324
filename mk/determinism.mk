# The same trace from every compiler: the simulation campaign built with gcc
# and with clang, each in an object tree of its own whatever CC is, must give
# byte-identical traces seed for seed (tests/sim/same-trace.sh). Included by
# the top-level Makefile, whose variables it uses; mk/fake.mk has the rest of
# the simulation's suites.

SAME_TRACE_SEEDS := 3000
# The canary's traces part from the gcc build's at the first backoff sleep,
# which a few seeds are sure to reach.
SAME_TRACE_CANARY_SEEDS := 50
SAME_TRACE_COMPILERS := gcc clang
# The built-in profile too: the campaign's modelled seeds (every third) use
# it, so the model's draws and the profile's parsing are compared as well.
SAME_TRACE_SRC := $(CORE_SRC) $(FAKE_SRC) $(PROFILE_SRC)

.PHONY: same-trace-test same-trace-canary-test $(SAME_TRACE_COMPILERS:%=deps-%)

# Debian names each compiler's package after its command.
DEPS_SAME_TRACE := $(foreach c,$(SAME_TRACE_COMPILERS),$(c):cmd:$(c))
$(SAME_TRACE_COMPILERS:%=deps-%): deps-%:
	@scripts/ensure-deps.sh $*:cmd:$*

# One tree per compiler: $(BUILD)/gcc/... and $(BUILD)/clang/..., with the
# warnings (errors) and flags of the main build.
define same_trace_tree
$$(BUILD)/$(1)/obj/%.o: %.c | deps-build deps-$(1)
	@mkdir -p $$(@D)
	$(1) $$(CPPFLAGS) $$(LIB_CFLAGS) -MMD -MP -c $$< -o $$@

$$(BUILD)/$(1)/sim/campaign: tests/sim/campaign.c $$(SAME_TRACE_SRC:%.c=$$(BUILD)/$(1)/obj/%.o) | deps-build deps-$(1)
	@mkdir -p $$(@D)
	$(1) $$(CPPFLAGS) $$(SIM_CFLAGS) -o $$@ $$^ $$(CORE_LIBS)
endef
$(foreach cc,$(SAME_TRACE_COMPILERS),$(eval $(call same_trace_tree,$(cc))))

SAME_TRACE_BINS := $(SAME_TRACE_COMPILERS:%=$(BUILD)/%/sim/campaign)

same-trace-test: $(SAME_TRACE_BINS)
	@scripts/run-tests.sh -c tests/sim/same-trace.sh $(SAME_TRACE_SEEDS) $^

# A check that cannot fail proves nothing: against the canary campaign
# (mk/fake.mk: the core built with -DADVLOCK_CANARY, first backoff delay
# 150 ms instead of 100) it must report a difference, and the first line it
# names from the gcc build's trace must be a sleep, where the two part.
same-trace-canary-test: $(BUILD)/gcc/sim/campaign $(BUILD)/sim/campaign-canary
	@scripts/run-tests.sh -c sh -c 'out=$$(tests/sim/same-trace.sh $(SAME_TRACE_CANARY_SEEDS) $^ 2>&1); \
	    status=$$?; \
	    if [ $$status -eq 1 ] && printf "%s\n" "$$out" | grep -q "^  $<: .*\"event\":\"sleep\""; then \
	        echo "same-trace canary: caught: $$(printf "%s\n" "$$out" | head -n 1)"; \
	    else printf "%s\n" "$$out"; echo "same-trace canary: not caught (status $$status)"; exit 1; fi'

test: same-trace-test same-trace-canary-test
