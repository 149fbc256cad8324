/* The connection engine (advlock_conn) against scripted answers: what it
 * asks to send, in which form and batch, and what its members end with. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "advlock.h"

enum { SLOTS = 8, BUCKETS = 64, PID = 100 };
static const uint64_t TOKEN = 0x5eed;

typedef struct fixture {
    advlock_conn c;
    advlock_conn_slot slots[SLOTS];
    advlock_peer *buckets[BUCKETS];
    advlock_member m[4];
    advlock_statement sent[32];
    int nsent;
    int64_t now;
} fixture;

static fixture f;

static void setup_caps(unsigned caps)
{
    memset(&f, 0, sizeof f);
    assert_int_equal(advlock_conn_init(&f.c, f.slots, SLOTS, f.buckets, BUCKETS, PID, TOKEN, caps),
                     0);
    for (int i = 0; i < 4; i++)
        advlock_member_init(&f.m[i]);
}

static int setup(void **state)
{
    (void)state;
    setup_caps(ADVLOCK_CAPS_PIPELINE | ADVLOCK_CAPS_PREPARE);
    return 0;
}

/* Polls every statement the engine offers now; returns how many. */
static int poll_all(void)
{
    f.nsent = 0;
    while (f.nsent < 32 && advlock_conn_poll_statement(&f.c, &f.sent[f.nsent], f.now))
        f.nsent++;
    return f.nsent;
}

static void expect_query(int i, advlock_sql sql, advlock_form form, const advlock_member *m)
{
    assert_true(i < f.nsent);
    assert_int_equal(f.sent[i].kind, ADVLOCK_STATEMENT_QUERY);
    assert_int_equal(f.sent[i].sql, sql);
    assert_int_equal(f.sent[i].form, form);
    assert_ptr_equal(f.sent[i].member, m);
}

static void expect_sync(int i)
{
    assert_true(i < f.nsent);
    assert_int_equal(f.sent[i].kind, ADVLOCK_STATEMENT_SYNC);
}

static void answer(advlock_result r)
{
    advlock_answer a;
    advlock_answer_init(&a, r);
    assert_int_equal(advlock_conn_on_answer(&f.c, &a, f.now), 0);
}

static void answer_error(const char *sqlstate, const char *words)
{
    advlock_answer a;
    advlock_answer_init(&a, ADVLOCK_RESULT_SERVER_ERROR);
    a.sqlstate = sqlstate;
    a.message = words;
    assert_int_equal(advlock_conn_on_answer(&f.c, &a, f.now), 0);
}

static void answer_aborted(void)
{
    advlock_answer a;
    advlock_answer_init(&a, ADVLOCK_RESULT_SERVER_ERROR);
    a.aborted = 1;
    assert_int_equal(advlock_conn_on_answer(&f.c, &a, f.now), 0);
}

/* The session row, answered inside a transaction block or not. */
static void answer_session_in(int server_pid, int in_transaction)
{
    advlock_answer a;
    advlock_answer_init(&a, ADVLOCK_RESULT_TRUE);
    a.server_pid = server_pid;
    a.ours = 1;
    a.in_transaction = in_transaction;
    assert_int_equal(advlock_conn_on_answer(&f.c, &a, f.now), 0);
}

static void answer_session(int server_pid)
{
    answer_session_in(server_pid, 0);
}

static void answer_capacity(int64_t locks, int64_t connections)
{
    advlock_answer a;
    advlock_answer_init(&a, ADVLOCK_RESULT_TRUE);
    a.settings[0] = locks;
    a.settings[1] = connections;
    assert_int_equal(advlock_conn_on_answer(&f.c, &a, f.now), 0);
}

/* Drains the events; returns how many there were, the last in *last. */
static int events(advlock_conn_event *last)
{
    int n = 0;
    advlock_conn_event ev;
    while (advlock_conn_poll_event(&f.c, &ev)) {
        n++;
        if (last != NULL)
            *last = ev;
    }
    return n;
}

/* The first acquire's session check: the settings' row, then the check,
 * one batch. */
static void check_session(int server_pid)
{
    assert_int_equal(poll_all(), 3);
    expect_query(0, ADVLOCK_SQL_CAPACITY, ADVLOCK_FORM_UNNAMED, NULL);
    expect_query(1, ADVLOCK_SQL_SESSION, ADVLOCK_FORM_UNNAMED, &f.m[0]);
    expect_sync(2);
    answer_capacity(64, 100);
    answer_session(server_pid);
}

static void acquire(int i, int64_t key, const advlock_options *o)
{
    assert_int_equal(advlock_conn_start_acquire_key(&f.c, &f.m[i], key, 5000, o, f.now), 0);
}

/* m[0] takes key 1 on a fresh engine: check, prepare, try. */
static void hold_first(void)
{
    acquire(0, 1, NULL);
    check_session(PID);
    assert_int_equal(poll_all(), 3);
    expect_query(0, ADVLOCK_SQL_TRY_LOCK, ADVLOCK_FORM_PREPARE, NULL);
    expect_query(1, ADVLOCK_SQL_TRY_LOCK, ADVLOCK_FORM_NAMED, &f.m[0]);
    assert_int_equal(f.sent[1].param, 1);
    expect_sync(2);
    answer(ADVLOCK_RESULT_TRUE);
    answer(ADVLOCK_RESULT_TRUE);
    assert_true(advlock_member_held(&f.m[0]));
    assert_int_equal(events(NULL), 1);
}

/* m[0] takes key 1 under a lease of 30 s on a fresh engine: check, the
 * lease's setup, prepare, try. */
static void hold_under_lease(void)
{
    assert_int_equal(advlock_conn_set_lease(&f.c, 30000, 0), 0);
    acquire(0, 1, NULL);
    check_session(PID);
    assert_int_equal(poll_all(), 2);
    answer(ADVLOCK_RESULT_TRUE); /* applied */
    assert_int_equal(poll_all(), 3);
    answer(ADVLOCK_RESULT_TRUE);
    answer(ADVLOCK_RESULT_TRUE);
    assert_true(advlock_member_held(&f.m[0]));
}

static void first_acquire_checks_prepares_and_holds(void **state)
{
    (void)state;
    hold_first();
    assert_int_equal(advlock_member_report(&f.m[0])->outcome, ADVLOCK_ACQUIRED);
    assert_true(advlock_conn_session(&f.c)->checked);
    assert_true(advlock_conn_watching(&f.c));
    /* A second member's try goes named at once: prepared already. */
    acquire(1, 2, NULL);
    assert_int_equal(poll_all(), 2);
    expect_query(0, ADVLOCK_SQL_TRY_LOCK, ADVLOCK_FORM_NAMED, &f.m[1]);
    expect_sync(1);
}

static void aborted_batch_is_sent_again(void **state)
{
    (void)state;
    hold_first();
    acquire(1, 2, NULL);
    acquire(2, 3, NULL);
    assert_int_equal(poll_all(), 3);
    advlock_statement head;
    assert_int_equal(advlock_conn_head(&f.c, &head), 1);
    assert_ptr_equal(head.member, &f.m[1]);
    answer_error("XX000", "boom");
    assert_int_equal(advlock_conn_head(&f.c, &head), 1);
    assert_int_equal(head.sync_follows, 1);
    answer_aborted();
    /* m[1] failed on its own; m[2] goes again, alone in a new batch. */
    advlock_conn_event ev;
    assert_int_equal(events(&ev), 1);
    assert_ptr_equal(ev.member, &f.m[1]);
    assert_int_equal(advlock_member_report(&f.m[1])->outcome, ADVLOCK_FAILED);
    assert_string_equal(advlock_member_words(&f.m[1]), "boom");
    assert_true(advlock_member_busy(&f.m[2]));
    assert_int_equal(poll_all(), 2);
    expect_query(0, ADVLOCK_SQL_TRY_LOCK, ADVLOCK_FORM_NAMED, &f.m[2]);
    answer(ADVLOCK_RESULT_TRUE);
    assert_true(advlock_member_held(&f.m[2]));
}

static void cancelled_grant_is_given_back(void **state)
{
    (void)state;
    hold_first();
    acquire(1, 7, NULL);
    assert_int_equal(poll_all(), 2);
    assert_int_equal(advlock_conn_cancel(&f.c, &f.m[1], f.now), 0);
    assert_int_equal(advlock_member_report(&f.m[1])->outcome, ADVLOCK_CANCELLED);
    assert_int_equal(events(NULL), 0); /* the caller knows: no event */
    /* Its key stays taken: another member asking is answered busy, locally. */
    acquire(2, 7, NULL);
    assert_int_equal(poll_all(), 0);
    assert_int_equal(advlock_next_action(&f.m[2].machine_).kind, ADVLOCK_ACTION_SLEEP);
    answer(ADVLOCK_RESULT_TRUE); /* granted to nobody */
    assert_int_equal(poll_all(), 2);
    expect_query(0, ADVLOCK_SQL_UNLOCK, ADVLOCK_FORM_UNNAMED, NULL);
    assert_int_equal(f.sent[0].param, 7);
    expect_sync(1);
    answer(ADVLOCK_RESULT_TRUE);
    /* Free now: the sleeper's next try goes out. */
    f.now = advlock_conn_next_wake(&f.c);
    advlock_conn_on_timer(&f.c, f.now);
    assert_int_equal(poll_all(), 2);
    expect_query(0, ADVLOCK_SQL_TRY_LOCK, ADVLOCK_FORM_NAMED, &f.m[2]);
}

static void reset_loses_held_members(void **state)
{
    (void)state;
    hold_first();
    f.now = 10;
    assert_int_equal(advlock_conn_on_reset(&f.c, 200, TOKEN + 1, f.now), 0);
    advlock_conn_event ev;
    assert_int_equal(events(&ev), 1);
    assert_int_equal(ev.kind, ADVLOCK_CONN_LOST);
    assert_true(advlock_member_lost(&f.m[0]));
    assert_string_equal(advlock_member_words(&f.m[0]),
                        "the connection was reset: server session 100, which held it, was "
                        "replaced by 200");
    /* The new session is checked again, its statements prepared again. */
    acquire(1, 2, NULL);
    assert_int_equal(poll_all(), 3);
    expect_query(1, ADVLOCK_SQL_SESSION, ADVLOCK_FORM_UNNAMED, &f.m[1]);
    assert_int_equal(f.sent[1].param2, 200);
}

static void close_stops_every_member_with_one_reason(void **state)
{
    (void)state;
    hold_first();
    acquire(1, 2, NULL);
    assert_int_equal(poll_all(), 2);
    acquire(2, 3, NULL);
    advlock_conn_on_closed(&f.c, "57P01", "terminating connection", f.now);
    assert_true(advlock_member_lost(&f.m[0]));
    assert_string_equal(advlock_member_sqlstate(&f.m[0]), "57P01");
    assert_string_equal(advlock_member_words(&f.m[0]), "terminating connection");
    assert_int_equal(advlock_member_report(&f.m[1])->failure, ADVLOCK_ECONNLOST);
    assert_string_equal(advlock_member_words(&f.m[1]), "terminating connection");
    assert_false(advlock_conn_watching(&f.c));
    /* The queued one ends with them, in the same words. */
    assert_int_equal(advlock_member_report(&f.m[2])->failure, ADVLOCK_ECONNLOST);
    assert_string_equal(advlock_member_words(&f.m[2]), "terminating connection");
    assert_int_equal(poll_all(), 0);
    assert_int_equal(advlock_conn_busy(&f.c), 0);
}

/* Behind a proxy a release waits behind the statement in flight: a close
 * or a reset meanwhile leaves it nothing to release on the next session,
 * so it ends there, its lock lost with the others. */
static void a_release_waiting_dies_with_its_session(void **state)
{
    (void)state;
    for (int reset = 0; reset < 2; reset++) {
        setup_caps(ADVLOCK_CAPS_PIPELINE | ADVLOCK_CAPS_PREPARE);
        acquire(0, 1, NULL);
        acquire(1, 2, NULL);
        check_session(PID + 50);
        assert_int_equal(poll_all(), 2);
        answer(ADVLOCK_RESULT_TRUE);
        assert_int_equal(poll_all(), 2);
        answer(ADVLOCK_RESULT_TRUE);
        (void)events(NULL);
        acquire(2, 3, NULL);
        assert_int_equal(poll_all(), 2); /* m[2]'s try in flight */
        assert_int_equal(advlock_conn_start_release(&f.c, &f.m[0], f.now), 0);
        assert_int_equal(poll_all(), 0); /* the release waits behind it */
        if (reset)
            assert_int_equal(advlock_conn_on_reset(&f.c, PID + 60, TOKEN + 1, f.now), 0);
        else
            advlock_conn_on_closed(&f.c, "57P01", "terminating connection", f.now);
        assert_false(advlock_member_busy(&f.m[0]));
        assert_true(advlock_member_lost(&f.m[0]));
        assert_true(advlock_member_lost(&f.m[1]));
        assert_int_equal(advlock_peers_count(&f.c.peers_), 0);
        assert_int_equal(advlock_member_report(&f.m[2])->failure, ADVLOCK_ECONNLOST);
    }
}

static void refused_lease_setup_fails_the_acquire(void **state)
{
    (void)state;
    assert_int_equal(advlock_conn_set_lease(&f.c, 30000, 0), 0);
    acquire(0, 1, NULL);
    check_session(PID);
    assert_int_equal(poll_all(), 2);
    expect_query(0, ADVLOCK_SQL_LEASE_SETUP, ADVLOCK_FORM_UNNAMED, NULL);
    expect_sync(1);
    assert_int_equal(poll_all(), 0); /* the try waits for the setup */
    answer(ADVLOCK_RESULT_FALSE);
    assert_int_equal(advlock_member_report(&f.m[0])->outcome, ADVLOCK_FAILED);
    assert_memory_equal(advlock_member_words(&f.m[0]), "lease: the server did not apply", 31);
}

/* A fenced try the refused setup failed never left the process: the unlock
 * its machine would undo it with could only take another member's hold. */
static void a_fenced_try_the_lease_refused_unlocks_nothing(void **state)
{
    (void)state;
    assert_int_equal(advlock_conn_set_lease(&f.c, 30000, 0), 0);
    advlock_options fenced;
    advlock_options_init(&fenced);
    fenced.fence = 1;
    acquire(0, 1, &fenced);
    check_session(PID);
    assert_int_equal(poll_all(), 2);
    expect_query(0, ADVLOCK_SQL_LEASE_SETUP, ADVLOCK_FORM_UNNAMED, NULL);
    answer(ADVLOCK_RESULT_FALSE);
    assert_int_equal(advlock_member_report(&f.m[0])->outcome, ADVLOCK_FAILED);
    assert_false(advlock_member_busy(&f.m[0]));
    assert_int_equal(poll_all(), 0);
}

