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

/* The operation's report in words, into a buffer of ADVLOCK_MESSAGE_MAX. */
static const char *describe(const advlock_machine *m, const char *key, size_t len,
                            const char *words)
{
    static char text[ADVLOCK_MESSAGE_MAX];
    int n = advlock_describe(advlock_next_action(m).report, key, len, words, text, sizeof text);
    assert_int_equal(n, (int)strlen(text));
    return text;
}

/* Times out at once and returns the machine's message. */
static const char *timeout_message(advlock_machine *m, const char *key, size_t len)
{
    advlock_machine_init(m);
    assert_int_equal(advlock_start_acquire(m, key, len, 1000, 0), 0);
    assert_int_equal(advlock_on_result(m, ADVLOCK_RESULT_FALSE, NULL, NULL, 1000), 0);
    assert_int_equal(advlock_next_action(m).report->outcome, ADVLOCK_TIMED_OUT);
    return describe(m, key, len, NULL);
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
    const char *msg = describe(&m, "k", 1, server);
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
    static const int codes[] = {ADVLOCK_OK,       ADVLOCK_EINVAL,    ADVLOCK_EUTF8,
                                ADVLOCK_EMISUSE,  ADVLOCK_ECRYPTO,   ADVLOCK_ENULL,
                                ADVLOCK_ESERVER,  ADVLOCK_ECONNLOST, ADVLOCK_ESTANDBY,
                                ADVLOCK_ESESSION, ADVLOCK_ENOANSWER, ADVLOCK_ENOMEM};
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
    assert_string_equal(advlock_outcome_name(ADVLOCK_HELD), "held");
    assert_string_equal(advlock_outcome_name((advlock_outcome)77), "unknown outcome");
}

static void sql_table(void **state)
{
    (void)state;
    assert_string_equal(advlock_sql_text(ADVLOCK_SQL_TRY_LOCK), "SELECT pg_try_advisory_lock($1)");
    assert_string_equal(advlock_sql_text(ADVLOCK_SQL_UNLOCK), "SELECT pg_advisory_unlock($1)");
    assert_null(advlock_sql_text(ADVLOCK_SQL_COUNT));
    assert_null(advlock_sql_text((advlock_sql)-1));
    /* The lock functions' rows; the verify's come after them. */
    for (int i = 0; i < ADVLOCK_SQL_HELD; i++) {
        const char *sql = advlock_sql_text((advlock_sql)i);
        int guarded = i >= ADVLOCK_SQL_TRY_LOCK_GUARDED;
        assert_null(strstr(sql, "hashtext"));
        advlock_sql_answer_kind answer = advlock_sql_answer((advlock_sql)i);
        if (answer == ADVLOCK_ANSWER_HOLDERS || answer == ADVLOCK_ANSWER_SESSION)
            continue;
        /* A guarded row runs its function only where the claim holds its
         * token, the last parameter. */
        if (guarded)
            assert_non_null(
                strstr(sql, answer == ADVLOCK_ANSWER_VOID
                                ? "current_setting('advlock.session', true) = $3::text"
                                : "current_setting('advlock.session', true) = $2::text"));
        if (answer == ADVLOCK_ANSWER_VOID) {
            /* The waits: the function on $1, bounded by lock_timeout = $2. */
            assert_int_equal(advlock_sql_params((advlock_sql)i), guarded ? 3 : 2);
            assert_non_null(strstr(sql, "_advisory_"));
            assert_null(strstr(sql, "_try_"));
            assert_non_null(strstr(sql, "($1)"));
            assert_non_null(strstr(sql, "set_config('lock_timeout', $2::text, true)"));
            continue;
        }
        assert_non_null(strstr(sql, "($1)"));
        assert_true(strstr(sql, "_try_") != NULL || strstr(sql, "unlock") != NULL);
        if (guarded) {
            assert_int_equal(advlock_sql_params((advlock_sql)i), 2);
            continue;
        }
        /* One bigint argument, no namespace: "SELECT pg_<function>($1)". */
        assert_int_equal(advlock_sql_params((advlock_sql)i), 1);
        assert_true(strncmp(sql, "SELECT pg_", 10) == 0);
        assert_null(strstr(sql, ","));
    }
    /* The session row claims with its token, $1, and never unclaims; $2
     * is the client's pid. */
    assert_int_equal(advlock_sql_answer(ADVLOCK_SQL_SESSION), ADVLOCK_ANSWER_SESSION);
    assert_int_equal(advlock_sql_params(ADVLOCK_SQL_SESSION), 2);
    assert_non_null(strstr(advlock_sql_text(ADVLOCK_SQL_SESSION),
                           "set_config('advlock.session', $1::text, false)"));
    assert_int_equal(advlock_sql_params(ADVLOCK_SQL_HOLDERS), 1);
    assert_int_equal(advlock_sql_params(ADVLOCK_SQL_COUNT), 0);
    assert_int_equal(advlock_sql_answer(ADVLOCK_SQL_HOLDERS), ADVLOCK_ANSWER_HOLDERS);
    assert_non_null(strstr(advlock_sql_text(ADVLOCK_SQL_HOLDERS), "$1::bigint"));
    assert_int_equal(advlock_sql_answer(ADVLOCK_SQL_COUNT), ADVLOCK_ANSWER_BOOLEAN);
}

