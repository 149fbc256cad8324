/* The fake database's server session check: the session row and its claim
 * (advlock.session), the guarded rows, the standby knob; and a lock machine
 * told its session (advlock_set_session) driven against the fake, as a
 * user's deterministic test would: direct, behind a transaction pooler that
 * hands its statements to another session, and on a standby. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "advlock_fake.h"
#include "fake_db_fixture.h"

#define TRY "SELECT pg_try_advisory_lock($1)"

static const int64_t K = 42;
static const int64_t T = -1234567890123LL, T2 = 77; /* tokens */

/* One of the core's rows, with as many parameters as it takes. */
static advlock_fake_result row(fixture *f, int pid, advlock_sql sql, int64_t p1, int64_t p2,
                               int64_t p3)
{
    const int64_t params[3] = {p1, p2, p3};
    advlock_fake_result r;
    assert_int_equal(advlock_fake_db_exec_params(&f->db, pid, advlock_sql_text(sql), params,
                                                 advlock_sql_params(sql), &r),
                     0);
    return r;
}

/* The session row's claim answer, checking the row's other columns. */
static int claim(fixture *f, int pid, int64_t token)
{
    advlock_fake_result r = row(f, pid, ADVLOCK_SQL_SESSION, token, 0, 0);
    assert_int_equal(r.status, ADVLOCK_FAKE_ROW_SESSION);
    assert_string_equal(r.command_tag, "SELECT 1");
    assert_int_equal(r.session_pid, pid);
    assert_int_equal(r.in_recovery, 0);
    return r.ours;
}

static advlock_fake_status guarded_try(fixture *f, int pid, int64_t token)
{
    return row(f, pid, ADVLOCK_SQL_TRY_LOCK_GUARDED, K, token, 0).status;
}

static advlock_fake_status plain(fixture *f, int pid, const char *sql)
{
    advlock_fake_result r;
    assert_int_equal(
        advlock_fake_db_exec(&f->db, pid, sql, strstr(sql, "$1") != NULL ? &K : NULL, &r), 0);
    return r.status;
}

static void a_session_is_claimed_once_for_one_token(void **state)
{
    fixture *f = *state;
    assert_int_equal(claim(f, f->a, 0), 1); /* token 0 claims nothing */
    assert_int_equal(claim(f, f->a, T), 1);
    assert_int_equal(claim(f, f->a, T), 1); /* its own again */
    assert_int_equal(claim(f, f->a, T2), 0);
    assert_int_equal(claim(f, f->a, 0), 1);
    assert_int_equal(claim(f, f->b, T2), 1);
    /* Claims live as long as the session. */
    int c;
    assert_int_equal(advlock_fake_db_close(&f->db, f->a), 0);
    assert_int_equal(advlock_fake_db_connect(&f->db, &c), 0);
    assert_int_equal(claim(f, c, T2), 1);
}

static void a_session_holding_a_lock_is_not_claimed(void **state)
{
    fixture *f = *state;
    assert_int_equal(plain(f, f->a, TRY), ADVLOCK_FAKE_ROW_TRUE);
    assert_int_equal(claim(f, f->a, T), 0);
    assert_int_equal(plain(f, f->a, "SELECT pg_advisory_unlock($1)"), ADVLOCK_FAKE_ROW_TRUE);
    /* A transaction-level hold counts too. */
    assert_int_equal(plain(f, f->b, "BEGIN"), ADVLOCK_FAKE_COMMAND_OK);
    assert_int_equal(plain(f, f->b, "SELECT pg_try_advisory_xact_lock($1)"), ADVLOCK_FAKE_ROW_TRUE);
    assert_int_equal(claim(f, f->b, T), 0);
    assert_int_equal(plain(f, f->b, "COMMIT"), ADVLOCK_FAKE_COMMAND_OK);
    assert_int_equal(claim(f, f->a, T), 1);
}

