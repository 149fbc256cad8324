/* The server session check (advlock_session, advlock_set_session): the
 * session row once per connection, the checked value carried from one
 * machine to the next, standby refusal, the claim and the guarded statements behind a
 * proxy, and what each failure says; and the verify of a held lock, which
 * behind a proxy is a guarded statement too. Without advlock_set_session nothing
 * changes: test_machine and test_options run the plain rows. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "advlock.h"
#include "machine_fixture.h"

static const char KEY[] = "jobs";
#define KEY_LEN (sizeof KEY - 1)

enum { CLIENT_PID = 4242, PROXY_PID = 777, SERVER_PID = 9001 };
static const uint64_t TOKEN = UINT64_C(0xfeedfacecafebeef); /* negative as an int64 */
static const uint64_t OTHER_TOKEN = 12345;

/* Possible causes, after the fact observed: a claimed server session (the
 * check's refusal), or a statement on one this connection did not claim. */
#define ESESSION_CAUSES                                                                \
    ": a transaction-pooling proxy, or a session pool that does not reset sessions "   \
    "between clients (PgBouncer's server_reset_query)? session advisory locks need a " \
    "direct connection or a session pool that resets sessions"
#define CLAIMED_WORDS                                                                   \
    "the server session this connection reached was claimed by another connection, or " \
    "holds another client's advisory lock" ESESSION_CAUSES
#define ESESSION_WORDS \
    "a statement of this connection reached a server session it did not claim" ESESSION_CAUSES

static void use(advlock_machine *m, advlock_mode mode, advlock_scope scope, advlock_wait wait,
                int allow_standby)
{
    advlock_options o;
    advlock_options_init(&o);
    o.mode = mode;
    o.scope = scope;
    o.wait = wait;
    o.allow_standby = allow_standby;
    assert_int_equal(advlock_set_options(m, &o), 0);
}

static int64_t key(void)
{
    int64_t k;
    assert_int_equal(advlock_derive_key(KEY, KEY_LEN, &k), 0);
    return k;
}

/* The action must be this query, with exactly these parameters. */
static void expect_query(const advlock_machine *m, advlock_sql sql, int64_t p1, int64_t p2,
                         int64_t p3)
{
    advlock_action a = act(m);
    assert_int_equal(a.kind, ADVLOCK_ACTION_QUERY);
    assert_int_equal(a.sql, sql);
    assert_string_equal(a.sql_text, advlock_sql_text(sql));
    assert_int_equal(a.param, p1);
    assert_int_equal(a.param2, p2);
    assert_int_equal(a.param3, p3);
}

/* The session row: the token to claim with (or 0), then the pid the
 * client was told, which decides where its timeouts are set. */
static void expect_session_query(const advlock_machine *m, uint64_t token)
{
    advlock_session s;
    assert_int_equal(advlock_get_session(m, &s), 0);
    expect_query(m, ADVLOCK_SQL_SESSION, (int64_t)token, s.client_pid, 0);
    assert_int_equal(advlock_sql_params(ADVLOCK_SQL_SESSION), 2);
}

static void expect_done(const advlock_machine *m, advlock_outcome outcome, int failure,
                        advlock_detail detail)
{
    assert_int_equal(act(m).kind, ADVLOCK_ACTION_DONE);
    assert_int_equal(report_of(m)->outcome, outcome);
    assert_int_equal(report_of(m)->failure, failure);
    assert_int_equal(report_of(m)->detail, detail);
}

static const char *said(const advlock_machine *m, const char *words)
{
    return described(m, KEY, KEY_LEN, words);
}

static void acquire(advlock_machine *m, int64_t timeout, int64_t now)
{
    assert_int_equal(advlock_start_acquire(m, KEY, KEY_LEN, timeout, now), 0);
}

static void release(advlock_machine *m, int64_t now)
{
    assert_int_equal(advlock_start_release(m, KEY, KEY_LEN, now), 0);
}

/* A fresh, unchecked value for a connection, handed to the machine. */
static void told(advlock_machine *m, int client_pid, uint64_t token)
{
    advlock_session s;
    assert_int_equal(advlock_session_init(&s, client_pid, token), 0);
    assert_int_equal(advlock_set_session(m, &s), 0);
}

/* What the machine's copy of the session says now. */
static advlock_session session_of(const advlock_machine *m)
{
    advlock_session s;
    assert_int_equal(advlock_get_session(m, &s), 0);
    return s;
}

static void session_row(advlock_machine *m, int pid, int in_recovery, int ours, int64_t now)
{
    assert_int_equal(advlock_on_session(m, pid, in_recovery, ours, now), 0);
}

/* Told the session, then checked: direct (the server's pid is the one the
 * client was told), or behind a proxy, claimed or not. */
static void checked(advlock_machine *m, int server_pid, int in_recovery, int ours)
{
    told(m, CLIENT_PID, TOKEN);
    acquire(m, 1000, 0);
    expect_session_query(m, TOKEN);
    session_row(m, server_pid, in_recovery, ours, 1);
}

/* Behind a proxy, claimed: the acquire's guarded try is out. */
static void proxied(advlock_machine *m)
{
    checked(m, SERVER_PID, 0, 1);
    expect_query(m, ADVLOCK_SQL_TRY_LOCK_GUARDED, key(), (int64_t)TOKEN, 0);
}

/* ---- telling the machine its session ---------------------------------- */

static void without_set_session_the_rows_are_plain(void **state)
{
    advlock_machine *m = *state;
    acquire(m, 1000, 0);
    expect_query(m, ADVLOCK_SQL_TRY_LOCK, key(), 0, 0);
    answer(m, ADVLOCK_RESULT_NULL, 1);
    expect_done(m, ADVLOCK_FAILED, ADVLOCK_ENULL, ADVLOCK_DETAIL_NONE);
    release(m, 2);
    expect_query(m, ADVLOCK_SQL_UNLOCK, key(), 0, 0);
    answer(m, ADVLOCK_RESULT_NULL, 3);
    expect_done(m, ADVLOCK_NOT_HELD, 0, ADVLOCK_DETAIL_NONE);
    /* The session row has no place in a machine never told a session. */
    assert_int_equal(advlock_on_session(m, 1, 0, 1, 4), ADVLOCK_EMISUSE);
}