static void lease_without_heartbeat_answer_expires(void **state)
{
    (void)state;
    hold_under_lease();
    assert_true(advlock_member_held(&f.m[0]));
    (void)events(NULL);
    /* A heartbeat, alone in its batch, never answered. */
    f.now = advlock_conn_next_wake(&f.c);
    assert_true(f.now > 0 && f.now < INT64_MAX);
    advlock_conn_on_timer(&f.c, f.now);
    assert_int_equal(poll_all(), 2);
    expect_query(0, ADVLOCK_SQL_HEARTBEAT, ADVLOCK_FORM_UNNAMED, NULL);
    expect_sync(1);
    int64_t beats = 0;
    while (!advlock_member_lost(&f.m[0]) && beats++ < 10) {
        f.now = advlock_conn_next_wake(&f.c);
        advlock_conn_on_timer(&f.c, f.now);
    }
    assert_true(advlock_member_lost(&f.m[0]));
    assert_int_equal(advlock_member_lease_expiry(&f.m[0]), ADVLOCK_LEASE_NO_ANSWER);
    assert_memory_equal(advlock_member_words(&f.m[0]), "no heartbeat answered within", 28);
    advlock_conn_event ev;
    assert_int_equal(events(&ev), 1);
    assert_int_equal(ev.kind, ADVLOCK_CONN_LOST);
    /* Refused until a new session. */
    assert_int_equal(advlock_conn_start_acquire_key(&f.c, &f.m[1], 2, 0, NULL, f.now),
                     ADVLOCK_EMISUSE);
}

static void behind_a_proxy_one_statement_at_a_time(void **state)
{
    (void)state;
    acquire(0, 1, NULL);
    acquire(1, 2, NULL);
    check_session(PID + 50); /* another pid answered: a proxy */
    assert_true(advlock_conn_session(&f.c)->proxied);
    assert_int_equal(poll_all(), 2);
    expect_query(0, ADVLOCK_SQL_TRY_LOCK_GUARDED, ADVLOCK_FORM_UNNAMED, &f.m[0]);
    expect_sync(1);
    assert_false(advlock_conn_wants_send(&f.c));
    answer(ADVLOCK_RESULT_TRUE);
    assert_int_equal(poll_all(), 2);
    expect_query(0, ADVLOCK_SQL_TRY_LOCK_GUARDED, ADVLOCK_FORM_UNNAMED, &f.m[1]);
}

static void fenced_try_goes_alone(void **state)
{
    (void)state;
    hold_first();
    advlock_options fenced;
    advlock_options_init(&fenced);
    fenced.fence = 1;
    acquire(1, 2, NULL);
    acquire(2, 3, &fenced);
    acquire(3, 4, NULL);
    assert_int_equal(poll_all(), 7);
    expect_query(0, ADVLOCK_SQL_TRY_LOCK, ADVLOCK_FORM_NAMED, &f.m[1]);
    expect_sync(1);
    expect_query(2, ADVLOCK_SQL_TRY_LOCK_FENCED, ADVLOCK_FORM_PREPARE, NULL);
    expect_query(3, ADVLOCK_SQL_TRY_LOCK_FENCED, ADVLOCK_FORM_NAMED, &f.m[2]);
    expect_sync(4);
    expect_query(5, ADVLOCK_SQL_TRY_LOCK, ADVLOCK_FORM_NAMED, &f.m[3]);
    expect_sync(6);
}

static void prepared_elsewhere_and_dropped_statements(void **state)
{
    (void)state;
    acquire(0, 1, NULL);
    check_session(PID);
    assert_int_equal(poll_all(), 3);
    answer_error("42P05", "prepared statement already exists");
    answer(ADVLOCK_RESULT_TRUE);
    assert_true(advlock_member_held(&f.m[0]));
    /* Dropped by someone: the execute fails 26000, the statement is
     * prepared again and goes again. */
    acquire(1, 2, NULL);
    assert_int_equal(poll_all(), 2);
    expect_query(0, ADVLOCK_SQL_TRY_LOCK, ADVLOCK_FORM_NAMED, &f.m[1]);
    answer_error("26000", "prepared statement does not exist");
    assert_true(advlock_member_busy(&f.m[1]));
    assert_int_equal(poll_all(), 3);
    expect_query(0, ADVLOCK_SQL_TRY_LOCK, ADVLOCK_FORM_PREPARE, NULL);
    expect_query(1, ADVLOCK_SQL_TRY_LOCK, ADVLOCK_FORM_NAMED, &f.m[1]);
}

/* Letting go of a held lock forgets it, unreleased: nothing sent, no
 * event, the key free for the next acquire, the report the acquire's. */
static void let_go_forgets_a_hold(void **state)
{
    (void)state;
    hold_first();
    (void)events(NULL);
    advlock_conn_let_go(&f.c, &f.m[0]);
    assert_false(advlock_member_held(&f.m[0]));
    assert_int_equal(advlock_member_report(&f.m[0])->outcome, ADVLOCK_ACQUIRED);
    assert_int_equal(events(NULL), 0);
    assert_int_equal(poll_all(), 0);
    assert_int_equal(advlock_peers_count(&f.c.peers_), 0);
    acquire(0, 2, NULL);
    assert_true(advlock_member_busy(&f.m[0]));
}

/* Inside a transaction block nothing goes named: a statement someone
 * dropped would abort the caller's transaction. */
static void nothing_named_inside_a_block(void **state)
{
    (void)state;
    advlock_conn_on_transaction(&f.c, 1);
    acquire(0, 1, NULL);
    check_session(PID);
    assert_int_equal(poll_all(), 2);
    expect_query(0, ADVLOCK_SQL_TRY_LOCK, ADVLOCK_FORM_UNNAMED, &f.m[0]);
}

static void past_the_share_is_refused_unsent(void **state)
{
    (void)state;
    assert_int_equal(advlock_conn_set_capacity_share(&f.c, 1), 0);
    acquire(0, 1, NULL);
    assert_int_equal(poll_all(), 3);
    answer_capacity(1, 50); /* 1% of 50 locks: 1 */
    answer_session(PID);
    assert_int_equal(poll_all(), 3);
    answer(ADVLOCK_RESULT_TRUE);
    answer(ADVLOCK_RESULT_TRUE);
    acquire(1, 2, NULL);
    assert_int_equal(poll_all(), 0);
    const advlock_report *r = advlock_member_report(&f.m[1]);
    assert_non_null(r);
    assert_int_equal(r->outcome, ADVLOCK_FAILED);
    assert_int_equal(r->failure, ADVLOCK_ESERVER);
    assert_string_equal(r->sqlstate, "53400");
}

/* A fenced try refused for the share never left the process: its
 * machine's undo must not unlock the key another member holds. */
static void a_fenced_try_past_the_share_unlocks_nothing(void **state)
{
    (void)state;
    assert_int_equal(advlock_conn_set_capacity_share(&f.c, 1), 0);
    acquire(0, 1, NULL);
    assert_int_equal(poll_all(), 3);
    answer_capacity(1, 50); /* 1% of 50 locks: 1 */
    answer_session(PID);
    assert_int_equal(poll_all(), 3);
    answer(ADVLOCK_RESULT_TRUE);
    answer(ADVLOCK_RESULT_TRUE);
    advlock_options fenced;
    advlock_options_init(&fenced);
    fenced.fence = 1;
    acquire(1, 1, &fenced); /* the key m[0] holds: re-entrant at the server */
    assert_int_equal(poll_all(), 0);
    assert_int_equal(advlock_member_report(&f.m[1])->outcome, ADVLOCK_FAILED);
    assert_true(advlock_member_held(&f.m[0]));
}

/* m[0] holds; m[1]'s fenced try of key is sent: its prepare, the try,
 * the sync. */
static void fenced_try_sent(int64_t key)
{
    hold_first();
    advlock_options fenced;
    advlock_options_init(&fenced);
    fenced.fence = 1;
    acquire(1, key, &fenced);
    assert_int_equal(poll_all(), 3);
}

/* A fenced try the server failed may have been granted: the machine
 * undoes it, and the key stays taken until that unlock has answered, so
 * no other member's grant can be the one it takes back. */
static void a_fenced_try_undone_keeps_its_key(void **state)
{
    (void)state;
    fenced_try_sent(5);
    answer(ADVLOCK_RESULT_TRUE);
    answer_error("XX000", "fence table broken");
    acquire(2, 5, NULL);             /* asks while the undo is to go */
    assert_int_equal(poll_all(), 3); /* the unlock's prepare, the unlock, the sync */
    expect_query(1, ADVLOCK_SQL_UNLOCK, ADVLOCK_FORM_NAMED, &f.m[1]);
    assert_int_equal(advlock_next_action(&f.m[2].machine_).kind, ADVLOCK_ACTION_SLEEP);
}

/* m[1]'s fenced try of key 5, failed by the server with sqlstate, is
 * undone: the unlock is out, its prepare answered. */
static void undo_sent(const char *sqlstate)
{
    fenced_try_sent(5);
    answer(ADVLOCK_RESULT_TRUE);
    answer_error(sqlstate, "the fenced try failed");
    assert_int_equal(poll_all(), 3); /* the unlock's prepare, the unlock, the sync */
    expect_query(1, ADVLOCK_SQL_UNLOCK, ADVLOCK_FORM_NAMED, &f.m[1]);
    answer(ADVLOCK_RESULT_TRUE);
}

/* The unlock undoing an acquire's grant, failed by the server, leaves the
 * grant on the session: the key stays taken, the unlock is owed as a
 * give-back, and failed as often as a give-back may be, the connection
 * must close. */
static void failed_undo_keeps_the_key_and_is_given_back(void **state)
{
    (void)state;
    undo_sent("XX000");
    answer_error("57014", "canceling statement due to statement timeout");
    (void)events(NULL);
    const advlock_report *r = advlock_member_report(&f.m[1]);
    assert_int_equal(r->outcome, ADVLOCK_FAILED);
    assert_true(advlock_detail_in_doubt(r->detail));
    assert_false(advlock_member_busy(&f.m[1]));
    acquire(2, 5, NULL);
    for (int round = 0; round < 2; round++) {
        assert_false(advlock_conn_must_close(&f.c));
        assert_int_equal(poll_all(), 2); /* the give-back, the sync: no try of 5 */
        expect_query(0, ADVLOCK_SQL_UNLOCK, ADVLOCK_FORM_UNNAMED, NULL);
        assert_int_equal(f.sent[0].param, 5);
        answer_error("57014", "canceling statement due to statement timeout");
    }
    assert_true(advlock_conn_must_close(&f.c));
    assert_int_equal(poll_all(), 0);
    assert_true(advlock_member_busy(&f.m[2]));
}

/* The unlock undoing a fenced try's error ran (true or false): the session
 * holds nothing of that try, so nothing is owed, and the key is free for
 * the next member; the report still says the try's error came first. A
 * second unlock would take back another hold of the key on the session. */
static void an_undo_that_ran_owes_nothing(void **state)
{
    (void)state;
    for (int result = ADVLOCK_RESULT_TRUE; result <= ADVLOCK_RESULT_FALSE; result++) {
        (void)setup(NULL);
        undo_sent("53200");
        answer((advlock_result)result);
        (void)events(NULL);
        const advlock_report *r = advlock_member_report(&f.m[1]);
        assert_int_equal(r->outcome, ADVLOCK_FAILED);
        assert_int_equal(r->detail, ADVLOCK_DETAIL_UNDO_AFTER_FENCE_ERROR);
        assert_int_equal(advlock_conn_outstanding(&f.c), 0);
        acquire(2, 5, NULL);
        assert_int_equal(poll_all(), 2); /* m[2]'s try and the sync: no give-back */
        expect_query(0, ADVLOCK_SQL_TRY_LOCK, ADVLOCK_FORM_NAMED, &f.m[2]);
    }
}

/* The same unlock, or the prepare ahead of it, taken back unsent (libpq
 * short of memory): the session still holds the grant, so the unlock goes
 * again at the next turn and the key stays taken till it answers. */
static void unsent_undo_goes_again(void **state)
{
    (void)state;
    fenced_try_sent(5);
    answer(ADVLOCK_RESULT_TRUE);
    answer_error("XX000", "fence table broken");
    advlock_statement st;
    assert_int_equal(advlock_conn_poll_statement(&f.c, &st, f.now), 1);
    assert_int_equal(st.form, ADVLOCK_FORM_PREPARE);
    advlock_conn_unsend(&f.c, 0, "out of memory", f.now);
    assert_true(advlock_member_busy(&f.m[1]));
    assert_int_equal(advlock_conn_poll_statement(&f.c, &st, f.now), 1); /* the prepare again */
    assert_int_equal(advlock_conn_poll_statement(&f.c, &st, f.now), 1);
    assert_int_equal(st.sql, ADVLOCK_SQL_UNLOCK);
    advlock_conn_unsend(&f.c, 0, "out of memory", f.now);
    assert_true(advlock_member_busy(&f.m[1]));
    answer(ADVLOCK_RESULT_TRUE); /* the prepare */
    acquire(2, 5, NULL);
    assert_int_equal(poll_all(), 2);
    expect_query(0, ADVLOCK_SQL_UNLOCK, ADVLOCK_FORM_NAMED, &f.m[1]);
    assert_int_equal(f.sent[0].param, 5);
    answer(ADVLOCK_RESULT_TRUE);
    assert_false(advlock_member_busy(&f.m[1]));
    assert_false(advlock_member_held(&f.m[1]));
}

/* m[i]'s try of key of transaction scope, in a block (begun now if none),
 * is in flight: the try (unnamed there), the sync. */
static void xact_acquire_sent(int i, int64_t key)
{
    advlock_options xact;
    advlock_options_init(&xact);
    xact.scope = ADVLOCK_TRANSACTION;
    advlock_conn_on_transaction(&f.c, 1);
    acquire(i, key, &xact);
    assert_int_equal(poll_all(), 2);
    expect_query(0, ADVLOCK_SQL_TRY_XACT_LOCK, ADVLOCK_FORM_UNNAMED, &f.m[i]);
    assert_int_equal(f.sent[0].param, key);
}

/* m[0] holds key 1 (session scope); m[1]'s try of key of transaction scope
 * is in flight, inside a block. */
static void xact_try_sent(int64_t key)
{
    hold_first();
    advlock_options xact;
    advlock_options_init(&xact);
    xact.scope = ADVLOCK_TRANSACTION;
    assert_int_equal(advlock_conn_start_acquire_key(&f.c, &f.m[1], key, 5000, &xact, f.now),
                     ADVLOCK_EMISUSE); /* outside a block it would end with its statement */
    xact_acquire_sent(1, key);
}

/* A transaction's lock is held until its block ends: a release says it
 * ends with the transaction and keeps the key taken; the block's end
 * frees it, the session's lock staying. */
