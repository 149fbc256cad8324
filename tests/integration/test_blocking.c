/*
 * The blocking adapter against a real PostgreSQL: what the server sees,
 * mutual exclusion and the reference's timeout, release and its warning,
 * re-entrancy, terminated sessions, prepared statements that vanish, open
 * transactions, and misuse.
 */
#include "pg_test.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

typedef struct fixture {
    pgt_lock lock; /* the key, and the observer */
    PGconn *a, *b;
    advlock_pq sa, sb;
} fixture;

static int setup(void **state)
{
    static fixture f;
    memset(&f, 0, sizeof f);
    f.a = pgt_connect();
    f.b = pgt_connect();
    assert_int_equal(advlock_pq_init(&f.sa, f.a), 0);
    assert_int_equal(advlock_pq_init(&f.sb, f.b), 0);
    pgt_lock_begin(&f.lock, "blocking", NULL);
    *state = &f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    PQfinish(f->a);
    PQfinish(f->b);
    pgt_lock_end(&f->lock);
    return 0;
}

static int acquire(advlock_pq *s, const char *key, int64_t timeout_ms, advlock_pq_report *r)
{
    return advlock_pq_acquire(s, key, strlen(key), timeout_ms, r);
}

static int release(advlock_pq *s, const char *key, advlock_pq_report *r)
{
    return advlock_pq_release(s, key, strlen(key), r);
}

static void expect_outcome(const advlock_pq_report *r, advlock_outcome outcome)
{
    pgt_expect_outcome(r, outcome);
}

/* ---- what the server sees ---- */

static void test_lock_row_and_statement_text(void **state)
{
    fixture *f = *state;
    advlock_pq_report r;
    assert_int_equal(acquire(&f->sa, f->lock.key, 1000, &r), 0);
    expect_outcome(&r, ADVLOCK_ACQUIRED);
    assert_int_equal(r.lock.attempts, 1);

    pgt_expect_lock_row(f->lock.observer, f->lock.derived, f->a);
    pgt_expect_try_lock_statement(f->lock.observer, f->a);

    assert_int_equal(release(&f->sa, f->lock.key, &r), 0);
    expect_outcome(&r, ADVLOCK_RELEASED);
    assert_int_equal(pgt_lock_count(f->lock.observer, f->lock.derived), 0);
}

/* ---- mutual exclusion ---- */

static void test_timeout_message_and_attempts(void **state)
{
    fixture *f = *state;
    advlock_pq_report r;
    assert_int_equal(acquire(&f->sa, f->lock.key, 1000, &r), 0);
    expect_outcome(&r, ADVLOCK_ACQUIRED);

    /* Tries at 0, 100, 300 and 700 ms; at 700 the timeout has passed. */
    int64_t start = advlock_pq_now_ms();
    assert_int_equal(acquire(&f->sb, f->lock.key, 700, &r), 0);
    int64_t took = advlock_pq_now_ms() - start;
    expect_outcome(&r, ADVLOCK_TIMED_OUT);
    assert_int_equal(r.lock.failure, 0);
    assert_int_equal(r.lock.attempts, 4);
    assert_true(took >= 700);
    char expected[256];
    snprintf(expected, sizeof expected, "Could not acquire migration lock for '%s' within 0.7s.",
             f->lock.key);
    assert_string_equal(pgt_describe(&r, f->lock.key), expected);
    assert_int_equal(pgt_lock_count(f->lock.observer, f->lock.derived), 1);

    assert_int_equal(release(&f->sa, f->lock.key, &r), 0);
    expect_outcome(&r, ADVLOCK_RELEASED);
}

typedef struct waiter {
    advlock_pq *session;
    const char *key;
    int64_t timeout_ms;
    advlock_pq_report report;
    int rc;
    int64_t done_ms;
} waiter;

static void *wait_for_lock(void *arg)
{
    waiter *w = arg;
    w->rc = acquire(w->session, w->key, w->timeout_ms, &w->report);
    w->done_ms = advlock_pq_now_ms();
    return NULL;
}

/* The sleep before attempt n (n >= 2) in the reference schedule. */
static int64_t sleep_before(uint64_t n)
{
    int64_t ms = 100;
    for (uint64_t i = 2; i < n && ms < 1000; i++)
        ms *= 2;
    return ms < 1000 ? ms : 1000;
}

