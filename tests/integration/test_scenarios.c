/*
 * The connection scenarios of tests/scenarios/connection.tsv through the C
 * drivers against a real PostgreSQL: the blocking adapter, the nonblocking
 * one and a lock set's member. The table says, per scenario, which report
 * to look at and what it must hold (outcome, failure, detail, statement,
 * the sentence's words, elapsed time and attempts); this file only sets
 * each scenario up. python/tests/test_scenarios.py runs the same table
 * through the Python drivers.
 *
 * Rows that need a harness the run lacks (PgBouncer: ADVLOCK_TEST_PGBOUNCER_TX)
 * are skipped, saying so; make pq-scenarios-test runs them all.
 */
#include "pg_test.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { LIMIT_MS = 10000, MAX_ROWS = 64, MAX_CASES = MAX_ROWS * 3, LINE_MAX_ = 4096 };

/* ---- the table ---------------------------------------------------------- */

enum {
    COL_SCENARIO,
    COL_REPORT,
    COL_OUTCOME,
    COL_FAILURE,
    COL_DETAIL,
    COL_SQL,
    COL_WORDS,
    COL_ELAPSED,
    COL_ATTEMPTS,
    COL_IN_DOUBT,
    COL_NEEDS,
    COL_DRIVERS,
    COL_COUNT = COL_DRIVERS + 6 + 1
};

static const char *const driver_columns[] = {"c_blocking", "c_async", "c_lockset"};
enum driver_kind { C_BLOCKING, C_ASYNC, C_LOCKSET };

typedef struct row {
    char *field[COL_COUNT];
} row;

typedef struct scenario_case {
    const row *row;
    enum driver_kind driver;
    char name[96];
} scenario_case;

static row rows[MAX_ROWS];
static size_t row_count;
static int columns[COL_COUNT]; /* the header's index of each column */

static const char *const column_names[COL_DRIVERS] = {
    "scenario", "report",     "outcome",  "failure",  "detail", "sql",
    "words",    "elapsed_ms", "attempts", "in_doubt", "needs"};

/* Splits line at tabs into at most n fields; returns how many. */
static size_t split_tabs(char *line, char **fields, size_t n)
{
    size_t count = 0;
    line[strcspn(line, "\r\n")] = '\0';
    for (char *p = line; count < n;) {
        fields[count++] = p;
        char *tab = strchr(p, '\t');
        if (tab == NULL)
            break;
        *tab = '\0';
        p = tab + 1;
    }
    return count;
}

static int column_of(char **header, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(header[i], name) == 0)
            return (int)i;
    fprintf(stderr, "test_scenarios: the table has no column %s\n", name);
    exit(1);
}

static void read_table(const char *path)
{
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        fprintf(stderr, "test_scenarios: %s: %s\n", path, strerror(errno));
        exit(1);
    }
    static char lines[MAX_ROWS + 1][LINE_MAX_];
    char *header[32];
    size_t header_n = 0, used = 0;
    while (used < MAX_ROWS + 1 && fgets(lines[used], LINE_MAX_, f) != NULL) {
        if (lines[used][0] == '#' || lines[used][0] == '\n')
            continue;
        if (header_n == 0) {
            header_n = split_tabs(lines[used++], header, 32);
            for (int c = 0; c < COL_DRIVERS; c++)
                columns[c] = column_of(header, header_n, column_names[c]);
            for (int d = 0; d < 3; d++)
                columns[COL_DRIVERS + d] = column_of(header, header_n, driver_columns[d]);
            continue;
        }
        char *fields[32];
        size_t n = split_tabs(lines[used++], fields, 32);
        if (n != header_n) {
            fprintf(stderr, "test_scenarios: %s: %zu fields where the header has %zu\n", path, n,
                    header_n);
            exit(1);
        }
        row *r = &rows[row_count++];
        for (int c = 0; c < COL_DRIVERS + 3; c++)
            r->field[c] = fields[columns[c]];
    }
    fclose(f);
}

/* ---- names in the table, as the header spells them ------------------------ */

typedef struct named {
    const char *name;
    int value;
} named;

#define N(prefix, x)  \
    {                 \
#x, prefix##x \
    }
