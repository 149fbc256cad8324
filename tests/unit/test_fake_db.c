/* The fake database against PostgreSQL's advisory-lock semantics. */
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

#define TRY       "SELECT pg_try_advisory_lock($1)"
#define TRY_SH    "SELECT pg_try_advisory_lock_shared($1)"
#define TRY_X     "SELECT pg_try_advisory_xact_lock($1)"
#define LOCK      "SELECT pg_advisory_lock($1)"
#define LOCK_SH   "SELECT pg_advisory_lock_shared($1)"
#define XLOCK     "SELECT pg_advisory_xact_lock($1)"
#define UNLOCK    "SELECT pg_advisory_unlock($1)"
#define UNLOCK_SH "SELECT pg_advisory_unlock_shared($1)"

static const int64_t K = 42, K2 = -7;

static advlock_fake_result run(fixture *f, int pid, const char *sql, int64_t key)
{
    advlock_fake_result r;
    assert_int_equal(advlock_fake_db_exec(&f->db, pid, sql, &key, &r), 0);
    char why[256];
    if (advlock_fake_db_check(&f->db, why, sizeof why) != 0)
        fail_msg("%s", why);
    return r;
}

static advlock_fake_result run0(fixture *f, int pid, const char *sql)
{
    advlock_fake_result r;
    assert_int_equal(advlock_fake_db_exec(&f->db, pid, sql, NULL, &r), 0);
    return r;
}

static advlock_fake_status st(fixture *f, int pid, const char *sql, int64_t key)
{
    return run(f, pid, sql, key).status;
}

static int held(fixture *f, int pid, int64_t key, advlock_fake_mode mode, int scope)
{
    int session = -1, xact = -1;
    assert_int_equal(advlock_fake_db_holds(&f->db, pid, key, mode, &session, &xact), 0);
    return scope == 0 ? session : xact;
}

static void exclusive_conflicts_and_stacks(void **state)
{
    fixture *f = *state;
    assert_int_equal(st(f, f->a, TRY, K), ADVLOCK_FAKE_ROW_TRUE);
    assert_int_equal(st(f, f->b, TRY, K), ADVLOCK_FAKE_ROW_FALSE);
    assert_int_equal(st(f, f->b, TRY_SH, K), ADVLOCK_FAKE_ROW_FALSE);
    assert_int_equal(st(f, f->a, TRY, K), ADVLOCK_FAKE_ROW_TRUE);
    assert_int_equal(held(f, f->a, K, ADVLOCK_FAKE_EXCLUSIVE, 0), 2);
    assert_int_equal(st(f, f->a, UNLOCK, K), ADVLOCK_FAKE_ROW_TRUE);
    assert_int_equal(st(f, f->b, TRY, K), ADVLOCK_FAKE_ROW_FALSE);
    assert_int_equal(st(f, f->a, UNLOCK, K), ADVLOCK_FAKE_ROW_TRUE);
    advlock_fake_result r = run(f, f->a, UNLOCK, K);
    assert_int_equal(r.status, ADVLOCK_FAKE_ROW_FALSE);
    assert_string_equal(r.warning_sqlstate, "01000");
    assert_string_equal(r.warning, "you don't own a lock of type ExclusiveLock");
    assert_string_equal(r.command_tag, "SELECT 1");
    assert_int_equal(st(f, f->b, TRY, K), ADVLOCK_FAKE_ROW_TRUE);
    assert_int_equal(st(f, f->b, TRY, K2), ADVLOCK_FAKE_ROW_TRUE); /* keys are independent */
}

static void shared_is_compatible_with_shared_only(void **state)
{
    fixture *f = *state;
    assert_int_equal(st(f, f->a, TRY_SH, K), ADVLOCK_FAKE_ROW_TRUE);
    assert_int_equal(st(f, f->b, TRY_SH, K), ADVLOCK_FAKE_ROW_TRUE);
    assert_int_equal(st(f, f->c, TRY, K), ADVLOCK_FAKE_ROW_FALSE);
    advlock_fake_result r = run(f, f->a, UNLOCK, K);
    assert_int_equal(r.status, ADVLOCK_FAKE_ROW_FALSE);
    assert_string_equal(r.warning, "you don't own a lock of type ExclusiveLock");
    assert_int_equal(st(f, f->a, UNLOCK_SH, K), ADVLOCK_FAKE_ROW_TRUE);
    r = run(f, f->a, UNLOCK_SH, K);
    assert_string_equal(r.warning, "you don't own a lock of type ShareLock");
    assert_int_equal(st(f, f->b, UNLOCK_SH, K), ADVLOCK_FAKE_ROW_TRUE);
    assert_int_equal(st(f, f->c, TRY, K), ADVLOCK_FAKE_ROW_TRUE);
}

static void a_session_never_conflicts_with_itself(void **state)
{
    fixture *f = *state;
    assert_int_equal(st(f, f->a, TRY_SH, K), ADVLOCK_FAKE_ROW_TRUE);
    assert_int_equal(st(f, f->a, TRY, K), ADVLOCK_FAKE_ROW_TRUE);
    assert_int_equal(st(f, f->b, TRY_SH, K), ADVLOCK_FAKE_ROW_FALSE);
    assert_int_equal(held(f, f->a, K, ADVLOCK_FAKE_SHARED, 0), 1);
    assert_int_equal(held(f, f->a, K, ADVLOCK_FAKE_EXCLUSIVE, 0), 1);
}