static void set_session_refuses_bad_calls_and_changes_nothing(void **state)
{
    advlock_machine *m = *state;
    advlock_machine before = *m;
    advlock_session s, untouched;
    memset(&untouched, 0xAB, sizeof untouched);
    s = untouched;
    assert_int_equal(advlock_session_init(NULL, CLIENT_PID, TOKEN), ADVLOCK_EINVAL);
    assert_int_equal(advlock_session_init(&s, CLIENT_PID, 0), ADVLOCK_EINVAL);
    assert_memory_equal(&s, &untouched, sizeof s);
    assert_int_equal(advlock_session_init(&s, CLIENT_PID, TOKEN), 0);
    assert_int_equal(advlock_set_session(NULL, &s), ADVLOCK_EINVAL);
    assert_int_equal(advlock_set_session(m, NULL), ADVLOCK_EINVAL);
    advlock_session bad = s;
    bad.token = 0;
    assert_int_equal(advlock_set_session(m, &bad), ADVLOCK_EINVAL);
    bad = s;
    bad.proxied = 2; /* no value the machine wrote */
    assert_int_equal(advlock_set_session(m, &bad), ADVLOCK_EINVAL);
    assert_int_equal(advlock_get_session(NULL, &s), ADVLOCK_EINVAL);
    assert_int_equal(advlock_get_session(m, NULL), ADVLOCK_EINVAL);
    assert_memory_equal(&before, m, sizeof before);
    /* While an operation runs: querying, sleeping, on the session query. */
    acquire(m, 1000, 0);
    before = *m;
    assert_int_equal(advlock_set_session(m, &s), ADVLOCK_EMISUSE);
    assert_memory_equal(&before, m, sizeof before);
    answer(m, ADVLOCK_RESULT_FALSE, 1);
    assert_int_equal(act(m).kind, ADVLOCK_ACTION_SLEEP);
    before = *m;
    assert_int_equal(advlock_set_session(m, &s), ADVLOCK_EMISUSE);
    assert_memory_equal(&before, m, sizeof before);
    assert_int_equal(advlock_cancel(m, 2), 0);
    told(m, CLIENT_PID, TOKEN);
    acquire(m, 1000, 3);
    expect_session_query(m, TOKEN);
    before = *m;
    assert_int_equal(advlock_session_init(&s, CLIENT_PID, OTHER_TOKEN), 0);
    assert_int_equal(advlock_set_session(m, &s), ADVLOCK_EMISUSE);
    assert_memory_equal(&before, m, sizeof before);
    assert_int_equal(advlock_on_session(NULL, 1, 0, 1, 4), ADVLOCK_EINVAL);
}

static void the_session_is_checked_once_per_connection(void **state)
{
    advlock_machine *m = *state;
    checked(m, CLIENT_PID, 0, 1);
    /* Direct: the plain rows, as without the check. */
    expect_query(m, ADVLOCK_SQL_TRY_LOCK, key(), 0, 0);
    assert_int_equal(report_of(m)->attempts, 1); /* the session row is no attempt */
    answer(m, ADVLOCK_RESULT_TRUE, 2);
    expect_done(m, ADVLOCK_ACQUIRED, 0, ADVLOCK_DETAIL_NONE);
    assert_int_equal(report_of(m)->elapsed_ms, 2);
    /* The checked value given back, as a driver does: no second check. */
    advlock_machine before = *m;
    advlock_session s = session_of(m);
    assert_int_equal(advlock_set_session(m, &s), 0);
    assert_memory_equal(&before, m, sizeof before);
    release(m, 3);
    expect_query(m, ADVLOCK_SQL_UNLOCK, key(), 0, 0);
    answer(m, ADVLOCK_RESULT_TRUE, 4);
    expect_done(m, ADVLOCK_RELEASED, 0, ADVLOCK_DETAIL_NONE);
}

/* What the session row found is in the machine's copy from the moment it
 * answered (a driver picks a statement's form by it during the operation),
 * and a second machine given that value sends no session row. */
static void the_checked_value_carries_to_the_next_machine(void **state)
{
    advlock_machine *m = *state;
    told(m, CLIENT_PID, TOKEN);
    acquire(m, 1000, 0);
    advlock_session s = session_of(m);
    assert_int_equal(s.checked, 0);
    assert_int_equal(s.token, TOKEN);
    assert_int_equal(s.client_pid, CLIENT_PID);
    session_row(m, SERVER_PID, 0, 1, 1);
    s = session_of(m);
    assert_int_equal(s.checked, 1);
    assert_int_equal(s.proxied, 1);
    assert_int_equal(s.claimed, 1);
    assert_int_equal(s.standby, 0);
    assert_int_equal(s.token, TOKEN);
    assert_int_equal(s.client_pid, CLIENT_PID);
    advlock_machine next;
    advlock_machine_init(&next);
    assert_int_equal(advlock_set_session(&next, &s), 0);
    acquire(&next, 1000, 2);
    expect_query(&next, ADVLOCK_SQL_TRY_LOCK_GUARDED, key(), (int64_t)TOKEN, 0);
    /* A direct connection's value: the plain rows, no row either. */
    advlock_machine_init(m);
    told(m, CLIENT_PID, OTHER_TOKEN);
    acquire(m, 1000, 3);
    session_row(m, CLIENT_PID, 0, 1, 4);
    s = session_of(m);
    assert_int_equal(s.proxied, 0);
    assert_int_equal(s.claimed, 1);
    advlock_machine_init(&next);
    assert_int_equal(advlock_set_session(&next, &s), 0);
    release(&next, 5);
    expect_query(&next, ADVLOCK_SQL_UNLOCK, key(), 0, 0);
    /* A machine never told its session gives a value with token 0. */
    advlock_machine_init(&next);
    assert_int_equal(session_of(&next).token, 0);
}

static void changed_values_check_again(void **state)
{
    advlock_machine *m = *state;
    checked(m, CLIENT_PID, 0, 1);
    answer(m, ADVLOCK_RESULT_TRUE, 2);
    /* A new token (a new connection): checked again, with it. */
    told(m, CLIENT_PID, OTHER_TOKEN);
    release(m, 3);
    expect_session_query(m, OTHER_TOKEN);
    session_row(m, CLIENT_PID, 0, 1, 4);
    expect_query(m, ADVLOCK_SQL_UNLOCK, key(), 0, 0);
    answer(m, ADVLOCK_RESULT_TRUE, 5);
    /* A new pid alone: again. */
    told(m, CLIENT_PID + 1, OTHER_TOKEN);
    acquire(m, 0, 6);
    expect_session_query(m, OTHER_TOKEN);
    /* A reinitialized machine knows nothing, and checks nothing. */
    advlock_machine_init(m);
    acquire(m, 0, 7);
    expect_query(m, ADVLOCK_SQL_TRY_LOCK, key(), 0, 0);
}

static void the_session_row_comes_with_on_session_only(void **state)
{
    advlock_machine *m = *state;
    told(m, CLIENT_PID, TOKEN);
    acquire(m, 1000, 0);
    advlock_machine before = *m;
    for (int r = ADVLOCK_RESULT_TRUE; r <= ADVLOCK_RESULT_NULL; r++)
        assert_int_equal(advlock_on_result(m, (advlock_result)r, NULL, NULL, 1), ADVLOCK_EMISUSE);
    assert_int_equal(advlock_on_holders(m, NULL, 0, 1), ADVLOCK_EMISUSE);
    assert_memory_equal(&before, m, sizeof before);
    session_row(m, CLIENT_PID, 0, 1, 1);
    /* Now the try is out: no session row for it. */
    before = *m;
    assert_int_equal(advlock_on_session(m, CLIENT_PID, 0, 1, 2), ADVLOCK_EMISUSE);
    assert_memory_equal(&before, m, sizeof before);
}