static const named outcomes[] = {
    N(ADVLOCK_, ACQUIRED),  N(ADVLOCK_, RELEASED), N(ADVLOCK_, NOT_HELD), N(ADVLOCK_, TIMED_OUT),
    N(ADVLOCK_, CANCELLED), N(ADVLOCK_, FAILED),   N(ADVLOCK_, HELD),     {NULL, 0}};
static const named failures[] = {
    {"NONE", 0},           N(ADVLOCK_, ENULL),    N(ADVLOCK_, ESERVER),   N(ADVLOCK_, ECONNLOST),
    N(ADVLOCK_, ESTANDBY), N(ADVLOCK_, ESESSION), N(ADVLOCK_, ENOANSWER), {NULL, 0}};
static const named details[] = {N(ADVLOCK_DETAIL_, NONE),
                                N(ADVLOCK_DETAIL_, CANCEL_TOO_LATE),
                                N(ADVLOCK_DETAIL_, UNDO_CANCELLED),
                                N(ADVLOCK_DETAIL_, UNDO_AFTER_DEADLINE),
                                N(ADVLOCK_DETAIL_, UNDO_AFTER_57014),
                                N(ADVLOCK_DETAIL_, DIAGNOSED),
                                N(ADVLOCK_DETAIL_, DIAGNOSIS_FAILED),
                                N(ADVLOCK_DETAIL_, LOST),
                                N(ADVLOCK_DETAIL_, UNDO_AFTER_FENCE_ERROR),
                                {NULL, 0}};
static const named statements[] = {N(ADVLOCK_SQL_, TRY_LOCK),
                                   N(ADVLOCK_SQL_, UNLOCK),
                                   N(ADVLOCK_SQL_, TRY_LOCK_GUARDED),
                                   N(ADVLOCK_SQL_, UNLOCK_GUARDED),
                                   N(ADVLOCK_SQL_, SESSION),
                                   N(ADVLOCK_SQL_, TRY_LOCK_FENCED),
                                   {NULL, 0}};
#undef N

static int value_of(const named *names, const char *name)
{
    for (; names->name != NULL; names++)
        if (strcmp(names->name, name) == 0)
            return names->value;
    fail_msg("the table names %s, which this test does not know", name);
    return -1;
}

/* ---- the drivers ------------------------------------------------------------ */

typedef struct driver {
    enum driver_kind kind;
    PGconn *conn;
    advlock_pq a;
    advlock_pq_lockset set;
    advlock_pq_member m;
    advlock_options o;
    const char *name;
} driver;

static void open_driver(driver *d, enum driver_kind kind, PGconn *conn, const advlock_options *o)
{
    memset(d, 0, sizeof *d);
    d->kind = kind;
    d->conn = conn;
    d->o = *o;
    if (kind == C_LOCKSET) {
        assert_int_equal(advlock_pq_lockset_init(&d->set, conn), 0);
        advlock_pq_member_init(&d->m);
        return;
    }
    assert_int_equal(
        kind == C_BLOCKING ? advlock_pq_init(&d->a, conn) : advlock_pq_async_init(&d->a, conn), 0);
    assert_int_equal(advlock_pq_set_options(&d->a, o), 0);
}

static void close_driver(driver *d)
{
    if (d->kind == C_LOCKSET)
        advlock_pq_lockset_finish(&d->set);
    PQfinish(d->conn);
}

/* Runs the nonblocking adapter until its operation ends; copies its report. */
static void async_finish(driver *d, advlock_pq_report *r)
{
    int64_t limit = advlock_pq_now_ms() + LIMIT_MS;
    while (advlock_pq_async_busy(&d->a)) {
        assert_true(advlock_pq_now_ms() < limit);
        assert_true(advlock_pq_wait(&d->a, -1, -1) >= 0);
    }
    *r = *advlock_pq_async_report(&d->a);
}

static void acquire(driver *d, const char *name, int64_t timeout_ms, advlock_pq_report *r)
{
    d->name = name;
    size_t len = strlen(name);
    switch (d->kind) {
    case C_BLOCKING:
        assert_int_equal(advlock_pq_acquire(&d->a, name, len, timeout_ms, r), 0);
        break;
    case C_ASYNC:
        assert_int_equal(
            advlock_pq_async_start_acquire(&d->a, name, len, timeout_ms, advlock_pq_now_ms()), 0);
        async_finish(d, r);
        break;
    case C_LOCKSET:
        assert_int_equal(
            advlock_pq_lockset_acquire(&d->set, &d->m, name, len, timeout_ms, &d->o, r), 0);
        break;
    }
}