static void xact_lock_is_held_until_the_block_ends(void **state)
{
    (void)state;
    xact_try_sent(5);
    answer(ADVLOCK_RESULT_TRUE);
    assert_true(advlock_member_held(&f.m[1]));
    assert_int_equal(events(NULL), 1);
    assert_int_equal(advlock_conn_start_release(&f.c, &f.m[1], f.now), 0);
    assert_int_equal(advlock_member_report(&f.m[1])->outcome, ADVLOCK_ENDS_WITH_TRANSACTION);
    assert_true(advlock_member_held(&f.m[1]));
    assert_int_equal(poll_all(), 0); /* nothing to send for it */
    acquire(2, 5, NULL);
    assert_int_equal(poll_all(), 0); /* the key is the block's: m[2] backs off */
    assert_true(advlock_member_sleeping(&f.m[2]));
    advlock_conn_on_transaction(&f.c, 0);
    assert_false(advlock_member_held(&f.m[1]));
    assert_true(advlock_member_held(&f.m[0]));
    f.now += 10000;
    advlock_conn_on_timer(&f.c, f.now);
    assert_true(poll_all() >= 1);
    expect_query(0, ADVLOCK_SQL_TRY_LOCK, ADVLOCK_FORM_NAMED, &f.m[2]);
}

/* Each block's locks end with it, and only they: a block's end with no
 * lock of transaction scope left changes nothing, and the next block's
 * lock, taken after one ended, ends with that block. */
static void xact_locks_end_with_each_block(void **state)
{
    (void)state;
    xact_try_sent(5);
    answer(ADVLOCK_RESULT_TRUE);
    assert_true(advlock_member_held(&f.m[1]));
    advlock_conn_on_transaction(&f.c, 0);
    assert_false(advlock_member_held(&f.m[1]));
    advlock_conn_on_transaction(&f.c, 0);
    assert_true(advlock_member_held(&f.m[0]));
    xact_acquire_sent(1, 6);
    answer(ADVLOCK_RESULT_TRUE);
    assert_true(advlock_member_held(&f.m[1]));
    advlock_conn_on_transaction(&f.c, 1); /* the same block goes on */
    assert_true(advlock_member_held(&f.m[1]));
    advlock_conn_on_transaction(&f.c, 0);
    assert_false(advlock_member_held(&f.m[1]));
    assert_true(advlock_member_held(&f.m[0]));
}

/* A cancel of a transaction's try in flight waits for its answer: a grant
 * cannot be unlocked, so the acquire ends ACQUIRED, too late to cancel. */
static void xact_cancel_too_late_keeps_the_grant(void **state)
{
    (void)state;
    xact_try_sent(5);
    assert_int_equal(advlock_conn_cancel(&f.c, &f.m[1], f.now), 0);
    assert_true(advlock_member_busy(&f.m[1]));
    answer(ADVLOCK_RESULT_TRUE);
    assert_int_equal(events(NULL), 1);
    const advlock_report *r = advlock_member_report(&f.m[1]);
    assert_int_equal(r->outcome, ADVLOCK_ACQUIRED);
    assert_int_equal(r->detail, ADVLOCK_DETAIL_CANCEL_TOO_LATE);
    assert_true(advlock_member_held(&f.m[1]));
    assert_int_equal(advlock_conn_outstanding(&f.c), 0); /* no unlock of it */
}

/* An acquire of transaction scope under way when the block ends has no
 * block to lock in: backing off, it ends FAILED (25P01) at once and no try
 * of it goes outside the block; its try in flight is the engine's, the key
 * kept until the answer, a grant given nothing back (it went with the
 * block). One left backing off over a reset never sends its try either. */
static void xact_acquire_under_way_ends_with_its_block(void **state)
{
    (void)state;
    xact_try_sent(7);
    answer(ADVLOCK_RESULT_FALSE); /* busy: m[1] backs off */
    assert_true(advlock_member_sleeping(&f.m[1]));
    (void)events(NULL);
    advlock_conn_on_transaction(&f.c, 0);
    assert_false(advlock_member_busy(&f.m[1]));
    const advlock_report *r = advlock_member_report(&f.m[1]);
    assert_int_equal(r->outcome, ADVLOCK_FAILED);
    assert_int_equal(r->failure, ADVLOCK_ESERVER);
    assert_string_equal(r->sqlstate, "25P01");
    assert_int_equal(events(NULL), 1);
    f.now += 10000;
    advlock_conn_on_timer(&f.c, f.now);
    assert_int_equal(poll_all(), 0);
    assert_false(advlock_member_held(&f.m[1]));
    assert_true(advlock_member_held(&f.m[0]));
    /* In flight at the block's end: the key stays taken till the answer. */
    xact_acquire_sent(1, 7);
    advlock_conn_on_transaction(&f.c, 0);
    assert_int_equal(advlock_member_report(&f.m[1])->outcome, ADVLOCK_FAILED);
    acquire(2, 7, NULL);
    assert_int_equal(poll_all(), 0); /* busy: the engine keeps key 7 */
    assert_true(advlock_member_sleeping(&f.m[2]));
    answer(ADVLOCK_RESULT_TRUE);
    assert_int_equal(advlock_conn_outstanding(&f.c), 0); /* nothing given back */
    f.now += 10000;
    advlock_conn_on_timer(&f.c, f.now);
    assert_true(poll_all() >= 1);
    expect_query(0, ADVLOCK_SQL_TRY_LOCK, ADVLOCK_FORM_NAMED, &f.m[2]);
    while (advlock_conn_outstanding(&f.c) > 0)
        answer(ADVLOCK_RESULT_TRUE);
    assert_true(advlock_member_held(&f.m[2]));
    /* Backing off over a reset: the new session is in no block. */
    xact_acquire_sent(3, 8);
    answer(ADVLOCK_RESULT_FALSE);
    assert_true(advlock_member_sleeping(&f.m[3]));
    assert_int_equal(advlock_conn_on_reset(&f.c, PID + 1, TOKEN + 1, f.now), 0);
    f.now += 10000;
    advlock_conn_on_timer(&f.c, f.now);
    for (int i = poll_all(); i > 0; i--)
        assert_int_not_equal(f.sent[i - 1].sql, ADVLOCK_SQL_TRY_XACT_LOCK);
    assert_int_equal(advlock_member_report(&f.m[3])->outcome, ADVLOCK_FAILED);
    assert_string_equal(advlock_member_report(&f.m[3])->sqlstate, "25P01");
}

/* A fenced try of transaction scope for a key another member holds is
 * answered busy here, as the server's fenced row would answer it: the
 * member backs off (it was answered as a plain try, which its machine
 * ignored, and it asked again for ever). */
static void xact_fenced_try_of_a_held_key_backs_off(void **state)
{
    (void)state;
    hold_first();
    advlock_conn_on_transaction(&f.c, 1);
    advlock_options o;
    advlock_options_init(&o);
    o.scope = ADVLOCK_TRANSACTION;
    o.fence = 1;
    acquire(1, 1, &o);
    assert_int_equal(poll_all(), 0);
    assert_true(advlock_member_sleeping(&f.m[1]));
}

static void one_at_a_time_client(void **state)
{
    (void)state;
    setup_caps(0);
    acquire(0, 1, NULL);
    acquire(1, 2, NULL);
    assert_int_equal(poll_all(), 1);
    expect_query(0, ADVLOCK_SQL_CAPACITY, ADVLOCK_FORM_UNNAMED, NULL);
    answer_capacity(64, 100);
    assert_int_equal(poll_all(), 1);
    expect_query(0, ADVLOCK_SQL_SESSION, ADVLOCK_FORM_UNNAMED, &f.m[0]);
    answer_session(PID);
    assert_int_equal(poll_all(), 1);
    expect_query(0, ADVLOCK_SQL_TRY_LOCK, ADVLOCK_FORM_UNNAMED, &f.m[0]);
    assert_int_equal(f.sent[0].sync_follows, 0);
    answer(ADVLOCK_RESULT_TRUE);
    assert_int_equal(poll_all(), 1);
    expect_query(0, ADVLOCK_SQL_TRY_LOCK, ADVLOCK_FORM_UNNAMED, &f.m[1]);
}

/* A one-member engine, one statement at a time: m[0]'s try of key 1
 * (after the check and the try's prepare), cancelled in flight and
 * granted; the member stays under way to give the grant back. */
static void one_member_try_cancelled_and_granted(void)
{
    setup_caps(ADVLOCK_CAPS_PREPARE | ADVLOCK_CAPS_CANCEL | ADVLOCK_CAPS_ONE_MEMBER);
    acquire(0, 1, NULL);
    assert_int_equal(poll_all(), 1);
    expect_query(0, ADVLOCK_SQL_SESSION, ADVLOCK_FORM_UNNAMED, &f.m[0]);
    answer_session(PID);
    assert_int_equal(poll_all(), 1);
    expect_query(0, ADVLOCK_SQL_TRY_LOCK, ADVLOCK_FORM_PREPARE, NULL);
    answer(ADVLOCK_RESULT_TRUE);
    assert_int_equal(poll_all(), 1);
    expect_query(0, ADVLOCK_SQL_TRY_LOCK, ADVLOCK_FORM_NAMED, &f.m[0]);
    assert_int_equal(advlock_conn_cancel(&f.c, &f.m[0], f.now), 0);
    assert_true(advlock_member_busy(&f.m[0]));
    answer(ADVLOCK_RESULT_TRUE); /* granted: given back by the machine */
}

/* The single-lock adapter's engine: one member, one statement at a time;
 * no lock table share to keep, so no settings row before the check; a
 * cancel of its try in flight waits for the answer and gives a grant
 * back with the machine's own unlock; a release answered "connection
 * lost" is the release's failure, its lock held in doubt until the close. */
static void one_member_engine(void **state)
{
    (void)state;
    one_member_try_cancelled_and_granted();
    assert_int_equal(poll_all(), 1);
    expect_query(0, ADVLOCK_SQL_UNLOCK, ADVLOCK_FORM_PREPARE, NULL);
    answer(ADVLOCK_RESULT_TRUE);
    assert_int_equal(poll_all(), 1);
    expect_query(0, ADVLOCK_SQL_UNLOCK, ADVLOCK_FORM_NAMED, &f.m[0]);
    answer(ADVLOCK_RESULT_TRUE);
    assert_false(advlock_member_busy(&f.m[0]));
    assert_int_equal(advlock_member_report(&f.m[0])->outcome, ADVLOCK_CANCELLED);
    acquire(0, 1, NULL);
    assert_int_equal(poll_all(), 1);
    answer(ADVLOCK_RESULT_TRUE);
    assert_true(advlock_member_held(&f.m[0]));
    assert_int_equal(advlock_conn_start_release(&f.c, &f.m[0], f.now), 0);
    assert_int_equal(poll_all(), 1);
    advlock_answer lost;
    advlock_answer_init(&lost, ADVLOCK_RESULT_CONNECTION_LOST);
    lost.message = "terminating connection due to administrator command";
    assert_int_equal(advlock_conn_on_answer(&f.c, &lost, f.now), 0);
    assert_true(advlock_member_held(&f.m[0]));
    assert_int_equal(advlock_member_report(&f.m[0])->failure, ADVLOCK_ECONNLOST);
    assert_int_equal(advlock_member_report(&f.m[0])->sql, ADVLOCK_SQL_UNLOCK);
    advlock_conn_on_closed(&f.c, "57P01", lost.message, f.now);
    assert_true(advlock_member_lost(&f.m[0]));
}

/* One statement at a time, the prepare of the unlock that gives back a
 * cancelled try's grant, taken back unsent: the session still holds the
 * grant, so the member stays under way and the unlock goes again. */
static void one_at_a_time_unsent_undo_prepare_goes_again(void **state)
{
    (void)state;
    one_member_try_cancelled_and_granted();
    advlock_statement st;
    assert_int_equal(advlock_conn_poll_statement(&f.c, &st, f.now), 1);
    assert_int_equal(st.form, ADVLOCK_FORM_PREPARE);
    advlock_conn_unsend(&f.c, 0, "out of memory", f.now);
    assert_true(advlock_member_busy(&f.m[0]));
    assert_int_equal(events(NULL), 0);
    assert_int_equal(poll_all(), 1);
    expect_query(0, ADVLOCK_SQL_UNLOCK, ADVLOCK_FORM_PREPARE, NULL);
    answer(ADVLOCK_RESULT_TRUE);
    assert_int_equal(poll_all(), 1);
    expect_query(0, ADVLOCK_SQL_UNLOCK, ADVLOCK_FORM_NAMED, &f.m[0]);
    answer(ADVLOCK_RESULT_TRUE);
    assert_int_equal(advlock_member_report(&f.m[0])->outcome, ADVLOCK_CANCELLED);
}

static void full_slots_hold_statements_back(void **state)
{
    (void)state;
    hold_first();
    advlock_member more[SLOTS + 2];
    for (int i = 0; i < SLOTS + 2; i++) {
        advlock_member_init(&more[i]);
        assert_int_equal(advlock_conn_start_acquire_key(&f.c, &more[i], 10 + i, 5000, NULL, f.now),
                         0);
    }
    /* Every slot but the one kept for a prepare's pair, and the sync. */
    assert_int_equal(poll_all(), SLOTS);
    expect_sync(SLOTS - 1);
    assert_true(advlock_conn_starved(&f.c));
    assert_int_equal(advlock_conn_busy(&f.c), SLOTS + 2);
    answer(ADVLOCK_RESULT_FALSE);
    answer(ADVLOCK_RESULT_FALSE);
    assert_int_equal(poll_all(), 3);
    expect_query(0, ADVLOCK_SQL_TRY_LOCK, ADVLOCK_FORM_NAMED, &more[SLOTS - 1]);
    /* More slots: the rest go at once. */
    advlock_conn_slot bigger[4 * SLOTS];
    assert_int_equal(advlock_conn_move_slots(&f.c, bigger, 4 * SLOTS), 0);
    assert_int_equal(poll_all(), 2);
    expect_query(0, ADVLOCK_SQL_TRY_LOCK, ADVLOCK_FORM_NAMED, &more[SLOTS + 1]);
    assert_false(advlock_conn_starved(&f.c));
    /* The members are the test's stack's: leave nothing behind. */
    for (int i = 0; i < SLOTS + 2; i++)
        (void)advlock_conn_cancel(&f.c, &more[i], f.now);
}

/* A session check answered inside a transaction block is provisional (a
 * rollback undoes its claim): still checked inside the block, checked
 * again, same token, once the connection is outside one. */