static void the_machine_stays_small_and_copyable(void **state)
{
    advlock_machine *m = *state;
    proxied(m);
    /* A copy goes on from where the original was, with the session known. */
    advlock_machine copy = *m;
    answer(&copy, ADVLOCK_RESULT_TRUE, 2);
    expect_done(&copy, ADVLOCK_ACQUIRED, 0, ADVLOCK_DETAIL_NONE);
    release(&copy, 3);
    expect_query(&copy, ADVLOCK_SQL_UNLOCK_GUARDED, key(), (int64_t)TOKEN, 0);
    expect_query(m, ADVLOCK_SQL_TRY_LOCK_GUARDED, key(), (int64_t)TOKEN, 0);
}

/* pg_stat_activity shows a statement's first track_activity_query_size
 * bytes (1024 by default, the terminating NUL included): an operator
 * looking at a session waiting on its check should read the whole row. */
static void the_session_statement_fits_pg_stat_activity(void **state)
{
    (void)state;
    assert_true(strlen(advlock_sql_text(ADVLOCK_SQL_SESSION)) < 1024);
}

/* ---- standby ---------------------------------------------------------- */

static void a_standby_refuses_acquires(void **state)
{
    advlock_machine *m = *state;
    checked(m, CLIENT_PID, 1, 1);
    expect_done(m, ADVLOCK_FAILED, ADVLOCK_ESTANDBY, ADVLOCK_DETAIL_NONE);
    assert_int_equal(report_of(m)->sql, ADVLOCK_SQL_SESSION);
    assert_int_equal(report_of(m)->attempts, 0);
    assert_string_equal(said(m, NULL),
                        "Refused to lock 'jobs': the server is a standby in recovery, where "
                        "advisory locks exclude nobody on the primary (connect to the primary, "
                        "or allow standby locks).");
    assert_string_equal(advlock_strerror(ADVLOCK_ESTANDBY), "the server is a standby in recovery");
    /* Known now: the next acquire is refused at once, transaction scope too. */
    use(m, ADVLOCK_EXCLUSIVE, ADVLOCK_TRANSACTION, ADVLOCK_WAIT_POLL, 0);
    acquire(m, 1000, 2);
    expect_done(m, ADVLOCK_FAILED, ADVLOCK_ESTANDBY, ADVLOCK_DETAIL_NONE);
    /* A release is allowed: it can only give a lock back. */
    use(m, ADVLOCK_SHARED, ADVLOCK_SESSION, ADVLOCK_WAIT_POLL, 0);
    release(m, 3);
    expect_query(m, ADVLOCK_SQL_UNLOCK_SHARED, key(), 0, 0);
    answer(m, ADVLOCK_RESULT_FALSE, 4);
    expect_done(m, ADVLOCK_NOT_HELD, 0, ADVLOCK_DETAIL_NONE);
}

/* PostgreSQL 13 fails the session row (it reads a setting 13 lacks): the
 * acquire fails there, nothing sent after it, and the sentence names the
 * minimum version and why. Another failure of the row says nothing of it. */
static void an_older_server_fails_the_check_with_the_minimum_version(void **state)
{
    advlock_machine *m = *state;
    const char *words = "unrecognized configuration parameter \"idle_session_timeout\"";
    told(m, CLIENT_PID, TOKEN);
    acquire(m, 1000, 0);
    expect_session_query(m, TOKEN);
    assert_int_equal(advlock_on_result(m, ADVLOCK_RESULT_SERVER_ERROR, "42704", words, 1), 0);
    expect_done(m, ADVLOCK_FAILED, ADVLOCK_ESERVER, ADVLOCK_DETAIL_NONE);
    assert_int_equal(report_of(m)->sql, ADVLOCK_SQL_SESSION);
    assert_int_equal(report_of(m)->attempts, 0);
    assert_non_null(strstr(said(m, words), words));
    assert_non_null(strstr(said(m, words), "advlock needs PostgreSQL 14 or later"));

    acquire(m, 1000, 2);
    expect_session_query(m, TOKEN);
    assert_int_equal(advlock_on_result(m, ADVLOCK_RESULT_SERVER_ERROR, "57P01", NULL, 3), 0);
    expect_done(m, ADVLOCK_FAILED, ADVLOCK_ESERVER, ADVLOCK_DETAIL_NONE);
    assert_null(strstr(said(m, NULL), "PostgreSQL 14"));
}

static void allow_standby_locks_there(void **state)
{
    advlock_machine *m = *state;
    use(m, ADVLOCK_EXCLUSIVE, ADVLOCK_SESSION, ADVLOCK_WAIT_POLL, 1);
    checked(m, CLIENT_PID, 1, 1);
    expect_query(m, ADVLOCK_SQL_TRY_LOCK, key(), 0, 0);
    answer(m, ADVLOCK_RESULT_TRUE, 2);
    expect_done(m, ADVLOCK_ACQUIRED, 0, ADVLOCK_DETAIL_NONE);
    /* The option is read at each start: off again, refused again. */
    use(m, ADVLOCK_EXCLUSIVE, ADVLOCK_SESSION, ADVLOCK_WAIT_POLL, 0);
    acquire(m, 1000, 3);
    expect_done(m, ADVLOCK_FAILED, ADVLOCK_ESTANDBY, ADVLOCK_DETAIL_NONE);
}

/* ---- behind a proxy --------------------------------------------------- */

static void a_proxy_gets_the_guarded_rows(void **state)
{
    advlock_machine *m = *state;
    proxied(m);
    answer(m, ADVLOCK_RESULT_FALSE, 2);
    assert_int_equal(act(m).kind, ADVLOCK_ACTION_SLEEP);
    assert_int_equal(advlock_on_timer(m, 102), 0);
    expect_query(m, ADVLOCK_SQL_TRY_LOCK_GUARDED, key(), (int64_t)TOKEN, 0);
    answer(m, ADVLOCK_RESULT_TRUE, 103);
    expect_done(m, ADVLOCK_ACQUIRED, 0, ADVLOCK_DETAIL_NONE);
    release(m, 104);
    expect_query(m, ADVLOCK_SQL_UNLOCK_GUARDED, key(), (int64_t)TOKEN, 0);
    answer(m, ADVLOCK_RESULT_TRUE, 105);
    expect_done(m, ADVLOCK_RELEASED, 0, ADVLOCK_DETAIL_NONE);
    /* Shared mode has its guarded rows too. */
    use(m, ADVLOCK_SHARED, ADVLOCK_SESSION, ADVLOCK_WAIT_POLL, 0);
    acquire(m, 1000, 106);
    expect_query(m, ADVLOCK_SQL_TRY_LOCK_SHARED_GUARDED, key(), (int64_t)TOKEN, 0);
    answer(m, ADVLOCK_RESULT_TRUE, 107);
    release(m, 108);
    expect_query(m, ADVLOCK_SQL_UNLOCK_SHARED_GUARDED, key(), (int64_t)TOKEN, 0);
}