/* The verify's rows: one boolean, this server session's granted hold of
 * key $1 in one mode; the guarded ones only where the claim is $2. */
static void sql_table_verify_rows(void **state)
{
    (void)state;
    for (int i = ADVLOCK_SQL_HELD; i <= ADVLOCK_SQL_HELD_SHARED_GUARDED; i++) {
        const char *sql = advlock_sql_text((advlock_sql)i);
        int guarded = i >= ADVLOCK_SQL_HELD_GUARDED;
        int shared = i == ADVLOCK_SQL_HELD_SHARED || i == ADVLOCK_SQL_HELD_SHARED_GUARDED;
        assert_int_equal(advlock_sql_answer((advlock_sql)i), ADVLOCK_ANSWER_BOOLEAN);
        assert_int_equal(advlock_sql_params((advlock_sql)i), guarded ? 2 : 1);
        assert_non_null(strstr(sql, "pg_catalog.pg_locks"));
        assert_non_null(strstr(sql, " granted AND pid = pg_catalog.pg_backend_pid()"));
        assert_non_null(strstr(sql, "classid::bigint = (($1::bigint >> 32) & 4294967295)"));
        assert_non_null(strstr(sql, "objid::bigint = ($1::bigint & 4294967295)"));
        assert_non_null(strstr(sql, shared ? "mode = 'ShareLock'" : "mode = 'ExclusiveLock'"));
        const char *guard = strstr(sql, "current_setting('advlock.session', true) = $2::text");
        assert_true(guarded ? guard != NULL : guard == NULL);
    }
}

/* The guarded transaction rows: the lock function called twice (on the
 * connection's own claimed session, or where this session holds no granted
 * row of the key in any mode), NULL anywhere else; the token last. */
static void sql_table_guarded_transaction_rows(void **state)
{
    (void)state;
    static const struct {
        advlock_sql sql;
        const char *call;
        int params;
    } rows[] = {
        {ADVLOCK_SQL_TRY_XACT_LOCK_GUARDED, "pg_catalog.pg_try_advisory_xact_lock($1)", 2},
        {ADVLOCK_SQL_TRY_XACT_LOCK_SHARED_GUARDED,
         "pg_catalog.pg_try_advisory_xact_lock_shared($1)", 2},
        {ADVLOCK_SQL_XACT_LOCK_GUARDED, "pg_catalog.pg_advisory_xact_lock($1)", 3},
        {ADVLOCK_SQL_XACT_LOCK_SHARED_GUARDED, "pg_catalog.pg_advisory_xact_lock_shared($1)", 3},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        const char *sql = advlock_sql_text(rows[i].sql);
        assert_int_equal(advlock_sql_params(rows[i].sql), rows[i].params);
        assert_int_equal(advlock_sql_answer(rows[i].sql),
                         rows[i].params == 3 ? ADVLOCK_ANSWER_VOID : ADVLOCK_ANSWER_BOOLEAN);
        const char *first = strstr(sql, rows[i].call);
        assert_non_null(first);
        assert_non_null(strstr(first + 1, rows[i].call));
        assert_non_null(strstr(sql, rows[i].params == 3
                                        ? "current_setting('advlock.session', true) = $3::text"
                                        : "current_setting('advlock.session', true) = $2::text"));
        assert_non_null(strstr(sql, "NOT EXISTS (SELECT FROM pg_catalog.pg_locks"));
        assert_null(strstr(sql, "mode = "));
        assert_non_null(strstr(sql, " granted AND pid = pg_catalog.pg_backend_pid()"));
    }
}