static void transaction_locks_end_with_the_transaction(void **state)
{
    fixture *f = *state;
    /* Outside a block the statement is the transaction: granted, then gone. */
    assert_int_equal(st(f, f->a, TRY_X, K), ADVLOCK_FAKE_ROW_TRUE);
    assert_int_equal(held(f, f->a, K, ADVLOCK_FAKE_EXCLUSIVE, 1), 0);
    assert_int_equal(st(f, f->b, TRY, K), ADVLOCK_FAKE_ROW_TRUE);
    assert_int_equal(st(f, f->b, UNLOCK, K), ADVLOCK_FAKE_ROW_TRUE);

    assert_string_equal(run0(f, f->a, "BEGIN").command_tag, "BEGIN");
    assert_int_equal(st(f, f->a, TRY_X, K), ADVLOCK_FAKE_ROW_TRUE);
    assert_int_equal(st(f, f->a, TRY_X, K), ADVLOCK_FAKE_ROW_TRUE);
    assert_int_equal(held(f, f->a, K, ADVLOCK_FAKE_EXCLUSIVE, 1), 2);
    assert_int_equal(st(f, f->b, TRY, K), ADVLOCK_FAKE_ROW_FALSE);
    /* pg_advisory_unlock releases session-level holds only. */
    advlock_fake_result r = run(f, f->a, UNLOCK, K);
    assert_int_equal(r.status, ADVLOCK_FAKE_ROW_FALSE);
    assert_string_equal(r.warning_sqlstate, "01000");
    assert_int_equal(run0(f, f->a, "SELECT pg_advisory_unlock_all()").status,
                     ADVLOCK_FAKE_ROW_VOID);
    assert_int_equal(held(f, f->a, K, ADVLOCK_FAKE_EXCLUSIVE, 1), 2);
    assert_string_equal(run0(f, f->a, "COMMIT").command_tag, "COMMIT");
    assert_int_equal(held(f, f->a, K, ADVLOCK_FAKE_EXCLUSIVE, 1), 0);
    assert_int_equal(st(f, f->b, TRY, K), ADVLOCK_FAKE_ROW_TRUE);

    run0(f, f->c, "BEGIN");
    assert_int_equal(st(f, f->c, "SELECT pg_try_advisory_xact_lock_shared($1)", K2),
                     ADVLOCK_FAKE_ROW_TRUE);
    assert_int_equal(st(f, f->d, TRY, K2), ADVLOCK_FAKE_ROW_FALSE);
    assert_string_equal(run0(f, f->c, "ROLLBACK").command_tag, "ROLLBACK");
    assert_int_equal(st(f, f->d, TRY, K2), ADVLOCK_FAKE_ROW_TRUE);
}

static void session_locks_survive_rollback_and_unlock_all_keeps_xact(void **state)
{
    fixture *f = *state;
    run0(f, f->a, "BEGIN");
    assert_int_equal(st(f, f->a, TRY, K), ADVLOCK_FAKE_ROW_TRUE);
    assert_int_equal(st(f, f->a, TRY_X, K2), ADVLOCK_FAKE_ROW_TRUE);
    run0(f, f->a, "SELECT pg_advisory_unlock_all()");
    assert_int_equal(held(f, f->a, K, ADVLOCK_FAKE_EXCLUSIVE, 0), 0);
    assert_int_equal(held(f, f->a, K2, ADVLOCK_FAKE_EXCLUSIVE, 1), 1);
    assert_int_equal(st(f, f->a, TRY, K), ADVLOCK_FAKE_ROW_TRUE);
    run0(f, f->a, "ROLLBACK");
    assert_int_equal(held(f, f->a, K, ADVLOCK_FAKE_EXCLUSIVE, 0), 1);
    assert_int_equal(held(f, f->a, K2, ADVLOCK_FAKE_EXCLUSIVE, 1), 0);
}

static void errors_abort_a_block(void **state)
{
    fixture *f = *state;
    advlock_fake_result r = run(f, f->a, "SELECT pg_advisory_lock_bogus($1)", K);
    assert_int_equal(r.status, ADVLOCK_FAKE_SERVER_ERROR);
    assert_string_equal(r.sqlstate, "42883");
    assert_string_equal(r.message, "function pg_advisory_lock_bogus(bigint) does not exist");
    r = run0(f, f->a, "SELEC 1");
    assert_string_equal(r.sqlstate, "42601");
    assert_string_equal(r.message, "syntax error at or near \"SELEC\"");
    r = run0(f, f->a, TRY);
    assert_string_equal(r.sqlstate, "08P01");
    assert_string_equal(
        r.message, "bind message supplies 0 parameters, but prepared statement \"\" requires 1");
    r = run0(f, f->a, "select pg_try_advisory_lock($1)"); /* exact text only */
    assert_int_equal(r.status, ADVLOCK_FAKE_SERVER_ERROR);

    run0(f, f->a, "BEGIN");
    assert_int_equal(st(f, f->a, TRY, K), ADVLOCK_FAKE_ROW_TRUE);
    assert_int_equal(st(f, f->a, TRY_X, K2), ADVLOCK_FAKE_ROW_TRUE);
    r = run(f, f->a, "SELECT nope($1)", K);
    assert_string_equal(r.sqlstate, "42883");
    /* The failed block released its transaction lock at once. */
    assert_int_equal(st(f, f->b, TRY, K2), ADVLOCK_FAKE_ROW_TRUE);
    r = run(f, f->a, UNLOCK, K);
    assert_string_equal(r.sqlstate, "25P02");
    assert_string_equal(
        r.message,
        "current transaction is aborted, commands ignored until end of transaction block");
    assert_string_equal(run0(f, f->a, "SELEC").sqlstate, "42601"); /* parse errors come first */
    r = run0(f, f->a, "COMMIT");
    assert_int_equal(r.status, ADVLOCK_FAKE_COMMAND_OK);
    assert_string_equal(r.command_tag, "ROLLBACK");
    assert_int_equal(held(f, f->a, K, ADVLOCK_FAKE_EXCLUSIVE, 0), 1);
}

