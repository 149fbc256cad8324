# The thundering herd, real beside simulated: `make herd` runs the same herd
# on a throwaway PostgreSQL and in the simulator with the profile
# `advlock calibrate` measured in the same run, prints the table that
# docs/simulation.md shows and draws every wait in $(BUILD)/herd/waits.svg
# (tests/herd/herd.sh). Not part of `make test`: it
# takes a few minutes. HERD_ROUNDS rounds per row; HERD_CLIENTS the sizes.

HERD_ROUNDS  ?= 3
HERD_CLIENTS ?= 10 30 50
HERD_TOOLS   := $(BUILD)/herd/launch $(BUILD)/herd/stamp $(BUILD)/herd/waits_svg

$(BUILD)/herd/%: tests/herd/%.c | deps-build
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) -std=c11 $(WARNINGS) $(CFLAGS) -o $@ $<

# The waits' picture, drawn with the command's SVG primitives.
$(BUILD)/herd/waits_svg: tests/herd/waits_svg.c $(BUILD)/obj/src/cli/svg.o | deps-build
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) -std=c11 $(WARNINGS) $(CFLAGS) -o $@ $< $(BUILD)/obj/src/cli/svg.o

.PHONY: herd
herd: $(BUILD)/advlock $(HERD_TOOLS)
	tests/pg/with-postgres.sh tests/herd/herd.sh $(BUILD) $(HERD_ROUNDS) $(HERD_CLIENTS)

all: $(HERD_TOOLS)