static void session_checked_in_a_block_is_checked_again(void **state)
{
    (void)state;
    acquire(0, 1, NULL);
    assert_int_equal(poll_all(), 3); /* the settings, the check, the sync */
    answer_capacity(64, 100);
    answer_session_in(PID, 1);
    assert_true(advlock_conn_session(&f.c)->checked);
    advlock_conn_on_transaction(&f.c, 1);
    assert_true(advlock_conn_session(&f.c)->checked);
    advlock_conn_on_transaction(&f.c, 0);
    assert_false(advlock_conn_session(&f.c)->checked);
    assert_int_equal(advlock_conn_session(&f.c)->token, TOKEN);
}

/* A verify the server failed cannot tell whether the session holds the
 * lock: the member stays holding, in doubt, its key taken, so another
 * member's try of the key is not sent (it would be a re-entrant grant). */
static void failed_verify_keeps_the_key(void **state)
{
    (void)state;
    hold_first();
    assert_int_equal(advlock_conn_start_verify(&f.c, &f.m[0], f.now), 0);
    assert_int_equal(poll_all(), 3); /* the held row's prepare, the row, the sync */
    answer(ADVLOCK_RESULT_TRUE);
    answer_error("57014", "canceling statement due to statement timeout");
    (void)events(NULL);
    assert_int_equal(advlock_member_report(&f.m[0])->outcome, ADVLOCK_FAILED);
    acquire(1, 1, NULL);
    poll_all();
    for (int i = 0; i < f.nsent; i++)
        assert_false(f.sent[i].kind == ADVLOCK_STATEMENT_QUERY
                     && f.sent[i].sql == ADVLOCK_SQL_TRY_LOCK && f.sent[i].param == 1);
}

/* A give-back the server failed (not skipped) leaves the grant on the
 * session: it goes again, its key still taken. */
static void failed_give_back_goes_again(void **state)
{
    (void)state;
    hold_first();
    acquire(1, 7, NULL);
    assert_int_equal(poll_all(), 2);
    assert_int_equal(advlock_conn_cancel(&f.c, &f.m[1], f.now), 0);
    answer(ADVLOCK_RESULT_TRUE); /* granted to nobody */
    assert_int_equal(poll_all(), 2);
    expect_query(0, ADVLOCK_SQL_UNLOCK, ADVLOCK_FORM_UNNAMED, NULL);
    answer_error("57014", "canceling statement due to statement timeout");
    assert_int_not_equal(advlock_conn_outstanding(&f.c), 0);
}

/* A cancelled member's fenced try that failed after its grant
 * (statement_timeout in the upsert) is given back, as the machine undoes
 * it when nobody cancelled. */
static void cancelled_fenced_error_is_given_back(void **state)
{
    (void)state;
    fenced_try_sent(5);
    assert_int_equal(advlock_conn_cancel(&f.c, &f.m[1], f.now), 0);
    answer(ADVLOCK_RESULT_TRUE);
    answer_error("57014", "canceling statement due to statement timeout");
    assert_true(poll_all() >= 1);
    expect_query(0, ADVLOCK_SQL_UNLOCK, ADVLOCK_FORM_UNNAMED, NULL);
    assert_int_equal(f.sent[0].param, 5);
}

/* A cancelled member may be freed on return: no event points at it. */
static void cancelled_member_may_be_freed(void **state)
{
    (void)state;
    hold_first();
    advlock_member *m = malloc(sizeof *m); /* needs <stdlib.h> */
    advlock_member_init(m);
    assert_int_equal(advlock_conn_start_acquire_key(&f.c, m, 9, 5000, NULL, f.now), 0);
    assert_int_equal(advlock_conn_cancel(&f.c, m, f.now), 0);
    free(m);
    advlock_conn_event ev;
    while (advlock_conn_poll_event(&f.c, &ev))
        assert_ptr_not_equal(ev.member, m);
}

/* One slot is refused: a statement needs room for two (its prepare). */
static void move_slots_refuses_too_few(void **state)
{
    (void)state;
    advlock_conn_slot one[1];
    assert_int_equal(advlock_conn_move_slots(&f.c, one, 1), ADVLOCK_EINVAL);
}

/* A member of another engine is refused. */
static void member_of_another_engine_refused(void **state)
{
    (void)state;
    static advlock_conn other;
    static advlock_conn_slot slots[4];
    static advlock_peer *buckets[4];
    assert_int_equal(advlock_conn_init(&other, slots, 4, buckets, 4, PID, TOKEN, 0), 0);
    acquire(1, 2, NULL);
    assert_int_equal(advlock_conn_cancel(&f.c, &f.m[1], f.now), 0); /* DONE unpolled */
    assert_int_equal(advlock_conn_start_acquire_key(&other, &f.m[1], 2, 5000, NULL, f.now),
                     ADVLOCK_EMISUSE);
}

/* A close with a session check queued, then a reset: the next acquire
 * checks the new session instead of waiting for the old check. */
static void acquire_after_close_and_reset_is_sent(void **state)
{
    (void)state;
    acquire(0, 1, NULL);
    acquire(1, 2, NULL);
    assert_int_equal(poll_all(), 3); /* settings, m[0]'s check, sync */
    advlock_conn_on_closed(&f.c, "57P01", "terminating connection", f.now);
    (void)events(NULL);
    assert_int_equal(advlock_conn_on_reset(&f.c, PID + 1, TOKEN + 1, f.now), 0);
    acquire(2, 3, NULL);
    assert_true(advlock_member_busy(&f.m[2]));
    assert_int_equal(poll_all(), 3);
    expect_query(1, ADVLOCK_SQL_SESSION, ADVLOCK_FORM_UNNAMED, &f.m[2]);
}

/* The settings' row taken back (not broken) fails the member it went
 * ahead of; the member parked behind that check asks in its place. */
static void unsent_settings_row_strands_nobody(void **state)
{
    (void)state;
    acquire(0, 1, NULL);
    acquire(1, 2, NULL); /* parked behind m[0]'s check */
    advlock_statement st;
    assert_int_equal(advlock_conn_poll_statement(&f.c, &st, f.now), 1);
    assert_int_equal(st.sql, ADVLOCK_SQL_CAPACITY);
    advlock_conn_unsend(&f.c, 0, "out of memory", f.now);
    assert_false(advlock_member_busy(&f.m[0]));
    assert_true(advlock_member_busy(&f.m[1]));
    assert_true(poll_all() > 0); /* someone checks the session */
}

/* Behind a proxy a due heartbeat waits for the statement in flight:
 * advlock_conn_wants_send() says 0 then, as polling gives nothing (a pump
 * waiting to write would spin). */
static void wants_send_only_what_poll_gives(void **state)
{
    (void)state;
    assert_int_equal(advlock_conn_set_lease(&f.c, 30000, 0), 0);
    acquire(0, 1, NULL);
    check_session(PID + 50); /* a proxy */
    assert_int_equal(poll_all(), 2);
    answer(ADVLOCK_RESULT_TRUE);
    assert_true(advlock_member_held(&f.m[0]));
    acquire(1, 2, NULL);
    assert_int_equal(poll_all(), 2); /* m[1]'s try in flight */
    f.now = advlock_conn_next_wake(&f.c);
    advlock_conn_on_timer(&f.c, f.now);
    int wants = advlock_conn_wants_send(&f.c);
    assert_int_equal(wants, poll_all() > 0);
}

/* The remaining time of a member parked behind another's session check
 * saturates (the sanitizer build sees an overflow): a timeout of INT64_MAX
 * and a clock that reads 1 ms earlier than the start. */
static void parked_member_time_does_not_overflow(void **state)
{
    (void)state;
    f.now = 1000;
    acquire(0, 1, NULL);
    assert_int_equal(advlock_conn_start_acquire_key(&f.c, &f.m[1], 2, INT64_MAX, NULL, f.now), 0);
    assert_int_equal(poll_all(), 3);
    f.now = 999; /* another thread's earlier reading of the clock */
    answer_capacity(64, 100);
    answer_session(PID);
    assert_true(advlock_member_busy(&f.m[1]));
}

/* A member LOST whose event is not polled yet may start again: the old
 * loss is dropped, never reported after the new grant (the pump would
 * mark the new, held lock lost). */
static void old_loss_after_new_grant_is_not_reported_last(void **state)
{
    (void)state;
    hold_first();
    advlock_conn_on_closed(&f.c, "57P01", "terminating connection", f.now);
    assert_int_equal(advlock_conn_on_reset(&f.c, PID + 1, TOKEN + 1, f.now), 0);
    acquire(0, 1, NULL); /* before polling the LOST event */
    check_session(PID + 1);
    assert_int_equal(poll_all(), 3);
    answer(ADVLOCK_RESULT_TRUE);
    answer(ADVLOCK_RESULT_TRUE);
    assert_true(advlock_member_held(&f.m[0]));
    advlock_conn_event last;
    assert_true(events(&last) >= 1);
    assert_int_equal(last.kind, ADVLOCK_CONN_DONE);
}

/* A given-up engine takes new work again after advlock_conn_on_reset(). */
static void reset_after_give_up_takes_work_again(void **state)
{
    (void)state;
    hold_first();
    advlock_conn_give_up(&f.c, ADVLOCK_ENOANSWER, "no answer", f.now);
    (void)events(NULL);
    assert_int_equal(advlock_conn_on_reset(&f.c, PID + 1, TOKEN + 1, f.now), 0);
    assert_int_equal(advlock_conn_start_acquire_key(&f.c, &f.m[1], 2, 5000, NULL, f.now), 0);
}

/* The common path to a stuck session check: one acquire started while the
 * connection is down (its send fails), then PQreset(): a later acquire is
 * sent, not parked behind a check nobody sends. */
static void acquire_on_a_dead_connection_then_reset(void **state)
{
    (void)state;
    advlock_conn_on_closed(&f.c, "57P01", "terminating connection", f.now);
    acquire(0, 1, NULL);
    advlock_statement st;
    assert_int_equal(advlock_conn_poll_statement(&f.c, &st, f.now), 1); /* the settings' row */
    advlock_conn_unsend(&f.c, 1, "server closed the connection unexpectedly", f.now);
    assert_int_equal(advlock_member_report(&f.m[0])->failure, ADVLOCK_ECONNLOST);
    assert_int_equal(advlock_conn_on_reset(&f.c, PID + 1, TOKEN + 1, f.now), 0);
    acquire(1, 2, NULL);
    assert_int_equal(poll_all(), 3);
}

static void server_wait_options(advlock_options *o)
{
    advlock_options_init(o);
    o->wait = ADVLOCK_WAIT_SERVER;
}

/* m[0] waits on the server for key 9, which another session holds: the
 * try answers false, the wait goes out. */
static void wait_on_server(void)
{
    advlock_options o;
    server_wait_options(&o);
    assert_int_equal(advlock_conn_start_acquire_key(&f.c, &f.m[0], 9, 5000, &o, f.now),
                     ADVLOCK_EINVAL); /* the pump cannot cancel */
    setup_caps(ADVLOCK_CAPS_PIPELINE | ADVLOCK_CAPS_PREPARE | ADVLOCK_CAPS_CANCEL);
    acquire(0, 9, &o);
    check_session(PID);
    assert_int_equal(poll_all(), 3);
    expect_query(1, ADVLOCK_SQL_TRY_LOCK, ADVLOCK_FORM_NAMED, &f.m[0]);
    answer(ADVLOCK_RESULT_TRUE); /* the prepare */
    answer(ADVLOCK_RESULT_FALSE);
    assert_int_equal(poll_all(), 3);
    expect_query(0, ADVLOCK_SQL_LOCK, ADVLOCK_FORM_PREPARE, NULL);
    expect_query(1, ADVLOCK_SQL_LOCK, ADVLOCK_FORM_NAMED, &f.m[0]);
    assert_int_equal(f.sent[1].param, 9);
    assert_true(f.sent[1].param2 > 0 && f.sent[1].param2 <= 5000);
    expect_sync(2);
    answer(ADVLOCK_RESULT_TRUE); /* the prepare */
}

static void expect_cancel(const advlock_member *m)
{
    advlock_statement st;
    assert_int_equal(advlock_conn_poll_statement(&f.c, &st, f.now), 1);
    assert_int_equal(st.kind, ADVLOCK_STATEMENT_CANCEL);
    assert_ptr_equal(st.member, m);
    assert_int_equal(advlock_conn_poll_statement(&f.c, &st, f.now), 0);
}

/* m's unlock, its first: prepared ahead of it. */
static void expect_unlock(const advlock_member *m)
{
    assert_int_equal(poll_all(), 3);
    expect_query(0, ADVLOCK_SQL_UNLOCK, ADVLOCK_FORM_PREPARE, NULL);
    expect_query(1, ADVLOCK_SQL_UNLOCK, ADVLOCK_FORM_NAMED, m);
    answer(ADVLOCK_RESULT_TRUE); /* the prepare */
}

static void a_server_wait_stuck_past_its_deadline_is_cancelled(void **state)
{
    (void)state;
    wait_on_server();
    /* The session is the wait's: nothing else may start on it. */
    assert_int_equal(advlock_conn_start_acquire_key(&f.c, &f.m[1], 2, 0, NULL, f.now),
                     ADVLOCK_EMISUSE);
    assert_int_equal(poll_all(), 0);
    assert_false(advlock_conn_wants_send(&f.c));
    int64_t due = advlock_conn_next_wake(&f.c);
    assert_true(due >= f.now + 5000 && due <= f.now + 5000 + ADVLOCK_WAIT_GRACE_MS);
    advlock_conn_on_timer(&f.c, due - 1);
    assert_false(advlock_conn_wants_send(&f.c));
    f.now = due;
    advlock_conn_on_timer(&f.c, f.now);
    assert_true(advlock_conn_wants_send(&f.c));
    expect_cancel(&f.m[0]);
    /* The cancel is asked again while the answer is late. */
    assert_true(advlock_conn_next_wake(&f.c) > f.now);
    answer_error("57014", "canceling statement due to user request");
    /* The wait may have been granted as it was cancelled: unlocked once. */
    expect_unlock(&f.m[0]);
    answer(ADVLOCK_RESULT_FALSE);
    assert_int_equal(events(NULL), 1);
    assert_false(advlock_member_busy(&f.m[0]));
    assert_false(advlock_member_held(&f.m[0]));
    assert_int_not_equal(advlock_member_report(&f.m[0])->outcome, ADVLOCK_ACQUIRED);
    assert_int_equal(advlock_conn_next_wake(&f.c), INT64_MAX);
    assert_int_equal(advlock_conn_start_acquire_key(&f.c, &f.m[1], 2, 0, NULL, f.now), 0);
}