/* Reports a driver fills in itself render too: a lost lock, and a report
 * that no machine would make (unknown outcome) renders as nothing. */
static void driver_reports_render(void **state)
{
    (void)state;
    advlock_report r;
    memset(&r, 0, sizeof r);
    r.outcome = ADVLOCK_FAILED;
    r.failure = ADVLOCK_ECONNLOST;
    r.detail = ADVLOCK_DETAIL_LOST;
    char text[ADVLOCK_MESSAGE_MAX];
    advlock_describe(&r, "jobs", 4, "terminating connection due to administrator command\n", text,
                     sizeof text);
    assert_string_equal(text, "Lock 'jobs' lost: the connection holding it closed: terminating "
                              "connection due to administrator command");
    advlock_describe(&r, "jobs", 4, NULL, text, sizeof text);
    assert_string_equal(text, "Lock 'jobs' lost: the connection holding it closed");
    r.failure = ADVLOCK_ENOANSWER;
    r.detail = ADVLOCK_DETAIL_NONE;
    r.sql = ADVLOCK_SQL_TRY_LOCK;
    advlock_describe(&r, "jobs", 4, NULL, text, sizeof text);
    assert_string_equal(text, "pg_try_advisory_lock for 'jobs' failed: no answer from the server "
                              "within the bound; the connection is unusable and must be closed "
                              "(closing it ends the server session and any lock it may have "
                              "taken)");
    r.outcome = ADVLOCK_OUTCOME_COUNT;
    assert_int_equal(advlock_describe(&r, "jobs", 4, NULL, text, sizeof text), 0);
    assert_string_equal(text, "");
}

/* A lease that ran out closed nothing: its own sentence, the lease's words
 * after it, the name escaped as every sentence shows it. */
static void lease_losses_render(void **state)
{
    (void)state;
    char text[ADVLOCK_MESSAGE_MAX];
    int n = advlock_describe_lease_lost("jo\nbs", 5, "no heartbeat answered within 3s", text,
                                        sizeof text);
    assert_string_equal(text, "Lock 'jo\\nbs' lost: its lease ran out: no heartbeat answered "
                              "within 3s");
    assert_int_equal(n, (int)strlen(text));
    advlock_describe_lease_lost("jobs", 4, NULL, text, sizeof text);
    assert_string_equal(text, "Lock 'jobs' lost: its lease ran out: ");
    assert_int_equal(advlock_describe_lease_lost(NULL, 1, "", text, sizeof text), ADVLOCK_EINVAL);
    assert_int_equal(advlock_describe_lease_lost("a", 1, "", NULL, 1), ADVLOCK_EINVAL);
}

static void backend_states_round_trip(void **state)
{
    (void)state;
    for (int i = 0; i <= ADVLOCK_BACKEND_DISABLED; i++)
        assert_int_equal(advlock_backend_state_parse(advlock_backend_state_name(i)), i);
    assert_int_equal(advlock_backend_state_parse("starting"), ADVLOCK_BACKEND_UNKNOWN);
    assert_int_equal(advlock_backend_state_parse(NULL), ADVLOCK_BACKEND_UNKNOWN);
    assert_string_equal(advlock_backend_state_name((advlock_backend_state)99), "unknown");
    assert_string_equal(advlock_backend_state_name(ADVLOCK_BACKEND_IDLE_IN_TRANSACTION),
                        "idle in transaction");
}