static void a_claim_inside_a_block_rolls_back_with_it(void **state)
{
    fixture *f = *state;
    assert_int_equal(plain(f, f->a, "BEGIN"), ADVLOCK_FAKE_COMMAND_OK);
    assert_int_equal(claim(f, f->a, T), 1);
    assert_int_equal(guarded_try(f, f->a, T), ADVLOCK_FAKE_ROW_TRUE);
    assert_int_equal(plain(f, f->a, "ROLLBACK"), ADVLOCK_FAKE_COMMAND_OK);
    /* The setting is gone; the session lock the block took is not. */
    assert_int_equal(guarded_try(f, f->a, T), ADVLOCK_FAKE_ROW_NULL);
    assert_int_equal(claim(f, f->a, T), 0); /* it holds a lock now */
    /* A failed block undoes it at the error; a committed one keeps it. */
    assert_int_equal(plain(f, f->b, "BEGIN"), ADVLOCK_FAKE_COMMAND_OK);
    assert_int_equal(claim(f, f->b, T2), 1);
    assert_int_equal(plain(f, f->b, "SELEC 1"), ADVLOCK_FAKE_SERVER_ERROR);
    assert_int_equal(plain(f, f->b, "COMMIT"), ADVLOCK_FAKE_COMMAND_OK);
    assert_int_equal(row(f, f->b, ADVLOCK_SQL_UNLOCK_GUARDED, K, T2, 0).status,
                     ADVLOCK_FAKE_ROW_NULL);
    assert_int_equal(plain(f, f->b, "BEGIN"), ADVLOCK_FAKE_COMMAND_OK);
    assert_int_equal(claim(f, f->b, T2), 1);
    assert_int_equal(plain(f, f->b, "COMMIT"), ADVLOCK_FAKE_COMMAND_OK);
    assert_int_equal(row(f, f->b, ADVLOCK_SQL_UNLOCK_GUARDED, K, T2, 0).status,
                     ADVLOCK_FAKE_ROW_FALSE);
    assert_int_equal(plain(f, f->a, "SELECT pg_advisory_unlock($1)"), ADVLOCK_FAKE_ROW_TRUE);
}

static void guarded_rows_run_only_on_the_claimed_session(void **state)
{
    fixture *f = *state;
    assert_int_equal(claim(f, f->a, T), 1);
    /* Elsewhere: NULL, and nothing locked or unlocked. */
    assert_int_equal(guarded_try(f, f->b, T), ADVLOCK_FAKE_ROW_NULL);
    assert_int_equal(guarded_try(f, f->a, T2), ADVLOCK_FAKE_ROW_NULL);
    assert_int_equal(guarded_try(f, f->a, T), ADVLOCK_FAKE_ROW_TRUE);
    assert_int_equal(row(f, f->b, ADVLOCK_SQL_UNLOCK_GUARDED, K, T, 0).status,
                     ADVLOCK_FAKE_ROW_NULL);
    int session_level = 0;
    assert_int_equal(
        advlock_fake_db_holds(&f->db, f->a, K, ADVLOCK_FAKE_EXCLUSIVE, &session_level, NULL), 0);
    assert_int_equal(session_level, 1);
    /* On it: exactly the plain forms (a wait takes the bound, then the token). */
    assert_int_equal(row(f, f->a, ADVLOCK_SQL_UNLOCK_GUARDED, K, T, 0).status,
                     ADVLOCK_FAKE_ROW_TRUE);
    advlock_fake_result r = row(f, f->a, ADVLOCK_SQL_UNLOCK_SHARED_GUARDED, K, T, 0);
    assert_int_equal(r.status, ADVLOCK_FAKE_ROW_FALSE);
    assert_string_equal(r.warning, "you don't own a lock of type ShareLock");
    assert_int_equal(row(f, f->a, ADVLOCK_SQL_TRY_LOCK_SHARED_GUARDED, K, T, 0).status,
                     ADVLOCK_FAKE_ROW_TRUE);
    assert_int_equal(row(f, f->a, ADVLOCK_SQL_LOCK_SHARED_GUARDED, K, 100, T).status,
                     ADVLOCK_FAKE_ROW_VOID);
    assert_int_equal(row(f, f->b, ADVLOCK_SQL_LOCK_SHARED_GUARDED, K, 100, T).status,
                     ADVLOCK_FAKE_ROW_NULL);
    assert_int_equal(claim(f, f->b, T2), 1);
    assert_int_equal(row(f, f->b, ADVLOCK_SQL_LOCK_GUARDED, K, 100, T2).status,
                     ADVLOCK_FAKE_WAITING); /* behind a's shared holds */
    assert_int_equal(advlock_fake_db_cancel(&f->db, f->b), 1);
    assert_int_equal(advlock_fake_db_poll(&f->db, f->b, &r), 1);
    assert_string_equal(r.sqlstate, "57014");
    assert_int_equal(plain(f, f->a, "SELECT pg_advisory_unlock_all()"), ADVLOCK_FAKE_ROW_VOID);
    /* A guarded wait sent with the key and the token only is refused at bind. */
    const int64_t two[2] = {K, T};
    assert_int_equal(advlock_fake_db_exec_params(
                         &f->db, f->a, advlock_sql_text(ADVLOCK_SQL_LOCK_GUARDED), two, 2, &r),
                     0);
    assert_int_equal(r.status, ADVLOCK_FAKE_SERVER_ERROR);
    assert_string_equal(r.sqlstate, "08P01");
    const int64_t four[4] = {K, 1, T, 0};
    assert_int_equal(advlock_fake_db_exec_params(&f->db, f->a, TRY, four, 4, &r), ADVLOCK_EINVAL);
}