static void a_guarded_wait_takes_the_bound_then_the_token(void **state)
{
    advlock_machine *m = *state;
    for (int shared = 0; shared <= 1; shared++) {
        advlock_machine_init(m);
        use(m, shared ? ADVLOCK_SHARED : ADVLOCK_EXCLUSIVE, ADVLOCK_SESSION, ADVLOCK_WAIT_SERVER,
            0);
        checked(m, SERVER_PID, 0, 1);
        expect_query(m, shared ? ADVLOCK_SQL_TRY_LOCK_SHARED_GUARDED : ADVLOCK_SQL_TRY_LOCK_GUARDED,
                     key(), (int64_t)TOKEN, 0);
        answer(m, ADVLOCK_RESULT_FALSE, 1);
        advlock_sql wait = shared ? ADVLOCK_SQL_LOCK_SHARED_GUARDED : ADVLOCK_SQL_LOCK_GUARDED;
        expect_query(m, wait, key(), 999, (int64_t)TOKEN);
        assert_int_equal(advlock_sql_params(wait), 3);
        answer(m, ADVLOCK_RESULT_TRUE, 500);
        expect_done(m, ADVLOCK_ACQUIRED, 0, ADVLOCK_DETAIL_NONE);
    }
}

static void an_unknown_pid_counts_as_a_proxy(void **state)
{
    advlock_machine *m = *state;
    told(m, 0, TOKEN);
    acquire(m, 1000, 0);
    session_row(m, 0, 0, 1, 1);
    expect_query(m, ADVLOCK_SQL_TRY_LOCK_GUARDED, key(), (int64_t)TOKEN, 0);
    /* And so does a server that says 0, whatever the client was told. */
    assert_int_equal(advlock_cancel(m, 2), 0);
    answer(m, ADVLOCK_RESULT_FALSE, 3);
    told(m, CLIENT_PID, TOKEN);
    acquire(m, 1000, 4);
    session_row(m, 0, 0, 1, 5);
    expect_query(m, ADVLOCK_SQL_TRY_LOCK_GUARDED, key(), (int64_t)TOKEN, 0);
}

/* A transaction-scoped acquire behind a proxy, its try busy, its wait
 * granted: the guarded rows, the token last. */
static void xact_try_then_wait(advlock_machine *m, advlock_mode mode, int64_t now)
{
    int shared = mode == ADVLOCK_SHARED;
    use(m, mode, ADVLOCK_TRANSACTION, ADVLOCK_WAIT_SERVER, 0);
    acquire(m, 1000, now);
    if (act(m).sql == ADVLOCK_SQL_SESSION) { /* a machine that has not checked yet */
        expect_session_query(m, 0);          /* claims nothing */
        session_row(m, SERVER_PID, 0, 1, now);
    }
    expect_query(
        m, shared ? ADVLOCK_SQL_TRY_XACT_LOCK_SHARED_GUARDED : ADVLOCK_SQL_TRY_XACT_LOCK_GUARDED,
        key(), (int64_t)TOKEN, 0);
    answer(m, ADVLOCK_RESULT_FALSE, now + 1);
    expect_query(m, shared ? ADVLOCK_SQL_XACT_LOCK_SHARED_GUARDED : ADVLOCK_SQL_XACT_LOCK_GUARDED,
                 key(), 999, (int64_t)TOKEN);
    answer(m, ADVLOCK_RESULT_TRUE, now + 2);
    expect_done(m, ADVLOCK_ACQUIRED, 0, ADVLOCK_DETAIL_NONE);
}

static void transaction_scope_is_guarded_behind_a_proxy(void **state)
{
    advlock_machine *m = *state;
    use(m, ADVLOCK_EXCLUSIVE, ADVLOCK_TRANSACTION, ADVLOCK_WAIT_SERVER, 0);
    /* A release needs no statement, so no check either. */
    told(m, CLIENT_PID, TOKEN);
    release(m, 0);
    expect_done(m, ADVLOCK_ENDS_WITH_TRANSACTION, 0, ADVLOCK_DETAIL_NONE);
    /* Behind a proxy, even unclaimed (no claim needed). */
    xact_try_then_wait(m, ADVLOCK_EXCLUSIVE, 1);
    xact_try_then_wait(m, ADVLOCK_SHARED, 5);
}

/* A transaction-scoped acquire started and its session checked (unclaimed
 * behind a proxy, as a transaction needs no claim). */
static void xact_checked(advlock_machine *m, advlock_wait wait, int64_t timeout, int server_pid)
{
    use(m, ADVLOCK_EXCLUSIVE, ADVLOCK_TRANSACTION, wait, 0);
    told(m, CLIENT_PID, TOKEN);
    acquire(m, timeout, 0);
    expect_session_query(m, 0); /* claims nothing */
    session_row(m, server_pid, 0, server_pid == CLIENT_PID, 0);
}

/* Transaction-scoped operations claim nothing; the first session-scoped one
 * behind the proxy then asks for the claim (directly connected, no need). */
static void a_session_lock_after_transaction_locks_claims(void **state)
{
    advlock_machine *m = *state;
    told(m, CLIENT_PID, TOKEN);
    xact_try_then_wait(m, ADVLOCK_EXCLUSIVE, 0);
    use(m, ADVLOCK_EXCLUSIVE, ADVLOCK_SESSION, ADVLOCK_WAIT_POLL, 0);
    acquire(m, 1000, 10);
    expect_session_query(m, TOKEN);
    session_row(m, SERVER_PID, 0, 1, 11);
    expect_query(m, ADVLOCK_SQL_TRY_LOCK_GUARDED, key(), (int64_t)TOKEN, 0);
    answer(m, ADVLOCK_RESULT_TRUE, 12);
    expect_done(m, ADVLOCK_ACQUIRED, 0, ADVLOCK_DETAIL_NONE);
    /* Asked once: the transaction rows now find the session their own. */
    xact_try_then_wait(m, ADVLOCK_SHARED, 20);
}

/* Directly connected, the transaction rows stay plain (no pg_locks read). */
static void transaction_scope_direct_is_plain(void **state)
{
    advlock_machine *m = *state;
    xact_checked(m, ADVLOCK_WAIT_POLL, 1000, CLIENT_PID);
    expect_query(m, ADVLOCK_SQL_TRY_XACT_LOCK, key(), 0, 0);
    answer(m, ADVLOCK_RESULT_NULL, 2);
    expect_done(m, ADVLOCK_FAILED, ADVLOCK_ENULL, ADVLOCK_DETAIL_NONE);
}

/* A guarded transaction row's NULL: another client holds the key at session
 * level on the server session the statement reached. Busy, as false: back
 * off and poll (never a server-side wait on that session), time out with
 * the reference's words, or end CANCELLED. */