static void transaction_control_warnings(void **state)
{
    fixture *f = *state;
    advlock_fake_result r = run0(f, f->a, "COMMIT");
    assert_string_equal(r.warning_sqlstate, "25P01");
    assert_string_equal(r.warning, "there is no transaction in progress");
    r = run0(f, f->a, "ROLLBACK");
    assert_string_equal(r.warning_sqlstate, "25P01");
    assert_string_equal(r.command_tag, "ROLLBACK");
    run0(f, f->a, "BEGIN");
    r = run0(f, f->a, "BEGIN");
    assert_string_equal(r.warning_sqlstate, "25001");
    assert_string_equal(r.warning, "there is already a transaction in progress");
    r = run(f, f->a, "BEGIN", K);
    assert_string_equal(r.sqlstate, "08P01");
}

static void closing_releases_everything_and_dead_sessions_are_lost(void **state)
{
    fixture *f = *state;
    run0(f, f->a, "BEGIN");
    assert_int_equal(st(f, f->a, TRY, K), ADVLOCK_FAKE_ROW_TRUE);
    assert_int_equal(st(f, f->a, TRY, K), ADVLOCK_FAKE_ROW_TRUE);
    assert_int_equal(st(f, f->a, TRY_X, K2), ADVLOCK_FAKE_ROW_TRUE);
    assert_int_equal(advlock_fake_db_close(&f->db, f->a), 0);
    assert_int_equal(advlock_fake_db_close(&f->db, f->a), ADVLOCK_EINVAL);
    assert_false(advlock_fake_db_is_open(&f->db, f->a));
    assert_int_equal(st(f, f->b, TRY, K), ADVLOCK_FAKE_ROW_TRUE);
    assert_int_equal(st(f, f->b, TRY, K2), ADVLOCK_FAKE_ROW_TRUE);
    advlock_fake_result r = run(f, f->a, TRY, K);
    assert_int_equal(r.status, ADVLOCK_FAKE_CONNECTION_LOST);
    assert_int_equal(advlock_fake_db_lock_rows(&f->db, NULL, 0), 2);
}

static void waiting_lock_is_granted_in_order(void **state)
{
    fixture *f = *state;
    assert_int_equal(st(f, f->a, LOCK, K), ADVLOCK_FAKE_ROW_VOID);
    assert_int_equal(st(f, f->b, LOCK, K), ADVLOCK_FAKE_WAITING);
    assert_int_equal(st(f, f->c, LOCK_SH, K), ADVLOCK_FAKE_WAITING);
    assert_true(advlock_fake_db_is_waiting(&f->db, f->b));
    advlock_fake_result r;
    assert_int_equal(advlock_fake_db_exec(&f->db, f->b, TRY, &K, &r), ADVLOCK_EMISUSE);
    assert_int_equal(advlock_fake_db_poll(&f->db, f->b, &r), 0);
    assert_int_equal(advlock_fake_db_poll(&f->db, f->d, &r), ADVLOCK_EMISUSE);

    assert_int_equal(st(f, f->a, UNLOCK, K), ADVLOCK_FAKE_ROW_TRUE);
    assert_int_equal(advlock_fake_db_poll(&f->db, f->b, &r), 1);
    assert_int_equal(r.status, ADVLOCK_FAKE_ROW_VOID);
    assert_int_equal(held(f, f->b, K, ADVLOCK_FAKE_EXCLUSIVE, 0), 1);
    assert_int_equal(advlock_fake_db_poll(&f->db, f->c, &r), 0); /* shared waits for b */
    assert_int_equal(st(f, f->b, UNLOCK, K), ADVLOCK_FAKE_ROW_TRUE);
    assert_int_equal(advlock_fake_db_poll(&f->db, f->c, &r), 1);
    assert_int_equal(held(f, f->c, K, ADVLOCK_FAKE_SHARED, 0), 1);
}

