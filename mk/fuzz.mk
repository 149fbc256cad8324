# libFuzzer targets for the core (the machine, key derivation, the lease, the
# connection engine): `make fuzz FUZZ_SECONDS=N` runs each for N s.
# Built with clang (-fsanitize=fuzzer,address,undefined) in a tree of their own.

FUZZ_SECONDS ?= 60
FUZZ_CC      := clang
FUZZ_FLAGS   := -std=c11 $(WARNINGS) -O1 -g -fsanitize=address,undefined \
                -fno-sanitize-recover=all -fno-omit-frame-pointer
FUZZ_TARGETS := fuzz_machine fuzz_key fuzz_lease fuzz_conn
FUZZ_CORE_SRC := $(wildcard src/core/*.c)
FUZZ_CORE_OBJ := $(FUZZ_CORE_SRC:%.c=$(BUILD)/fuzz/obj/%.o)

.PHONY: fuzz fuzz-build deps-fuzz

# libFuzzer's runtime is in clang's package on newer Debian, apart on 12.
DEPS_FUZZ := clang:cmd:clang
DEPS_FUZZ_RUNTIME := libclang-rt-14-dev:cmd:no-such-command-forces-install

deps-fuzz:
	@scripts/ensure-deps.sh $(DEPS_FUZZ)
	@printf 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { (void)d; return (int)n * 0; }\n' \
	    | clang -fsanitize=fuzzer -x c - -o /dev/null 2>/dev/null \
	    || scripts/ensure-deps.sh $(DEPS_FUZZ_RUNTIME)

$(BUILD)/fuzz/obj/%.o: %.c | deps-fuzz deps-build
	@mkdir -p $(@D)
	$(FUZZ_CC) $(CPPFLAGS) $(FUZZ_FLAGS) -fsanitize=fuzzer-no-link -c $< -o $@

$(BUILD)/fuzz/%: fuzz/%.c fuzz/fuzz_input.h $(FUZZ_CORE_OBJ) | deps-fuzz
	@mkdir -p $(@D)
	$(FUZZ_CC) $(CPPFLAGS) $(FUZZ_FLAGS) -fsanitize=fuzzer -o $@ $(filter-out %.h,$^) $(CORE_LIBS)

fuzz-build: $(FUZZ_TARGETS:%=$(BUILD)/fuzz/%)

# Each target starts from its committed seeds and adds what it finds to a
# scratch corpus under build/, so the tree stays clean. The targets fuzz
# side by side, one a core ($(call together), Makefile): each still fuzzes
# for FUZZ_SECONDS.
fuzz: fuzz-build
	@$(call together,$(FUZZ_TARGETS:%=fuzz-run-%),$(NPROC))

fuzz-run-%: $(BUILD)/fuzz/%
	@corpus=$(BUILD)/fuzz/corpus/$(*:fuzz_%=%); mkdir -p $$corpus; \
	echo "fuzzing $* for $(FUZZ_SECONDS) s"; \
	if $< -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 \
	       -artifact_prefix=$(BUILD)/fuzz/ $$corpus fuzz/corpus/$(*:fuzz_%=%) \
	       > $(BUILD)/fuzz/$*.log 2>&1; then \
	    grep -E '^stat::number_of_executed_units' $(BUILD)/fuzz/$*.log; \
	else \
	    tail -n 40 $(BUILD)/fuzz/$*.log; exit 1; \
	fi

.SECONDARY: $(FUZZ_CORE_OBJ)

# The canary: the machine fuzzer on a core with a planted schedule bug must
# fail within seconds, from the committed seeds alone, or the gate is blind.
FUZZ_CANARY_OBJ := $(FUZZ_CORE_SRC:%.c=$(BUILD)/fuzz-canary/obj/%.o)

$(BUILD)/fuzz-canary/obj/%.o: %.c | deps-fuzz deps-build
	@mkdir -p $(@D)
	$(FUZZ_CC) $(CPPFLAGS) -DADVLOCK_CANARY $(FUZZ_FLAGS) -fsanitize=fuzzer-no-link -c $< -o $@

$(BUILD)/fuzz-canary/fuzz_machine: fuzz/fuzz_machine.c fuzz/fuzz_input.h $(FUZZ_CANARY_OBJ) | deps-fuzz
	@mkdir -p $(@D)
	$(FUZZ_CC) $(CPPFLAGS) $(FUZZ_FLAGS) -fsanitize=fuzzer -o $@ $(filter-out %.h,$^) $(CORE_LIBS)

.PHONY: fuzz-canary
fuzz-canary: $(BUILD)/fuzz-canary/fuzz_machine
	@if $< -runs=0 -artifact_prefix=$(BUILD)/fuzz-canary/ fuzz/corpus/machine \
	        > $(BUILD)/fuzz-canary/log 2>&1; then \
	    echo "fuzz canary: NOT caught: the machine fuzzer missed a planted schedule bug"; exit 1; \
	elif grep -q 'in on_sleep_started' $(BUILD)/fuzz-canary/log; then \
	    echo "fuzz canary: caught (a planted 150 ms first sleep aborts the machine fuzzer)"; \
	else \
	    echo "fuzz canary: the fuzzer failed, but not on the schedule check:"; \
	    tail -n 20 $(BUILD)/fuzz-canary/log; exit 1; \
	fi

.SECONDARY: $(FUZZ_CANARY_OBJ)