static void release(driver *d, advlock_pq_report *r)
{
    size_t len = strlen(d->name);
    switch (d->kind) {
    case C_BLOCKING: assert_int_equal(advlock_pq_release(&d->a, d->name, len, r), 0); break;
    case C_ASYNC:
        assert_int_equal(advlock_pq_async_start_release(&d->a, d->name, len, advlock_pq_now_ms()),
                         0);
        async_finish(d, r);
        break;
    case C_LOCKSET: assert_int_equal(advlock_pq_lockset_release(&d->set, &d->m, r), 0); break;
    }
}

/* Whether the driver knows its held lock is lost, after watching as its
 * user would for up to ms: the blocking adapter's check, a turn of the
 * nonblocking adapter's loop, of the set's. */
static int watch(driver *d, int64_t ms)
{
    int64_t until = advlock_pq_now_ms() + ms;
    for (;;) {
        int64_t left = until - advlock_pq_now_ms();
        int turn = (int)(left < 50 ? (left > 0 ? left : 0) : 50);
        switch (d->kind) {
        case C_BLOCKING:
            assert_int_equal(advlock_pq_check(&d->a), 0);
            if (advlock_pq_async_lost(&d->a))
                return 1;
            pgt_sleep_ms(turn);
            break;
        case C_ASYNC:
            assert_true(advlock_pq_wait(&d->a, -1, turn) >= 0);
            if (advlock_pq_async_lost(&d->a))
                return 1;
            break;
        case C_LOCKSET:
            assert_true(advlock_pq_lockset_wait(&d->set, -1, turn) >= 0);
            if (advlock_pq_member_lost(&d->m))
                return 1;
            break;
        }
        if (left <= 0)
            return 0;
    }
}

static const advlock_pq_report *loss_report(const driver *d)
{
    return d->kind == C_LOCKSET ? advlock_pq_member_report(&d->m) : advlock_pq_async_report(&d->a);
}

/* ---- the scenarios: each sets up, and returns the report the row judges --- */

typedef struct scene {
    pgt_lock lock; /* the key and the observer */
    driver d;
    enum driver_kind kind;
    advlock_options o;
    advlock_pq_report judged;
} scene;

static void acquired(scene *s, PGconn *conn)
{
    open_driver(&s->d, s->kind, conn, &s->o);
    advlock_pq_report r;
    acquire(&s->d, s->lock.key, 5000, &r);
    pgt_expect_outcome(&r, ADVLOCK_ACQUIRED);
}

static void timeout_scene(scene *s, int clip)
{
    char key[32];
    snprintf(key, sizeof key, "%lld", (long long)s->lock.derived);
    pgt_query(s->lock.observer, (char[8]){0}, 8, "SELECT pg_advisory_lock($1::bigint)::text", key,
              (char *)NULL);
    s->o.clip_to_deadline = clip;
    open_driver(&s->d, s->kind, pgt_connect(), &s->o);
    acquire(&s->d, s->lock.key, 1000, &s->judged);
    pgt_query(s->lock.observer, (char[8]){0}, 8, "SELECT pg_advisory_unlock($1::bigint)::text", key,
              (char *)NULL);
}

static void scene_timeout_reference(scene *s)
{
    timeout_scene(s, 0);
}

static void scene_timeout_clipped(scene *s)
{
    timeout_scene(s, 1);
}

static void expect_lost(scene *s)
{
    assert_true(watch(&s->d, 5000));
    s->judged = *loss_report(&s->d);
    assert_int_equal(pgt_lock_count(s->lock.observer, s->lock.derived), 0);
}

static void scene_terminate_holder(scene *s)
{
    acquired(s, pgt_connect());
    pgt_terminate(s->lock.observer, PQbackendPID(s->d.conn));
    expect_lost(s);
}

static void scene_reset_holder(scene *s)
{
    acquired(s, pgt_connect());
    PQreset(s->d.conn);
    assert_int_equal(PQstatus(s->d.conn), CONNECTION_OK);
    expect_lost(s);
}

static void scene_idle_session_timeout(scene *s)
{
    PGconn *conn = pgt_connect();
    pgt_exec(conn, "SET idle_session_timeout = 500");
    acquired(s, conn);
    assert_false(watch(&s->d, 1200));
    assert_int_equal(pgt_lock_rows(s->lock.observer, s->lock.derived, "ExclusiveLock", 1, conn), 1);
    release(&s->d, &s->judged);
}