static void shared_waiters_are_granted_together(void **state)
{
    fixture *f = *state;
    advlock_fake_result r;
    assert_int_equal(st(f, f->a, TRY, K), ADVLOCK_FAKE_ROW_TRUE);
    assert_int_equal(st(f, f->b, LOCK_SH, K), ADVLOCK_FAKE_WAITING);
    assert_int_equal(st(f, f->c, LOCK_SH, K), ADVLOCK_FAKE_WAITING);
    assert_int_equal(st(f, f->d, LOCK, K), ADVLOCK_FAKE_WAITING);
    advlock_fake_lock_row rows[8];
    assert_int_equal(advlock_fake_db_lock_rows(&f->db, rows, 8), 4);
    assert_int_equal(rows[0].pid, f->a);
    assert_int_equal(rows[0].granted, 1);
    assert_int_equal(rows[3].pid, f->d);
    assert_int_equal(rows[3].granted, 0);
    assert_int_equal(rows[3].mode, ADVLOCK_FAKE_EXCLUSIVE);
    assert_int_equal(st(f, f->a, UNLOCK, K), ADVLOCK_FAKE_ROW_TRUE);
    assert_int_equal(advlock_fake_db_poll(&f->db, f->b, &r), 1);
    assert_int_equal(advlock_fake_db_poll(&f->db, f->c, &r), 1);
    assert_int_equal(advlock_fake_db_poll(&f->db, f->d, &r), 0);
    advlock_fake_db_close(&f->db, f->b);
    assert_int_equal(advlock_fake_db_poll(&f->db, f->d, &r), 0);
    advlock_fake_db_close(&f->db, f->c);
    assert_int_equal(advlock_fake_db_poll(&f->db, f->d, &r), 1);
}

static void waiters_block_newcomers_but_not_holders(void **state)
{
    fixture *f = *state;
    advlock_fake_result r;
    assert_int_equal(st(f, f->a, TRY_SH, K), ADVLOCK_FAKE_ROW_TRUE);
    assert_int_equal(st(f, f->b, LOCK, K), ADVLOCK_FAKE_WAITING);
    /* Shared would be compatible with a's hold, but b asked first. */
    assert_int_equal(st(f, f->c, TRY_SH, K), ADVLOCK_FAKE_ROW_FALSE);
    /* Holding the mode already: granted again at once. */
    assert_int_equal(st(f, f->a, TRY_SH, K), ADVLOCK_FAKE_ROW_TRUE);
    /* Exclusive: the try form refuses because of b's request ... */
    assert_int_equal(st(f, f->a, TRY, K), ADVLOCK_FAKE_ROW_FALSE);
    /* ... but the waiting form jumps ahead of b, who waits for a anyway. */
    assert_int_equal(st(f, f->a, LOCK, K), ADVLOCK_FAKE_ROW_VOID);
    assert_int_equal(advlock_fake_db_poll(&f->db, f->b, &r), 0);
    run0(f, f->a, "SELECT pg_advisory_unlock_all()");
    assert_int_equal(advlock_fake_db_poll(&f->db, f->b, &r), 1);
}

/* PostgreSQL 17's try-lock is placed in the queue as a wait would be: the
 * holder's exclusive try jumps ahead of b as its wait does; a newcomer's
 * still waits its turn (busy). */
static void from_17_a_holders_try_is_placed_as_its_wait(void **state)
{
    fixture *f = *state;
    advlock_fake_result r;
    advlock_fake_db_set_server_version(&f->db, 170000);
    assert_int_equal(st(f, f->a, TRY_SH, K), ADVLOCK_FAKE_ROW_TRUE);
    assert_int_equal(st(f, f->b, LOCK, K), ADVLOCK_FAKE_WAITING);
    assert_int_equal(st(f, f->c, TRY_SH, K), ADVLOCK_FAKE_ROW_FALSE);
    assert_int_equal(st(f, f->a, TRY, K), ADVLOCK_FAKE_ROW_TRUE);
    assert_int_equal(held(f, f->a, K, ADVLOCK_FAKE_EXCLUSIVE, 0), 1);
    assert_int_equal(advlock_fake_db_poll(&f->db, f->b, &r), 0);
    run0(f, f->a, "SELECT pg_advisory_unlock_all()");
    assert_int_equal(advlock_fake_db_poll(&f->db, f->b, &r), 1);

    /* Where a's wait would be a deadlock (b waits for a's shared hold and
     * holds shared itself), the try is busy, no error. */
    run0(f, f->b, "SELECT pg_advisory_unlock_all()");
    assert_int_equal(st(f, f->a, TRY_SH, K), ADVLOCK_FAKE_ROW_TRUE);
    assert_int_equal(st(f, f->b, TRY_SH, K), ADVLOCK_FAKE_ROW_TRUE);
    assert_int_equal(st(f, f->b, LOCK, K), ADVLOCK_FAKE_WAITING);
    assert_int_equal(st(f, f->a, TRY, K), ADVLOCK_FAKE_ROW_FALSE);
    assert_int_equal(held(f, f->a, K, ADVLOCK_FAKE_EXCLUSIVE, 0), 0);
}

static void waiting_behind_someone_who_waits_for_you_is_a_deadlock(void **state)
{
    fixture *f = *state;
    advlock_fake_result r;
    assert_int_equal(st(f, f->a, TRY_SH, K), ADVLOCK_FAKE_ROW_TRUE);
    assert_int_equal(st(f, f->b, TRY_SH, K), ADVLOCK_FAKE_ROW_TRUE);
    assert_int_equal(st(f, f->b, LOCK, K), ADVLOCK_FAKE_WAITING);
    r = run(f, f->a, LOCK, K);
    assert_int_equal(r.status, ADVLOCK_FAKE_SERVER_ERROR);
    assert_string_equal(r.sqlstate, "40P01");
    assert_string_equal(r.message, "deadlock detected");
    assert_int_equal(advlock_fake_db_poll(&f->db, f->b, &r), 0);
    assert_int_equal(st(f, f->a, UNLOCK_SH, K), ADVLOCK_FAKE_ROW_TRUE);
    assert_int_equal(advlock_fake_db_poll(&f->db, f->b, &r), 1);
    assert_int_equal(held(f, f->b, K, ADVLOCK_FAKE_EXCLUSIVE, 0), 1);
    assert_int_equal(held(f, f->b, K, ADVLOCK_FAKE_SHARED, 0), 1);
}