static void test_waiter_acquires_on_next_attempt(void **state)
{
    fixture *f = *state;
    advlock_pq_report r;
    assert_int_equal(acquire(&f->sa, f->lock.key, 1000, &r), 0);
    expect_outcome(&r, ADVLOCK_ACQUIRED);

    waiter w = {.session = &f->sb, .key = f->lock.key, .timeout_ms = 10000};
    pthread_t thread;
    assert_int_equal(pthread_create(&thread, NULL, wait_for_lock, &w), 0);
    pgt_sleep_ms(500); /* B tried at 0, 100, 300 and sleeps until 700 */
    assert_int_equal(release(&f->sa, f->lock.key, &r), 0);
    int64_t released = advlock_pq_now_ms();
    expect_outcome(&r, ADVLOCK_RELEASED);
    assert_int_equal(pthread_join(thread, NULL), 0);

    assert_int_equal(w.rc, 0);
    expect_outcome(&w.report, ADVLOCK_ACQUIRED);
    /* The try before the last one failed, so the lock was released during
     * the last sleep: B got it on its first try after the release. */
    assert_true(w.report.lock.attempts >= 2);
    assert_true(w.done_ms - released <= sleep_before(w.report.lock.attempts) + 250);
    assert_int_equal(release(&f->sb, f->lock.key, &r), 0);
    expect_outcome(&r, ADVLOCK_RELEASED);
}

/* ---- the key: derived once, passed back ---- */

static void test_release_by_the_acquires_key(void **state)
{
    fixture *f = *state;
    advlock_pq_report r;
    assert_int_equal(acquire(&f->sa, f->lock.key, 0, &r), 0);
    expect_outcome(&r, ADVLOCK_ACQUIRED);
    assert_true(r.lock.key == f->lock.derived);

    /* The acquire's report carries the key: releasing by it unlocks the
     * same lock, without hashing the name again. */
    assert_int_equal(advlock_pq_release_key(&f->sa, r.lock.key, &r), 0);
    expect_outcome(&r, ADVLOCK_RELEASED);
    assert_true(r.lock.key == f->lock.derived);
    assert_int_equal(pgt_lock_count(f->lock.observer, f->lock.derived), 0);
    assert_int_equal(advlock_pq_release_key(&f->sa, f->lock.derived, &r), 0);
    expect_outcome(&r, ADVLOCK_NOT_HELD);
    char expected[256];
    snprintf(expected, sizeof expected, "This session held no lock '%s' to release.", f->lock.key);
    assert_string_equal(pgt_describe(&r, f->lock.key), expected);
}

static void test_acquire_by_key(void **state)
{
    fixture *f = *state;
    advlock_pq_report r;
    assert_int_equal(advlock_pq_acquire_key(&f->sa, f->lock.derived, 0, &r), 0);
    expect_outcome(&r, ADVLOCK_ACQUIRED);
    assert_true(r.lock.key == f->lock.derived);
    assert_int_equal(r.lock.attempts, 1);
    pgt_expect_lock_row(f->lock.observer, f->lock.derived, f->a);
    pgt_expect_try_lock_statement(f->lock.observer, f->a);

    /* The same lock as the name's: another session waits for it, and the
     * sentence names the lock by the name its caller knows. */
    assert_int_equal(advlock_pq_acquire_key(&f->sb, f->lock.derived, 250, &r), 0);
    expect_outcome(&r, ADVLOCK_TIMED_OUT);
    char expected[256];
    snprintf(expected, sizeof expected, "Could not acquire migration lock for '%s' within 0.25s.",
             f->lock.key);
    assert_string_equal(pgt_describe(&r, f->lock.key), expected);

    assert_int_equal(release(&f->sa, f->lock.key, &r), 0);
    expect_outcome(&r, ADVLOCK_RELEASED);
    assert_int_equal(advlock_pq_acquire_key(&f->sa, f->lock.derived, -1, &r), ADVLOCK_EINVAL);
    assert_int_equal(advlock_pq_acquire_key(NULL, f->lock.derived, 0, &r), ADVLOCK_EINVAL);
    assert_int_equal(advlock_pq_acquire_key(&f->sa, f->lock.derived, 0, NULL), ADVLOCK_EINVAL);
    assert_int_equal(advlock_pq_release_key(NULL, f->lock.derived, &r), ADVLOCK_EINVAL);
    assert_int_equal(advlock_pq_release_key(&f->sa, f->lock.derived, NULL), ADVLOCK_EINVAL);
}

