# The simulation: campaigns of seeded runs against the fake database
# (libadvlock_fake: src/adapters/fake and src/sim), the canary that proves a campaign catches a planted bug, the
# examples from docs/simulation.md. (The fake's fidelity to a real PostgreSQL
# is an integration test: mk/pq.mk.) Included by the top-level Makefile, whose variables it uses.

SIM_CFLAGS := -std=c11 $(WARNINGS) $(CFLAGS)
# Seeds `make test` runs; `make sim` runs SEEDS seeds from START.
SIM_TEST_SEEDS := 20000
SIM_SAN_SEEDS  := 2000
SEEDS ?= 100000
START ?= 1

.PHONY: sim sim-test sim-san-test sim-canary-test sim-doc-test

# Every campaign links the built-in profile (PROFILE_SRC): its modelled seeds
# live in the world `advlock simulate` uses by default.
$(BUILD)/sim/campaign: tests/sim/campaign.c $(PROFILE_SRC:%.c=$(BUILD)/obj/%.o) $(FAKE_OBJ) $(CORE_OBJ) | deps-build
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(SIM_CFLAGS) -o $@ $^ $(CORE_LIBS)

$(BUILD)/san/sim/campaign: tests/sim/campaign.c $(PROFILE_SRC:%.c=$(BUILD)/san/obj/%.o) $(FAKE_SAN_OBJ) $(CORE_SAN_OBJ) | deps-build
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(SIM_CFLAGS) $(SANITIZE) -o $@ $^ $(CORE_LIBS)

# The canary: the same core with a wrong first backoff delay planted, under
# the unchanged fake and simulator.
CANARY_OBJ := $(CORE_SRC:%.c=$(BUILD)/canary/obj/%.o) $(FAKE_OBJ) $(PROFILE_SRC:%.c=$(BUILD)/obj/%.o)