/* PgBouncer's reset between session-mode clients clears the claim and the
 * locks, so the next client claims the session afresh; not in a block. */
static void discard_all_clears_the_claim_and_the_locks(void **state)
{
    fixture *f = *state;
    assert_int_equal(claim(f, f->a, T), 1);
    assert_int_equal(guarded_try(f, f->a, T), ADVLOCK_FAKE_ROW_TRUE);
    assert_int_equal(plain(f, f->a, "BEGIN"), ADVLOCK_FAKE_COMMAND_OK);
    advlock_fake_result r;
    assert_int_equal(advlock_fake_db_exec(&f->db, f->a, "DISCARD ALL", NULL, &r), 0);
    assert_int_equal(r.status, ADVLOCK_FAKE_SERVER_ERROR);
    assert_string_equal(r.sqlstate, "25001");
    assert_string_equal(r.message, "DISCARD ALL cannot run inside a transaction block");
    assert_int_equal(plain(f, f->a, "ROLLBACK"), ADVLOCK_FAKE_COMMAND_OK);
    assert_int_equal(claim(f, f->a, T2), 0);
    assert_int_equal(plain(f, f->a, "DISCARD ALL"), ADVLOCK_FAKE_COMMAND_OK);
    assert_int_equal(advlock_fake_db_lock_rows(&f->db, NULL, 0), 0);
    assert_int_equal(guarded_try(f, f->a, T), ADVLOCK_FAKE_ROW_NULL);
    assert_int_equal(claim(f, f->a, T2), 1);
}

static void the_standby_knob(void **state)
{
    fixture *f = *state;
    advlock_fake_db_set_in_recovery(&f->db, 7);
    advlock_fake_result r = row(f, f->a, ADVLOCK_SQL_SESSION, T, 0, 0);
    assert_int_equal(r.in_recovery, 1);
    assert_int_equal(r.ours, 1);
    /* Its locks still work, as a standby's do. */
    assert_int_equal(guarded_try(f, f->a, T), ADVLOCK_FAKE_ROW_TRUE);
    advlock_fake_db_set_in_recovery(&f->db, 0);
    assert_int_equal(row(f, f->a, ADVLOCK_SQL_SESSION, T, 0, 0).in_recovery, 0);
    advlock_fake_db_set_in_recovery(NULL, 1);
    assert_int_equal(row(f, f->a, ADVLOCK_SQL_UNLOCK_GUARDED, K, T, 0).status,
                     ADVLOCK_FAKE_ROW_TRUE);
}

/* ---- a lock machine against the fake ---------------------------------- */

/* Runs one operation to its end, as a driver would: each statement goes to
 * the session route[] names for it (a pooler's choice; the last one for the
 * rest), its answer back to the machine. */