/* Times out on the lock named by len bytes of name, which b holds, and
 * returns the sentence. */
static const char *timeout_sentence(fixture *f, const char *name, size_t len)
{
    advlock_pq_report held, r;
    assert_int_equal(advlock_pq_acquire(&f->sb, name, len, 0, &held), 0);
    expect_outcome(&held, ADVLOCK_ACQUIRED);
    assert_int_equal(advlock_pq_acquire(&f->sa, name, len, 0, &r), 0);
    expect_outcome(&r, ADVLOCK_TIMED_OUT);
    static char sentence[ADVLOCK_MESSAGE_MAX];
    int n = advlock_pq_describe(&r, name, len, sentence, sizeof sentence);
    assert_int_equal((size_t)n, strlen(sentence));
    assert_int_equal(advlock_pq_release_key(&f->sb, held.lock.key, &r), 0);
    expect_outcome(&r, ADVLOCK_RELEASED);
    return sentence;
}

static void test_describe_a_name_with_nul_bytes(void **state)
{
    fixture *f = *state;
    char name[200];
    int len = snprintf(name, sizeof name, "%s", f->lock.key);
    memcpy(name + len, "\0tail\0", 6); /* two NUL bytes around "tail" */
    len += 6;
    char expected[300];
    snprintf(expected, sizeof expected,
             "Could not acquire migration lock for '%s\\0tail\\0' within 0s.", f->lock.key);
    assert_string_equal(timeout_sentence(f, name, (size_t)len), expected);
}

static void test_describe_a_name_longer_than_the_echo(void **state)
{
    fixture *f = *state;
    /* "x" and two-byte characters: the 512th byte of the name is the first
     * half of one, so the echo stops one byte short, at 511. */
    char name[1 + 2 * 400];
    name[0] = 'x';
    for (int i = 0; i < 400; i++)
        memcpy(name + 1 + 2 * i, "\xD1\x8F", 2); /* я */
    char expected[ADVLOCK_MESSAGE_MAX];
    snprintf(expected, sizeof expected, "Could not acquire migration lock for '%.*s...' within 0s.",
             511, name);
    assert_true(ADVLOCK_KEY_ECHO_MAX == 512);
    assert_string_equal(timeout_sentence(f, name, sizeof name), expected);
}

/* ---- release, the server's warning, and the connection's notice hooks ---- */

static int notices_seen;
static void *notice_arg_seen;
static char notice_text[512];

static void counting_receiver(void *arg, const PGresult *res)
{
    notices_seen++;
    notice_arg_seen = arg;
    snprintf(notice_text, sizeof notice_text, "%s", PQresultErrorMessage(res));
}

static void counting_processor(void *arg, const char *message)
{
    notices_seen++;
    notice_arg_seen = arg;
    snprintf(notice_text, sizeof notice_text, "%s", message);
}

static void test_second_release_not_held_and_quiet(void **state)
{
    fixture *f = *state;
    advlock_pq_report r;
    assert_int_equal(acquire(&f->sa, f->lock.key, 1000, &r), 0);
    PQnoticeReceiver before = PQsetNoticeReceiver(f->a, NULL, NULL);

    pgt_stderr_capture capture;
    char printed[512];
    pgt_stderr_begin(&capture);
    int first = release(&f->sa, f->lock.key, &r);
    advlock_pq_report second;
    int again = release(&f->sa, f->lock.key, &second);
    pgt_stderr_end(&capture, printed, sizeof printed);

    assert_string_equal(printed, "");
    assert_int_equal(first, 0);
    expect_outcome(&r, ADVLOCK_RELEASED);
    assert_int_equal(r.notices, 0);
    assert_int_equal(again, 0);
    expect_outcome(&second, ADVLOCK_NOT_HELD);
    assert_int_equal(second.lock.failure, 0);
    assert_int_equal(second.notices, 1);
    assert_string_equal(second.notice_sqlstate, "01000");
    assert_string_equal(second.notice, "you don't own a lock of type ExclusiveLock");

    /* libpq's default receiver is back, still printing through the default
     * processor. */
    assert_ptr_equal(PQsetNoticeReceiver(f->a, NULL, NULL), before);
    pgt_stderr_begin(&capture);
    pgt_exec(f->a, "DO $$ BEGIN RAISE WARNING 'advlock-test-warning'; END $$");
    pgt_stderr_end(&capture, printed, sizeof printed);
    assert_non_null(strstr(printed, "advlock-test-warning"));
}