static void a_cancelled_server_wait_granted_meanwhile_is_given_back(void **state)
{
    (void)state;
    wait_on_server();
    assert_int_equal(advlock_conn_cancel(&f.c, &f.m[0], f.now), 0);
    /* The server has the statement: its answer decides, the member waits. */
    assert_true(advlock_member_busy(&f.m[0]));
    assert_int_equal(events(NULL), 0);
    expect_cancel(&f.m[0]);
    answer(ADVLOCK_RESULT_TRUE); /* granted before the cancel came */
    expect_unlock(&f.m[0]);
    answer(ADVLOCK_RESULT_TRUE);
    assert_int_equal(events(NULL), 1);
    assert_int_equal(advlock_member_report(&f.m[0])->outcome, ADVLOCK_CANCELLED);
    assert_false(advlock_member_held(&f.m[0]));
}

static void a_server_wait_granted_is_held_and_excludes(void **state)
{
    (void)state;
    wait_on_server();
    answer(ADVLOCK_RESULT_TRUE);
    assert_true(advlock_member_held(&f.m[0]));
    assert_int_equal(events(NULL), 1);
    /* Held by the wait's grant: another member's try is answered busy here. */
    acquire(1, 9, NULL);
    assert_int_equal(poll_all(), 0);
    assert_int_equal(advlock_next_action(&f.m[1].machine_).kind, ADVLOCK_ACTION_SLEEP);
    /* A wait needs the session to itself. */
    advlock_options o;
    server_wait_options(&o);
    assert_int_equal(advlock_conn_start_acquire_key(&f.c, &f.m[2], 3, 100, &o, f.now),
                     ADVLOCK_EMISUSE);
    (void)advlock_conn_cancel(&f.c, &f.m[1], f.now);
}

/* Names taken one after another: a member holds while another waits on
 * the server (no lease: the holder needs only the watch). Meanwhile the
 * holder's release waits for the wait's end; under a lease the wait is
 * refused, its heartbeats could not go. */
static void a_server_wait_while_another_member_holds(void **state)
{
    (void)state;
    setup_caps(ADVLOCK_CAPS_PIPELINE | ADVLOCK_CAPS_PREPARE | ADVLOCK_CAPS_CANCEL);
    hold_first();
    advlock_options o;
    server_wait_options(&o);
    /* Not for the key held here: the session's re-entrant lock would grant
     * it at once, beside the hold. */
    assert_int_equal(advlock_conn_start_acquire_key(&f.c, &f.m[1], 1, 5000, &o, f.now),
                     ADVLOCK_EMISUSE);
    acquire(1, 2, &o);
    assert_int_equal(poll_all(), 2);
    expect_query(0, ADVLOCK_SQL_TRY_LOCK, ADVLOCK_FORM_NAMED, &f.m[1]);
    answer(ADVLOCK_RESULT_FALSE);
    assert_int_equal(poll_all(), 3);
    expect_query(1, ADVLOCK_SQL_LOCK, ADVLOCK_FORM_NAMED, &f.m[1]);
    answer(ADVLOCK_RESULT_TRUE); /* the prepare */
    assert_int_equal(advlock_conn_start_release(&f.c, &f.m[0], f.now), ADVLOCK_EMISUSE);
    assert_int_equal(advlock_conn_start_verify(&f.c, &f.m[0], f.now), ADVLOCK_EMISUSE);
    assert_true(advlock_conn_watching(&f.c));
    answer(ADVLOCK_RESULT_TRUE);
    assert_true(advlock_member_held(&f.m[0]));
    assert_true(advlock_member_held(&f.m[1]));
    assert_int_equal(events(NULL), 1);
    assert_int_equal(advlock_conn_start_release(&f.c, &f.m[0], f.now), 0);

    setup_caps(ADVLOCK_CAPS_PIPELINE | ADVLOCK_CAPS_PREPARE | ADVLOCK_CAPS_CANCEL);
    hold_under_lease();
    assert_int_equal(advlock_conn_start_acquire_key(&f.c, &f.m[1], 2, 5000, &o, f.now),
                     ADVLOCK_EMISUSE);
}

static void a_cancel_lets_the_undo_of_a_grant_go_out(void **state)
{
    (void)state;
    wait_on_server();
    /* lock_timeout, at the deadline, may come with the grant it raced:
     * the machine unlocks. */
    f.now += 5000;
    answer_error("55P03", "canceling statement due to lock timeout");
    assert_int_equal(advlock_conn_cancel(&f.c, &f.m[0], f.now), 0);
    assert_true(advlock_member_busy(&f.m[0]));
    expect_unlock(&f.m[0]);
    answer(ADVLOCK_RESULT_TRUE);
    assert_int_equal(events(NULL), 1);
    assert_false(advlock_member_busy(&f.m[0]));
    assert_false(advlock_member_held(&f.m[0]));
}

/* m[0] waits on the server under the connection's lease and is granted
 * more than a heartbeat's interval after the wait was sent. */
static void grant_late_under_a_lease(void)
{
    setup_caps(ADVLOCK_CAPS_PIPELINE | ADVLOCK_CAPS_PREPARE | ADVLOCK_CAPS_CANCEL);
    assert_int_equal(advlock_conn_set_lease(&f.c, 30000, 0), 0);
    advlock_options o;
    server_wait_options(&o);
    assert_int_equal(advlock_conn_start_acquire_key(&f.c, &f.m[0], 9, 60000, &o, f.now), 0);
    check_session(PID);
    assert_int_equal(poll_all(), 2);
    expect_query(0, ADVLOCK_SQL_LEASE_SETUP, ADVLOCK_FORM_UNNAMED, NULL);
    answer(ADVLOCK_RESULT_TRUE);
    assert_int_equal(poll_all(), 3);
    expect_query(1, ADVLOCK_SQL_TRY_LOCK, ADVLOCK_FORM_NAMED, &f.m[0]);
    answer(ADVLOCK_RESULT_TRUE); /* the prepare */
    answer(ADVLOCK_RESULT_FALSE);
    assert_int_equal(poll_all(), 3);
    expect_query(1, ADVLOCK_SQL_LOCK, ADVLOCK_FORM_NAMED, &f.m[0]);
    answer(ADVLOCK_RESULT_TRUE); /* the prepare */
    advlock_lease_plan plan;
    assert_int_equal(advlock_lease_plan_init(&plan, 30000, 0), 0);
    f.now += plan.heartbeat_ms + 1;
    answer(ADVLOCK_RESULT_TRUE);
    /* Not held yet: the server may have stopped hearing this client while
     * the grant came; a heartbeat sent now says whether it still does. */
    assert_true(advlock_member_busy(&f.m[0]));
    assert_int_equal(events(NULL), 0);
    assert_true(advlock_conn_wants_send(&f.c)); /* a pump that asks first sends it */
    assert_int_equal(poll_all(), 2);
    expect_query(0, ADVLOCK_SQL_HEARTBEAT, ADVLOCK_FORM_UNNAMED, &f.m[0]);
    assert_int_equal(f.sent[0].param, plan.user_timeout_ms);
    expect_sync(1);
    assert_int_equal(advlock_conn_next_wake(&f.c), f.now + plan.deadline_ms);
}

static void a_late_grant_counts_from_its_heartbeat(void **state)
{
    (void)state;
    grant_late_under_a_lease();
    answer(ADVLOCK_RESULT_TRUE);
    assert_int_equal(events(NULL), 1);
    assert_true(advlock_member_held(&f.m[0]));
    assert_int_equal(advlock_member_report(&f.m[0])->outcome, ADVLOCK_ACQUIRED);
    assert_true(advlock_conn_next_wake(&f.c) < INT64_MAX); /* heartbeats from now on */
}

static void a_late_grant_whose_heartbeat_fails_is_lost(void **state)
{
    (void)state;
    grant_late_under_a_lease();
    answer_error("55000", "settings changed");
    advlock_conn_event last;
    assert_int_equal(events(&last), 2); /* DONE, then LOST */
    assert_int_equal(last.kind, ADVLOCK_CONN_LOST);
    assert_int_equal(advlock_member_report(&f.m[0])->outcome, ADVLOCK_ACQUIRED);
    assert_string_equal(advlock_member_words(&f.m[0]),
                        "the heartbeat after a long wait for the grant failed (settings "
                        "changed); stop the work now");
    assert_int_equal(advlock_member_lease_expiry(&f.m[0]), ADVLOCK_LEASE_SETTINGS);
}

static void a_late_grant_whose_heartbeat_never_answers_is_lost(void **state)
{
    (void)state;
    grant_late_under_a_lease();
    f.now = advlock_conn_next_wake(&f.c);
    advlock_conn_on_timer(&f.c, f.now);
    assert_int_equal(events(NULL), 2);
    assert_false(advlock_member_busy(&f.m[0]));
    assert_false(advlock_member_held(&f.m[0]));
    answer(ADVLOCK_RESULT_TRUE); /* too late: changes nothing */
    assert_int_equal(events(NULL), 0);
}

/* A key the session holds without the engine knowing (a statement of the
 * caller's took it) is released and verified by key: the member holds
 * nothing before; a verify that finds it held holds it from then on; a key
 * another member holds is refused, lest its hold be taken. */
static void a_key_not_held_is_released_and_verified(void **state)
{
    (void)state;
    hold_first();
    assert_int_equal(advlock_conn_start_release_key(&f.c, &f.m[1], 1, NULL, f.now),
                     ADVLOCK_EMISUSE);
    assert_int_equal(advlock_conn_start_release_key(&f.c, &f.m[1], 9, NULL, f.now), 0);
    assert_true(advlock_member_busy(&f.m[1]));
    /* Its key is taken meanwhile: another member's try is answered busy. */
    acquire(2, 9, NULL);
    assert_int_equal(poll_all(), 3); /* the unlock's prepare, the unlock, the sync */
    expect_query(1, ADVLOCK_SQL_UNLOCK, ADVLOCK_FORM_NAMED, &f.m[1]);
    assert_int_equal(f.sent[1].param, 9);
    assert_int_equal(advlock_next_action(&f.m[2].machine_).kind, ADVLOCK_ACTION_SLEEP);
    answer(ADVLOCK_RESULT_TRUE);
    answer(ADVLOCK_RESULT_TRUE);
    assert_int_equal(advlock_member_report(&f.m[1])->outcome, ADVLOCK_RELEASED);
    assert_false(advlock_member_held(&f.m[1]));
    assert_int_equal(advlock_peers_count(&f.c.peers_), 1);
    (void)events(NULL);
    /* A verify that finds its key held holds it. */
    assert_int_equal(advlock_conn_start_verify_key(&f.c, &f.m[3], 11, NULL, f.now), 0);
    assert_int_equal(poll_all(), 3); /* the held row's prepare, the row, the sync */
    expect_query(1, ADVLOCK_SQL_HELD, ADVLOCK_FORM_NAMED, &f.m[3]);
    answer(ADVLOCK_RESULT_TRUE);
    answer(ADVLOCK_RESULT_TRUE);
    assert_int_equal(advlock_member_report(&f.m[3])->outcome, ADVLOCK_HELD);
    assert_true(advlock_member_held(&f.m[3]));
    assert_int_equal(advlock_conn_start_release(&f.c, &f.m[3], f.now), 0);
    assert_int_equal(poll_all(), 2);
    answer(ADVLOCK_RESULT_TRUE);
    assert_int_equal(advlock_member_report(&f.m[3])->outcome, ADVLOCK_RELEASED);
    /* A release by key the server failed leaves m holding nothing. */
    assert_int_equal(advlock_conn_start_release_key(&f.c, &f.m[3], 12, NULL, f.now), 0);
    assert_int_equal(poll_all(), 2);
    expect_query(0, ADVLOCK_SQL_UNLOCK, ADVLOCK_FORM_NAMED, &f.m[3]);
    answer_error("XX000", "boom");
    assert_int_equal(advlock_member_report(&f.m[3])->outcome, ADVLOCK_FAILED);
    assert_false(advlock_member_held(&f.m[3]));
    assert_int_equal(advlock_peers_count(&f.c.peers_), 1);
}

/* The lease's deadlines: while held, the stop deadline; once it ran out,
 * the time the server frees the lock by, a lease after the engine saw it
 * run out, or after a statement sent later (the server heard the client). */
/* A verify out when the lease runs out (behind a proxy, one statement at a
 * time, the heartbeat waits behind it): the lock is lost all the same, the
 * verify's answer, if it ever comes, is nobody's. */
static void a_verify_out_when_the_lease_runs_out_is_lost(void **state)
{
    (void)state;
    hold_under_lease();
    (void)events(NULL);
    assert_int_equal(advlock_conn_start_verify(&f.c, &f.m[0], f.now), 0);
    (void)poll_all();
    while (!advlock_member_lost(&f.m[0]) && f.now < 60000) {
        f.now = advlock_conn_next_wake(&f.c);
        advlock_conn_on_timer(&f.c, f.now);
    }
    assert_true(advlock_member_lost(&f.m[0]));
    assert_false(advlock_member_busy(&f.m[0]));
    advlock_conn_event last;
    assert_true(events(&last) >= 1);
    assert_int_equal(last.kind, ADVLOCK_CONN_LOST);
    assert_int_equal(advlock_member_lease_expiry(&f.m[0]), ADVLOCK_LEASE_NO_ANSWER);
}

static void a_lease_that_ran_out_says_when_the_server_frees(void **state)
{
    (void)state;
    advlock_lease_plan plan;
    assert_int_equal(advlock_lease_plan_init(&plan, 30000, 0), 0);
    int64_t stop = 0, free_by = 0;
    assert_int_equal(advlock_conn_lease_deadline(&f.c, &stop, &free_by), 0);
    hold_under_lease();
    (void)events(NULL);
    assert_int_equal(advlock_conn_lease_deadline(&f.c, &stop, &free_by), 1);
    assert_int_equal(stop, plan.deadline_ms); /* the try went at 0 */
    assert_int_equal(free_by, INT64_MAX);
    /* No heartbeat answers: at the stop deadline the lease runs out. */
    while (!advlock_member_lost(&f.m[0]) && f.now < 10 * plan.deadline_ms) {
        f.now = advlock_conn_next_wake(&f.c);
        advlock_conn_on_timer(&f.c, f.now);
        (void)poll_all();
    }
    assert_true(advlock_member_lost(&f.m[0]));
    int64_t ran_out = f.now;
    assert_int_equal(advlock_conn_lease_deadline(&f.c, &stop, NULL), 2);
    assert_int_equal(stop, plan.deadline_ms);
    assert_int_equal(advlock_conn_lease_deadline(&f.c, NULL, &free_by), 2);
    assert_int_equal(free_by, ran_out + 30000);
    /* A statement sent later: the server frees a lease after it. */
    f.now = ran_out + 5000;
    assert_int_equal(advlock_conn_start_release_key(&f.c, &f.m[1], 9, NULL, f.now), 0);
    assert_true(poll_all() > 0);
    assert_int_equal(advlock_conn_lease_deadline(&f.c, NULL, &free_by), 2);
    assert_int_equal(free_by, ran_out + 5000 + 30000);
    /* A new server session has a new lease. */
    assert_int_equal(advlock_conn_on_reset(&f.c, PID + 1, TOKEN + 1, f.now), 0);
    assert_int_equal(advlock_conn_lease_deadline(&f.c, &stop, &free_by), 0);
}

