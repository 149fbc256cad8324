# The pictures: advlock simulate --svg's timeline and make herd's waits
# (tests/herd/waits_svg.c), parsed, checked self-contained and rendered by
# Debian's headless Chromium (tests/cli/svg.sh; about 15 s, no server).

DEPS_SVG := chromium:cmd:chromium python3:cmd:/usr/bin/python3

.PHONY: svg-test deps-svg
deps-svg:
	@scripts/ensure-deps.sh $(DEPS_SVG)

svg-test: $(BUILD)/advlock $(BUILD)/herd/waits_svg | deps-svg
	@ADVLOCK=$(BUILD)/advlock WAITS_SVG=$(BUILD)/herd/waits_svg scripts/run-tests.sh tests/cli/svg.sh

test: svg-test