static void test_callers_receiver_left_in_place(void **state)
{
    fixture *f = *state;
    int mine;
    PQsetNoticeReceiver(f->a, counting_receiver, &mine);
    notices_seen = 0;
    notice_arg_seen = NULL;

    advlock_pq_report r;
    pgt_stderr_capture capture;
    char printed[512];
    pgt_stderr_begin(&capture);
    assert_int_equal(release(&f->sa, f->lock.key, &r), 0);
    pgt_stderr_end(&capture, printed, sizeof printed);

    expect_outcome(&r, ADVLOCK_NOT_HELD);
    assert_string_equal(printed, "");
    /* The caller's receiver got the warning, with its own argument; the
     * report stays empty because the adapter did not touch the hooks. */
    assert_int_equal(notices_seen, 1);
    assert_ptr_equal(notice_arg_seen, &mine);
    assert_non_null(strstr(notice_text, "you don't own a lock"));
    assert_int_equal(r.notices, 0);
    assert_ptr_equal(PQsetNoticeReceiver(f->a, NULL, NULL), counting_receiver);

    pgt_exec(f->a, "DO $$ BEGIN RAISE NOTICE 'after'; END $$");
    assert_int_equal(notices_seen, 2);
    assert_ptr_equal(notice_arg_seen, &mine);
}

/* A blocking call from an event callback (misuse: the callback must not
 * call back) is refused, and the call it interrupted still puts libpq's
 * receiver back when it ends. */
static int nested_rc;

static void call_back_in(void *user, const advlock_event *event)
{
    (void)event;
    fixture *f = user;
    advlock_pq_report nested;
    nested_rc = release(&f->sa, f->lock.key, &nested);
}

static void test_call_from_a_callback_refused_hooks_kept(void **state)
{
    fixture *f = *state;
    advlock_options o;
    advlock_options_init(&o);
    o.on_event = call_back_in;
    o.event_user = f;
    assert_int_equal(advlock_pq_set_options(&f->sa, &o), 0);
    PQnoticeReceiver before = PQsetNoticeReceiver(f->a, NULL, NULL);
    nested_rc = 0;

    advlock_pq_report r;
    assert_int_equal(release(&f->sa, f->lock.key, &r), 0);

    expect_outcome(&r, ADVLOCK_NOT_HELD);
    assert_int_equal(r.notices, 1);
    assert_int_equal(nested_rc, ADVLOCK_EMISUSE);
    assert_ptr_equal(PQsetNoticeReceiver(f->a, NULL, NULL), before);
}

static void test_callers_processor_gets_the_warning_too(void **state)
{
    fixture *f = *state;
    int mine;
    PQsetNoticeProcessor(f->a, counting_processor, &mine);
    notices_seen = 0;
    notice_arg_seen = NULL;

    advlock_pq_report r;
    assert_int_equal(release(&f->sa, f->lock.key, &r), 0);
    expect_outcome(&r, ADVLOCK_NOT_HELD);
    assert_int_equal(r.notices, 1);
    assert_int_equal(notices_seen, 1);
    assert_ptr_equal(notice_arg_seen, &mine);
    assert_non_null(strstr(notice_text, "you don't own a lock"));
    assert_ptr_equal(PQsetNoticeProcessor(f->a, NULL, NULL), counting_processor);

    pgt_exec(f->a, "DO $$ BEGIN RAISE NOTICE 'after'; END $$");
    assert_int_equal(notices_seen, 2);
    assert_ptr_equal(notice_arg_seen, &mine);
}

/* ---- re-entrancy ---- */