/* Names are shown as one printable line of valid UTF-8, whatever they hold. */
static void control_characters_are_escaped(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        size_t len;
        const char *shown;
    } cases[] = {
        {"a\nb", 3, "a\\nb"},
        {"tab\there\r", 9, "tab\\there\\r"},
        {"\x1b[31mred", 8, "\\x1b[31mred"},
        {"del\x7f", 4, "del\\x7f"},
        {"c1\xC2\x9B", 4, "c1\\u009b"},
        {"nbsp\xC2\xA0ok", 8, "nbsp\xC2\xA0ok"},
        {"\xE6\x97\xA5\xF0\x9F\x94\x92", 7, "\xE6\x97\xA5\xF0\x9F\x94\x92"},
        {"bad\xff\xC0\x80", 6, "bad\\xff\\xc0\\x80"},
        {"cut\xE6\x97", 5, "cut\\xe6\\x97"},
        {"", 0, ""},
    };
    char buf[64];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int n = advlock_escape_name(cases[i].name, cases[i].len, buf, sizeof buf);
        assert_string_equal(buf, cases[i].shown);
        assert_int_equal(n, (int)strlen(cases[i].shown));
        assert_int_equal(advlock_utf8_valid(buf, strlen(buf)), 1);
    }
    static advlock_machine m;
    assert_string_equal(timeout_message(&m, "a\nb", 3),
                        "Could not acquire migration lock for 'a\\nb' within 1s.");
    assert_int_equal(advlock_escape_name(NULL, 1, buf, sizeof buf), ADVLOCK_EINVAL);
    assert_int_equal(advlock_escape_name("a", 1, NULL, 1), ADVLOCK_EINVAL);
    assert_int_equal(advlock_escape_name("abcdefgh", 8, buf, 6), 5);
    assert_string_equal(buf, "ab...");
}

/* The advlock command's own statements, and the lock-delay mark's after
 * them, are rows of the same table: text, parameters and answer kind,
 * nothing the command writes itself. Both writes of the mark are durable
 * before they answer. */
static void sql_table_command_rows(void **state)
{
    (void)state;
    static const struct {
        advlock_sql sql;
        int params;
        advlock_sql_answer_kind answer;
        const char *starts;
    } rows[] = {
        {ADVLOCK_SQL_OCCUPY, 1, ADVLOCK_ANSWER_VOID, "SELECT pg_catalog.pg_sleep("},
        {ADVLOCK_SQL_FENCE_INSTALLED, 0, ADVLOCK_ANSWER_FENCE_INSTALLED, "SELECT "},
        {ADVLOCK_SQL_FENCE_SETUP, 0, ADVLOCK_ANSWER_COMMAND,
         "CREATE SCHEMA IF NOT EXISTS advlock;"},
        {ADVLOCK_SQL_FENCE_GRANTS, 0, ADVLOCK_ANSWER_FENCE_GRANTS, "SELECT "},
        {ADVLOCK_SQL_BEGIN, 0, ADVLOCK_ANSWER_COMMAND, "BEGIN"},
        {ADVLOCK_SQL_CLOSE_ALL, 0, ADVLOCK_ANSWER_COMMAND, "CLOSE ALL"},
        {ADVLOCK_SQL_COMMIT, 0, ADVLOCK_ANSWER_COMMAND, "COMMIT"},
        {ADVLOCK_SQL_ROLLBACK, 0, ADVLOCK_ANSWER_COMMAND, "ROLLBACK"},
        {ADVLOCK_SQL_MARK_TAKE, 3, ADVLOCK_ANSWER_CAPACITY, "WITH old AS ("},
        {ADVLOCK_SQL_MARK_WRITE, 3, ADVLOCK_ANSWER_CAPACITY, "WITH w AS (INSERT"},
        {ADVLOCK_SQL_MARK_CLEAR, 3, ADVLOCK_ANSWER_CAPACITY, "WITH c AS (DELETE"},
        {ADVLOCK_SQL_MARK_GRANTS, 0, ADVLOCK_ANSWER_FENCE_GRANTS, "SELECT "},
        {ADVLOCK_SQL_LOCKS_TABLES, 0, ADVLOCK_ANSWER_LOCKS_TABLES, "SELECT EXISTS ("},
        {ADVLOCK_SQL_LOCKS, 0, ADVLOCK_ANSWER_LOCKS, "SELECT ((l.classid"},
        {ADVLOCK_SQL_LOCKS_MARK, 0, ADVLOCK_ANSWER_LOCKS, "SELECT ((l.classid"},
        {ADVLOCK_SQL_LOCKS_FENCE, 0, ADVLOCK_ANSWER_LOCKS, "SELECT ((l.classid"},
        {ADVLOCK_SQL_LOCKS_MARK_FENCE, 0, ADVLOCK_ANSWER_LOCKS, "SELECT ((l.classid"},
    };
    assert_int_equal(sizeof rows / sizeof rows[0], ADVLOCK_SQL_COUNT - ADVLOCK_SQL_OCCUPY);
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        const char *text = advlock_sql_text(rows[i].sql);
        assert_non_null(text);
        assert_true(strncmp(text, rows[i].starts, strlen(rows[i].starts)) == 0);
        assert_int_equal(advlock_sql_params(rows[i].sql), rows[i].params);
        assert_int_equal(advlock_sql_answer(rows[i].sql), rows[i].answer);
        assert_int_equal(advlock_sql_guarded(rows[i].sql), 0);
    }
    /* The guard compares the claim's setting with the token, as the guarded
     * lock rows do. */
    assert_non_null(strstr(advlock_sql_text(ADVLOCK_SQL_OCCUPY),
                           "current_setting('advlock.session', true) = $1::text"));
    assert_ptr_equal(advlock_fence_setup_sql(), advlock_sql_text(ADVLOCK_SQL_FENCE_SETUP));
    static const char durable[] = "set_config('synchronous_commit', 'on', true)";
    assert_non_null(strstr(advlock_sql_text(ADVLOCK_SQL_MARK_TAKE), durable));
    assert_non_null(strstr(advlock_sql_text(ADVLOCK_SQL_MARK_WRITE), durable));
    assert_non_null(strstr(advlock_fence_setup_sql(), "CREATE TABLE IF NOT EXISTS advlock.mark"));
    /* The listing's forms name a table of the schema only where their place
     * says so (LOCKS + 1: the mark, + 2: the fence): a form sent without
     * the table would fail at parse. None reads state_change. */
    for (int form = 0; form < 4; form++) {
        const char *text = advlock_sql_text((advlock_sql)(ADVLOCK_SQL_LOCKS + form));
        assert_int_equal(strstr(text, "advlock.mark") != NULL, (form & 1) != 0);
        assert_int_equal(strstr(text, "advlock.fence") != NULL, (form & 2) != 0);
        assert_null(strstr(text, "state_change"));
    }
}