$(BUILD)/canary/obj/%.o: %.c | deps-build
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) -DADVLOCK_CANARY $(LIB_CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/sim/campaign-canary: tests/sim/campaign.c $(CANARY_OBJ) | deps-build
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(SIM_CFLAGS) -o $@ $^ $(CORE_LIBS)

sim: $(BUILD)/sim/campaign
	$(BUILD)/sim/campaign --seeds $(SEEDS) --start $(START)

sim-test: $(BUILD)/sim/campaign
	@scripts/run-tests.sh -c $(BUILD)/sim/campaign --seeds $(SIM_TEST_SEEDS) --start 1

sim-san-test: $(BUILD)/san/sim/campaign
	@scripts/run-tests.sh -c $(BUILD)/san/sim/campaign --seeds $(SIM_SAN_SEEDS) --start 1

# The canary's expected failures (FAIL seed ...) are checked, not printed:
# only a canary that was not caught shows its output.
sim-canary-test: $(BUILD)/sim/campaign-canary
	@scripts/run-tests.sh -c sh -c 'out=$$(tests/sim/expect-canary-caught.sh $< 2>&1) \
	    && echo "canary: caught (the campaign flags the planted 150 ms first delay)" \
	    || { printf "%s\n" "$$out"; exit 1; }'

# The examples in docs/simulation.md, compiled and run exactly as printed and
# linked as the page says (libadvlock_fake, then libadvlock): each follows a
# "<!-- tested: doc_NAME.c -->" marker.
DOC_EXAMPLES := $(BUILD)/sim/doc_example $(BUILD)/sim/doc_options

$(BUILD)/sim/doc_%.c: docs/simulation.md
	@mkdir -p $(@D)
	awk '/<!-- tested: doc_$*.c -->/ {armed = 1; next} \
	     armed && /^```c/ {inside = 1; next} inside && /^```/ {exit} inside {print}' $< > $@
	@test -s $@ || { echo "docs/simulation.md: the tested example doc_$*.c is missing" >&2; exit 1; }

$(BUILD)/sim/doc_%: $(BUILD)/sim/doc_%.c $(BUILD)/libadvlock_fake.a $(BUILD)/libadvlock.a
	$(CC) $(CPPFLAGS) $(SIM_CFLAGS) -o $@ $< -L$(BUILD) -Wl,-Bstatic -ladvlock_fake -ladvlock \
	    -Wl,-Bdynamic $(CORE_LIBS)

sim-doc-test: $(DOC_EXAMPLES)
	@scripts/run-tests.sh $^

# Kept: make would otherwise delete them, and say so, after the last test.
.SECONDARY: $(DOC_EXAMPLES:%=%.c)

test: sim-test sim-san-test sim-canary-test sim-doc-test
programs: $(BUILD)/sim/campaign $(BUILD)/san/sim/campaign $(BUILD)/sim/campaign-canary $(DOC_EXAMPLES)

# The lease campaign (tests/sim/lease_campaign.c): partitions and pauses of
# holders whose connection engine runs a lease must give no overlapping work
# and no spurious stop. Its canary links an engine built with
# -DADVLOCK_LEASE_CANARY, whose grants never start the lease (no heartbeat,
# no deadline): over the same worlds it must find overlaps (a check that
# cannot fail proves nothing).
LEASE_TEST_SEEDS := 10000
LEASE_SAN_SEEDS  := 2000

.PHONY: sim-lease-test sim-lease-san-test sim-lease-canary-test

# The lease and lock-set campaigns link the fake and the core alone.
$(BUILD)/sim/%_campaign: tests/sim/%_campaign.c $(FAKE_OBJ) $(CORE_OBJ) | deps-build
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(SIM_CFLAGS) -o $@ $^ $(CORE_LIBS)

$(BUILD)/san/sim/%_campaign: tests/sim/%_campaign.c $(FAKE_SAN_OBJ) $(CORE_SAN_OBJ) | deps-build
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(SIM_CFLAGS) $(SANITIZE) -o $@ $^ $(CORE_LIBS)

sim-lease-test: $(BUILD)/sim/lease_campaign
	@scripts/run-tests.sh -c $< --seeds $(LEASE_TEST_SEEDS) --start 1

sim-lease-san-test: $(BUILD)/san/sim/lease_campaign
	@scripts/run-tests.sh -c $< --seeds $(LEASE_SAN_SEEDS) --start 1

# The lease and lock-set campaigns' canaries: each links the core with the
# one file its flag plants a bug in, built under $(BUILD)/planted with every
# such flag (each file reads its own), named by an explicit prerequisite.
$(BUILD)/planted/obj/%.o: %.c | deps-build
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) -DADVLOCK_LEASE_CANARY -DADVLOCK_PEERS_CANARY -DADVLOCK_DELAY_CANARY \
	    $(LIB_CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/sim/%_campaign-canary: tests/sim/%_campaign.c $(FAKE_OBJ) | deps-build
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(SIM_CFLAGS) -o $@ $^ $(CORE_LIBS)

$(BUILD)/sim/lease_campaign-canary: $(filter-out %/conn_lease.o,$(CORE_OBJ)) \
    $(BUILD)/planted/obj/src/core/conn_lease.o

sim-lease-canary-test: $(BUILD)/sim/lease_campaign-canary
	@scripts/run-tests.sh -c sh -c 'out=$$($< --seeds $(LEASE_TEST_SEEDS) --start 1 2>&1); \
	    status=$$?; \
	    if [ $$status -eq 1 ] && printf "%s\n" "$$out" | grep -q "^FAIL .*two holders. work overlaps"; then \
	        echo "lease canary: caught: $$(printf "%s\n" "$$out" | grep "^overlaps:" | cut -d";" -f1)"; \
	    else printf "%s\n" "$$out"; echo "lease canary: an engine whose grants start no lease was not caught (status $$status)"; exit 1; fi'

test: sim-lease-test sim-lease-san-test sim-lease-canary-test
programs: $(BUILD)/sim/lease_campaign $(BUILD)/san/sim/lease_campaign $(BUILD)/sim/lease_campaign-canary

# Lock-delay in the lease campaign (--lock-delay): the server also ends
# sessions on its own (a terminate of the holder's session, a crash and
# restart), and each seed runs with lock-delay, where no two holders' work
# may overlap, and without, where the same seeds must find overlaps (the
# campaign fails if the ends never bite). Its canary links an engine built
# with -DADVLOCK_DELAY_CANARY (src/core/conn_delay.c), which waits out half
# the old holder's stop bound: with lock-delay on, it must find overlaps.
LEASE_DELAY_TEST_SEEDS := 10000
LEASE_DELAY_SAN_SEEDS  := 2000

.PHONY: sim-lease-delay-test sim-lease-delay-san-test sim-lease-delay-canary-test

sim-lease-delay-test: $(BUILD)/sim/lease_campaign
	@scripts/run-tests.sh -c $< --lock-delay --seeds $(LEASE_DELAY_TEST_SEEDS) --start 1

sim-lease-delay-san-test: $(BUILD)/san/sim/lease_campaign
	@scripts/run-tests.sh -c $< --lock-delay --seeds $(LEASE_DELAY_SAN_SEEDS) --start 1

$(BUILD)/sim/lease_campaign-delay-canary: tests/sim/lease_campaign.c $(FAKE_OBJ) \
    $(filter-out %/conn_delay.o,$(CORE_OBJ)) $(BUILD)/planted/obj/src/core/conn_delay.o | deps-build
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(SIM_CFLAGS) -o $@ $^ $(CORE_LIBS)

sim-lease-delay-canary-test: $(BUILD)/sim/lease_campaign-delay-canary
	@scripts/run-tests.sh -c sh -c 'out=$$($< --lock-delay --seeds $(LEASE_DELAY_TEST_SEEDS) --start 1 2>&1); \
	    status=$$?; \
	    if [ $$status -eq 1 ] && printf "%s\n" "$$out" | grep -q "^FAIL .*two holders. work overlaps.* --lock-delay --trace)$$"; then \
	        echo "lock-delay canary: caught: $$(printf "%s\n" "$$out" | grep "^lock-delay:" | cut -d" " -f2-)"; \
	    else printf "%s\n" "$$out"; echo "lock-delay canary: an engine waiting out half the stop bound was not caught (status $$status)"; exit 1; fi'

test: sim-lease-delay-test sim-lease-delay-san-test sim-lease-delay-canary-test
programs: $(BUILD)/sim/lease_campaign-delay-canary

# The lock-set campaign (tests/sim/lockset_campaign.c): sets of callers
# sharing one connection beside ordinary clients, checked after every event
# (no conflicting holds, the server's hold counts equal what the callers
# were told, LOST for every held member at once). Its canary links a peers
# table built with -DADVLOCK_PEERS_CANARY, which lets every peer through:
# the campaign must find two callers holding one key at once.
LOCKSET_TEST_SEEDS := 10000
LOCKSET_SAN_SEEDS  := 2000
LOCKSET_CANARY_SEEDS := 500

.PHONY: sim-lockset-test sim-lockset-san-test sim-lockset-canary-test

$(BUILD)/sim/lockset_campaign-canary: $(filter-out %/peers.o,$(CORE_OBJ)) \
    $(BUILD)/planted/obj/src/core/peers.o

sim-lockset-test: $(BUILD)/sim/lockset_campaign
	@scripts/run-tests.sh -c $< --seeds $(LOCKSET_TEST_SEEDS) --start 1

sim-lockset-san-test: $(BUILD)/san/sim/lockset_campaign
	@scripts/run-tests.sh -c $< --seeds $(LOCKSET_SAN_SEEDS) --start 1

sim-lockset-canary-test: $(BUILD)/sim/lockset_campaign-canary
	@scripts/run-tests.sh -c sh -c 'out=$$($< --seeds $(LOCKSET_CANARY_SEEDS) --start 1 2>&1); \
	    status=$$?; \
	    if [ $$status -eq 1 ] && printf "%s\n" "$$out" | grep -q "^FAIL .*shared callers at once"; then \
	        echo "lockset canary: caught: $$(printf "%s\n" "$$out" | grep -m 1 "^FAIL")"; \
	    else printf "%s\n" "$$out"; echo "lockset canary: a table letting every peer through was not caught (status $$status)"; exit 1; fi'

test: sim-lockset-test sim-lockset-san-test sim-lockset-canary-test
programs: $(BUILD)/sim/lockset_campaign $(BUILD)/san/sim/lockset_campaign $(BUILD)/sim/lockset_campaign-canary
