/* advlock_conn_turn(): a pump's turn in one call does what the calls it
 * stands for do, in their order: the answer, the timer when due, the poll. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "advlock.h"

enum { SLOTS = 4, BUCKETS = 16, PID = 100 };

typedef struct fixture {
    advlock_conn c;
    advlock_conn_slot slots[SLOTS];
    advlock_peer *buckets[BUCKETS];
    advlock_member m;
    advlock_statement st;
    advlock_answer a;
    int64_t wake;
} fixture;

static fixture f;

/* One statement at a time (asyncpg's caps), one member taking key 7. */
static int setup(void **state)
{
    (void)state;
    memset(&f, 0, sizeof f);
    assert_int_equal(advlock_conn_init(&f.c, f.slots, SLOTS, f.buckets, BUCKETS, PID, 1, 0), 0);
    advlock_member_init(&f.m);
    assert_int_equal(advlock_conn_start_acquire_key(&f.c, &f.m, 7, 5000, NULL, 0), 0);
    return 0;
}

/* A turn answering the statement in flight with r (no answer: r < 0). */
static int turn(int r, int64_t now)
{
    if (r < 0)
        return advlock_conn_turn(&f.c, NULL, &f.st, now, &f.wake);
    advlock_answer_init(&f.a, (advlock_result)r);
    f.a.server_pid = PID; /* the session row's, read only there */
    f.a.ours = 1;
    return advlock_conn_turn(&f.c, &f.a, &f.st, now, &f.wake);
}

static void expect_statement(int found, advlock_sql sql)
{
    assert_int_equal(found, ADVLOCK_TURN_STATEMENT);
    assert_int_equal(f.st.kind, ADVLOCK_STATEMENT_QUERY);
    assert_int_equal(f.st.sql, sql);
}

static void acquire_by_turns(void **state)
{
    (void)state;
    expect_statement(turn(-1, 0), ADVLOCK_SQL_CAPACITY);
    expect_statement(turn(ADVLOCK_RESULT_TRUE, 0), ADVLOCK_SQL_SESSION);
    expect_statement(turn(ADVLOCK_RESULT_TRUE, 0), ADVLOCK_SQL_TRY_LOCK);
    assert_int_equal(f.st.param, 7);
    /* Granted: nothing to send, the member's DONE waits, no timer. */
    assert_int_equal(turn(ADVLOCK_RESULT_TRUE, 0), ADVLOCK_TURN_EVENTS);
    assert_int_equal(f.wake, INT64_MAX);
    assert_true(advlock_member_held(&f.m));
    advlock_conn_event ev;
    assert_int_equal(advlock_conn_poll_event(&f.c, &ev), 1);
    assert_int_equal(ev.kind, ADVLOCK_CONN_DONE);
    assert_int_equal(advlock_conn_poll_event(&f.c, &ev), 0);
    assert_int_equal(turn(-1, 0), 0);
}

static void timer_runs_when_due(void **state)
{
    (void)state;
    (void)turn(-1, 0);
    (void)turn(ADVLOCK_RESULT_TRUE, 0);
    expect_statement(turn(ADVLOCK_RESULT_TRUE, 0), ADVLOCK_SQL_TRY_LOCK);
    /* Refused: the member sleeps till its next try, the turn's wake. */
    assert_int_equal(turn(ADVLOCK_RESULT_FALSE, 0), 0);
    assert_true(f.wake > 0 && f.wake <= 5000);
    assert_int_equal(advlock_conn_next_wake(&f.c), f.wake);
    int64_t due = f.wake;
    assert_int_equal(turn(-1, due - 1), 0); /* not due: no try */
    expect_statement(turn(-1, due), ADVLOCK_SQL_TRY_LOCK);
}

static void answer_with_nothing_in_flight_is_refused(void **state)
{
    (void)state;
    assert_int_equal(turn(ADVLOCK_RESULT_TRUE, 0), ADVLOCK_TURN_REFUSED);
    /* Nothing was done: the first statement is still the settings' row. */
    expect_statement(turn(-1, 0), ADVLOCK_SQL_CAPACITY);
    assert_int_equal(advlock_conn_turn(NULL, NULL, &f.st, 0, NULL), ADVLOCK_TURN_REFUSED);
    assert_int_equal(advlock_conn_turn(&f.c, NULL, NULL, 0, NULL), ADVLOCK_TURN_REFUSED);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(acquire_by_turns, setup),
        cmocka_unit_test_setup(timer_runs_when_due, setup),
        cmocka_unit_test_setup(answer_with_nothing_in_flight_is_refused, setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