static const advlock_report *drive(fixture *f, advlock_machine *m, const int *route, int nroute,
                                   int64_t *now)
{
    for (int sent = 0;;) {
        advlock_action a = advlock_next_action(m);
        if (a.kind == ADVLOCK_ACTION_DONE)
            return a.report;
        if (a.kind == ADVLOCK_ACTION_SLEEP) {
            *now = a.wake_at_ms;
            assert_int_equal(advlock_on_timer(m, *now), 0);
            continue;
        }
        assert_int_equal(a.kind, ADVLOCK_ACTION_QUERY);
        int pid = route[sent < nroute ? sent : nroute - 1];
        sent++;
        advlock_fake_result r = row(f, pid, a.sql, a.param, a.param2, a.param3);
        *now += 1;
        switch (r.status) {
        case ADVLOCK_FAKE_ROW_SESSION:
            assert_int_equal(advlock_on_session(m, r.session_pid, r.in_recovery, r.ours, *now), 0);
            break;
        case ADVLOCK_FAKE_ROW_TRUE:
        case ADVLOCK_FAKE_ROW_VOID:
            assert_int_equal(advlock_on_result(m, ADVLOCK_RESULT_TRUE, NULL, NULL, *now), 0);
            break;
        case ADVLOCK_FAKE_ROW_FALSE:
            assert_int_equal(advlock_on_result(m, ADVLOCK_RESULT_FALSE, NULL, NULL, *now), 0);
            break;
        case ADVLOCK_FAKE_ROW_NULL:
            assert_int_equal(advlock_on_result(m, ADVLOCK_RESULT_NULL, NULL, NULL, *now), 0);
            break;
        default: fail_msg("unexpected answer %d to %s", (int)r.status, a.sql_text);
        }
    }
}

/* Hands the machine a fresh, unchecked session value. */
static void tell(advlock_machine *m, int client_pid, uint64_t token)
{
    advlock_session s;
    assert_int_equal(advlock_session_init(&s, client_pid, token), 0);
    assert_int_equal(advlock_set_session(m, &s), 0);
}

static void told(advlock_machine *m, int client_pid, uint64_t token)
{
    advlock_machine_init(m);
    tell(m, client_pid, token);
}

static void a_direct_connection_locks_as_before(void **state)
{
    fixture *f = *state;
    advlock_machine m1, m2;
    int64_t now = 0;
    told(&m1, f->a, (uint64_t)T);
    told(&m2, f->b, (uint64_t)T2);
    assert_int_equal(advlock_start_acquire(&m1, "jobs", 4, 1000, now), 0);
    assert_int_equal(drive(f, &m1, &f->a, 1, &now)->outcome, ADVLOCK_ACQUIRED);
    assert_int_equal(advlock_start_acquire(&m2, "jobs", 4, 250, now), 0);
    const advlock_report *r = drive(f, &m2, &f->b, 1, &now);
    assert_int_equal(r->outcome, ADVLOCK_TIMED_OUT);
    assert_int_equal(r->sql, ADVLOCK_SQL_TRY_LOCK); /* plain rows: no proxy */
    assert_int_equal(advlock_start_release(&m1, "jobs", 4, now), 0);
    assert_int_equal(drive(f, &m1, &f->a, 1, &now)->outcome, ADVLOCK_RELEASED);
}

static void a_transaction_pooler_is_caught(void **state)
{
    fixture *f = *state;
    advlock_machine m;
    int64_t now = 0;
    /* A pooler announces a pid of its own; the check lands on a and claims
     * it, the try on b, which runs nothing. */
    told(&m, 1, (uint64_t)T);
    const int a_then_b[2] = {f->a, f->b};
    assert_int_equal(advlock_start_acquire(&m, "jobs", 4, 1000, now), 0);
    const advlock_report *r = drive(f, &m, a_then_b, 2, &now);
    assert_int_equal(r->outcome, ADVLOCK_FAILED);
    assert_int_equal(r->failure, ADVLOCK_ESESSION);
    assert_int_equal(r->sql, ADVLOCK_SQL_TRY_LOCK_GUARDED);
    /* On a, it works; another client's check landing on a is refused. */
    assert_int_equal(advlock_start_acquire(&m, "jobs", 4, 1000, now), 0);
    assert_int_equal(drive(f, &m, &f->a, 1, &now)->outcome, ADVLOCK_ACQUIRED);
    advlock_machine other;
    told(&other, 2, (uint64_t)T2);
    assert_int_equal(advlock_start_acquire(&other, "jobs", 4, 1000, now), 0);
    r = drive(f, &other, &f->a, 1, &now);
    assert_int_equal(r->failure, ADVLOCK_ESESSION);
    assert_int_equal(r->sql, ADVLOCK_SQL_SESSION);
    /* The release landing on b cannot release: it says so. */
    assert_int_equal(advlock_start_release(&m, "jobs", 4, now), 0);
    r = drive(f, &m, &f->b, 1, &now);
    assert_int_equal(r->failure, ADVLOCK_ESESSION);
    char text[ADVLOCK_MESSAGE_MAX];
    assert_true(advlock_describe(r, "jobs", 4, NULL, text, sizeof text) > 0);
    assert_non_null(strstr(text, "may still be held on another server session"));
    assert_int_equal(advlock_start_release(&m, "jobs", 4, now), 0);
    assert_int_equal(drive(f, &m, &f->a, 1, &now)->outcome, ADVLOCK_RELEASED);
}

