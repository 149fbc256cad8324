/* Profiles (src/cli/profile.c): the format advlock calibrate writes and
 * advlock simulate --profile reads; every error names the file and line. */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "../../src/cli/profile.h"

static const char good[] = "advlock-profile 1\n"
                           "# advlock calibrate --clients 30\n"
                           "\n"
                           "clients 30\n"
                           "servers 2\n"
                           "launch_us 0 100 2000\n"
                           "startup_us 500\n"
                           "statement_us 20 30 40 50 60 70 80 90 100 110 120 130 140 150 160 170 "
                           "180 190 200 210 220\n"
                           "  wakeup_us 0 0 5000   \n"
                           "command_us 1000 2000\r\n";

static int parse(const char *text, cli_profile *p, char *why)
{
    return cli_profile_parse_text(text, "p.txt", p, why, 256);
}

static void a_profile_reads_back_every_setting(void **state)
{
    (void)state;
    cli_profile p;
    char why[256] = "";
    assert_int_equal(parse(good, &p, why), 0);
    assert_int_equal(p.clients, 30);
    assert_int_equal(p.model.servers, 2);
    assert_int_equal(p.model.launch.count, 3);
    assert_int_equal(p.model.launch.us[2], 2000);
    assert_int_equal(p.model.startup.count, 1);
    assert_int_equal(p.model.startup.us[0], 500);
    assert_int_equal(p.model.statement.count, 21);
    assert_int_equal(p.model.statement.us[20], 220);
    assert_int_equal(p.model.wakeup.count, 3);
    assert_int_equal(p.model.wakeup.us[2], 5000);
    assert_int_equal(p.model.command.us[1], 2000); /* a CR before the newline is fine */
}

static void what_is_written_reads_back_the_same(void **state)
{
    (void)state;
    cli_profile p, q;
    char why[256] = "";
    assert_int_equal(parse(good, &p, why), 0);
    char *text = NULL;
    size_t size = 0;
    FILE *out = open_memstream(&text, &size);
    assert_non_null(out);
    assert_int_equal(cli_profile_write(out, &p, "two\nlines"), 0);
    fclose(out);
    assert_non_null(strstr(text, "advlock-profile 1\n# two\n# lines\nclients 30\n"));
    assert_int_equal(parse(text, &q, why), 0);
    assert_memory_equal(&p, &q, sizeof p);
    free(text);
}

/* Each bad input, and the exact words it gets. */
static void every_error_names_the_file_and_line(void **state)
{
    (void)state;
    static const struct {
        const char *text, *why;
    } bad[] = {
        {"", "p.txt: empty: not an advlock profile (no 'advlock-profile 1' line)"},
        {"# only a comment\n",
         "p.txt: empty: not an advlock profile (no 'advlock-profile 1' line)"},
        {"clients 3\n",
         "p.txt:1: not an advlock profile (the first line must be 'advlock-profile 1')"},
        {"advlock-profile 2\nclients 3\n",
         "p.txt:1: profile version 2 is not supported (this advlock reads version 1)"},
        {"advlock-profile\n",
         "p.txt:1: not an advlock profile (the first line must be 'advlock-profile 1')"},
        {"advlock-profile 1\nclients 3\nflavour 4\n", "p.txt:3: unknown key 'flavour'"},
        {"advlock-profile 1\nclients 3\nclients 4\n", "p.txt:3: 'clients' given twice"},
        {"advlock-profile 1\nlaunch_us 5 4\n",
         "p.txt:2: launch_us: values must not decrease (4 after 5)"},
        {"advlock-profile 1\nlaunch_us 5 x\n",
         "p.txt:2: launch_us: 'x' is not a whole number from 0 to 3600000000"},
        {"advlock-profile 1\nstartup_us -1\n",
         "p.txt:2: startup_us: '-1' is not a whole number from 0 to 3600000000"},
        {"advlock-profile 1\nwakeup_us 99999999999\n",
         "p.txt:2: wakeup_us: '99999999999' is not a whole number from 0 to 3600000000"},
        {"advlock-profile 1\ncommand_us\n", "p.txt:2: command_us: no values"},
        {"advlock-profile 1\nstatement_us 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 "
         "22\n",
         "p.txt:2: statement_us: more than 21 values"},
        {"advlock-profile 1\nclients 0\n",
         "p.txt:2: clients: '0' is not a whole number from 1 to 1000"},
        {"advlock-profile 1\nservers 65\n",
         "p.txt:2: servers: '65' is not a whole number from 0 to 64"},
        {"advlock-profile 1\nservers 1 2\n", "p.txt:2: servers takes one value"},
        {"advlock-profile 1\nservers\n", "p.txt:2: servers: no value"},
        {"advlock-profile 1\nclients 3\nservers 1\nlaunch_us 0\nstartup_us 0\nstatement_us 0\n"
         "wakeup_us 0\n",
         "p.txt: 'command_us' is missing"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cli_profile p;
        char why[256] = "";
        assert_int_equal(parse(bad[i].text, &p, why), -1);
        assert_string_equal(why, bad[i].why);
    }
}

static void a_missing_file_is_named(void **state)
{
    (void)state;
    cli_profile p;
    char why[256] = "";
    assert_int_equal(cli_profile_read("/nonexistent/profile", &p, why, sizeof why), -1);
    assert_string_equal(why, "/nonexistent/profile: cannot open: No such file or directory");
}

/* Launch and startup grow with the clients that start together; the rest
 * is the server's and the command's, and stays. */
static void the_start_scales_with_the_clients(void **state)
{
    (void)state;
    cli_profile p;
    char why[256] = "";
    assert_int_equal(parse(good, &p, why), 0);
    advlock_sim_model same = cli_profile_model_for(&p, 30);
    assert_memory_equal(&same, &p.model, sizeof same);
    advlock_sim_model m = cli_profile_model_for(&p, 45);
    assert_int_equal(m.launch.us[1], 150);
    assert_int_equal(m.launch.us[2], 3000);
    assert_int_equal(m.startup.us[0], 750);
    assert_int_equal(m.statement.us[20], 220);
    assert_int_equal(m.command.us[1], 2000);
    m = cli_profile_model_for(&p, 1);
    assert_int_equal(m.launch.us[2], 66); /* 2000 / 30, rounded down */
}

static void the_built_in_profile_is_valid(void **state)
{
    (void)state;
    cli_profile p;
    char why[256] = "";
    if (parse(cli_profile_default_text, &p, why) != 0)
        fail_msg("%s", why);
    assert_true(p.clients > 1 && p.model.statement.count > 1 && p.model.startup.count > 1);
    assert_int_equal(advlock_sim_dist_check(&p.model.launch), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_profile_reads_back_every_setting),
        cmocka_unit_test(what_is_written_reads_back_the_same),
        cmocka_unit_test(every_error_names_the_file_and_line),
        cmocka_unit_test(a_missing_file_is_named),
        cmocka_unit_test(the_start_scales_with_the_clients),
        cmocka_unit_test(the_built_in_profile_is_valid),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