static void test_reentrant_holds_need_two_releases(void **state)
{
    fixture *f = *state;
    advlock_pq_report r;
    assert_int_equal(acquire(&f->sa, f->lock.key, 0, &r), 0);
    expect_outcome(&r, ADVLOCK_ACQUIRED);
    assert_int_equal(acquire(&f->sa, f->lock.key, 0, &r), 0);
    expect_outcome(&r, ADVLOCK_ACQUIRED);
    assert_int_equal(pgt_lock_count(f->lock.observer, f->lock.derived), 1);

    assert_int_equal(release(&f->sa, f->lock.key, &r), 0);
    expect_outcome(&r, ADVLOCK_RELEASED);
    assert_int_equal(acquire(&f->sb, f->lock.key, 0, &r), 0);
    expect_outcome(&r, ADVLOCK_TIMED_OUT); /* one hold left */

    assert_int_equal(release(&f->sa, f->lock.key, &r), 0);
    expect_outcome(&r, ADVLOCK_RELEASED);
    assert_int_equal(pgt_lock_count(f->lock.observer, f->lock.derived), 0);
    assert_int_equal(release(&f->sa, f->lock.key, &r), 0);
    expect_outcome(&r, ADVLOCK_NOT_HELD);

    assert_int_equal(acquire(&f->sb, f->lock.key, 0, &r), 0);
    expect_outcome(&r, ADVLOCK_ACQUIRED);
    assert_int_equal(release(&f->sb, f->lock.key, &r), 0);
}

/* ---- terminated sessions ---- */

static void expect_connection_lost(const advlock_pq_report *r, int rc, const char *key,
                                   const char *function)
{
    assert_int_equal(rc, 0);
    pgt_expect_connection_lost(r, key, function);
}

static void test_terminated_while_holding(void **state)
{
    fixture *f = *state;
    advlock_pq_report r;
    assert_int_equal(acquire(&f->sa, f->lock.key, 0, &r), 0);
    expect_outcome(&r, ADVLOCK_ACQUIRED);
    pgt_terminate(f->lock.observer, PQbackendPID(f->a));
    assert_int_equal(pgt_lock_count(f->lock.observer, f->lock.derived), 0);

    int rc = release(&f->sa, f->lock.key, &r);
    expect_connection_lost(&r, rc, f->lock.key, "pg_advisory_unlock for '");

    /* The connection stays dead: the next call fails at once, politely. */
    rc = acquire(&f->sa, f->lock.key, 5000, &r);
    assert_int_equal(rc, 0);
    expect_outcome(&r, ADVLOCK_FAILED);
    assert_int_equal(r.lock.failure, ADVLOCK_ECONNLOST);
    assert_int_equal(r.lock.attempts, 1);
}

static void test_terminated_while_waiting(void **state)
{
    fixture *f = *state;
    advlock_pq_report r;
    assert_int_equal(acquire(&f->sa, f->lock.key, 0, &r), 0);

    waiter w = {.session = &f->sb, .key = f->lock.key, .timeout_ms = 30000};
    pthread_t thread;
    assert_int_equal(pthread_create(&thread, NULL, wait_for_lock, &w), 0);
    pgt_sleep_ms(150);
    int64_t terminated = advlock_pq_now_ms();
    pgt_terminate(f->lock.observer, PQbackendPID(f->b));
    assert_int_equal(pthread_join(thread, NULL), 0);

    expect_connection_lost(&w.report, w.rc, f->lock.key, "pg_try_advisory_lock for '");
    assert_true(w.done_ms - terminated < 1500); /* at its next try, not at the timeout */
    assert_int_equal(release(&f->sa, f->lock.key, &r), 0);
    expect_outcome(&r, ADVLOCK_RELEASED);
}

static void test_terminated_mid_statement(void **state)
{
    fixture *f = *state;
    /* The connection's one session row first, so that the termination
     * meets the try-lock. */
    advlock_pq_report r;
    assert_int_equal(release(&f->sb, f->lock.key, &r), 0);
    expect_outcome(&r, ADVLOCK_NOT_HELD);
    int pid = PQbackendPID(f->b);
    pgt_freeze(pid);
    waiter w = {.session = &f->sb, .key = f->lock.key, .timeout_ms = 30000};
    pthread_t thread;
    assert_int_equal(pthread_create(&thread, NULL, wait_for_lock, &w), 0);
    pgt_sleep_ms(100); /* the statement is on its way to the frozen backend */
    pgt_terminate_frozen(f->lock.observer, pid);
    assert_int_equal(pthread_join(thread, NULL), 0);
    /* The server's FATAL answered the statement: its SQLSTATE is kept, not
     * replaced by libpq's "server closed the connection" that follows. */
    expect_connection_lost(&w.report, w.rc, f->lock.key, "pg_try_advisory_lock for '");
    assert_string_equal(w.report.lock.sqlstate, "57P01");
}

