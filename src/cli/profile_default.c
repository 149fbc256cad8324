/*
 * The world `advlock simulate` puts its clients in without --profile or
 * --ideal: what `advlock calibrate --clients 50` (command `true`) measured
 * on the project's 2-core test machine against a throwaway PostgreSQL 15
 * (tests/pg/with-postgres.sh) on 2026-11-30, the machine shared with other
 * builds and tests (load average about 8 to 12 at the time): 50 processes
 * started by one launcher took 0.4 to 1.9 s each to get the answer to their
 * first lock statement. docs/simulation.md ("The world") explains each line; to
 * simulate another machine, run calibrate there and pass --profile.
 */
#include "profile.h"

const char cli_profile_default_text[] =
    "advlock-profile 1\n"
    "# advlock calibrate --clients 50 --statements 20 --hold 0 -- true\n"
    "# values: microseconds at the 0, 5, 10, ... 100th percentiles\n"
    "clients 50\n"
    "servers 1\n"
    "launch_us 0 4494 12364 22385 38413 66087 80433 109448 111315 192336 220242 222112 280328 "
    "344731 517538 649705 899223 901587 989304 1059161 1436478\n"
    "startup_us 425765 565998 647911 766521 852469 961894 991992 1170674 1239430 1313905 1354452 "
    "1393231 1444478 1506795 1543520 1580818 1641347 1683654 1729766 1802101 1941179\n"
    "statement_us 22 22 22 23 23 23 24 24 24 25 25 25 25 25 26 26 46 47 48 50 84\n"
    "wakeup_us 35 111 123 129 138 146 158 172 184 198 213 239 284 382 548 817 1535 3060 11021 "
    "92950 533745\n"
    "command_us 6820 7031 7319 7428 7560 7619 7668 7812 7946 7979 8338 9768 16287 17927 19636 "
    "37052 48245 54696 58312 124190 795478\n";