static void a_guarded_transaction_null_is_busy(void **state)
{
    advlock_machine *m = *state;
    xact_checked(m, ADVLOCK_WAIT_SERVER, 250, SERVER_PID);
    expect_query(m, ADVLOCK_SQL_TRY_XACT_LOCK_GUARDED, key(), (int64_t)TOKEN, 0);
    answer(m, ADVLOCK_RESULT_NULL, 10);
    assert_int_equal(act(m).kind, ADVLOCK_ACTION_SLEEP);
    assert_int_equal(act(m).sleep_ms, 100);
    assert_int_equal(advlock_on_timer(m, 110), 0);
    expect_query(m, ADVLOCK_SQL_TRY_XACT_LOCK_GUARDED, key(), (int64_t)TOKEN, 0);
    /* Free now: false, so the server-side wait follows. */
    answer(m, ADVLOCK_RESULT_FALSE, 120);
    expect_query(m, ADVLOCK_SQL_XACT_LOCK_GUARDED, key(), 130, (int64_t)TOKEN);
    /* The wait reached a holding session too (the pooler's choice): busy. */
    answer(m, ADVLOCK_RESULT_NULL, 130);
    assert_int_equal(act(m).kind, ADVLOCK_ACTION_SLEEP);
    assert_int_equal(advlock_on_timer(m, 330), 0);
    expect_query(m, ADVLOCK_SQL_TRY_XACT_LOCK_GUARDED, key(), (int64_t)TOKEN, 0);
    answer(m, ADVLOCK_RESULT_NULL, 331);
    expect_done(m, ADVLOCK_TIMED_OUT, 0, ADVLOCK_DETAIL_NONE);
    assert_int_equal(report_of(m)->attempts, 4);
    assert_string_equal(said(m, NULL), "Could not acquire migration lock for 'jobs' within 0.25s.");
    /* Cancelled while the try is out: its NULL ends CANCELLED. */
    acquire(m, 1000, 400);
    assert_int_equal(advlock_cancel(m, 401), 0);
    answer(m, ADVLOCK_RESULT_NULL, 402);
    expect_done(m, ADVLOCK_CANCELLED, 0, ADVLOCK_DETAIL_NONE);
}

static void a_refused_claim_fails_without_sending_anything(void **state)
{
    advlock_machine *m = *state;
    checked(m, SERVER_PID, 0, 0);
    expect_done(m, ADVLOCK_FAILED, ADVLOCK_ESESSION, ADVLOCK_DETAIL_NONE);
    assert_int_equal(report_of(m)->sql, ADVLOCK_SQL_SESSION);
    assert_int_equal(report_of(m)->attempts, 0);
    assert_string_equal(said(m, NULL),
                        "the server session check for 'jobs' failed: " CLAIMED_WORDS);
    assert_string_equal(advlock_strerror(ADVLOCK_ESESSION), ESESSION_WORDS);
    /* Known now: refused at the start. */
    acquire(m, 1000, 2);
    expect_done(m, ADVLOCK_FAILED, ADVLOCK_ESESSION, ADVLOCK_DETAIL_NONE);
    /* Direct, the claim does not matter: another lock user of this very
     * session (holding a lock of its own) refuses it, and that is fine. */
    told(m, CLIENT_PID, OTHER_TOKEN);
    acquire(m, 1000, 3);
    session_row(m, CLIENT_PID, 0, 0, 4);
    expect_query(m, ADVLOCK_SQL_TRY_LOCK, key(), 0, 0);
}

/* The bug review found: a release refused at the check said nothing of the
 * lock it did not release. */
static void a_refused_release_says_the_lock_may_still_be_held(void **state)
{
    advlock_machine *m = *state;
    for (int shared = 0; shared <= 1; shared++) {
        advlock_machine_init(m);
        use(m, shared ? ADVLOCK_SHARED : ADVLOCK_EXCLUSIVE, ADVLOCK_SESSION, ADVLOCK_WAIT_POLL, 0);
        told(m, CLIENT_PID, TOKEN);
        release(m, 0);
        expect_session_query(m, TOKEN);
        session_row(m, SERVER_PID, 0, 0, 1);
        expect_done(m, ADVLOCK_FAILED, ADVLOCK_ESESSION, ADVLOCK_DETAIL_NONE);
        assert_int_equal(report_of(m)->sql,
                         shared ? ADVLOCK_SQL_UNLOCK_SHARED_GUARDED : ADVLOCK_SQL_UNLOCK_GUARDED);
        assert_int_equal(report_of(m)->elapsed_ms, 1);
        const char *expected = shared
                                   ? "pg_advisory_unlock_shared for 'jobs' failed: " ESESSION_WORDS
                                     " (the lock may still be held on another server session)"
                                   : "pg_advisory_unlock for 'jobs' failed: " ESESSION_WORDS
                                     " (the lock may still be held on another server session)";
        assert_string_equal(said(m, NULL), expected);
        /* Known now: refused at the start, saying the same. */
        release(m, 2);
        expect_done(m, ADVLOCK_FAILED, ADVLOCK_ESESSION, ADVLOCK_DETAIL_NONE);
        assert_string_equal(said(m, NULL), expected);
    }
}

/* ---- a guarded statement's NULL: it reached another server session ----- */

static void a_guarded_try_answering_null_fails_esession(void **state)
{
    advlock_machine *m = *state;
    proxied(m);
    answer(m, ADVLOCK_RESULT_NULL, 2);
    expect_done(m, ADVLOCK_FAILED, ADVLOCK_ESESSION, ADVLOCK_DETAIL_NONE);
    assert_int_equal(report_of(m)->sql, ADVLOCK_SQL_TRY_LOCK_GUARDED);
    assert_string_equal(said(m, NULL), "pg_try_advisory_lock for 'jobs' failed: " ESESSION_WORDS);
    /* With a cancel pending too: the connection is no place for session
     * locks, which matters more than the cancel. */
    acquire(m, 1000, 3);
    assert_int_equal(advlock_cancel(m, 4), 0);
    answer(m, ADVLOCK_RESULT_NULL, 5);
    expect_done(m, ADVLOCK_FAILED, ADVLOCK_ESESSION, ADVLOCK_DETAIL_NONE);
}

static void a_guarded_wait_answering_null_fails_esession(void **state)
{
    advlock_machine *m = *state;
    use(m, ADVLOCK_EXCLUSIVE, ADVLOCK_SESSION, ADVLOCK_WAIT_SERVER, 0);
    proxied(m);
    answer(m, ADVLOCK_RESULT_FALSE, 2);
    expect_query(m, ADVLOCK_SQL_LOCK_GUARDED, key(), 998, (int64_t)TOKEN);
    answer(m, ADVLOCK_RESULT_NULL, 3); /* a void column's NULL */
    expect_done(m, ADVLOCK_FAILED, ADVLOCK_ESESSION, ADVLOCK_DETAIL_NONE);
    assert_int_equal(report_of(m)->sql, ADVLOCK_SQL_LOCK_GUARDED);
    assert_string_equal(said(m, NULL), "pg_advisory_lock for 'jobs' failed: " ESESSION_WORDS);
}

/* An undo that lands elsewhere leaves the grant in doubt, and says why it
 * ran: after a cancel, after the deadline, after a wait's error. */
