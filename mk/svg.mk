# The pictures: advlock simulate --svg's timeline and make herd's waits
# (tests/herd/waits_svg.c), parsed, checked self-contained and rendered by
# Debian's headless Chromium (tests/cli/svg.sh; about 15 s, no server).

DEPS_SVG := chromium:cmd:chromium python3:cmd:/usr/bin/python3

.PHONY: svg-test deps-svg
# Chromium without its Recommends: 19 packages instead of 73 (avahi, cups,
# upower, notification daemons...), none of whose files a headless render opens.
deps-svg:
	@NO_RECOMMENDS=1 scripts/ensure-deps.sh $(DEPS_SVG)

svg-test: $(BUILD)/advlock $(BUILD)/herd/waits_svg | deps-svg
	@ADVLOCK=$(BUILD)/advlock WAITS_SVG=$(BUILD)/herd/waits_svg scripts/run-tests.sh tests/cli/svg.sh

test: svg-test