/* The one JSON escaper: any bytes make a string that parses, and a cut
 * never splits an escape or a character. */
static void json_strings(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        const char *json;
    } cases[] = {
        {"plain", "\"plain\""},
        {"q\"b\\", "\"q\\\"b\\\\\""},
        {"a\nb\tc\rd\x7f", "\"a\\nb\\tc\\u000dd\\u007f\""},
        {"\xC3\xA9t\xC3\xA9", "\"\xC3\xA9t\xC3\xA9\""},
        {"bad\xff\xC0\x80", "\"bad\\ufffd\\ufffd\\ufffd\""},
        {"", "\"\""},
    };
    char buf[64];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int n = advlock_json_string(cases[i].text, buf, sizeof buf);
        assert_string_equal(buf, cases[i].json);
        assert_int_equal(n, (int)strlen(cases[i].json));
        assert_int_equal(advlock_json_string(cases[i].text, NULL, 0), n);
    }
    /* "\"a\\n" is 4 bytes: with room for 3 the escape is left out whole. */
    assert_int_equal(advlock_json_string("a\nb", buf, 4), 6);
    assert_string_equal(buf, "\"a");
    assert_int_equal(advlock_json_string("\xC3\xA9", buf, 3), 4);
    assert_string_equal(buf, "\"");
    assert_int_equal(advlock_json_string(NULL, buf, sizeof buf), ADVLOCK_EINVAL);
    assert_int_equal(advlock_json_string("a", NULL, 1), ADVLOCK_EINVAL);
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
        cmocka_unit_test(driver_reports_render),
        cmocka_unit_test(lease_losses_render),
        cmocka_unit_test(backend_states_round_trip),
        cmocka_unit_test(control_characters_are_escaped),
        cmocka_unit_test(names_for_every_code),
        cmocka_unit_test(sql_table),
        cmocka_unit_test(sql_table_verify_rows),
        cmocka_unit_test(sql_table_guarded_transaction_rows),
        cmocka_unit_test(sql_table_command_rows),
        cmocka_unit_test(json_strings),
    };
    return cmocka_run_group_tests_name("text", tests, NULL, NULL);
}