/* ---- prepared statements on connections the adapter did not open ---- */

static long long prepared_count(PGconn *conn)
{
    return pgt_query_int(conn,
                         "SELECT count(*) FROM pg_prepared_statements"
                         " WHERE name LIKE 'advlock\\_%'",
                         (char *)NULL);
}

static void test_statements_dropped_behind_its_back(void **state)
{
    fixture *f = *state;
    advlock_pq_report r;
    assert_int_equal(acquire(&f->sa, f->lock.key, 0, &r), 0);
    assert_int_equal(release(&f->sa, f->lock.key, &r), 0);
    assert_int_equal(prepared_count(f->a), 2);

    pgt_exec(f->a, "DEALLOCATE ALL");
    assert_int_equal(acquire(&f->sa, f->lock.key, 0, &r), 0);
    expect_outcome(&r, ADVLOCK_ACQUIRED);
    assert_int_equal(r.lock.attempts, 1);
    assert_int_equal(release(&f->sa, f->lock.key, &r), 0);
    expect_outcome(&r, ADVLOCK_RELEASED);
    assert_int_equal(prepared_count(f->a), 2);
}

static void test_statements_prepared_by_someone_else(void **state)
{
    fixture *f = *state;
    advlock_pq other;
    advlock_pq_report r;
    assert_int_equal(advlock_pq_init(&other, f->a), 0);
    assert_int_equal(acquire(&other, f->lock.key, 0, &r), 0);
    /* sa has not prepared anything yet: its PREPARE finds them (42P05). */
    assert_int_equal(acquire(&f->sa, f->lock.key, 0, &r), 0);
    expect_outcome(&r, ADVLOCK_ACQUIRED);
    assert_int_equal(release(&f->sa, f->lock.key, &r), 0);
    expect_outcome(&r, ADVLOCK_RELEASED);
    assert_int_equal(release(&other, f->lock.key, &r), 0);
    expect_outcome(&r, ADVLOCK_RELEASED);
    assert_int_equal(PQtransactionStatus(f->a), PQTRANS_IDLE);
}

static void test_open_transaction_is_never_aborted(void **state)
{
    fixture *f = *state;
    advlock_pq_report r;
    /* The session believes its statements exist; they do not. */
    assert_int_equal(acquire(&f->sa, f->lock.key, 0, &r), 0);
    assert_int_equal(release(&f->sa, f->lock.key, &r), 0);
    pgt_exec(f->a, "DEALLOCATE ALL");

    pgt_exec(f->a, "BEGIN");
    assert_int_equal(acquire(&f->sa, f->lock.key, 0, &r), 0);
    expect_outcome(&r, ADVLOCK_ACQUIRED);
    assert_int_equal(PQtransactionStatus(f->a), PQTRANS_INTRANS);
    assert_int_equal(release(&f->sa, f->lock.key, &r), 0);
    expect_outcome(&r, ADVLOCK_RELEASED);
    assert_int_equal(PQtransactionStatus(f->a), PQTRANS_INTRANS);
    assert_int_equal(pgt_query_int(f->a, "SELECT 1", (char *)NULL), 1);
    assert_int_equal(prepared_count(f->a), 0); /* sent unnamed */
    pgt_exec(f->a, "COMMIT");

    /* In a failed transaction the server's own error comes back. */
    pgt_exec(f->a, "BEGIN");
    PQclear(PQexec(f->a, "SELECT 1/0"));
    assert_int_equal(acquire(&f->sa, f->lock.key, 0, &r), 0);
    expect_outcome(&r, ADVLOCK_FAILED);
    assert_int_equal(r.lock.failure, ADVLOCK_ESERVER);
    assert_string_equal(r.lock.sqlstate, "25P02");
    pgt_exec(f->a, "ROLLBACK");
}

/* ---- misuse ---- */

/* A refused call's report: FAILED, no failure (the return value says what
 * was wrong), no words. */
static void expect_refused(const advlock_pq_report *r)
{
    assert_int_equal(r->lock.outcome, ADVLOCK_FAILED);
    assert_int_equal(r->lock.failure, 0);
    assert_string_equal(r->server_message, "");
    assert_int_equal(r->notices, 0);
}