/* Acquires through the proxy conninfo in the environment variable proxy,
 * releasing what it took. */
static void through_proxy(scene *s, const char *proxy)
{
    open_driver(&s->d, s->kind, pgt_connect_env(proxy), &s->o);
    acquire(&s->d, s->lock.key, 1000, &s->judged);
    advlock_pq_report r;
    if (s->judged.lock.outcome == ADVLOCK_ACQUIRED) {
        release(&s->d, &r);
        pgt_expect_outcome(&r, ADVLOCK_RELEASED);
    }
}

static void scene_proxy_session_pool(scene *s)
{
    through_proxy(s, "ADVLOCK_TEST_PGBOUNCER_SESSION");
}

static void scene_proxy_claimed_session(scene *s)
{
    /* A server session claimed by another token, which the transaction
     * pool keeps for the next client, and hands out first (LIFO). */
    PGconn *other = pgt_connect_env("ADVLOCK_TEST_PGBOUNCER_TX");
    pgt_exec(other, "SELECT pg_catalog.set_config('advlock.session', '999', false)");
    PQfinish(other);
    through_proxy(s, "ADVLOCK_TEST_PGBOUNCER_TX");
}

static void scene_fence_error_after_grant(scene *s)
{
    char sql[512];
    pgt_exec(s->lock.observer, advlock_fence_setup_sql());
    pgt_exec(s->lock.observer,
             "CREATE OR REPLACE FUNCTION advlock.scenario_refuse() RETURNS trigger LANGUAGE "
             "plpgsql AS $$BEGIN RAISE EXCEPTION 'counter refused'; END$$");
    snprintf(sql, sizeof sql,
             "CREATE TRIGGER scenario_refuse BEFORE INSERT OR UPDATE ON advlock.fence FOR EACH "
             "ROW WHEN (NEW.key = %lld) EXECUTE FUNCTION advlock.scenario_refuse()",
             (long long)s->lock.derived);
    pgt_exec(s->lock.observer, sql);
    s->o.fence = 1;
    open_driver(&s->d, s->kind, pgt_connect(), &s->o);
    acquire(&s->d, s->lock.key, 1000, &s->judged);
    assert_int_equal(pgt_lock_count(s->lock.observer, s->lock.derived), 0);
    pgt_exec(s->lock.observer, "DROP TRIGGER scenario_refuse ON advlock.fence");
    pgt_exec(s->lock.observer, "DROP FUNCTION advlock.scenario_refuse()");
}

/* A lease of 8 s with a stop time of 1 s: heartbeats every 0.75 s, the
 * stop deadline 3 s after the last answered one's send. */
enum { LEASE_MS = 8000, LEASE_STOP_MS = 1000, LEASE_D_MS = 3000 };

static void scene_lease_expiry(scene *s)
{
    char conninfo[256];
    const char *listen = getenv("ADVLOCK_PG_LISTEN"), *port = getenv("PGPORT");
    if (listen == NULL || port == NULL) { /* run_case skips without them */
        fail();
        return;
    }
    snprintf(conninfo, sizeof conninfo, "host=%.*s port=%s", (int)strcspn(listen, "/"), listen,
             port);
    PGconn *conn = PQconnectdb(conninfo);
    assert_int_equal(PQstatus(conn), CONNECTION_OK);
    s->o.lease_ms = LEASE_MS;
    s->o.lease_stop_ms = LEASE_STOP_MS;
    if (s->kind == C_LOCKSET) {
        open_driver(&s->d, s->kind, conn, &s->o);
        assert_int_equal(advlock_pq_lockset_set_lease(&s->d.set, LEASE_MS, LEASE_STOP_MS), 0);
        s->d.o.lease_ms = 0; /* the set's, not the member's */
        s->d.o.lease_stop_ms = 0;
        advlock_pq_report r;
        acquire(&s->d, s->lock.key, 5000, &r);
        pgt_expect_outcome(&r, ADVLOCK_ACQUIRED);
    } else {
        acquired(s, conn);
    }
    int pid = PQbackendPID(conn);
    pgt_freeze(pid); /* the server stops answering, as behind a partition */
    int lost = watch(&s->d, LEASE_D_MS + 2000);
    pgt_terminate_frozen(s->lock.observer, pid);
    assert_true(lost);
    s->judged = *loss_report(&s->d);
}

