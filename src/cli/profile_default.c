/*
 * The world `advlock simulate` puts its clients in without --profile or
 * --ideal: what `advlock calibrate --clients 50` (command `true`) measured
 * on the project's 2-core test machine against a throwaway PostgreSQL 15
 * (tests/pg/with-postgres.sh) on 2026-11-30, the machine shared with other
 * builds and tests (load average about 8 to 15 at the time): 50 processes
 * started by one launcher took 0.7 to 2.3 s each to reach their first
 * statement. docs/simulation.md ("The world") explains each line; to
 * simulate another machine, run calibrate there and pass --profile.
 */
#include "profile.h"

const char cli_profile_default_text[] =
    "advlock-profile 1\n"
    "# advlock calibrate --clients 50 --statements 20 --hold 0 -- true\n"
    "# values: microseconds at the 0, 5, 10, ... 100th percentiles\n"
    "clients 50\n"
    "servers 1\n"
    "launch_us 0 2490 30248 89406 91348 126505 283041 351974 353420 510913 584784 759268 895921 "
    "1140712 1304780 1375300 1778530 1940232 2020786 2136829 2465151\n"
    "startup_us 720968 794993 802263 929723 1051787 1450890 1472149 1568768 1589373 1678454 "
    "1702604 1719540 1742700 1754016 1786498 1845153 1904901 1970243 2027473 2124913 2278196\n"
    "statement_us 21 21 22 22 22 23 24 25 30 30 30 30 30 31 31 31 32 32 33 38 1556\n"
    "wakeup_us 38 105 140 166 212 290 415 584 759 992 1317 1919 2503 3655 5043 6862 10013 20688 "
    "55558 96911 410684\n"
    "command_us 7919 7919 8582 9045 10243 11551 15548 21728 23703 25377 38773 42791 43646 51392 "
    "55278 195362 272130 319858 350493 515913 585632\n";