static void deadlock_check_and_cancel_end_a_wait(void **state)
{
    fixture *f = *state;
    advlock_fake_result r;
    assert_int_equal(st(f, f->a, TRY, K), ADVLOCK_FAKE_ROW_TRUE);
    assert_int_equal(st(f, f->b, TRY, K2), ADVLOCK_FAKE_ROW_TRUE);
    assert_int_equal(st(f, f->a, LOCK, K2), ADVLOCK_FAKE_WAITING);
    assert_int_equal(advlock_fake_db_check_deadlock(&f->db, f->a), 0);
    assert_int_equal(st(f, f->b, LOCK, K), ADVLOCK_FAKE_WAITING);
    assert_int_equal(advlock_fake_db_check_deadlock(&f->db, f->b), 1);
    assert_int_equal(advlock_fake_db_poll(&f->db, f->b, &r), 1);
    assert_string_equal(r.sqlstate, "40P01");
    assert_true(advlock_fake_db_is_waiting(&f->db, f->a));
    assert_int_equal(advlock_fake_db_cancel(&f->db, f->a), 1);
    assert_int_equal(advlock_fake_db_cancel(&f->db, f->a), 0);
    assert_int_equal(advlock_fake_db_poll(&f->db, f->a, &r), 1);
    assert_string_equal(r.sqlstate, "57014");
    assert_string_equal(r.message, "canceling statement due to user request");
    assert_int_equal(advlock_fake_db_lock_rows(&f->db, NULL, 0), 2);
}

static void waiting_transaction_lock_outside_a_block_ends_with_its_statement(void **state)
{
    fixture *f = *state;
    advlock_fake_result r;
    assert_int_equal(st(f, f->a, TRY, K), ADVLOCK_FAKE_ROW_TRUE);
    assert_int_equal(st(f, f->b, XLOCK, K), ADVLOCK_FAKE_WAITING);
    assert_int_equal(st(f, f->c, LOCK, K), ADVLOCK_FAKE_WAITING);
    assert_int_equal(st(f, f->a, UNLOCK, K), ADVLOCK_FAKE_ROW_TRUE);
    /* b was granted, its statement's transaction ended, and c got it. */
    assert_int_equal(advlock_fake_db_poll(&f->db, f->b, &r), 1);
    assert_int_equal(r.status, ADVLOCK_FAKE_ROW_VOID);
    assert_int_equal(held(f, f->b, K, ADVLOCK_FAKE_EXCLUSIVE, 1), 0);
    assert_int_equal(advlock_fake_db_poll(&f->db, f->c, &r), 1);
    assert_int_equal(held(f, f->c, K, ADVLOCK_FAKE_EXCLUSIVE, 0), 1);
}

static void closing_a_waiting_session_leaves_the_queue(void **state)
{
    fixture *f = *state;
    advlock_fake_result r;
    assert_int_equal(st(f, f->a, TRY, K), ADVLOCK_FAKE_ROW_TRUE);
    assert_int_equal(st(f, f->b, LOCK, K), ADVLOCK_FAKE_WAITING);
    assert_int_equal(st(f, f->c, LOCK, K), ADVLOCK_FAKE_WAITING);
    advlock_fake_db_close(&f->db, f->b);
    advlock_fake_db_close(&f->db, f->a);
    assert_int_equal(advlock_fake_db_poll(&f->db, f->c, &r), 1);
    assert_int_equal(advlock_fake_db_lock_rows(&f->db, NULL, 0), 1);
}

static void lock_rows_are_ordered_and_bounded(void **state)
{
    fixture *f = *state;
    assert_int_equal(st(f, f->b, TRY_SH, K), ADVLOCK_FAKE_ROW_TRUE);
    assert_int_equal(st(f, f->a, TRY_SH, K), ADVLOCK_FAKE_ROW_TRUE);
    assert_int_equal(st(f, f->a, TRY, K2), ADVLOCK_FAKE_ROW_TRUE);
    assert_int_equal(st(f, f->a, TRY_SH, K2), ADVLOCK_FAKE_ROW_TRUE);
    advlock_fake_lock_row rows[2];
    assert_int_equal(advlock_fake_db_lock_rows(&f->db, rows, 2), 4);
    assert_int_equal(rows[0].pid, f->a);
    assert_int_equal(rows[0].key, K2);
    assert_int_equal(rows[0].mode, ADVLOCK_FAKE_EXCLUSIVE);
    assert_int_equal(rows[1].key, K2);
    assert_int_equal(rows[1].mode, ADVLOCK_FAKE_SHARED);
}

/* A cancel that reaches a waiter after the grant, before its statement has
 * finished, ends the statement with 57014; the session keeps the lock (a
 * transaction-level one goes with the aborted transaction). */