/* The caller cancels while the try is in flight, and the server then
 * grants it: the driver gives the grant back, and the acquire ends
 * CANCELLED with no lock left. The backend is stopped while the try goes
 * out, so that the cancel surely comes first. */
static void scene_cancelled_grant_given_back(scene *s)
{
    char warm[200];
    snprintf(warm, sizeof warm, "%s/warm-up", s->lock.key);
    open_driver(&s->d, s->kind, pgt_connect(), &s->o);
    advlock_pq_report r;
    acquire(&s->d, warm, 1000, &r); /* the session check, done before */
    pgt_expect_outcome(&r, ADVLOCK_ACQUIRED);
    release(&s->d, &r);
    int pid = PQbackendPID(s->d.conn);
    pgt_freeze(pid);
    int64_t now = advlock_pq_now_ms();
    if (s->kind == C_LOCKSET) {
        assert_int_equal(advlock_pq_lockset_start_acquire(&s->d.set, &s->d.m, s->lock.key,
                                                          s->lock.len, 5000, &s->o, now),
                         0);
        for (int i = 0; i < 3; i++)
            assert_true(advlock_pq_lockset_wait(&s->d.set, -1, 50) >= 0);
        assert_int_equal(advlock_pq_lockset_cancel(&s->d.set, &s->d.m, advlock_pq_now_ms()), 0);
        s->judged = *advlock_pq_member_report(&s->d.m);
    } else {
        assert_int_equal(
            advlock_pq_async_start_acquire(&s->d.a, s->lock.key, s->lock.len, 5000, now), 0);
        for (int i = 0; i < 3; i++)
            assert_true(advlock_pq_wait(&s->d.a, -1, 50) >= 0);
        assert_int_equal(advlock_pq_async_cancel(&s->d.a, advlock_pq_now_ms()), 0);
    }
    assert_int_equal(kill(pid, SIGCONT), 0);
    if (s->kind == C_ASYNC)
        async_finish(&s->d, &s->judged);
    /* The set gives the grant back by itself, in its next turns. */
    int64_t limit = advlock_pq_now_ms() + LIMIT_MS;
    while (pgt_lock_count(s->lock.observer, s->lock.derived) != 0) {
        assert_true(advlock_pq_now_ms() < limit);
        if (s->kind == C_LOCKSET)
            assert_true(advlock_pq_lockset_wait(&s->d.set, -1, 20) >= 0);
        else
            pgt_sleep_ms(20);
    }
}

/* A batch of three members' tries goes out in one pipeline; the middle
 * one is cancelled in flight: it ends CANCELLED at once, its grant is
 * given back, and the others are granted as if it had not been there. */
static void scene_cancel_mid_batch(scene *s)
{
    assert_int_equal(s->kind, C_LOCKSET); /* the table: lock sets only */
    open_driver(&s->d, s->kind, pgt_connect(), &s->o);
    advlock_pq_lockset *set = &s->d.set;
    advlock_pq_member others[2];
    char names[2][200];
    advlock_pq_report r;
    acquire(&s->d, s->lock.key, 1000, &r); /* the session check, done before */
    release(&s->d, &r);
    for (int i = 0; i < 2; i++) {
        advlock_pq_member_init(&others[i]);
        snprintf(names[i], sizeof names[i], "%s/other-%d", s->lock.key, i);
    }
    int64_t now = advlock_pq_now_ms();
    assert_int_equal(advlock_pq_lockset_start_acquire(set, &others[0], names[0], strlen(names[0]),
                                                      5000, &s->o, now),
                     0);
    assert_int_equal(
        advlock_pq_lockset_start_acquire(set, &s->d.m, s->lock.key, s->lock.len, 5000, &s->o, now),
        0);
    assert_int_equal(advlock_pq_lockset_start_acquire(set, &others[1], names[1], strlen(names[1]),
                                                      5000, &s->o, now),
                     0);
    assert_int_equal(advlock_pq_lockset_process(set, ADVLOCK_PQ_WRITE, advlock_pq_now_ms()), 0);
    assert_int_equal(advlock_pq_lockset_wants(set), ADVLOCK_PQ_READ); /* sent, unanswered */
    assert_int_equal(advlock_pq_lockset_cancel(set, &s->d.m, advlock_pq_now_ms()), 0);
    s->judged = *advlock_pq_member_report(&s->d.m);
    int64_t limit = advlock_pq_now_ms() + LIMIT_MS;
    while (advlock_pq_lockset_busy(set) > 0
           || pgt_lock_count(s->lock.observer, s->lock.derived) != 0) {
        assert_true(advlock_pq_now_ms() < limit);
        assert_true(advlock_pq_lockset_wait(set, -1, 20) >= 0);
    }
    for (int i = 0; i < 2; i++) {
        pgt_expect_outcome(advlock_pq_member_report(&others[i]), ADVLOCK_ACQUIRED);
        assert_int_equal(advlock_pq_lockset_release(set, &others[i], &r), 0);
        pgt_expect_outcome(&r, ADVLOCK_RELEASED);
    }
}

