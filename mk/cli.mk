# The advlock command. It drives the libpq adapters and the fake database.

CLI_SRC := $(wildcard src/cli/*.c)
CLI_OBJ := $(CLI_SRC:%.c=$(BUILD)/obj/%.o)

$(CLI_OBJ): CPPFLAGS += $(PQ_CPPFLAGS)
$(CLI_OBJ): | deps-pq

$(BUILD)/advlock: $(CLI_OBJ) $(BUILD)/libadvlock_pq.a $(BUILD)/libadvlock.a
	$(CC) -o $@ $(CLI_OBJ) $(BUILD)/libadvlock_pq.a $(BUILD)/libadvlock.a $(PQ_LIBS) $(CORE_LIBS)

all: $(BUILD)/advlock

.PHONY: cli-test
cli-test: $(BUILD)/advlock
	@ADVLOCK=$(BUILD)/advlock tests/cli/key.sh
	@ADVLOCK=$(BUILD)/advlock tests/pg/with-postgres.sh scripts/run-tests.sh tests/cli/status.sh tests/cli/run.sh

test: cli-test