/* Why a token must name one connection: two checks with one token behind a
 * transaction pooler (a reconnect that kept it) claim two sessions, and a
 * release that lands on the other one says NOT_HELD while the lock stays. */
static void one_token_checked_twice_can_claim_two_sessions(void **state)
{
    fixture *f = *state;
    advlock_machine m;
    int64_t now = 0;
    told(&m, 1, (uint64_t)T);
    assert_int_equal(advlock_start_acquire(&m, "jobs", 4, 1000, now), 0);
    assert_int_equal(drive(f, &m, &f->a, 1, &now)->outcome, ADVLOCK_ACQUIRED);
    tell(&m, 2, (uint64_t)T); /* a new pid, the old token */
    assert_int_equal(advlock_start_release(&m, "jobs", 4, now), 0);
    assert_int_equal(drive(f, &m, &f->b, 1, &now)->outcome, ADVLOCK_NOT_HELD);
    assert_int_equal(advlock_fake_db_lock_rows(&f->db, NULL, 0), 1); /* still held on a */
    /* A new token instead: b is claimed for it, a (T's, holding the lock)
     * refuses it, and the release fails loudly there. */
    tell(&m, 3, (uint64_t)T2);
    assert_int_equal(advlock_start_release(&m, "jobs", 4, now), 0);
    const advlock_report *r = drive(f, &m, &f->a, 1, &now);
    assert_int_equal(r->failure, ADVLOCK_ESESSION);
    assert_int_equal(r->sql, ADVLOCK_SQL_UNLOCK_GUARDED);
    assert_int_equal(advlock_fake_db_close(&f->db, f->a), 0);
}

static void a_standby_is_refused(void **state)
{
    fixture *f = *state;
    advlock_machine m;
    int64_t now = 0;
    advlock_fake_db_set_in_recovery(&f->db, 1);
    told(&m, f->a, (uint64_t)T);
    assert_int_equal(advlock_start_acquire(&m, "jobs", 4, 1000, now), 0);
    const advlock_report *r = drive(f, &m, &f->a, 1, &now);
    assert_int_equal(r->failure, ADVLOCK_ESTANDBY);
    assert_int_equal(advlock_fake_db_lock_rows(&f->db, NULL, 0), 0); /* nothing locked */
    advlock_options o;
    advlock_options_init(&o);
    o.allow_standby = 1;
    assert_int_equal(advlock_set_options(&m, &o), 0);
    assert_int_equal(advlock_start_acquire(&m, "jobs", 4, 1000, now), 0);
    assert_int_equal(drive(f, &m, &f->a, 1, &now)->outcome, ADVLOCK_ACQUIRED);
    assert_int_equal(advlock_fake_db_close(&f->db, f->a), 0);
}

int main(void)
{
#define T_(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
    const struct CMUnitTest tests[] = {
        T_(a_session_is_claimed_once_for_one_token),
        T_(a_session_holding_a_lock_is_not_claimed),
        T_(a_claim_inside_a_block_rolls_back_with_it),
        T_(guarded_rows_run_only_on_the_claimed_session),
        T_(discard_all_clears_the_claim_and_the_locks),
        T_(the_standby_knob),
        T_(a_direct_connection_locks_as_before),
        T_(a_transaction_pooler_is_caught),
        T_(one_token_checked_twice_can_claim_two_sessions),
        T_(a_standby_is_refused),
    };
    return cmocka_run_group_tests_name("fake session", tests, NULL, NULL);
}