static void a_cancel_after_the_grant_still_ends_the_statement(void **state)
{
    fixture *f = *state;
    advlock_fake_result r;
    assert_int_equal(st(f, f->a, TRY, K), ADVLOCK_FAKE_ROW_TRUE);
    assert_int_equal(st(f, f->b, LOCK, K), ADVLOCK_FAKE_WAITING);
    assert_int_equal(st(f, f->a, UNLOCK, K), ADVLOCK_FAKE_ROW_TRUE); /* grants b */
    assert_int_equal(advlock_fake_db_is_waiting(&f->db, f->b), 0);
    assert_int_equal(advlock_fake_db_cancel(&f->db, f->b), 1);
    assert_int_equal(advlock_fake_db_poll(&f->db, f->b, &r), 1);
    assert_string_equal(r.sqlstate, "57014");
    assert_string_equal(r.message, "canceling statement due to user request");
    assert_int_equal(held(f, f->b, K, ADVLOCK_FAKE_EXCLUSIVE, 0), 1);
    assert_int_equal(advlock_fake_db_cancel(&f->db, f->b), 0); /* idle now: nothing */

    /* Inside a block the error aborts it: the transaction lock is gone. */
    assert_int_equal(run0(f, f->c, "BEGIN").status, ADVLOCK_FAKE_COMMAND_OK);
    assert_int_equal(st(f, f->c, XLOCK, K2), ADVLOCK_FAKE_ROW_VOID);
    assert_int_equal(run0(f, f->d, "BEGIN").status, ADVLOCK_FAKE_COMMAND_OK);
    assert_int_equal(st(f, f->d, XLOCK, K2), ADVLOCK_FAKE_WAITING);
    assert_int_equal(run0(f, f->c, "COMMIT").status, ADVLOCK_FAKE_COMMAND_OK); /* grants d */
    assert_int_equal(held(f, f->d, K2, ADVLOCK_FAKE_EXCLUSIVE, 1), 1);
    assert_int_equal(advlock_fake_db_cancel(&f->db, f->d), 1);
    assert_int_equal(held(f, f->d, K2, ADVLOCK_FAKE_EXCLUSIVE, 1), 0);
    assert_int_equal(advlock_fake_db_poll(&f->db, f->d, &r), 1);
    assert_string_equal(r.sqlstate, "57014");
    assert_string_equal(run(f, f->d, TRY, K2).sqlstate, "25P02");
}

/* The holders query (ADVLOCK_SQL_HOLDERS) as PostgreSQL answers it: pg_locks
 * rows joined with pg_stat_activity, times from the database's clock and
 * now() the start of the querying transaction. */
static void the_holders_query_answers_from_the_lock_table(void **state)
{
    fixture *f = *state;
    const char *holders = advlock_sql_text(ADVLOCK_SQL_HOLDERS);
    advlock_holder rows[4];
    advlock_fake_db_set_time(&f->db, 1000);
    assert_int_equal(st(f, f->a, TRY, K), ADVLOCK_FAKE_ROW_TRUE);
    advlock_fake_db_set_time(&f->db, 2500);
    assert_int_equal(st(f, f->b, LOCK, K), ADVLOCK_FAKE_WAITING);
    assert_int_equal(run0(f, f->c, "BEGIN").status, ADVLOCK_FAKE_COMMAND_OK);
    advlock_fake_db_set_time(&f->db, 4200);
    advlock_fake_db_set_time(&f->db, 100); /* the clock never goes back */

    advlock_fake_result r = run(f, f->c, holders, K);
    assert_int_equal(r.status, ADVLOCK_FAKE_ROWS);
    assert_string_equal(r.command_tag, "SELECT 2");
    assert_int_equal(advlock_fake_db_holders(&f->db, f->c, K, rows, 4), 2);
    /* now() is c's BEGIN, 2500: a has held since 1000 (its statement's end). */
    assert_int_equal(rows[0].pid, f->a);
    assert_int_equal(rows[0].granted, 1);
    assert_string_equal(rows[0].mode, "ExclusiveLock");
    assert_string_equal(rows[0].application_name, "");
    assert_string_equal(rows[0].client, "local");
    assert_string_equal(rows[0].state, "idle");
    assert_string_equal(rows[0].backend_start, "");
    assert_int_equal(rows[0].seconds, 1);
    assert_int_equal(rows[1].pid, f->b);
    assert_int_equal(rows[1].granted, 0);
    assert_string_equal(rows[1].state, "active"); /* waiting in its statement */
    assert_int_equal(rows[1].seconds, 0);

    /* An observer of its own sees now() = the clock, 4200. */
    assert_int_equal(advlock_fake_db_holders(&f->db, 0, K, rows, 1), 2); /* bounded */
    assert_int_equal(rows[0].seconds, 3);
    assert_int_equal(advlock_fake_db_holders(&f->db, 0, K, rows, 4), 2);
    assert_int_equal(rows[1].seconds, 1);

    /* Inside its block, the querying session's own hold is younger than
     * now(): floor of a negative interval. It shows as active. */
    assert_int_equal(st(f, f->c, TRY_SH, K2), ADVLOCK_FAKE_ROW_TRUE);
    advlock_fake_db_set_time(&f->db, 4300);
    assert_int_equal(run(f, f->c, holders, K2).status, ADVLOCK_FAKE_ROWS);
    assert_int_equal(advlock_fake_db_holders(&f->db, f->c, K2, rows, 4), 1);
    assert_string_equal(rows[0].mode, "ShareLock");
    assert_string_equal(rows[0].state, "active");
    assert_int_equal(rows[0].seconds, -2);
    assert_int_equal(advlock_fake_db_holders(&f->db, f->d, K2, rows, 4), 1);
    assert_string_equal(rows[0].state, "idle in transaction");

    /* A failed block shows as aborted, and refuses the query itself. */
    assert_int_equal(run0(f, f->a, "BEGIN").status, ADVLOCK_FAKE_COMMAND_OK);
    assert_int_equal(run0(f, f->a, "SELEC 1").status, ADVLOCK_FAKE_SERVER_ERROR);
    assert_int_equal(advlock_fake_db_holders(&f->db, f->d, K, rows, 4), 2);
    assert_string_equal(rows[0].state, "idle in transaction (aborted)");
    r = run(f, f->a, holders, K);
    assert_string_equal(r.sqlstate, "25P02");
    assert_int_equal(advlock_fake_db_holders(&f->db, f->d, 12345, rows, 4), 0);
    assert_int_equal(advlock_fake_db_holders(NULL, f->d, K, rows, 4), 0);
}