static void scene_standby(scene *s)
{
    open_driver(&s->d, s->kind, pgt_connect_env("ADVLOCK_TEST_STANDBY"), &s->o);
    acquire(&s->d, s->lock.key, 1000, &s->judged);
}

typedef struct scene_fn {
    const char *scenario;
    void (*run)(scene *s);
} scene_fn;

static const scene_fn scenes[] = {
    {"timeout_reference", scene_timeout_reference},
    {"timeout_clipped", scene_timeout_clipped},
    {"terminate_holder", scene_terminate_holder},
    {"reset_holder", scene_reset_holder},
    {"idle_session_timeout", scene_idle_session_timeout},
    {"proxy_session_pool", scene_proxy_session_pool},
    {"proxy_claimed_session", scene_proxy_claimed_session},
    {"fence_error_after_grant", scene_fence_error_after_grant},
    {"standby", scene_standby},
    {"lease_expiry", scene_lease_expiry},
    {"cancel_mid_batch", scene_cancel_mid_batch},
    {"cancelled_grant_given_back", scene_cancelled_grant_given_back},
};

/* ---- judging the report by the row ---------------------------------------------- */

/* The row's words with {name} replaced by the lock's name. */
static void expand_words(const char *words, const char *name, char *out, size_t size)
{
    const char *at = strstr(words, "{name}");
    if (at == NULL)
        snprintf(out, size, "%s", words);
    else
        snprintf(out, size, "%.*s%s%s", (int)(at - words), words, name, at + 6);
}

static void judge(const row *rw, const advlock_pq_report *r, const char *name, const char *who)
{
    const char *said = pgt_describe(r, name);
    const char *const *f = (const char *const *)rw->field;
    if ((int)r->lock.outcome != value_of(outcomes, f[COL_OUTCOME]))
        fail_msg("%s: outcome %s, the table says %s: %s", who,
                 advlock_outcome_name(r->lock.outcome), f[COL_OUTCOME], said);
    if (r->lock.failure != value_of(failures, f[COL_FAILURE]))
        fail_msg("%s: failure %d (%s), the table says %s: %s", who, r->lock.failure,
                 advlock_strerror(r->lock.failure), f[COL_FAILURE], said);
    if ((int)r->lock.detail != value_of(details, f[COL_DETAIL]))
        fail_msg("%s: detail %d, the table says %s: %s", who, (int)r->lock.detail, f[COL_DETAIL],
                 said);
    if (strcmp(f[COL_SQL], "*") != 0 && (int)r->lock.sql != value_of(statements, f[COL_SQL]))
        fail_msg("%s: statement %d, the table says %s", who, (int)r->lock.sql, f[COL_SQL]);
    char words[512];
    expand_words(f[COL_WORDS], name, words, sizeof words);
    if (words[0] == '\0' ? said[0] != '\0' : strstr(said, words) == NULL)
        fail_msg("%s: said \"%s\", the table's words are \"%s\"", who, said, words);
    long long lo, hi;
    if (sscanf(f[COL_ELAPSED], "%lld..%lld", &lo, &hi) == 2
        && (r->lock.elapsed_ms < lo || r->lock.elapsed_ms > hi))
        fail_msg("%s: elapsed %lld ms, the table says %lld..%lld", who,
                 (long long)r->lock.elapsed_ms, lo, hi);
    if (strcmp(f[COL_ATTEMPTS], "-") != 0
        && r->lock.attempts != strtoull(f[COL_ATTEMPTS], NULL, 10))
        fail_msg("%s: %llu attempts, the table says %s", who, (unsigned long long)r->lock.attempts,
                 f[COL_ATTEMPTS]);
    if (advlock_detail_in_doubt(r->lock.detail) != (strcmp(f[COL_IN_DOUBT], "yes") == 0))
        fail_msg("%s: in doubt %d, the table says %s", who, advlock_detail_in_doubt(r->lock.detail),
                 f[COL_IN_DOUBT]);
    printf("# %s: %s after %lld ms, %llu attempts: %s\n", who,
           advlock_outcome_name(r->lock.outcome), (long long)r->lock.elapsed_ms,
           (unsigned long long)r->lock.attempts, said);
}