static void a_guarded_undo_answering_null_leaves_the_lock_in_doubt(void **state)
{
    advlock_machine *m = *state;
    /* After a cancel. */
    proxied(m);
    assert_int_equal(advlock_cancel(m, 2), 0);
    answer(m, ADVLOCK_RESULT_TRUE, 3);
    expect_query(m, ADVLOCK_SQL_UNLOCK_GUARDED, key(), (int64_t)TOKEN, 0);
    answer(m, ADVLOCK_RESULT_NULL, 4);
    expect_done(m, ADVLOCK_FAILED, ADVLOCK_ESESSION, ADVLOCK_DETAIL_UNDO_CANCELLED);
    assert_string_equal(said(m, NULL),
                        "pg_advisory_unlock for 'jobs' failed: " ESESSION_WORDS
                        " (undoing a cancelled acquire: the lock may still be held)");
    /* After the deadline, a wait granted past its grace. */
    use(m, ADVLOCK_EXCLUSIVE, ADVLOCK_SESSION, ADVLOCK_WAIT_SERVER, 0);
    acquire(m, 1000, 10);
    answer(m, ADVLOCK_RESULT_FALSE, 11);
    expect_query(m, ADVLOCK_SQL_LOCK_GUARDED, key(), 999, (int64_t)TOKEN);
    assert_int_equal(advlock_on_timer(m, 10 + 1000 + ADVLOCK_WAIT_GRACE_MS), 0);
    assert_int_equal(act(m).kind, ADVLOCK_ACTION_CANCEL_QUERY);
    assert_int_equal(act(m).param3, (int64_t)TOKEN);
    assert_int_equal(advlock_on_cancel_sent(m, 1511), 0);
    answer(m, ADVLOCK_RESULT_TRUE, 1512);
    expect_query(m, ADVLOCK_SQL_UNLOCK_GUARDED, key(), (int64_t)TOKEN, 0);
    answer(m, ADVLOCK_RESULT_NULL, 1513);
    expect_done(m, ADVLOCK_FAILED, ADVLOCK_ESESSION, ADVLOCK_DETAIL_UNDO_AFTER_DEADLINE);
    /* After the wait's own lock_timeout (55P03), which may hide a grant. */
    acquire(m, 1000, 2000);
    answer(m, ADVLOCK_RESULT_FALSE, 2001);
    assert_int_equal(
        advlock_on_result(m, ADVLOCK_RESULT_SERVER_ERROR, "55P03", "lock timeout", 3000), 0);
    expect_query(m, ADVLOCK_SQL_UNLOCK_GUARDED, key(), (int64_t)TOKEN, 0);
    answer(m, ADVLOCK_RESULT_NULL, 3001);
    expect_done(m, ADVLOCK_FAILED, ADVLOCK_ESESSION, ADVLOCK_DETAIL_UNDO_AFTER_57014);
    assert_string_equal(said(m, NULL),
                        "pg_advisory_unlock for 'jobs' failed: " ESESSION_WORDS
                        " (giving back a grant the cancelled statement may have made: the lock "
                        "may still be held)");
}

/* A guarded release that reached another server session tries again on the
 * backoff schedule (the claimed one may be busy with another client's
 * transaction), and fails only at its bound. */
static void a_guarded_release_answering_null_may_leave_the_lock(void **state)
{
    advlock_machine *m = *state;
    proxied(m);
    answer(m, ADVLOCK_RESULT_TRUE, 2);
    release(m, 3);
    int64_t now = 3, sleeps = 0;
    for (;;) {
        expect_query(m, ADVLOCK_SQL_UNLOCK_GUARDED, key(), (int64_t)TOKEN, 0);
        answer(m, ADVLOCK_RESULT_NULL, now);
        if (act(m).kind != ADVLOCK_ACTION_SLEEP)
            break;
        /* 100, 200, 400, 800, then 1000 ms, the last cut to the bound. */
        int64_t left = 3 + ADVLOCK_GUARD_RETRY_MS - now;
        int64_t step = sleeps < 4 ? 100 << sleeps : 1000;
        assert_int_equal(act(m).sleep_ms, step < left ? step : left);
        now = act(m).wake_at_ms;
        assert_int_equal(advlock_on_timer(m, now), 0);
        sleeps++;
    }
    assert_int_equal(now - 3, ADVLOCK_GUARD_RETRY_MS);
    expect_done(m, ADVLOCK_FAILED, ADVLOCK_ESESSION, ADVLOCK_DETAIL_NONE);
    assert_int_equal(report_of(m)->sql, ADVLOCK_SQL_UNLOCK_GUARDED);
    assert_string_equal(said(m, NULL), "pg_advisory_unlock for 'jobs' failed: " ESESSION_WORDS
                                       " (the lock may still be held on another server session)");
    /* Reached at the second try: released. */
    release(m, now + 1);
    answer(m, ADVLOCK_RESULT_NULL, now + 2);
    assert_int_equal(advlock_on_timer(m, now + 102), 0);
    expect_query(m, ADVLOCK_SQL_UNLOCK_GUARDED, key(), (int64_t)TOKEN, 0);
    answer(m, ADVLOCK_RESULT_TRUE, now + 103);
    expect_done(m, ADVLOCK_RELEASED, 0, ADVLOCK_DETAIL_NONE);
    /* A cancel while it sleeps ends it as the bound would. */
    release(m, now + 104);
    answer(m, ADVLOCK_RESULT_NULL, now + 105);
    assert_int_equal(advlock_cancel(m, now + 106), 0);
    expect_done(m, ADVLOCK_FAILED, ADVLOCK_ESESSION, ADVLOCK_DETAIL_NONE);
    /* false is the claimed session's word: it holds none. */
    release(m, now + 107);
    answer(m, ADVLOCK_RESULT_FALSE, now + 108);
    expect_done(m, ADVLOCK_NOT_HELD, 0, ADVLOCK_DETAIL_NONE);
}

/* ---- the session query's own fate ------------------------------------- */

static void a_cancel_during_the_session_query(void **state)
{
    advlock_machine *m = *state;
    told(m, CLIENT_PID, TOKEN);
    acquire(m, 1000, 0);
    assert_int_equal(advlock_cancel(m, 1), 0);
    /* A quick query: no cancel request, the answer is awaited. */
    expect_session_query(m, TOKEN);
    assert_int_equal(advlock_cancel(m, 2), 0);
    session_row(m, SERVER_PID, 0, 1, 3);
    expect_done(m, ADVLOCK_CANCELLED, 0, ADVLOCK_DETAIL_NONE);
    assert_int_equal(report_of(m)->attempts, 0);
    /* What the row said is kept: the next acquire goes straight to the
     * guarded try. */
    acquire(m, 1000, 4);
    expect_query(m, ADVLOCK_SQL_TRY_LOCK_GUARDED, key(), (int64_t)TOKEN, 0);
    /* An error beats the pending cancel; a release cannot be cancelled. */
    assert_int_equal(advlock_cancel(m, 5), 0);
    answer(m, ADVLOCK_RESULT_FALSE, 6);
    told(m, CLIENT_PID, OTHER_TOKEN);
    acquire(m, 1000, 7);
    assert_int_equal(advlock_cancel(m, 8), 0);
    answer(m, ADVLOCK_RESULT_SERVER_ERROR, 9);
    expect_done(m, ADVLOCK_FAILED, ADVLOCK_ESERVER, ADVLOCK_DETAIL_NONE);
    release(m, 10);
    expect_session_query(m, OTHER_TOKEN);
    advlock_machine before = *m;
    assert_int_equal(advlock_cancel(m, 11), ADVLOCK_EMISUSE);
    assert_memory_equal(&before, m, sizeof before);
}