/* While a lock is held under the lease, the same lease may be set again
 * (a pump that sets a member's options before each operation), which
 * changes nothing; another is refused. Held with no lease, none again: a
 * lease set up by the next acquire would bound the session while nothing
 * beats for the lock held (an acquire never granted starts no heartbeat). A
 * plan refused is EINVAL whatever is held. */
static void a_held_lock_keeps_its_lease_when_set_again(void **state)
{
    (void)state;
    hold_first();
    assert_int_equal(advlock_conn_set_lease(&f.c, 0, 0), 0);
    assert_int_equal(advlock_conn_set_lease(&f.c, 30000, 0), ADVLOCK_EMISUSE);
    assert_int_equal(advlock_conn_set_lease(&f.c, -1, 0), ADVLOCK_EINVAL);
    acquire(1, 2, NULL);
    assert_int_equal(poll_all(), 2); /* no lease setup: the try and its sync */
    expect_query(0, ADVLOCK_SQL_TRY_LOCK, ADVLOCK_FORM_NAMED, &f.m[1]);
    setup_caps(ADVLOCK_CAPS_PIPELINE | ADVLOCK_CAPS_PREPARE);
    hold_under_lease();
    int64_t wake = advlock_conn_next_wake(&f.c);
    assert_true(wake > 0 && wake < INT64_MAX);
    assert_int_equal(advlock_conn_set_lease(&f.c, 30000, 0), 0);
    assert_int_equal(advlock_conn_next_wake(&f.c), wake); /* runs on as it was */
    assert_int_equal(advlock_conn_lease_deadline(&f.c, NULL, NULL), 1);
    assert_int_equal(advlock_conn_set_lease(&f.c, 40000, 0), ADVLOCK_EMISUSE);
    assert_int_equal(advlock_conn_set_lease(&f.c, 30000, 1000), ADVLOCK_EMISUSE);
    assert_int_equal(advlock_conn_set_lease(&f.c, 0, 0), ADVLOCK_EMISUSE);
    /* Not while a member is busy. */
    acquire(1, 2, NULL);
    assert_int_equal(advlock_conn_set_lease(&f.c, 30000, 0), ADVLOCK_EMISUSE);
}

/* A pump that gives a connection up closes it and may leave the engine:
 * set up afresh on another connection, the members it had (one held, now
 * lost; one whose acquire failed) start there as on a new engine. */
static void a_given_up_engine_is_left_for_another_connection(void **state)
{
    (void)state;
    hold_first();
    acquire(1, 2, NULL);
    assert_int_equal(poll_all(), 2);
    advlock_conn_give_up(&f.c, ADVLOCK_ENOANSWER, "no answer", f.now);
    assert_true(advlock_member_lost(&f.m[0]));
    assert_int_equal(advlock_member_report(&f.m[1])->failure, ADVLOCK_ENOANSWER);
    assert_int_equal(events(NULL), 2);
    assert_int_equal(advlock_conn_outstanding(&f.c), 0);
    assert_int_equal(advlock_conn_start_acquire_key(&f.c, &f.m[1], 2, 5000, NULL, f.now),
                     ADVLOCK_EMISUSE);
    assert_int_equal(advlock_conn_init(&f.c, f.slots, SLOTS, f.buckets, BUCKETS, PID + 1, TOKEN + 1,
                                       ADVLOCK_CAPS_PIPELINE | ADVLOCK_CAPS_PREPARE),
                     0);
    /* The lost member's words and report stay readable till it starts. */
    assert_string_equal(advlock_member_words(&f.m[0]), "no answer");
    acquire(0, 1, NULL);
    acquire(1, 2, NULL);
    assert_int_equal(poll_all(), 3); /* the settings' row, the check, the sync */
    assert_int_equal(f.sent[1].param2, PID + 1);
}

/* A member lost with a connection given up, its LOST event not polled,
 * starts on the engine set up afresh (its stale news dropped). */
static void a_member_with_unpolled_news_starts_on_a_fresh_engine(void **state)
{
    (void)state;
    hold_first();
    advlock_conn_give_up(&f.c, ADVLOCK_ECONNLOST, "no answer", f.now);
    assert_true(advlock_member_lost(&f.m[0]));
    assert_int_equal(advlock_conn_init(&f.c, f.slots, SLOTS, f.buckets, BUCKETS, PID + 1, TOKEN + 1,
                                       ADVLOCK_CAPS_PIPELINE | ADVLOCK_CAPS_PREPARE),
                     0);
    acquire(0, 1, NULL);
    assert_int_equal(events(NULL), 0);
    assert_int_equal(poll_all(), 3);
}

/* Release or verify by key of transaction scope: only inside a block. A
 * verify by key under a lease: refused (a lock it found would be held with
 * no heartbeat). */
static void by_key_refused_outside_a_block_and_under_a_lease(void **state)
{
    (void)state;
    hold_first();
    advlock_options xact;
    advlock_options_init(&xact);
    xact.scope = ADVLOCK_TRANSACTION;
    assert_int_equal(advlock_conn_start_verify_key(&f.c, &f.m[1], 9, &xact, f.now),
                     ADVLOCK_EMISUSE);
    assert_int_equal(advlock_conn_start_release_key(&f.c, &f.m[2], 10, &xact, f.now),
                     ADVLOCK_EMISUSE);
    assert_false(advlock_member_busy(&f.m[1]) || advlock_member_busy(&f.m[2]));
    assert_int_equal(poll_all(), 0);
    setup_caps(ADVLOCK_CAPS_PIPELINE | ADVLOCK_CAPS_PREPARE);
    hold_under_lease();
    assert_int_equal(advlock_conn_start_verify_key(&f.c, &f.m[1], 11, NULL, f.now),
                     ADVLOCK_EMISUSE);
    assert_int_equal(advlock_conn_start_release_key(&f.c, &f.m[1], 11, NULL, f.now), 0);
}

/* A release by key waiting behind the session check when the connection
 * is reset was asked of the old session: it ends FAILED (the connection
 * lost), never run on the new one. */
static void a_release_by_key_parked_dies_with_its_session(void **state)
{
    (void)state;
    acquire(0, 1, NULL);
    assert_int_equal(advlock_conn_start_release_key(&f.c, &f.m[1], 9, NULL, f.now), 0);
    assert_true(advlock_member_busy(&f.m[1]));
    assert_int_equal(advlock_conn_on_reset(&f.c, PID + 1, TOKEN + 1, f.now), 0);
    assert_false(advlock_member_busy(&f.m[1]));
    assert_int_equal(advlock_member_report(&f.m[1])->outcome, ADVLOCK_FAILED);
    assert_int_equal(advlock_member_report(&f.m[1])->failure, ADVLOCK_ECONNLOST);
    assert_int_equal(poll_all(), 3); /* m[0]'s check of the new session */
    answer_capacity(64, 100);
    answer_session(PID + 1);
    int n = poll_all();
    assert_true(n > 0);
    for (int i = 0; i < n; i++) /* m[0]'s try: nothing of m[1]'s */
        assert_true(f.sent[i].member != &f.m[1]);
}

static void record_event(void *user, const advlock_event *ev)
{
    if (ev->kind == ADVLOCK_EVENT_WARNING)
        *(int *)user += 1;
}

/* A server's notice during a member's statement is a warning: an event of
 * the member's (before its DONE), in the same words for every pump, and its
 * callback hears it. */
static void notices_are_warnings(void **state)
{
    (void)state;
    int heard = 0;
    advlock_options o;
    advlock_options_init(&o);
    o.on_event = record_event;
    o.event_user = &heard;
    hold_first();
    acquire(1, 2, &o);
    assert_int_equal(poll_all(), 2);
    advlock_conn_on_notice(&f.c, "01000", "you don't own a lock of type ExclusiveLock\nmore",
                           f.now);
    answer(ADVLOCK_RESULT_TRUE);
    advlock_conn_event ev;
    assert_int_equal(advlock_conn_poll_event(&f.c, &ev), 1);
    assert_int_equal(ev.kind, ADVLOCK_CONN_WARNING);
    assert_ptr_equal(ev.member, &f.m[1]);
    assert_string_equal(advlock_conn_warning(&f.c), "you don't own a lock of type ExclusiveLock");
    assert_string_equal(advlock_conn_warning_sqlstate(&f.c), "01000");
    assert_int_equal(heard, 1);
    assert_int_equal(advlock_conn_poll_event(&f.c, &ev), 1);
    assert_int_equal(ev.kind, ADVLOCK_CONN_DONE);
    assert_int_equal(events(NULL), 0);
    /* The connection's own statement: no member. */
    advlock_conn_on_notice(&f.c, NULL, "a notice", f.now);
    assert_int_equal(advlock_conn_poll_event(&f.c, &ev), 1);
    assert_int_equal(ev.kind, ADVLOCK_CONN_WARNING);
    assert_null(ev.member);
    assert_string_equal(advlock_conn_warning_sqlstate(&f.c), "");
    /* A member started again leaves its warning to the connection. */
    assert_int_equal(advlock_conn_start_release(&f.c, &f.m[1], f.now), 0);
    assert_int_equal(poll_all(), 3);
    answer(ADVLOCK_RESULT_TRUE); /* the unlock's prepare: m[1]'s unlock is the head */
    advlock_conn_on_notice(&f.c, NULL, "a notice", f.now);
    answer(ADVLOCK_RESULT_TRUE);
    acquire(1, 3, NULL);
    assert_int_equal(advlock_conn_poll_event(&f.c, &ev), 1);
    assert_int_equal(ev.kind, ADVLOCK_CONN_WARNING);
    assert_null(ev.member);
}

/* A cancel request the pump could not send is a warning of the member
 * waiting on the server; a member that is not that waiter (cancelled, and
 * maybe freed since, or another) is never read: the warning is the
 * connection's. */
static void a_failed_cancel_is_the_waiters_warning(void **state)
{
    (void)state;
    wait_on_server();
    advlock_conn_event ev;
    advlock_conn_on_cancel_failed(&f.c, &f.m[0], "connection refused", f.now);
    assert_int_equal(advlock_conn_poll_event(&f.c, &ev), 1);
    assert_int_equal(ev.kind, ADVLOCK_CONN_WARNING);
    assert_ptr_equal(ev.member, &f.m[0]);
    assert_string_equal(advlock_conn_warning(&f.c),
                        "could not send a cancel request: connection refused");
    /* m[1] is on c, but not the waiter. */
    f.m[1].conn_ = &f.c;
    advlock_conn_on_cancel_failed(&f.c, &f.m[1], "no", f.now);
    assert_int_equal(advlock_conn_poll_event(&f.c, &ev), 1);
    assert_null(ev.member);
}

/* ---- Lock-delay ------------------------------------------------------------ */

/* Under a 30 s lease m[0] takes key 1 with lock-delay, within timeout_ms:
 * the try is granted, its mark's read not yet polled. */
static void grant_held_back(int64_t timeout_ms)
{
    advlock_options o;
    advlock_options_init(&o);
    o.lock_delay = 1;
    assert_int_equal(advlock_conn_set_lease(&f.c, 30000, 0), 0);
    assert_int_equal(advlock_conn_start_acquire_key(&f.c, &f.m[0], 1, timeout_ms, &o, f.now), 0);
    check_session(PID);
    assert_int_equal(poll_all(), 2);
    answer(ADVLOCK_RESULT_TRUE); /* the lease's setup, applied */
    assert_int_equal(poll_all(), 3);
    answer(ADVLOCK_RESULT_TRUE); /* the prepare */
    answer(ADVLOCK_RESULT_TRUE); /* granted */
    assert_false(advlock_member_held(&f.m[0]));
    assert_true(advlock_member_busy(&f.m[0]));
    assert_int_equal(events(NULL), 0);
}

/* As grant_held_back(): the mark's read goes next, alone, with this
 * holder's U = 27 s. */
static void grant_with_lock_delay(int64_t timeout_ms)
{
    grant_held_back(timeout_ms);
    assert_int_equal(poll_all(), 2);
    expect_query(0, ADVLOCK_SQL_MARK_TAKE, ADVLOCK_FORM_UNNAMED, &f.m[0]);
    assert_int_equal(f.sent[0].param, 1);
    assert_int_equal(f.sent[0].param2, (int64_t)TOKEN);
    assert_int_equal(f.sent[0].param3, 27000);
    expect_sync(1);
}

/* The mark row: another holder's token (0: none), its stop bound, and 1
 * if ours was written. */
static void answer_mark(int64_t token, int64_t stop_ms, int64_t written)
{
    advlock_answer a;
    advlock_answer_init(&a, ADVLOCK_RESULT_TRUE);
    a.settings[0] = token;
    a.settings[1] = stop_ms;
    a.settings[2] = written;
    assert_int_equal(advlock_conn_on_answer(&f.c, &a, f.now), 0);
}

/* m[0]'s acquire ended with outcome, its one event DONE: holding only if
 * ACQUIRED. */
static void expect_done(advlock_outcome outcome)
{
    advlock_conn_event ev = {0};
    assert_int_equal(events(&ev), 1);
    assert_int_equal(ev.kind, ADVLOCK_CONN_DONE);
    assert_ptr_equal(ev.member, &f.m[0]);
    assert_int_equal(advlock_member_held(&f.m[0]), outcome == ADVLOCK_ACQUIRED);
    assert_int_equal(advlock_member_report(&f.m[0])->outcome, outcome);
}

static void expect_acquired(void)
{
    expect_done(ADVLOCK_ACQUIRED);
}

/* No mark, or the last holder's cleared: the one statement reads and
 * writes, and the grant is reported at its answer. */
static void lock_delay_clean_hand_off_costs_one_statement(void **state)
{
    (void)state;
    grant_with_lock_delay(5000);
    answer_mark(0, 0, 1);
    expect_acquired();
    assert_int_equal(poll_all(), 0);
}

/* Another holder's mark: the grant is held, not reported, until its stop
 * bound and the margin have passed since the grant's answer, heartbeats
 * going meanwhile; then our mark is written over it. */