static void test_misuse_is_refused_cleanly(void **state)
{
    fixture *f = *state;
    advlock_pq_report r;
    advlock_pq unbound;
    memset(&unbound, 0, sizeof unbound);

    assert_int_equal(advlock_pq_init(NULL, f->a), ADVLOCK_EINVAL);
    assert_int_equal(advlock_pq_init(&unbound, NULL), ADVLOCK_EINVAL);
    assert_int_equal(acquire(NULL, f->lock.key, 0, &r), ADVLOCK_EINVAL);
    expect_refused(&r);
    assert_int_equal(advlock_pq_acquire(&f->sa, f->lock.key, strlen(f->lock.key), 0, NULL),
                     ADVLOCK_EINVAL);
    assert_int_equal(advlock_pq_release(&f->sa, f->lock.key, strlen(f->lock.key), NULL),
                     ADVLOCK_EINVAL);
    assert_int_equal(acquire(&f->sa, f->lock.key, -1, &r), ADVLOCK_EINVAL);
    assert_int_equal(advlock_pq_acquire(&f->sa, NULL, 3, 0, &r), ADVLOCK_EINVAL);
    assert_int_equal(acquire(&unbound, f->lock.key, 0, &r), ADVLOCK_EMISUSE);
    assert_int_equal(release(&unbound, f->lock.key, &r), ADVLOCK_EMISUSE);
    assert_int_equal(acquire(&f->sa, "bad \xC3\x28 utf-8", 0, &r), ADVLOCK_EUTF8);
    expect_refused(&r);

    /* A query of the caller's in flight: nothing is sent, its result stays
     * the caller's to read. */
    assert_int_equal(PQsendQuery(f->a, "SELECT 42"), 1);
    assert_int_equal(acquire(&f->sa, f->lock.key, 0, &r), ADVLOCK_EMISUSE);
    expect_refused(&r);
    assert_int_equal(release(&f->sa, f->lock.key, &r), ADVLOCK_EMISUSE);
    expect_refused(&r);
    assert_int_equal(advlock_pq_release_key(&f->sa, f->lock.derived, &r), ADVLOCK_EMISUSE);
    expect_refused(&r);
    PGresult *res = PQgetResult(f->a);
    assert_int_equal(PQresultStatus(res), PGRES_TUPLES_OK);
    assert_string_equal(PQgetvalue(res, 0, 0), "42");
    PQclear(res);
    assert_null(PQgetResult(f->a));
    assert_int_equal(pgt_lock_count(f->lock.observer, f->lock.derived), 0);
}

int main(void)
{
    alarm(120); /* a hang fails the program instead of the whole run */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_lock_row_and_statement_text, setup, teardown),
        cmocka_unit_test_setup_teardown(test_timeout_message_and_attempts, setup, teardown),
        cmocka_unit_test_setup_teardown(test_waiter_acquires_on_next_attempt, setup, teardown),
        cmocka_unit_test_setup_teardown(test_release_by_the_acquires_key, setup, teardown),
        cmocka_unit_test_setup_teardown(test_acquire_by_key, setup, teardown),
        cmocka_unit_test_setup_teardown(test_describe_a_name_with_nul_bytes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_describe_a_name_longer_than_the_echo, setup, teardown),
        cmocka_unit_test_setup_teardown(test_second_release_not_held_and_quiet, setup, teardown),
        cmocka_unit_test_setup_teardown(test_callers_receiver_left_in_place, setup, teardown),
        cmocka_unit_test_setup_teardown(test_call_from_a_callback_refused_hooks_kept, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_callers_processor_gets_the_warning_too, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_reentrant_holds_need_two_releases, setup, teardown),
        cmocka_unit_test_setup_teardown(test_terminated_while_holding, setup, teardown),
        cmocka_unit_test_setup_teardown(test_terminated_while_waiting, setup, teardown),
        cmocka_unit_test_setup_teardown(test_terminated_mid_statement, setup, teardown),
        cmocka_unit_test_setup_teardown(test_statements_dropped_behind_its_back, setup, teardown),
        cmocka_unit_test_setup_teardown(test_statements_prepared_by_someone_else, setup, teardown),
        cmocka_unit_test_setup_teardown(test_open_transaction_is_never_aborted, setup, teardown),
        cmocka_unit_test_setup_teardown(test_misuse_is_refused_cleanly, setup, teardown),
    };
    return cmocka_run_group_tests_name("libpq blocking adapter", tests, NULL, NULL);
}
