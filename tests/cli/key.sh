#!/usr/bin/env bash
# advlock key: output format, stdin, bad UTF-8, --lookup, exit statuses.
set -u
. "$(dirname "$0")/lib.sh"
A=${ADVLOCK:?set ADVLOCK to the advlock binary}

capture "$A" key BrighterMigration_public.Outbox ""
check "two keys, status" 0 "$RC"
check "two keys, output" "$(printf '6330443736081384332\t0x57da4109afba438c\t1473921289\t2948219788\n-740567494393065055\t0xf5b8f9c99c8011a1\t4122540489\t2625638817')" "$OUT"

capture "$A" key "Straße" "$(printf '\xc3')" "日本語のキー"
check "bad key, status" 2 "$RC"
check "bad key, names the argument" "advlock: argument 2: lock key is not valid UTF-8" "$ERR"
check "bad key, others still printed" "$(printf '1741376046945380858\t0x182a9c49da8da9fa\t405445705\t3666717178\n-6244129624372329093\t0xa95865307fcb457b\t2841142576\t2144028027')" "$OUT"

capture bash -c "printf 'a\n\xed\xa0\x80\n🔒lock\n' | '$A' key -"
check "stdin, status" 2 "$RC"
check "stdin, names the line" "advlock: line 2: lock key is not valid UTF-8" "$ERR"
check "stdin, first column" "$(printf '5833259923214357904\n-4681257986631115808')" "$(cut -f1 <<<"$OUT")"

capture bash -c "printf 'a\0b\n' | '$A' key -"
check "stdin keeps NUL bytes" "1372762861005608360" "$(cut -f1 <<<"$OUT")"

# A file written on Windows: the CR LF ends the line, the name is the same.
capture bash -c "printf 'BrighterMigration_public.Outbox\r\nx\n' | '$A' key -"
check "stdin, CR LF line end" "6330443736081384332 -7095688318469890164" "$(cut -f1 <<<"$OUT" | tr '\n' ' ' | sed 's/ $//')"

capture "$A" key --lookup 1473921289 2948219788 nope BrighterMigration_public.Outbox other
check "lookup, status" 0 "$RC"
check "lookup, match" "BrighterMigration_public.Outbox" "$OUT"

capture bash -c "printf 'x\nBrighterMigration_public.Inbox\n' | '$A' key --lookup 2929138567 996202603 -"
check "lookup from stdin" "BrighterMigration_public.Inbox" "$OUT"

capture "$A" key --lookup 1 2 a b
check "lookup, no match, status" 1 "$RC"

capture "$A" key --lookup 1 notanumber a
check "lookup, bad objid" "$EXIT_USAGE" "$RC"
capture "$A" key --lookup 4294967296 1 a
check "lookup, classid beyond 32 bits" "$EXIT_USAGE" "$RC"
# A usage error says what is wrong and where help is, not the whole usage.
capture "$A" key
check "no keys" "${EXIT_USAGE} advlock: a KEY (or -, to read them) is needed; try 'advlock key --help'" "$RC $ERR"
capture "$A" key --bogus a
check "unknown option" "${EXIT_USAGE} $(printf "advlock: unrecognized option '--bogus'\nadvlock: try 'advlock key --help'")" "$RC $ERR"
capture "$A" frobnicate
check "unknown command" "${EXIT_USAGE} advlock: unknown command 'frobnicate'; try 'advlock --help'" "$RC $ERR"
capture "$A"
check "no command" "${EXIT_USAGE} advlock: a command is needed; try 'advlock --help'" "$RC $ERR"
capture "$A" run
check "run, nothing to run" "${EXIT_USAGE} advlock: a KEY and a COMMAND are needed; try 'advlock run --help'" "$RC $ERR"

# Output that cannot be written is an I/O error (74), said.
capture bash -c "'$A' key a >/dev/full"
check "stdout full" "${EXIT_IO} advlock: writing standard output: No space left on device" "$RC $ERR"
for cmd in "" key run status simulate calibrate setup; do
    capture bash -c "'$A' $cmd --help >/dev/full"
    check "$cmd --help, stdout full" "$EXIT_IO" "$RC"
done
capture "$A" --version
# The version the library's header declares (docs.sh holds the man page to it).
header_version=$("$(dirname "$0")/../../scripts/version.sh")
check "version" "advlock $header_version" "$OUT"

finish