static void lock_delay_waits_out_a_foreign_mark(void **state)
{
    (void)state;
    grant_with_lock_delay(60000);
    int64_t granted = f.now;
    answer_mark(999, 20000, 0);
    assert_true(advlock_member_sleeping(&f.m[0]));
    advlock_conn_event ev = {0};
    assert_int_equal(events(&ev), 1);
    assert_int_equal(ev.kind, ADVLOCK_CONN_WARNING);
    assert_ptr_equal(ev.member, &f.m[0]);
    assert_string_equal(advlock_conn_warning(&f.c),
                        "lock-delay: waiting out the previous holder's lease until 21s into the "
                        "acquire (its stop bound 20s + 1s from the grant): it left the lock "
                        "without releasing it");
    int64_t until = granted + 20000 + ADVLOCK_LEASE_MARGIN_MS;
    int beats = 0;
    while (f.now < until) {
        f.now = advlock_conn_next_wake(&f.c);
        assert_true(f.now <= until);
        advlock_conn_on_timer(&f.c, f.now);
        int n = poll_all();
        if (n == 2 && f.sent[0].sql == ADVLOCK_SQL_HEARTBEAT) {
            beats++;
            answer(ADVLOCK_RESULT_TRUE);
        }
        if (f.now < until)
            assert_false(advlock_member_held(&f.m[0]));
    }
    assert_true(beats >= 2);
    expect_query(0, ADVLOCK_SQL_MARK_WRITE, ADVLOCK_FORM_UNNAMED, &f.m[0]);
    assert_int_equal(f.sent[0].param3, 27000);
    expect_sync(1);
    f.now += 3;
    answer_mark(0, 0, 1);
    expect_acquired();
    assert_int_equal(advlock_member_report(&f.m[0])->elapsed_ms, f.now);
}

/* The timeout first: the grant is given back, the mark left as it was
 * (nothing written), and the acquire ends TIMED_OUT. */
static void lock_delay_timeout_gives_back_and_leaves_the_mark(void **state)
{
    (void)state;
    grant_with_lock_delay(5000);
    answer_mark(999, 27000, 0);
    (void)events(NULL);
    assert_int_equal(advlock_conn_next_wake(&f.c) <= 5000, 1);
    f.now = 5000;
    advlock_conn_on_timer(&f.c, f.now);
    assert_int_equal(poll_all(), 3);
    expect_query(0, ADVLOCK_SQL_UNLOCK, ADVLOCK_FORM_PREPARE, NULL);
    expect_query(1, ADVLOCK_SQL_UNLOCK, ADVLOCK_FORM_NAMED, &f.m[0]);
    assert_int_equal(f.sent[1].param, 1);
    answer(ADVLOCK_RESULT_TRUE);
    assert_true(advlock_member_busy(&f.m[0]));
    answer(ADVLOCK_RESULT_TRUE);
    advlock_conn_event ev = {0};
    assert_int_equal(events(&ev), 1);
    assert_int_equal(ev.kind, ADVLOCK_CONN_DONE);
    assert_false(advlock_member_held(&f.m[0]));
    assert_int_equal(advlock_member_report(&f.m[0])->outcome, ADVLOCK_TIMED_OUT);
    /* The key is free in the process again. */
    assert_int_equal(advlock_conn_start_acquire_key(&f.c, &f.m[1], 1, 0, NULL, f.now), 0);
}

/* A cancel while the grant is held back gives it back first. */
static void lock_delay_cancel_gives_back(void **state)
{
    (void)state;
    grant_with_lock_delay(60000);
    answer_mark(999, 27000, 0);
    (void)events(NULL);
    assert_int_equal(advlock_conn_cancel(&f.c, &f.m[0], f.now), 0);
    assert_true(advlock_member_busy(&f.m[0]));
    expect_unlock(&f.m[0]);
    answer(ADVLOCK_RESULT_TRUE);
    advlock_conn_event ev = {0};
    assert_int_equal(events(&ev), 1);
    assert_int_equal(ev.kind, ADVLOCK_CONN_DONE);
    assert_int_equal(advlock_member_report(&f.m[0])->outcome, ADVLOCK_CANCELLED);
}

/* The grant goes back after our mark was written: the clear, alone, then
 * the unlock after its sync (the clear's answer and the unlock's prepare
 * answered here). */
static void expect_clear_then_unlock(const advlock_member *m)
{
    assert_int_equal(poll_all(), 5);
    expect_query(0, ADVLOCK_SQL_MARK_CLEAR, ADVLOCK_FORM_UNNAMED, m);
    assert_int_equal(f.sent[0].param, 1);
    assert_int_equal(f.sent[0].param2, (int64_t)TOKEN);
    assert_int_equal(f.sent[0].param3, 0); /* outside a block: waits for no flush */
    expect_sync(1);
    expect_query(2, ADVLOCK_SQL_UNLOCK, ADVLOCK_FORM_PREPARE, NULL);
    expect_query(3, ADVLOCK_SQL_UNLOCK, ADVLOCK_FORM_NAMED, m);
    expect_sync(4);
    answer_mark(0, 0, 1);
    assert_true(advlock_member_busy(m));
    answer(ADVLOCK_RESULT_TRUE); /* the prepare */
}

/* The acquire of m[0] ended FAILED at its give-back's answer: no ACQUIRED
 * ever, the connection's transaction block its reason. */
static void expect_refused_in_block(void)
{
    expect_done(ADVLOCK_FAILED);
    assert_int_equal(advlock_member_report(&f.m[0])->failure, ADVLOCK_ESERVER);
    assert_string_equal(advlock_member_sqlstate(&f.m[0]), "25001");
    assert_non_null(strstr(advlock_member_words(&f.m[0]), "inside a transaction block"));
}

/* m[0]'s grant goes back inside a block, where nothing goes prepared: our
 * mark cleared first where it was written (cleared), then the unlock, its
 * answer still to come. */
static void expect_unlock_in_block(int cleared)
{
    assert_int_equal(poll_all(), cleared ? 4 : 2);
    int at = 0;
    if (cleared) {
        expect_query(0, ADVLOCK_SQL_MARK_CLEAR, ADVLOCK_FORM_UNNAMED, &f.m[0]);
        expect_sync(1);
        at = 2;
    }
    expect_query(at, ADVLOCK_SQL_UNLOCK, ADVLOCK_FORM_UNNAMED, &f.m[0]);
    expect_sync(at + 1);
    if (cleared)
        answer_mark(0, 0, 1);
}

/* A session lock with lock-delay inside the caller's transaction block:
 * its mark would commit or roll back with the block. Refused at the start;
 * a block that begins between the grant and the mark (before its read,
 * while it is out, while the member waits out another holder) gives the
 * grant back, and the acquire fails. */
static void lock_delay_refused_inside_a_block(void **state)
{
    (void)state;
    advlock_options o;
    advlock_options_init(&o);
    o.lock_delay = 1;
    assert_int_equal(advlock_conn_set_lease(&f.c, 30000, 0), 0);
    advlock_conn_on_transaction(&f.c, 1);
    assert_int_equal(advlock_conn_start_acquire_key(&f.c, &f.m[0], 1, 5000, &o, f.now),
                     ADVLOCK_EMISUSE);
    assert_false(advlock_member_busy(&f.m[0]));
    advlock_conn_on_transaction(&f.c, 0);

    /* Granted, its mark's read not sent yet. */
    grant_held_back(5000);
    advlock_conn_on_transaction(&f.c, 1);
    expect_unlock_in_block(0);
    answer(ADVLOCK_RESULT_TRUE);
    expect_refused_in_block();

    /* Its mark's read out and written when the block began. */
    setup(NULL);
    grant_with_lock_delay(5000);
    advlock_conn_on_transaction(&f.c, 1);
    answer_mark(0, 0, 1);
    expect_unlock_in_block(1);
    answer(ADVLOCK_RESULT_TRUE);
    expect_refused_in_block();

    /* Waiting out another holder's mark. */
    setup(NULL);
    grant_with_lock_delay(60000);
    answer_mark(999, 20000, 0);
    assert_int_equal(events(NULL), 1); /* the warning */
    advlock_conn_on_transaction(&f.c, 1);
    assert_false(advlock_member_sleeping(&f.m[0]));
    expect_unlock_in_block(0);
    answer(ADVLOCK_RESULT_TRUE);
    expect_refused_in_block();
}

/* Heartbeats go unanswered until the lease runs out (the stop deadline). */
static void run_the_lease_out(void)
{
    int turns = 0;
    while (advlock_conn_lease_deadline(&f.c, NULL, NULL) != 2) {
        assert_true(turns++ < 20);
        f.now = advlock_conn_next_wake(&f.c);
        assert_true(f.now < INT64_MAX);
        advlock_conn_on_timer(&f.c, f.now);
        (void)poll_all();
    }
}

/* m[0]'s acquire ended FAILED with the lease, never ACQUIRED, and nothing
 * was sent to give its grant back (the session is taken for gone). */
static void expect_lost_with_the_lease(void)
{
    advlock_conn_event ev = {0};
    int n = 0;
    while (advlock_conn_poll_event(&f.c, &ev)) {
        assert_int_not_equal(ev.kind, ADVLOCK_CONN_LOST);
        if (ev.kind == ADVLOCK_CONN_DONE) {
            assert_ptr_equal(ev.member, &f.m[0]);
            n++;
        }
    }
    assert_int_equal(n, 1);
    assert_false(advlock_member_busy(&f.m[0]));
    assert_false(advlock_member_held(&f.m[0]));
    assert_int_equal(advlock_member_report(&f.m[0])->outcome, ADVLOCK_FAILED);
    assert_int_equal(advlock_member_report(&f.m[0])->failure, ADVLOCK_ECONNLOST);
    assert_int_not_equal(advlock_member_lease_expiry(&f.m[0]), ADVLOCK_LEASE_LIVE);
    assert_non_null(strstr(advlock_member_words(&f.m[0]), "lock-delay: the lease ran out"));
    for (int i = 0; i < poll_all(); i++)
        assert_true(f.sent[i].kind != ADVLOCK_STATEMENT_QUERY
                    || (f.sent[i].sql != ADVLOCK_SQL_UNLOCK
                        && f.sent[i].sql != ADVLOCK_SQL_MARK_WRITE
                        && f.sent[i].sql != ADVLOCK_SQL_MARK_CLEAR));
}

/* The lease runs out while a grant is held back: the member waiting out
 * another holder's mark, and one whose mark's read is out, end FAILED with
 * the lease, as the held locks are lost; neither reports ACQUIRED. */
static void lock_delay_lease_runs_out_while_held_back(void **state)
{
    (void)state;
    grant_with_lock_delay(INT32_MAX);
    answer_mark(999, 600000, 0);
    assert_true(advlock_member_sleeping(&f.m[0]));
    (void)events(NULL);
    run_the_lease_out();
    expect_lost_with_the_lease();

    /* The mark's read out, answered written after the lease ran out. */
    setup(NULL);
    grant_with_lock_delay(INT32_MAX);
    run_the_lease_out();
    assert_true(advlock_member_busy(&f.m[0]));
    answer_mark(0, 0, 1);
    expect_lost_with_the_lease();
}

/* A mark statement out past the acquire's timeout (blocked on another
 * transaction's row lock): the engine wakes at the deadline; the acquire
 * ends TIMED_OUT at the answer, the grant given back, a mark of ours
 * written meanwhile cleared first. A client that can send cancel requests
 * is asked for one, again while the mark is late, nothing else going out
 * meanwhile. */
static void lock_delay_mark_out_past_the_timeout(void **state)
{
    (void)state;
    grant_with_lock_delay(5000);
    assert_int_equal(advlock_conn_next_wake(&f.c), 5000);
    f.now = 5000;
    advlock_conn_on_timer(&f.c, f.now);
    assert_int_equal(poll_all(), 0);
    f.now += 40;
    /* A standby's wait the timeout's cancel ended warns: the timeout stands. */
    advlock_conn_on_notice(&f.c, "01000",
                           "canceling wait for synchronous replication due to user request", f.now);
    answer_mark(0, 0, 1);              /* written, late */
    assert_int_equal(events(NULL), 1); /* the warning's */
    expect_clear_then_unlock(&f.m[0]);
    answer(ADVLOCK_RESULT_TRUE);
    expect_done(ADVLOCK_TIMED_OUT);
    assert_non_null(strstr(advlock_member_words(&f.m[0]), "timeout passed"));

    setup_caps(ADVLOCK_CAPS_PIPELINE | ADVLOCK_CAPS_PREPARE | ADVLOCK_CAPS_CANCEL);
    grant_with_lock_delay(5000);
    f.now = advlock_conn_next_wake(&f.c);
    assert_int_equal(f.now, 5000);
    advlock_conn_on_timer(&f.c, f.now);
    assert_true(advlock_conn_wants_send(&f.c));
    assert_int_equal(poll_all(), 1);
    assert_int_equal(f.sent[0].kind, ADVLOCK_STATEMENT_CANCEL);
    assert_int_equal(f.sent[0].sql, ADVLOCK_SQL_MARK_TAKE);
    assert_ptr_equal(f.sent[0].member, &f.m[0]);
    advlock_conn_on_cancel_failed(&f.c, &f.m[0], "connection refused", f.now);
    advlock_conn_event ev = {0};
    assert_int_equal(advlock_conn_poll_event(&f.c, &ev), 1);
    assert_ptr_equal(ev.member, &f.m[0]);
    assert_int_equal(advlock_conn_next_wake(&f.c), 5250);
    f.now = 5250;
    advlock_conn_on_timer(&f.c, f.now);
    assert_int_equal(poll_all(), 1);
    assert_int_equal(f.sent[0].kind, ADVLOCK_STATEMENT_CANCEL);
    answer_error("57014", "canceling statement due to user request");
    expect_unlock(&f.m[0]); /* nothing written: no clear */
    answer(ADVLOCK_RESULT_TRUE);
    expect_done(ADVLOCK_TIMED_OUT);

    /* Where cancel requests go, nothing goes out behind a mark. */
    setup_caps(ADVLOCK_CAPS_PIPELINE | ADVLOCK_CAPS_PREPARE | ADVLOCK_CAPS_CANCEL);
    grant_with_lock_delay(5000);
    assert_int_equal(advlock_conn_start_acquire_key(&f.c, &f.m[1], 2, 0, NULL, f.now), 0);
    assert_false(advlock_conn_wants_send(&f.c));
    assert_int_equal(poll_all(), 0);
    answer_mark(0, 0, 1);
    expect_acquired();
    assert_int_equal(poll_all(), 2);
    expect_query(0, ADVLOCK_SQL_TRY_LOCK, ADVLOCK_FORM_NAMED, &f.m[1]);

    /* An acquire that tries once still gets its mark written: the mark
     * has its round trip's grace. */
    setup(NULL);
    grant_with_lock_delay(0);
    assert_true(advlock_conn_next_wake(&f.c) >= ADVLOCK_LEASE_MARGIN_MS);
    answer_mark(0, 0, 1);
    expect_acquired();
}

/* A late mark's member ended with the connection given up (its statement
 * left to the engine) is not late in its next acquire: no cancel request
 * goes for that one's mark before its own deadline. */