static void a_failed_session_query_fails_and_is_asked_again(void **state)
{
    advlock_machine *m = *state;
    told(m, CLIENT_PID, TOKEN);
    acquire(m, 1000, 0);
    assert_int_equal(
        advlock_on_result(m, ADVLOCK_RESULT_SERVER_ERROR, "42501", "permission denied", 1), 0);
    expect_done(m, ADVLOCK_FAILED, ADVLOCK_ESERVER, ADVLOCK_DETAIL_NONE);
    assert_int_equal(report_of(m)->sql, ADVLOCK_SQL_SESSION);
    assert_string_equal(report_of(m)->sqlstate, "42501");
    assert_string_equal(said(m, "permission denied"),
                        "the server session check for 'jobs' failed with SQLSTATE 42501: "
                        "permission denied");
    /* Nothing was learnt: the next operation, a release, asks again. */
    release(m, 2);
    expect_session_query(m, TOKEN);
    answer(m, ADVLOCK_RESULT_CONNECTION_LOST, 3);
    expect_done(m, ADVLOCK_FAILED, ADVLOCK_ECONNLOST, ADVLOCK_DETAIL_NONE);
    assert_string_equal(said(m, NULL),
                        "the server session check for 'jobs' failed: connection lost");
    acquire(m, 1000, 4);
    expect_session_query(m, TOKEN);
}

static void the_session_row_before_a_release(void **state)
{
    advlock_machine *m = *state;
    struct {
        int pid, in_recovery;
        advlock_sql sql;
        int64_t p2;
    } cases[] = {
        {CLIENT_PID, 0, ADVLOCK_SQL_UNLOCK, 0},
        {CLIENT_PID, 1, ADVLOCK_SQL_UNLOCK, 0}, /* a standby: releases allowed */
        {SERVER_PID, 0, ADVLOCK_SQL_UNLOCK_GUARDED, (int64_t)TOKEN},
        {SERVER_PID, 1, ADVLOCK_SQL_UNLOCK_GUARDED, (int64_t)TOKEN},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        advlock_machine_init(m);
        told(m, CLIENT_PID, TOKEN);
        release(m, 0);
        expect_session_query(m, TOKEN);
        session_row(m, cases[i].pid, cases[i].in_recovery, 1, 1);
        expect_query(m, cases[i].sql, key(), cases[i].p2, 0);
        answer(m, ADVLOCK_RESULT_TRUE, 2);
        expect_done(m, ADVLOCK_RELEASED, 0, ADVLOCK_DETAIL_NONE);
    }
}

static void a_zero_timeout_still_tries_once_after_the_check(void **state)
{
    advlock_machine *m = *state;
    told(m, CLIENT_PID, TOKEN);
    acquire(m, 0, 0);
    session_row(m, SERVER_PID, 0, 1, 50); /* a slow check: past the timeout */
    expect_query(m, ADVLOCK_SQL_TRY_LOCK_GUARDED, key(), (int64_t)TOKEN, 0);
    answer(m, ADVLOCK_RESULT_FALSE, 51);
    expect_done(m, ADVLOCK_TIMED_OUT, 0, ADVLOCK_DETAIL_NONE);
    assert_int_equal(report_of(m)->attempts, 1);
    assert_int_equal(report_of(m)->elapsed_ms, 51);
}

/* ---- verifying a held lock (advlock_start_verify_key) -------------------- */

#define NO_LONGER_HELD "Lock 'jobs' is no longer held by this session."
#define CANNOT_TELL                                          \
    "the held-lock check for 'jobs' failed: " ESESSION_WORDS \
    " (this connection cannot tell whether it still holds the lock)"

static void verify(advlock_machine *m, int64_t now)
{
    assert_int_equal(advlock_start_verify_key(m, key(), now), 0);
}

/* A verify whose statement answers result a millisecond later. */
static void verify_answered(advlock_machine *m, advlock_result result, advlock_outcome outcome,
                            int failure, int64_t now)
{
    verify(m, now);
    answer(m, result, now + 1);
    expect_done(m, outcome, failure, ADVLOCK_DETAIL_NONE);
}

/* Acquired behind a proxy on the claimed session; its guarded try answered. */
static void acquired_behind_proxy(advlock_machine *m)
{
    proxied(m);
    answer(m, ADVLOCK_RESULT_TRUE, 2);
    expect_done(m, ADVLOCK_ACQUIRED, 0, ADVLOCK_DETAIL_NONE);
}

static void a_verify_asks_pg_locks_in_the_mode(void **state)
{
    advlock_machine *m = *state;
    for (int shared = 0; shared <= 1; shared++) {
        advlock_machine_init(m);
        use(m, shared ? ADVLOCK_SHARED : ADVLOCK_EXCLUSIVE, ADVLOCK_SESSION, ADVLOCK_WAIT_POLL, 0);
        /* Never told a session: the plain row at once. */
        verify(m, 10);
        advlock_sql held = shared ? ADVLOCK_SQL_HELD_SHARED : ADVLOCK_SQL_HELD;
        expect_query(m, held, key(), 0, 0);
        answer(m, ADVLOCK_RESULT_TRUE, 12);
        expect_done(m, ADVLOCK_HELD, 0, ADVLOCK_DETAIL_NONE);
        assert_int_equal(report_of(m)->sql, held);
        assert_int_equal(report_of(m)->key, key());
        assert_int_equal(report_of(m)->attempts, 0); /* no lock statement */
        assert_int_equal(report_of(m)->elapsed_ms, 2);
        assert_string_equal(said(m, NULL), "");
        verify_answered(m, ADVLOCK_RESULT_FALSE, ADVLOCK_NOT_HELD, 0, 13);
        assert_string_equal(said(m, NULL), NO_LONGER_HELD);
    }
}

static void a_verify_is_checked_like_any_first_statement(void **state)
{
    advlock_machine *m = *state;
    told(m, CLIENT_PID, TOKEN);
    verify(m, 0);
    expect_session_query(m, TOKEN);
    /* A standby refuses acquires only: its own locks can be verified. */
    session_row(m, CLIENT_PID, 1, 1, 1);
    expect_query(m, ADVLOCK_SQL_HELD, key(), 0, 0);
    answer(m, ADVLOCK_RESULT_TRUE, 2);
    expect_done(m, ADVLOCK_HELD, 0, ADVLOCK_DETAIL_NONE);
    /* Checked once: the next verify sends its row at once. */
    verify(m, 3);
    expect_query(m, ADVLOCK_SQL_HELD, key(), 0, 0);
}

