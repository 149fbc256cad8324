/* Text the core produces: seconds, bounded messages for long keys, NUL
 * bytes in keys, error and outcome names, the SQL table. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "advlock.h"

static void seconds_like_total_seconds(void **state)
{
    (void)state;
    char buf[32];
    assert_int_equal(advlock_format_seconds(30000, buf, sizeof buf), 2);
    assert_string_equal(buf, "30");
    assert_int_equal(advlock_format_seconds(500, buf, sizeof buf), 3);
    assert_string_equal(buf, "0.5");
    assert_int_equal(advlock_format_seconds(1250, buf, sizeof buf), 4);
    assert_string_equal(buf, "1.25");
    assert_int_equal(advlock_format_seconds(0, buf, sizeof buf), 1);
    assert_string_equal(buf, "0");
    assert_int_equal(advlock_format_seconds(INT64_MAX, buf, sizeof buf), 20);
    assert_string_equal(buf, "9223372036854775.807");
}

static void seconds_buffer_handling(void **state)
{
    (void)state;
    char buf[4] = "zzz";
    assert_int_equal(advlock_format_seconds(1250, NULL, 0), 4); /* measure only */
    assert_int_equal(advlock_format_seconds(1250, buf, sizeof buf), 4);
    assert_string_equal(buf, "1.2"); /* cut like snprintf */
    assert_int_equal(advlock_format_seconds(1250, buf, 1), 4);
    assert_string_equal(buf, "");
    assert_int_equal(advlock_format_seconds(-1, buf, sizeof buf), ADVLOCK_EINVAL);
    assert_int_equal(advlock_format_seconds(1, NULL, 5), ADVLOCK_EINVAL);
}

/* Times out at once and returns the machine's message. */
static const char *timeout_message(advlock_machine *m, const char *key, size_t len)
{
    advlock_machine_init(m);
    assert_int_equal(advlock_start_acquire(m, key, len, 1000, 0), 0);
    assert_int_equal(advlock_on_result(m, ADVLOCK_RESULT_FALSE, NULL, NULL, 1000), 0);
    assert_int_equal(advlock_next_action(m).outcome, ADVLOCK_TIMED_OUT);
    return advlock_next_action(m).message;
}

static void long_keys_are_cut_in_messages(void **state)
{
    (void)state;
    static advlock_machine m;
    size_t len = 1048576;
    char *key = malloc(len);
    assert_non_null(key);
    memset(key, 'x', len);
    const char *msg = timeout_message(&m, key, len);
    char expected[ADVLOCK_MESSAGE_MAX];
    memcpy(expected, "Could not acquire migration lock for '", 38);
    memset(expected + 38, 'x', ADVLOCK_KEY_ECHO_MAX);
    memcpy(expected + 38 + ADVLOCK_KEY_ECHO_MAX, "...' within 1s.", sizeof "...' within 1s.");
    assert_string_equal(msg, expected);
    free(key);
}

static void cuts_fall_between_characters(void **state)
{
    (void)state;
    static advlock_machine m;
    char key[3000];
    for (size_t i = 0; i < sizeof key; i += 3)
        memcpy(key + i, "\xE6\x97\xA5", 3); /* U+65E5 */
    const char *msg = timeout_message(&m, key, sizeof key);
    assert_int_equal(advlock_utf8_valid(msg, strlen(msg)), 1);
    const char *cut = strstr(msg, "...' within 1s.");
    assert_non_null(cut);
    size_t echoed = (size_t)(cut - msg) - 38;
    assert_int_equal(echoed, 510); /* 170 whole characters: 171 would pass 512 */
}

static void long_server_messages_are_cut(void **state)
{
    (void)state;
    static advlock_machine m;
    char server[4000];
    memset(server, 'e', sizeof server - 1);
    server[sizeof server - 1] = '\0';
    advlock_machine_init(&m);
    assert_int_equal(advlock_start_acquire(&m, "k", 1, 0, 0), 0);
    assert_int_equal(advlock_on_result(&m, ADVLOCK_RESULT_SERVER_ERROR, "XX000", server, 0), 0);
    const char *msg = advlock_next_action(&m).message;
    assert_int_equal(strlen(msg), ADVLOCK_MESSAGE_MAX - 1);
    assert_string_equal(msg + ADVLOCK_MESSAGE_MAX - 4, "...");
    assert_true(strncmp(msg, "pg_try_advisory_lock for 'k' failed with SQLSTATE XX000: eee", 60)
                == 0);
}