static void the_consistency_check_can_fail(void **state)
{
    fixture *f = *state;
    assert_int_equal(st(f, f->a, TRY, K), ADVLOCK_FAKE_ROW_TRUE);
    advlock_fake_db copy = f->db;
    copy.locks_[0].granted_[ADVLOCK_FAKE_SHARED] = 1;
    char why[128];
    assert_int_equal(advlock_fake_db_check(&copy, why, sizeof why), ADVLOCK_EINVAL);
    assert_non_null(strstr(why, "granted counts"));
}

static void argument_errors(void **state)
{
    fixture *f = *state;
    advlock_fake_result r;
    int pid;
    assert_int_equal(advlock_fake_db_exec(NULL, f->a, TRY, &K, &r), ADVLOCK_EINVAL);
    assert_int_equal(advlock_fake_db_exec(&f->db, f->a, NULL, &K, &r), ADVLOCK_EINVAL);
    assert_int_equal(advlock_fake_db_exec(&f->db, f->a, TRY, &K, NULL), ADVLOCK_EINVAL);
    assert_int_equal(advlock_fake_db_connect(&f->db, NULL), ADVLOCK_EINVAL);
    assert_int_equal(advlock_fake_db_holds(&f->db, 999999, K, ADVLOCK_FAKE_SHARED, NULL, NULL),
                     ADVLOCK_EINVAL);
    assert_int_equal(advlock_fake_db_cancel(&f->db, 999999), ADVLOCK_EINVAL);
    assert_int_equal(advlock_fake_db_poll(&f->db, f->a, NULL), ADVLOCK_EINVAL);
    for (int i = 4; i < ADVLOCK_FAKE_MAX_SESSIONS; i++)
        assert_int_equal(advlock_fake_db_connect(&f->db, &pid), 0);
    assert_int_equal(advlock_fake_db_connect(&f->db, &pid), ADVLOCK_ESERVER);
    advlock_fake_db_close(&f->db, f->c);
    assert_int_equal(advlock_fake_db_connect(&f->db, &pid), 0);
    assert_true(pid > f->d); /* pids are never reused */
}

/* The accessors a driver uses instead of the database's arrays. */
typedef struct hold_seen {
    int pid, mode, session_level, transaction_level, calls;
} hold_seen;

static int remember_hold(void *user, int pid, int64_t key, advlock_fake_mode mode,
                         int session_level, int transaction_level)
{
    hold_seen *seen = user;
    (void)key;
    *seen = (hold_seen){pid, (int)mode, session_level, transaction_level, seen->calls + 1};
    return seen->calls == 2 ? 9 : 0; /* the second call stops the walk */
}

static void waits_and_holds_are_read_by_pid(void **state)
{
    fixture *f = *state;
    assert_int_equal(run(f, f->a, TRY, K).status, ADVLOCK_FAKE_ROW_TRUE);
    assert_int_equal(run(f, f->b, LOCK, K).status, ADVLOCK_FAKE_WAITING);
    assert_int_equal(advlock_fake_db_wait_state(&f->db, f->b), ADVLOCK_FAKE_WAIT_QUEUED);
    assert_int_equal(advlock_fake_db_wait_state(&f->db, f->a), ADVLOCK_FAKE_WAIT_NONE);
    hold_seen seen = {0};
    assert_int_equal(advlock_fake_db_each_hold(&f->db, remember_hold, &seen), 0);
    assert_int_equal(seen.calls, 1);
    assert_int_equal(seen.pid, f->a);
    assert_int_equal(seen.session_level, 1);
    assert_int_equal(seen.transaction_level, 0);
    /* The unlock grants b's wait: b's statement is finished by the time the
     * call returns, and its result waits to be polled. */
    assert_int_equal(run(f, f->a, UNLOCK, K).status, ADVLOCK_FAKE_ROW_TRUE);
    assert_int_equal(advlock_fake_db_wait_state(&f->db, f->b), ADVLOCK_FAKE_WAIT_GRANTED);
    assert_int_equal(advlock_fake_db_fail_statement(&f->db, f->b), ADVLOCK_EMISUSE);
    advlock_fake_result r;
    assert_int_equal(advlock_fake_db_poll(&f->db, f->b, &r), 1);
    assert_int_equal(advlock_fake_db_wait_state(&f->db, f->b), ADVLOCK_FAKE_WAIT_NONE);
    /* Two holders: the walk stops where the callback says. */
    assert_int_equal(run0(f, f->c, "BEGIN").status, ADVLOCK_FAKE_COMMAND_OK);
    assert_int_equal(run(f, f->c, "SELECT pg_try_advisory_xact_lock_shared($1)", K2).status,
                     ADVLOCK_FAKE_ROW_TRUE);
    seen.calls = 0;
    assert_int_equal(advlock_fake_db_each_hold(&f->db, remember_hold, &seen), 9);
    assert_int_equal(seen.calls, 2);
    seen.calls = 0;
    /* An injected error fails c's block and ends its transaction's locks. */
    assert_int_equal(advlock_fake_db_fail_statement(&f->db, f->c), 0);
    assert_int_equal(advlock_fake_db_each_hold(&f->db, remember_hold, &seen), 0);
    assert_int_equal(seen.calls, 1); /* b's hold of K only */
    assert_int_equal(seen.pid, f->b);
    assert_int_equal(run(f, f->c, TRY, K2).status, ADVLOCK_FAKE_SERVER_ERROR); /* 25P02 */
    assert_int_equal(advlock_fake_db_fail_statement(&f->db, 99999), ADVLOCK_EINVAL);
    assert_int_equal(advlock_fake_db_wait_state(NULL, f->a), ADVLOCK_FAKE_WAIT_NONE);
    assert_int_equal(advlock_fake_db_each_hold(NULL, remember_hold, &seen), 0);
}