static void behind_a_proxy_the_verify_is_guarded(void **state)
{
    advlock_machine *m = *state;
    acquired_behind_proxy(m);
    verify(m, 3);
    expect_query(m, ADVLOCK_SQL_HELD_GUARDED, key(), (int64_t)TOKEN, 0);
    answer(m, ADVLOCK_RESULT_TRUE, 4);
    expect_done(m, ADVLOCK_HELD, 0, ADVLOCK_DETAIL_NONE);
    /* The claimed server session is busy (or gone): the guard's NULL cannot
     * say whether the lock is held, so the verify asks again after a sleep,
     * and reaches it ... */
    verify(m, 5);
    answer(m, ADVLOCK_RESULT_NULL, 5);
    assert_int_equal(act(m).kind, ADVLOCK_ACTION_SLEEP);
    assert_int_equal(act(m).sleep_ms, 100);
    assert_int_equal(advlock_on_timer(m, 105), 0);
    expect_query(m, ADVLOCK_SQL_HELD_GUARDED, key(), (int64_t)TOKEN, 0);
    answer(m, ADVLOCK_RESULT_TRUE, 106);
    expect_done(m, ADVLOCK_HELD, 0, ADVLOCK_DETAIL_NONE);
    /* ... or not within the bound: cannot tell. */
    verify(m, 200);
    int64_t now = 200;
    while (answer(m, ADVLOCK_RESULT_NULL, now), act(m).kind == ADVLOCK_ACTION_SLEEP) {
        now = act(m).wake_at_ms;
        assert_int_equal(advlock_on_timer(m, now), 0);
    }
    assert_int_equal(now - 200, ADVLOCK_GUARD_RETRY_MS);
    expect_done(m, ADVLOCK_FAILED, ADVLOCK_ESESSION, ADVLOCK_DETAIL_NONE);
    assert_int_equal(report_of(m)->sql, ADVLOCK_SQL_HELD_GUARDED);
    assert_string_equal(said(m, NULL), CANNOT_TELL);
    /* On the claimed session, a lock no longer there. */
    verify_answered(m, ADVLOCK_RESULT_FALSE, ADVLOCK_NOT_HELD, 0, 7);
    assert_string_equal(said(m, NULL), NO_LONGER_HELD);
}

static void a_verify_on_a_refused_claim_sends_nothing(void **state)
{
    advlock_machine *m = *state;
    use(m, ADVLOCK_SHARED, ADVLOCK_SESSION, ADVLOCK_WAIT_POLL, 0);
    told(m, CLIENT_PID, TOKEN);
    verify(m, 0);
    expect_session_query(m, TOKEN);
    session_row(m, SERVER_PID, 0, 0, 1);
    expect_done(m, ADVLOCK_FAILED, ADVLOCK_ESESSION, ADVLOCK_DETAIL_NONE);
    assert_int_equal(report_of(m)->sql, ADVLOCK_SQL_HELD_SHARED_GUARDED);
    assert_string_equal(said(m, NULL), CANNOT_TELL);
    verify(m, 2); /* known now: at once */
    expect_done(m, ADVLOCK_FAILED, ADVLOCK_ESESSION, ADVLOCK_DETAIL_NONE);
}

/* A proxy keeps a transaction on one server session: the plain row. */
static void a_transaction_lock_is_verified_unguarded(void **state)
{
    advlock_machine *m = *state;
    use(m, ADVLOCK_EXCLUSIVE, ADVLOCK_TRANSACTION, ADVLOCK_WAIT_POLL, 0);
    told(m, CLIENT_PID, TOKEN);
    verify(m, 0);
    session_row(m, SERVER_PID, 0, 0, 1);
    expect_query(m, ADVLOCK_SQL_HELD, key(), 0, 0);
    answer(m, ADVLOCK_RESULT_TRUE, 2);
    expect_done(m, ADVLOCK_HELD, 0, ADVLOCK_DETAIL_NONE);
}

static void a_verify_fails_as_statements_do(void **state)
{
    advlock_machine *m = *state;
    verify(m, 0);
    assert_int_equal(advlock_on_result(m, ADVLOCK_RESULT_SERVER_ERROR, "57P01",
                                       "terminating connection due to administrator command", 1),
                     0);
    expect_done(m, ADVLOCK_FAILED, ADVLOCK_ESERVER, ADVLOCK_DETAIL_NONE);
    assert_string_equal(report_of(m)->sqlstate, "57P01");
    assert_string_equal(said(m, "terminating connection due to administrator command"),
                        "the held-lock check for 'jobs' failed with SQLSTATE 57P01: terminating "
                        "connection due to administrator command");
    verify_answered(m, ADVLOCK_RESULT_CONNECTION_LOST, ADVLOCK_FAILED, ADVLOCK_ECONNLOST, 2);
    assert_string_equal(said(m, NULL), "the held-lock check for 'jobs' failed: connection lost");
    /* The plain row's EXISTS is never NULL: a NULL is the driver's fault. */
    verify_answered(m, ADVLOCK_RESULT_NULL, ADVLOCK_FAILED, ADVLOCK_ENULL, 4);
    assert_string_equal(said(m, NULL),
                        "the held-lock check for 'jobs' returned null (expected boolean).");
}

static void a_verify_refuses_bad_calls_and_cannot_be_cancelled(void **state)
{
    advlock_machine *m = *state;
    assert_int_equal(advlock_start_verify_key(NULL, 1, 0), ADVLOCK_EINVAL);
    verify(m, 0);
    advlock_machine before = *m;
    assert_int_equal(advlock_start_verify_key(m, key(), 1), ADVLOCK_EMISUSE);
    assert_int_equal(advlock_cancel(m, 1), ADVLOCK_EMISUSE);
    assert_memory_equal(&before, m, sizeof before);
    assert_int_equal(advlock_on_timer(m, INT64_MAX), 0); /* no deadline */
    expect_query(m, ADVLOCK_SQL_HELD, key(), 0, 0);
    answer(m, ADVLOCK_RESULT_TRUE, 2);
    expect_done(m, ADVLOCK_HELD, 0, ADVLOCK_DETAIL_NONE);
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(without_set_session_the_rows_are_plain),
        T(set_session_refuses_bad_calls_and_changes_nothing),
        T(the_session_is_checked_once_per_connection),
        T(the_checked_value_carries_to_the_next_machine),
        T(changed_values_check_again),
        T(the_session_row_comes_with_on_session_only),
        T(the_machine_stays_small_and_copyable),
        cmocka_unit_test(the_session_statement_fits_pg_stat_activity),
        T(a_standby_refuses_acquires),
        T(an_older_server_fails_the_check_with_the_minimum_version),
        T(allow_standby_locks_there),
        T(a_proxy_gets_the_guarded_rows),
        T(a_guarded_wait_takes_the_bound_then_the_token),
        T(an_unknown_pid_counts_as_a_proxy),
        T(transaction_scope_is_guarded_behind_a_proxy),
        T(transaction_scope_direct_is_plain),
        T(a_session_lock_after_transaction_locks_claims),
        T(a_guarded_transaction_null_is_busy),
        T(a_refused_claim_fails_without_sending_anything),
        T(a_refused_release_says_the_lock_may_still_be_held),
        T(a_guarded_try_answering_null_fails_esession),
        T(a_guarded_wait_answering_null_fails_esession),
        T(a_guarded_undo_answering_null_leaves_the_lock_in_doubt),
        T(a_guarded_release_answering_null_may_leave_the_lock),
        T(a_cancel_during_the_session_query),
        T(a_failed_session_query_fails_and_is_asked_again),
        T(the_session_row_before_a_release),
        T(a_zero_timeout_still_tries_once_after_the_check),
        T(a_verify_asks_pg_locks_in_the_mode),
        T(a_verify_is_checked_like_any_first_statement),
        T(behind_a_proxy_the_verify_is_guarded),
        T(a_verify_on_a_refused_claim_sends_nothing),
        T(a_transaction_lock_is_verified_unguarded),
        T(a_verify_fails_as_statements_do),
        T(a_verify_refuses_bad_calls_and_cannot_be_cancelled),
    };
    return cmocka_run_group_tests_name("session", tests, NULL, NULL);
}