static void lock_delay_late_mark_given_up_is_not_late_again(void **state)
{
    (void)state;
    setup_caps(ADVLOCK_CAPS_PIPELINE | ADVLOCK_CAPS_PREPARE | ADVLOCK_CAPS_CANCEL);
    grant_with_lock_delay(5000);
    f.now = 5000;
    advlock_conn_on_timer(&f.c, f.now);
    assert_int_equal(poll_all(), 1);
    assert_int_equal(f.sent[0].kind, ADVLOCK_STATEMENT_CANCEL);
    advlock_conn_give_up(&f.c, ADVLOCK_ENOANSWER, "no answer", f.now);
    (void)events(NULL);
    assert_int_equal(advlock_conn_on_reset(&f.c, PID, TOKEN, f.now), 0);
    f.now += 250; /* when its cancel request was due again */
    grant_with_lock_delay(5000);
    assert_true(advlock_conn_next_wake(&f.c) > f.now);
    advlock_conn_on_timer(&f.c, f.now);
    assert_int_equal(poll_all(), 0);
    answer_mark(0, 0, 1);
    expect_acquired();
}

/* A cancel while the mark's read is out, whose answer comes back aborted
 * with its batch: the read did not run, and is not sent again; the grant
 * goes straight back. */
static void lock_delay_cancelled_mark_aborted_gives_back(void **state)
{
    (void)state;
    grant_with_lock_delay(60000);
    assert_int_equal(advlock_conn_cancel(&f.c, &f.m[0], f.now), 0);
    assert_true(advlock_member_busy(&f.m[0]));
    answer_aborted();
    expect_unlock(&f.m[0]);
    answer(ADVLOCK_RESULT_TRUE);
    expect_done(ADVLOCK_CANCELLED);
}

/* A mark that could not be written (no table), or whose commit stopped
 * waiting for the synchronous standby, fails the acquire after the grant
 * is given back. */
static void lock_delay_mark_not_written_gives_back(void **state)
{
    (void)state;
    grant_with_lock_delay(5000);
    answer_error("42P01", "relation \"advlock.mark\" does not exist");
    expect_unlock(&f.m[0]);
    answer(ADVLOCK_RESULT_TRUE);
    advlock_conn_event ev = {0};
    assert_int_equal(events(&ev), 1);
    assert_int_equal(advlock_member_report(&f.m[0])->outcome, ADVLOCK_FAILED);
    assert_int_equal(advlock_member_report(&f.m[0])->failure, ADVLOCK_ESERVER);
    assert_string_equal(advlock_member_sqlstate(&f.m[0]), "42P01");
    assert_non_null(
        strstr(advlock_member_words(&f.m[0]), "lock-delay: writing this holder's mark"));

    setup(NULL);
    grant_with_lock_delay(5000);
    advlock_conn_on_notice(&f.c, "01000",
                           "canceling wait for synchronous replication due to user request", f.now);
    answer_mark(0, 0, 1);
    expect_clear_then_unlock(&f.m[0]);
    answer(ADVLOCK_RESULT_TRUE);
    (void)events(NULL);
    assert_int_equal(advlock_member_report(&f.m[0])->outcome, ADVLOCK_FAILED);
    assert_non_null(strstr(advlock_member_words(&f.m[0]), "synchronous standby"));

    /* The same warning from a server speaking German: its SQLSTATE says it. */
    setup(NULL);
    grant_with_lock_delay(5000);
    advlock_conn_on_notice(&f.c, "01000", "breche Warten auf synchrone Replikation ab", f.now);
    answer_mark(0, 0, 1);
    expect_clear_then_unlock(&f.m[0]);
    answer(ADVLOCK_RESULT_TRUE);
    (void)events(NULL);
    assert_int_equal(advlock_member_report(&f.m[0])->outcome, ADVLOCK_FAILED);
    assert_non_null(strstr(advlock_member_words(&f.m[0]), "breche Warten"));

    /* A plain NOTICE (a trigger's, say) is no warning: the mark stands. */
    setup(NULL);
    grant_with_lock_delay(5000);
    assert_int_equal(advlock_conn_on_notice(&f.c, "00000", "a trigger's notice", f.now), 1);
    answer_mark(0, 0, 1);
    assert_int_equal(events(&ev), 2); /* the warning's, then the acquire's */
    assert_int_equal(advlock_member_report(&f.m[0])->outcome, ADVLOCK_ACQUIRED);
    assert_true(advlock_member_held(&f.m[0]));
}

/* A release clears our mark, alone, and its unlock follows after the sync
 * without waiting for the clear's answer. */
static void lock_delay_release_clears_before_the_unlock(void **state)
{
    (void)state;
    grant_with_lock_delay(5000);
    answer_mark(0, 0, 1);
    expect_acquired();
    assert_int_equal(advlock_conn_start_release(&f.c, &f.m[0], f.now), 0);
    assert_int_equal(poll_all(), 5);
    expect_query(0, ADVLOCK_SQL_MARK_CLEAR, ADVLOCK_FORM_UNNAMED, &f.m[0]);
    assert_int_equal(f.sent[0].param, 1);
    assert_int_equal(f.sent[0].param2, (int64_t)TOKEN);
    expect_sync(1);
    expect_query(2, ADVLOCK_SQL_UNLOCK, ADVLOCK_FORM_PREPARE, NULL);
    expect_query(3, ADVLOCK_SQL_UNLOCK, ADVLOCK_FORM_NAMED, &f.m[0]);
    expect_sync(4);
    answer_mark(0, 0, 1);
    assert_true(advlock_member_busy(&f.m[0]));
    answer(ADVLOCK_RESULT_TRUE);
    answer(ADVLOCK_RESULT_TRUE);
    assert_int_equal(advlock_member_report(&f.m[0])->outcome, ADVLOCK_RELEASED);
    /* The next acquire of the same member marks afresh. */
    advlock_options o;
    advlock_options_init(&o);
    o.lock_delay = 1;
    assert_int_equal(advlock_conn_start_acquire_key(&f.c, &f.m[0], 1, 5000, &o, f.now), 0);
    assert_int_equal(poll_all(), 2);
    answer(ADVLOCK_RESULT_TRUE);
    assert_int_equal(poll_all(), 2);
    expect_query(0, ADVLOCK_SQL_MARK_TAKE, ADVLOCK_FORM_UNNAMED, &f.m[0]);
    expect_sync(1);
    answer_mark(0, 0, 1);
    expect_acquired();
    /* Its release inside the caller's block: the clear says so (its $3),
     * and leaves the block's durability as the caller set it. */
    advlock_conn_on_transaction(&f.c, 1);
    assert_int_equal(advlock_conn_start_release(&f.c, &f.m[0], f.now), 0);
    assert_int_equal(poll_all(), 4);
    expect_query(0, ADVLOCK_SQL_MARK_CLEAR, ADVLOCK_FORM_UNNAMED, &f.m[0]);
    assert_int_equal(f.sent[0].param3, 1);
    expect_sync(1);
    expect_query(2, ADVLOCK_SQL_UNLOCK, ADVLOCK_FORM_UNNAMED, &f.m[0]);
    expect_sync(3);
}

/* What cannot hold is refused: a transaction's mark would commit or roll
 * back with the caller's transaction, a shared hold excludes no one, and
 * without the lease there is no stop bound to record. */
static void lock_delay_refusals(void **state)
{
    (void)state;
    advlock_options o;
    advlock_options_init(&o);
    o.lock_delay = 1;
    assert_int_equal(advlock_conn_start_acquire_key(&f.c, &f.m[0], 1, 0, &o, f.now),
                     ADVLOCK_EINVAL);
    assert_int_equal(advlock_conn_set_lease(&f.c, 30000, 0), 0);
    advlock_conn_on_transaction(&f.c, 1);
    o.scope = ADVLOCK_TRANSACTION;
    assert_int_equal(advlock_conn_start_acquire_key(&f.c, &f.m[0], 1, 0, &o, f.now),
                     ADVLOCK_EINVAL);
    o.scope = ADVLOCK_SESSION;
    advlock_conn_on_transaction(&f.c, 0);
    o.mode = ADVLOCK_SHARED;
    assert_int_equal(advlock_conn_start_acquire_key(&f.c, &f.m[0], 1, 0, &o, f.now),
                     ADVLOCK_EINVAL);
    assert_false(advlock_member_busy(&f.m[0]));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(first_acquire_checks_prepares_and_holds, setup),
        cmocka_unit_test_setup(aborted_batch_is_sent_again, setup),
        cmocka_unit_test_setup(cancelled_grant_is_given_back, setup),
        cmocka_unit_test_setup(reset_loses_held_members, setup),
        cmocka_unit_test_setup(close_stops_every_member_with_one_reason, setup),
        cmocka_unit_test_setup(a_release_waiting_dies_with_its_session, setup),
        cmocka_unit_test_setup(refused_lease_setup_fails_the_acquire, setup),
        cmocka_unit_test_setup(a_fenced_try_the_lease_refused_unlocks_nothing, setup),
        cmocka_unit_test_setup(lease_without_heartbeat_answer_expires, setup),
        cmocka_unit_test_setup(behind_a_proxy_one_statement_at_a_time, setup),
        cmocka_unit_test_setup(fenced_try_goes_alone, setup),
        cmocka_unit_test_setup(prepared_elsewhere_and_dropped_statements, setup),
        cmocka_unit_test_setup(nothing_named_inside_a_block, setup),
        cmocka_unit_test_setup(let_go_forgets_a_hold, setup),
        cmocka_unit_test_setup(past_the_share_is_refused_unsent, setup),
        cmocka_unit_test_setup(a_fenced_try_past_the_share_unlocks_nothing, setup),
        cmocka_unit_test_setup(a_fenced_try_undone_keeps_its_key, setup),
        cmocka_unit_test_setup(failed_undo_keeps_the_key_and_is_given_back, setup),
        cmocka_unit_test_setup(an_undo_that_ran_owes_nothing, setup),
        cmocka_unit_test_setup(unsent_undo_goes_again, setup),
        cmocka_unit_test_setup(xact_lock_is_held_until_the_block_ends, setup),
        cmocka_unit_test_setup(xact_locks_end_with_each_block, setup),
        cmocka_unit_test_setup(xact_cancel_too_late_keeps_the_grant, setup),
        cmocka_unit_test_setup(xact_fenced_try_of_a_held_key_backs_off, setup),
        cmocka_unit_test_setup(xact_acquire_under_way_ends_with_its_block, setup),
        cmocka_unit_test_setup(one_at_a_time_client, setup),
        cmocka_unit_test_setup(one_member_engine, setup),
        cmocka_unit_test_setup(one_at_a_time_unsent_undo_prepare_goes_again, setup),
        cmocka_unit_test_setup(full_slots_hold_statements_back, setup),
        cmocka_unit_test_setup(session_checked_in_a_block_is_checked_again, setup),
        cmocka_unit_test_setup(failed_verify_keeps_the_key, setup),
        cmocka_unit_test_setup(failed_give_back_goes_again, setup),
        cmocka_unit_test_setup(cancelled_fenced_error_is_given_back, setup),
        cmocka_unit_test_setup(cancelled_member_may_be_freed, setup),
        cmocka_unit_test_setup(move_slots_refuses_too_few, setup),
        cmocka_unit_test_setup(member_of_another_engine_refused, setup),
        cmocka_unit_test_setup(acquire_after_close_and_reset_is_sent, setup),
        cmocka_unit_test_setup(unsent_settings_row_strands_nobody, setup),
        cmocka_unit_test_setup(wants_send_only_what_poll_gives, setup),
        cmocka_unit_test_setup(parked_member_time_does_not_overflow, setup),
        cmocka_unit_test_setup(old_loss_after_new_grant_is_not_reported_last, setup),
        cmocka_unit_test_setup(reset_after_give_up_takes_work_again, setup),
        cmocka_unit_test_setup(acquire_on_a_dead_connection_then_reset, setup),
        cmocka_unit_test_setup(a_server_wait_stuck_past_its_deadline_is_cancelled, setup),
        cmocka_unit_test_setup(a_cancelled_server_wait_granted_meanwhile_is_given_back, setup),
        cmocka_unit_test_setup(a_server_wait_granted_is_held_and_excludes, setup),
        cmocka_unit_test_setup(a_server_wait_while_another_member_holds, setup),
        cmocka_unit_test_setup(a_cancel_lets_the_undo_of_a_grant_go_out, setup),
        cmocka_unit_test_setup(a_late_grant_counts_from_its_heartbeat, setup),
        cmocka_unit_test_setup(a_late_grant_whose_heartbeat_fails_is_lost, setup),
        cmocka_unit_test_setup(a_late_grant_whose_heartbeat_never_answers_is_lost, setup),
        cmocka_unit_test_setup(a_key_not_held_is_released_and_verified, setup),
        cmocka_unit_test_setup(a_lease_that_ran_out_says_when_the_server_frees, setup),
        cmocka_unit_test_setup(a_verify_out_when_the_lease_runs_out_is_lost, setup),
        cmocka_unit_test_setup(a_held_lock_keeps_its_lease_when_set_again, setup),
        cmocka_unit_test_setup(a_given_up_engine_is_left_for_another_connection, setup),
        cmocka_unit_test_setup(a_member_with_unpolled_news_starts_on_a_fresh_engine, setup),
        cmocka_unit_test_setup(by_key_refused_outside_a_block_and_under_a_lease, setup),
        cmocka_unit_test_setup(a_release_by_key_parked_dies_with_its_session, setup),
        cmocka_unit_test_setup(notices_are_warnings, setup),
        cmocka_unit_test_setup(a_failed_cancel_is_the_waiters_warning, setup),
        cmocka_unit_test_setup(lock_delay_clean_hand_off_costs_one_statement, setup),
        cmocka_unit_test_setup(lock_delay_waits_out_a_foreign_mark, setup),
        cmocka_unit_test_setup(lock_delay_timeout_gives_back_and_leaves_the_mark, setup),
        cmocka_unit_test_setup(lock_delay_cancel_gives_back, setup),
        cmocka_unit_test_setup(lock_delay_mark_not_written_gives_back, setup),
        cmocka_unit_test_setup(lock_delay_release_clears_before_the_unlock, setup),
        cmocka_unit_test_setup(lock_delay_refusals, setup),
        cmocka_unit_test_setup(lock_delay_refused_inside_a_block, setup),
        cmocka_unit_test_setup(lock_delay_lease_runs_out_while_held_back, setup),
        cmocka_unit_test_setup(lock_delay_mark_out_past_the_timeout, setup),
        cmocka_unit_test_setup(lock_delay_cancelled_mark_aborted_gives_back, setup),
        cmocka_unit_test_setup(lock_delay_late_mark_given_up_is_not_late_again, setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