/* The fenced try-locks: a grant issues the key's next token, per key from
 * 1; a busy try issues none; a standby refuses before locking. */
static void fenced_tries_issue_tokens_per_key(void **state)
{
    fixture *f = *state;
    const char *fenced = advlock_sql_text(ADVLOCK_SQL_TRY_LOCK_FENCED);
    advlock_fake_result r = run(f, f->a, fenced, K);
    assert_int_equal(r.status, ADVLOCK_FAKE_ROW_FENCED);
    assert_int_equal(r.fence_token, 1);
    r = run(f, f->b, fenced, K); /* busy */
    assert_int_equal(r.status, ADVLOCK_FAKE_ROW_FENCED);
    assert_int_equal(r.fence_token, 0);
    assert_int_equal(run(f, f->b, fenced, K2).fence_token, 1); /* another key's own counter */
    assert_int_equal(st(f, f->a, UNLOCK, K), ADVLOCK_FAKE_ROW_TRUE);
    assert_int_equal(run(f, f->b, fenced, K).fence_token, 2);
    assert_int_equal(held(f, f->b, K, ADVLOCK_FAKE_EXCLUSIVE, 0), 1);

    /* The transaction form, inside a block: held until it ends. */
    assert_int_equal(run0(f, f->c, "BEGIN").status, ADVLOCK_FAKE_COMMAND_OK);
    assert_int_equal(st(f, f->b, UNLOCK, K), ADVLOCK_FAKE_ROW_TRUE);
    assert_int_equal(
        run(f, f->c, advlock_sql_text(ADVLOCK_SQL_TRY_XACT_LOCK_FENCED), K).fence_token, 3);
    assert_int_equal(run0(f, f->c, "COMMIT").status, ADVLOCK_FAKE_COMMAND_OK);

    advlock_fake_db_set_in_recovery(&f->db, 1);
    r = run(f, f->d, fenced, K);
    assert_int_equal(r.status, ADVLOCK_FAKE_SERVER_ERROR);
    assert_string_equal(r.sqlstate, "25006");
    assert_int_equal(held(f, f->d, K, ADVLOCK_FAKE_EXCLUSIVE, 0), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(fenced_tries_issue_tokens_per_key, setup, teardown),
        cmocka_unit_test_setup_teardown(exclusive_conflicts_and_stacks, setup, teardown),
        cmocka_unit_test_setup_teardown(shared_is_compatible_with_shared_only, setup, teardown),
        cmocka_unit_test_setup_teardown(a_session_never_conflicts_with_itself, setup, teardown),
        cmocka_unit_test_setup_teardown(transaction_locks_end_with_the_transaction, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(session_locks_survive_rollback_and_unlock_all_keeps_xact,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(errors_abort_a_block, setup, teardown),
        cmocka_unit_test_setup_teardown(transaction_control_warnings, setup, teardown),
        cmocka_unit_test_setup_teardown(closing_releases_everything_and_dead_sessions_are_lost,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(waiting_lock_is_granted_in_order, setup, teardown),
        cmocka_unit_test_setup_teardown(shared_waiters_are_granted_together, setup, teardown),
        cmocka_unit_test_setup_teardown(waiters_block_newcomers_but_not_holders, setup, teardown),
        cmocka_unit_test_setup_teardown(waiting_behind_someone_who_waits_for_you_is_a_deadlock,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(deadlock_check_and_cancel_end_a_wait, setup, teardown),
        cmocka_unit_test_setup_teardown(
            waiting_transaction_lock_outside_a_block_ends_with_its_statement, setup, teardown),
        cmocka_unit_test_setup_teardown(from_17_a_holders_try_is_placed_as_its_wait, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(closing_a_waiting_session_leaves_the_queue, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(lock_rows_are_ordered_and_bounded, setup, teardown),
        cmocka_unit_test_setup_teardown(a_cancel_after_the_grant_still_ends_the_statement, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(the_holders_query_answers_from_the_lock_table, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(the_consistency_check_can_fail, setup, teardown),
        cmocka_unit_test_setup_teardown(argument_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(waits_and_holds_are_read_by_pid, setup, teardown),
    };
    return cmocka_run_group_tests_name("fake database", tests, NULL, NULL);
}
