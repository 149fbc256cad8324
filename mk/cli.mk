# The advlock command.

CLI_SRC := $(wildcard src/cli/*.c)
CLI_OBJ := $(CLI_SRC:%.c=$(BUILD)/obj/%.o)

$(BUILD)/advlock: $(CLI_OBJ) $(BUILD)/libadvlock.a
	$(CC) -o $@ $(CLI_OBJ) $(BUILD)/libadvlock.a $(CORE_LIBS)

all: $(BUILD)/advlock

.PHONY: cli-test
cli-test: $(BUILD)/advlock
	@ADVLOCK=$(BUILD)/advlock tests/cli/key.sh

test: cli-test