static void nul_bytes_are_shown_escaped(void **state)
{
    (void)state;
    static advlock_machine m;
    assert_string_equal(timeout_message(&m, "a\0b", 3),
                        "Could not acquire migration lock for 'a\\0b' within 1s.");
    assert_string_equal(timeout_message(&m, "\0", 1),
                        "Could not acquire migration lock for '\\0' within 1s.");
    assert_string_equal(timeout_message(&m, "", 0),
                        "Could not acquire migration lock for '' within 1s.");
}

static void names_for_every_code(void **state)
{
    (void)state;
    static const int codes[] = {ADVLOCK_OK,      ADVLOCK_EINVAL,   ADVLOCK_EUTF8,
                                ADVLOCK_EMISUSE, ADVLOCK_ECRYPTO,  ADVLOCK_ENULL,
                                ADVLOCK_ESERVER, ADVLOCK_ECONNLOST};
    size_t n = sizeof codes / sizeof codes[0];
    for (size_t i = 0; i < n; i++) {
        assert_string_not_equal(advlock_strerror(codes[i]), "unknown advlock error");
        for (size_t j = 0; j < i; j++)
            assert_string_not_equal(advlock_strerror(codes[i]), advlock_strerror(codes[j]));
    }
    assert_string_equal(advlock_strerror(-1000), "unknown advlock error");
    assert_string_equal(advlock_strerror(1), "unknown advlock error");

    assert_string_equal(advlock_outcome_name(ADVLOCK_ACQUIRED), "acquired");
    assert_string_equal(advlock_outcome_name(ADVLOCK_RELEASED), "released");
    assert_string_equal(advlock_outcome_name(ADVLOCK_NOT_HELD), "not held");
    assert_string_equal(advlock_outcome_name(ADVLOCK_TIMED_OUT), "timed out");
    assert_string_equal(advlock_outcome_name(ADVLOCK_CANCELLED), "cancelled");
    assert_string_equal(advlock_outcome_name(ADVLOCK_FAILED), "failed");
    assert_string_equal(advlock_outcome_name(ADVLOCK_ENDS_WITH_TRANSACTION),
                        "ends with transaction");
    assert_string_equal(advlock_outcome_name((advlock_outcome)77), "unknown outcome");
}

static void sql_table(void **state)
{
    (void)state;
    assert_string_equal(advlock_sql_text(ADVLOCK_SQL_TRY_LOCK), "SELECT pg_try_advisory_lock($1)");
    assert_string_equal(advlock_sql_text(ADVLOCK_SQL_UNLOCK), "SELECT pg_advisory_unlock($1)");
    assert_null(advlock_sql_text(ADVLOCK_SQL_COUNT));
    assert_null(advlock_sql_text((advlock_sql)-1));
    for (int i = 0; i < ADVLOCK_SQL_COUNT; i++) {
        const char *sql = advlock_sql_text((advlock_sql)i);
        assert_null(strstr(sql, "hashtext"));
        if (advlock_sql_answer((advlock_sql)i) == ADVLOCK_ANSWER_HOLDERS)
            continue;
        /* One bigint argument, no namespace: "SELECT pg_<function>($1)". */
        assert_true(strncmp(sql, "SELECT pg_", 10) == 0);
        assert_null(strstr(sql, ","));
        assert_non_null(strstr(sql, "($1)"));
        int waits = strstr(sql, "_try_") == NULL && strstr(sql, "unlock") == NULL;
        assert_int_equal(advlock_sql_answer((advlock_sql)i),
                         waits ? ADVLOCK_ANSWER_VOID : ADVLOCK_ANSWER_BOOLEAN);
    }
    assert_int_equal(advlock_sql_answer(ADVLOCK_SQL_HOLDERS), ADVLOCK_ANSWER_HOLDERS);
    assert_non_null(strstr(advlock_sql_text(ADVLOCK_SQL_HOLDERS), "$1::bigint"));
    assert_int_equal(advlock_sql_answer(ADVLOCK_SQL_COUNT), ADVLOCK_ANSWER_BOOLEAN);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(seconds_like_total_seconds),
        cmocka_unit_test(seconds_buffer_handling),
        cmocka_unit_test(long_keys_are_cut_in_messages),
        cmocka_unit_test(cuts_fall_between_characters),
        cmocka_unit_test(long_server_messages_are_cut),
        cmocka_unit_test(nul_bytes_are_shown_escaped),
        cmocka_unit_test(names_for_every_code),
        cmocka_unit_test(sql_table),
    };
    return cmocka_run_group_tests_name("text", tests, NULL, NULL);
}