/* The variable the harness a row needs exports (NULL: any server will do). */
static const char *harness_of(const char *needs)
{
    static const char *const harnesses[][2] = {
        {"pgbouncer-session", "ADVLOCK_TEST_PGBOUNCER_SESSION"},
        {"pgbouncer-tx", "ADVLOCK_TEST_PGBOUNCER_TX"},
        {"standby", "ADVLOCK_TEST_STANDBY"},
        {"tcp", "ADVLOCK_PG_LISTEN"},
    };
    for (size_t i = 0; i < sizeof harnesses / sizeof harnesses[0]; i++)
        if (strcmp(needs, harnesses[i][0]) == 0)
            return harnesses[i][1];
    if (strcmp(needs, "-") != 0)
        fail_msg("the table needs %s, which this test does not know", needs);
    return NULL;
}

static void run_case(void **state)
{
    const scenario_case *c = *state;
    const row *rw = c->row;
    const char *harness = harness_of(rw->field[COL_NEEDS]);
    if (harness != NULL && getenv(harness) == NULL)
        skip(); /* make pq-scenarios-test runs it, in its harness */
    static scene s;
    memset(&s, 0, sizeof s);
    s.kind = c->driver;
    advlock_options_init(&s.o);
    pgt_lock_begin(&s.lock, c->name, NULL);
    const scene_fn *fn = NULL;
    for (size_t i = 0; i < sizeof scenes / sizeof scenes[0]; i++)
        if (strcmp(scenes[i].scenario, rw->field[COL_SCENARIO]) == 0)
            fn = &scenes[i];
    if (fn == NULL)
        fail_msg("%s: no setup in this test for the table's scenario", c->name);
    fn->run(&s);
    judge(rw, &s.judged, s.lock.key, c->name);
    close_driver(&s.d);
    pgt_lock_end(&s.lock);
}

int main(void)
{
    alarm(300); /* a hang fails the program instead of the whole run */
    const char *path = getenv("ADVLOCK_SCENARIOS");
    read_table(path != NULL ? path : "tests/scenarios/connection.tsv");
    static scenario_case cases[MAX_CASES];
    static struct CMUnitTest tests[MAX_CASES];
    size_t n = 0;
    /* ADVLOCK_SCENARIOS_NEEDS=standby: only the rows that need that harness. */
    const char *only = getenv("ADVLOCK_SCENARIOS_NEEDS");
    for (size_t i = 0; i < row_count; i++)
        for (int d = 0; d < 3 && (only == NULL || strcmp(only, rows[i].field[COL_NEEDS]) == 0);
             d++) {
            const char *cell = rows[i].field[COL_DRIVERS + d];
            if (strcmp(cell, "yes") != 0) {
                if (strncmp(cell, "drift: ", 7) == 0) /* known, to be fixed */
                    printf("# %s/%s skipped: %s\n", rows[i].field[COL_SCENARIO], driver_columns[d],
                           cell);
                else if (strncmp(cell, "n/a: ", 5) != 0) {
                    fprintf(stderr, "test_scenarios: %s, %s: \"%s\" is not yes, n/a or drift\n",
                            rows[i].field[COL_SCENARIO], driver_columns[d], cell);
                    return 1;
                }
                continue;
            }
            scenario_case *c = &cases[n];
            c->row = &rows[i];
            c->driver = (enum driver_kind)d;
            snprintf(c->name, sizeof c->name, "%s/%s", rows[i].field[COL_SCENARIO],
                     driver_columns[d]);
            tests[n] =
                (struct CMUnitTest){.name = c->name, .test_func = run_case, .initial_state = c};
            n++;
        }
    return _cmocka_run_group_tests("scenarios", tests, n, NULL, NULL);
}
