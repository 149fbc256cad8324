/*
 * Fidelity of the fake database: random sequences of advisory-lock
 * statements over 3 sessions and 4 keys run side by side on the fake and on
 * a real PostgreSQL, and after every statement both must agree on
 *   - the result: boolean, NULL, void row, command tag, or error (SQLSTATE
 *     and primary message),
 *   - the warning it raised, if any (SQLSTATE and message),
 *   - the pg_locks picture of every session (key, mode, granted),
 *   - whether a waiting statement is still waiting, and how it ended,
 *   - the rows of the core's holders query (ADVLOCK_SQL_HOLDERS), run by
 *     an observer session: which session, granted, mode, state, and the
 *     seconds held or waited (whole seconds, on the fake's clock fed with
 *     real time; a rare 1.5 s pause makes them count).
 *
 * The core's bounded waits (pg_advisory_lock with lock_timeout = $2 ms) run
 * with a short bound, which the test lets strike on both sides (55P03, and
 * the caller's lock_timeout back as it was), or a long one, which never
 * does within a sequence.
 *
 * The core's server session check runs too: the session row (its pid, in
 * recovery, and the claim of advlock.session for one of two tokens or 0),
 * and the guarded rows with either token, which run on a session that token
 * claimed and answer NULL elsewhere (the transaction-scoped ones run also
 * where the session holds no granted row of the key); claims made in blocks
 * roll back. So do
 * the verify's rows (ADVLOCK_SQL_HELD: does this session hold the key in a
 * mode, at either level), plain and guarded, and the lease's rows as a
 * Unix socket answers them (the setup NULL, the heartbeat TRUE, the guarded
 * heartbeat by the claim), inside blocks and failed blocks too.
 *
 * Waiting statements (pg_advisory_lock and friends) are sent asynchronously
 * when the fake predicts they wait and no other session is waiting: with one
 * waiter no deadlock can form, whose resolution PostgreSQL leaves to a
 * timer. The test waits until the server's pg_locks shows the session
 * waiting as well, and later for its result when the fake says it ended.
 *
 * Run under tests/pg/with-postgres.sh (it sets PGHOST and friends).
 *   test_fidelity [--sequences N] [--start S]   sequences S .. S+N-1
 *   test_fidelity --sequence S                  replay one, printing each step
 */
#include "advlock_fake.h"

#include <libpq-fe.h>

#include <inttypes.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { SESSIONS = 3, KEYS = 4, MAX_ROWS = 64, WAIT_LIMIT_MS = 5000 };
enum { BOOLOID = 16, INT4OID = 23, VOIDOID = 2278 };

typedef struct statement {
    const char *sql; /* NULL: the core's row `core`, its parameters as the core sends them */
    int keyed;       /* takes the key as $1 */
    int waits;       /* may wait for a lock */
    int weight;      /* how often the generator picks it */
    advlock_sql core;
} statement;

static const statement statements[] = {
    {"SELECT pg_try_advisory_lock($1)", 1, 0, 8, 0},
    {"SELECT pg_try_advisory_lock_shared($1)", 1, 0, 6, 0},
    {"SELECT pg_try_advisory_xact_lock($1)", 1, 0, 4, 0},
    {"SELECT pg_try_advisory_xact_lock_shared($1)", 1, 0, 3, 0},
    {"SELECT pg_advisory_lock($1)", 1, 1, 5, 0},
    {"SELECT pg_advisory_lock_shared($1)", 1, 1, 4, 0},
    {"SELECT pg_advisory_xact_lock($1)", 1, 1, 2, 0},
    {"SELECT pg_advisory_xact_lock_shared($1)", 1, 1, 2, 0},
    {"SELECT pg_advisory_unlock($1)", 1, 0, 8, 0},
    {"SELECT pg_advisory_unlock_shared($1)", 1, 0, 6, 0},
    {"SELECT pg_advisory_unlock_all()", 0, 0, 2, 0},
    {"BEGIN", 0, 0, 3, 0},
    {"COMMIT", 0, 0, 2, 0},
    {"ROLLBACK", 0, 0, 2, 0},
    {"DISCARD ALL", 0, 0, 1, 0},
    {"SELECT pg_advisory_lock_nonexistent($1)", 1, 0, 1, 0},
    {"SELEC 1", 0, 0, 1, 0},
    {NULL, 1, 1, 3, ADVLOCK_SQL_LOCK},
    {NULL, 1, 1, 2, ADVLOCK_SQL_LOCK_SHARED},
    {NULL, 1, 1, 1, ADVLOCK_SQL_XACT_LOCK},
    {NULL, 1, 1, 1, ADVLOCK_SQL_XACT_LOCK_SHARED},
    {NULL, 0, 0, 3, ADVLOCK_SQL_SESSION},
    {NULL, 1, 0, 3, ADVLOCK_SQL_TRY_LOCK_GUARDED},
    {NULL, 1, 0, 3, ADVLOCK_SQL_UNLOCK_GUARDED},
    {NULL, 1, 0, 2, ADVLOCK_SQL_TRY_LOCK_SHARED_GUARDED},
    {NULL, 1, 0, 2, ADVLOCK_SQL_UNLOCK_SHARED_GUARDED},
    {NULL, 1, 1, 2, ADVLOCK_SQL_LOCK_GUARDED},
    {NULL, 1, 1, 1, ADVLOCK_SQL_LOCK_SHARED_GUARDED},
    {NULL, 1, 0, 3, ADVLOCK_SQL_HELD},
    {NULL, 1, 0, 2, ADVLOCK_SQL_HELD_SHARED},
    {NULL, 1, 0, 2, ADVLOCK_SQL_HELD_GUARDED},
    {NULL, 1, 0, 1, ADVLOCK_SQL_HELD_SHARED_GUARDED},
    {NULL, 1, 0, 3, ADVLOCK_SQL_TRY_XACT_LOCK_GUARDED},
    {NULL, 1, 0, 2, ADVLOCK_SQL_TRY_XACT_LOCK_SHARED_GUARDED},
    {NULL, 1, 1, 1, ADVLOCK_SQL_XACT_LOCK_GUARDED},
    {NULL, 1, 1, 1, ADVLOCK_SQL_XACT_LOCK_SHARED_GUARDED},
    {NULL, 0, 0, 2, ADVLOCK_SQL_LEASE_SETUP},
    {NULL, 0, 0, 2, ADVLOCK_SQL_HEARTBEAT},
    {NULL, 0, 0, 2, ADVLOCK_SQL_HEARTBEAT_GUARDED},
};

/* The sessions' claim tokens: two clients', and 0 (claims nothing). */
static const int64_t tokens[] = {-6917529027641081857LL, 4242, 0};

/* A bounded wait's bound: short enough to strike within a step, or long
 * enough never to. */
enum { SHORT_BOUND_MS = 40, LONG_BOUND_MS = 600000 };

static const char *text_of(const statement *st)
{
    return st->sql != NULL ? st->sql : advlock_sql_text(st->core);
}

static int params_of(const statement *st)
{
    return st->sql == NULL ? advlock_sql_params(st->core) : st->keyed;
}

/* The lease rows' $1: a plan's tcp_user_timeout (ms). */
enum { LEASE_USER_TIMEOUT_MS = 27000 };

/* $1 the key (the session row's: the token; the lease rows': U), then a
 * wait's bound, then a guarded row's token, as the core's actions carry
 * them. */
static void params_for(const statement *st, int64_t key, int64_t bound, int64_t token,
                       int64_t params[3])
{
    int session = st->sql == NULL && st->core == ADVLOCK_SQL_SESSION;
    int lease = st->sql == NULL && st->core >= ADVLOCK_SQL_LEASE_SETUP
                && st->core <= ADVLOCK_SQL_HEARTBEAT_GUARDED;
    int wait = st->sql == NULL && advlock_sql_answer(st->core) == ADVLOCK_ANSWER_VOID;
    params[0] = session ? token : lease ? LEASE_USER_TIMEOUT_MS : key;
    params[1] = wait ? bound : token;
    params[2] = token;
}
enum { NSTATEMENTS = sizeof statements / sizeof statements[0] };

/* What one side said about one statement. */
typedef struct answer {
    advlock_fake_result r;
    int warnings; /* how many WARNINGs (the fake raises at most one) */
} answer;

typedef struct session {
    PGconn *conn;
    int pg_pid;
    int fake_pid;
    answer notices; /* the latest WARNING the server sent, and the count */
} session;

typedef struct lock_row {
    int session;
    int64_t key;
    int mode;
    int granted;
} lock_row;

typedef struct world {
    PGconn *observer;
    int fake_observer; /* the observer's twin in the fake, for the holders query */
    session s[SESSIONS];
    advlock_fake_db fake;
    int waiting;        /* the session in a waiting statement, or -1 */
    int64_t strikes_at; /* its short lock_timeout's end on the fake's clock, or 0 */
    int64_t keys[KEYS];
    int verbose;
    char log[64][128]; /* the sequence so far, for a failure report */
    int logged;
} world;

static world w;

/* How often the interesting cases came up, for the summary. */
static struct {
    int waits, granted_after_wait, deadlocks, cancels, warnings, errors, reconnects;
    int lock_timeouts;
    int holders_queries, holder_rows, rows_held_a_second, pauses;
    int session_rows, claims, guarded_nulls;
} seen;

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "fidelity: ");
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(2);
}

static void copy(char *dst, size_t size, const char *src)
{
    snprintf(dst, size, "%s", src != NULL ? src : "");
}

/* ---- talking to PostgreSQL ------------------------------------------------ */

static void on_notice(void *arg, const PGresult *res)
{
    answer *n = arg;
    const char *severity = PQresultErrorField(res, PG_DIAG_SEVERITY_NONLOCALIZED);
    if (severity == NULL || strcmp(severity, "WARNING") != 0)
        return;
    n->warnings++;
    copy(n->r.warning_sqlstate, sizeof n->r.warning_sqlstate,
         PQresultErrorField(res, PG_DIAG_SQLSTATE));
    copy(n->r.warning, sizeof n->r.warning, PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY));
}

static PGconn *connect_pg(void)
{
    PGconn *c = PQconnectdb("");
    if (PQstatus(c) != CONNECTION_OK)
        die("cannot connect: %s", PQerrorMessage(c));
    return c;
}

static void open_session(int i)
{
    session *s = &w.s[i];
    s->conn = connect_pg();
    s->pg_pid = PQbackendPID(s->conn);
    PQsetNoticeReceiver(s->conn, on_notice, &s->notices);
    if (advlock_fake_db_connect(&w.fake, &s->fake_pid) != 0)
        die("the fake database has no free session");
}

static PGresult *observe(const char *sql, int pid)
{
    char text[16];
    snprintf(text, sizeof text, "%d", pid);
    const char *values[1] = {text};
    PGresult *r = PQexecParams(w.observer, sql, pid != 0 ? 1 : 0, NULL, pid != 0 ? values : NULL,
                               NULL, NULL, 0);
    if (PQresultStatus(r) != PGRES_TUPLES_OK)
        die("observer query failed: %s", PQerrorMessage(w.observer));
    return r;
}

static int observe_count(const char *sql, int pid)
{
    PGresult *r = observe(sql, pid);
    int n = atoi(PQgetvalue(r, 0, 0));
    PQclear(r);
    return n;
}

static void pause_ms(long ms)
{
    struct timespec t = {ms / 1000, ms % 1000 * 1000000L};
    nanosleep(&t, NULL);
}

/* The fake's clock follows real time, so that the seconds in its holders
 * rows can be compared with the server's. */
static int64_t now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* An empty fake that follows the lock manager rules of the server it is
 * compared with (advlock_fake_db_set_server_version). */
static void fake_init(void)
{
    advlock_fake_db_init(&w.fake);
    advlock_fake_db_set_server_version(&w.fake, PQserverVersion(w.observer));
}

static void fake_clock_now(void)
{
    advlock_fake_db_set_time(&w.fake, now_ms());
}

/* Reads one statement's result, waiting at most WAIT_LIMIT_MS; returns 0
 * and fills a, or -1 if the server is still busy then. */
static int await_result(PGconn *c, answer *a, const answer *notices)
{
    PGresult *first = NULL;
    for (int waited = 0;;) {
        if (PQconsumeInput(c) == 0)
            die("connection failed: %s", PQerrorMessage(c));
        while (!PQisBusy(c)) {
            PGresult *r = PQgetResult(c);
            if (r == NULL)
                goto done;
            if (first == NULL)
                first = r;
            else
                PQclear(r);
        }
        if (waited >= WAIT_LIMIT_MS)
            return -1;
        struct pollfd p = {PQsocket(c), POLLIN, 0};
        poll(&p, 1, 10);
        waited += 10;
    }
done:
    memset(a, 0, sizeof *a);
    switch (PQresultStatus(first)) {
    case PGRES_TUPLES_OK:
        copy(a->r.command_tag, sizeof a->r.command_tag, PQcmdStatus(first));
        a->r.status = (advlock_fake_status)-1; /* unless it is one of these */
        if (PQntuples(first) == 1 && PQnfields(first) == 3 && PQftype(first, 0) == INT4OID
            && PQftype(first, 1) == BOOLOID && PQftype(first, 2) == BOOLOID) {
            a->r.status = ADVLOCK_FAKE_ROW_SESSION; /* the session row */
            a->r.session_pid = atoi(PQgetvalue(first, 0, 0));
            a->r.in_recovery = strcmp(PQgetvalue(first, 0, 1), "t") == 0;
            a->r.ours = strcmp(PQgetvalue(first, 0, 2), "t") == 0;
            break;
        }
        if (PQntuples(first) != 1 || PQnfields(first) != 1)
            break;
        if (PQgetisnull(first, 0, 0))
            a->r.status = ADVLOCK_FAKE_ROW_NULL;
        else if (PQftype(first, 0) == BOOLOID)
            a->r.status = strcmp(PQgetvalue(first, 0, 0), "t") == 0 ? ADVLOCK_FAKE_ROW_TRUE
                                                                    : ADVLOCK_FAKE_ROW_FALSE;
        else if (PQftype(first, 0) == VOIDOID)
            a->r.status = ADVLOCK_FAKE_ROW_VOID;
        break;
    case PGRES_COMMAND_OK:
        a->r.status = ADVLOCK_FAKE_COMMAND_OK;
        copy(a->r.command_tag, sizeof a->r.command_tag, PQcmdStatus(first));
        break;
    case PGRES_FATAL_ERROR:
        a->r.status = ADVLOCK_FAKE_SERVER_ERROR;
        copy(a->r.sqlstate, sizeof a->r.sqlstate, PQresultErrorField(first, PG_DIAG_SQLSTATE));
        copy(a->r.message, sizeof a->r.message, PQresultErrorField(first, PG_DIAG_MESSAGE_PRIMARY));
        break;
    default: a->r.status = (advlock_fake_status)-1; break;
    }
    PQclear(first);
    a->warnings = notices->warnings;
    copy(a->r.warning_sqlstate, sizeof a->r.warning_sqlstate, notices->r.warning_sqlstate);
    copy(a->r.warning, sizeof a->r.warning, notices->r.warning);
    return 0;
}

static void send_pg(int i, const statement *st, const int64_t *params)
{
    session *s = &w.s[i];
    memset(&s->notices, 0, sizeof s->notices);
    char text[3][24];
    for (int p = 0; p < 3; p++)
        snprintf(text[p], sizeof text[p], "%" PRId64, params[p]);
    const char *values[3] = {text[0], text[1], text[2]};
    const unsigned int types[3] = {20, 20, 20}; /* int8, as the core's drivers send them */
    int n = params_of(st);
    if (!PQsendQueryParams(s->conn, text_of(st), n, n > 0 ? types : NULL, n > 0 ? values : NULL,
                           NULL, NULL, 0))
        die("send failed: %s", PQerrorMessage(s->conn));
}

/* ---- comparing --------------------------------------------------------- */

static int row_order(const void *pa, const void *pb)
{
    const lock_row *a = pa, *b = pb;
    if (a->session != b->session)
        return a->session - b->session;
    if (a->key != b->key)
        return a->key < b->key ? -1 : 1;
    if (a->mode != b->mode)
        return a->mode - b->mode;
    return b->granted - a->granted;
}

static int session_of(int pid, int fake)
{
    for (int i = 0; i < SESSIONS; i++)
        if ((fake ? w.s[i].fake_pid : w.s[i].pg_pid) == pid)
            return i;
    return -1;
}

static int pg_rows(lock_row *rows)
{
    PGresult *r =
        observe("SELECT pid, ((classid::bigint << 32) | objid::bigint)::text, mode, granted, "
                "objsubid FROM pg_locks WHERE locktype = 'advisory' AND database = "
                "(SELECT oid FROM pg_database WHERE datname = current_database())",
                0);
    int n = PQntuples(r);
    if (n > MAX_ROWS)
        die("too many pg_locks rows");
    for (int i = 0; i < n; i++) {
        rows[i].session = session_of(atoi(PQgetvalue(r, i, 0)), 0);
        rows[i].key = strtoll(PQgetvalue(r, i, 1), NULL, 10);
        rows[i].mode = strcmp(PQgetvalue(r, i, 2), "ExclusiveLock") == 0 ? ADVLOCK_FAKE_EXCLUSIVE
                       : strcmp(PQgetvalue(r, i, 2), "ShareLock") == 0   ? ADVLOCK_FAKE_SHARED
                                                                         : -1;
        rows[i].granted = strcmp(PQgetvalue(r, i, 3), "t") == 0;
        if (strcmp(PQgetvalue(r, i, 4), "1") != 0)
            rows[i].mode = -2; /* not a single-bigint key: never equal to the fake's */
    }
    PQclear(r);
    qsort(rows, (size_t)n, sizeof *rows, row_order);
    return n;
}

static int fake_rows(lock_row *rows)
{
    advlock_fake_lock_row fr[MAX_ROWS];
    size_t n = advlock_fake_db_lock_rows(&w.fake, fr, MAX_ROWS);
    if (n > MAX_ROWS)
        die("too many fake lock rows");
    for (size_t i = 0; i < n; i++)
        rows[i] = (lock_row){session_of(fr[i].pid, 1), fr[i].key, (int)fr[i].mode, fr[i].granted};
    qsort(rows, n, sizeof *rows, row_order);
    return (int)n;
}

static const char *status_name(int status)
{
    static const char *const names[] = {
        "true",  "false",           "NULL",    "void", "command",
        "error", "connection lost", "waiting", "rows", "session row"};
    return status >= 0 && status < 10 ? names[status] : "unexpected result shape";
}

static void describe(const char *side, const answer *a)
{
    fprintf(stderr, "    %-10s %s", side, status_name((int)a->r.status));
    if (a->r.status == ADVLOCK_FAKE_ROW_SESSION)
        fprintf(stderr, " (pid %d, in recovery %d, ours %d)", a->r.session_pid, a->r.in_recovery,
                a->r.ours);
    if (a->r.command_tag[0])
        fprintf(stderr, " [%s]", a->r.command_tag);
    if (a->r.sqlstate[0])
        fprintf(stderr, " %s \"%s\"", a->r.sqlstate, a->r.message);
    if (a->warnings)
        fprintf(stderr, " WARNING x%d %s \"%s\"", a->warnings, a->r.warning_sqlstate, a->r.warning);
    fputc('\n', stderr);
}

static void print_rows(const char *side, const lock_row *rows, int n)
{
    fprintf(stderr, "    %s pg_locks:", side);
    for (int i = 0; i < n; i++)
        fprintf(stderr, " [s%d %" PRId64 " %s%s]", rows[i].session, rows[i].key,
                rows[i].mode == 0   ? "Exclusive"
                : rows[i].mode == 1 ? "Share"
                                    : "other",
                rows[i].granted ? "" : " waiting");
    fputc('\n', stderr);
}

static void mismatch(uint64_t seq, const char *what) __attribute__((noreturn));

static void mismatch(uint64_t seq, const char *what)
{
    fprintf(stderr, "FIDELITY MISMATCH in sequence %" PRIu64 ": %s\n  keys:", seq, what);
    for (int k = 0; k < KEYS; k++)
        fprintf(stderr, " k%d=%" PRId64, k, w.keys[k]);
    fprintf(stderr, "\n  steps so far:\n");
    for (int i = 0; i < w.logged; i++)
        fprintf(stderr, "    %s\n", w.log[i]);
    fprintf(
        stderr,
        "  replay: tests/pg/with-postgres.sh build/integration/test_fidelity --sequence %" PRIu64
        "\n",
        seq);
    exit(1);
}

static void compare_answers(uint64_t seq, const answer *fake, const answer *pg)
{
    const advlock_fake_result *f = &fake->r, *p = &pg->r;
    seen.deadlocks += strcmp(f->sqlstate, "40P01") == 0;
    seen.errors += f->status == ADVLOCK_FAKE_SERVER_ERROR;
    seen.warnings += fake->warnings;
    /* The session row names its session: the same one on both sides. */
    int same_row = f->status != ADVLOCK_FAKE_ROW_SESSION
                   || (session_of(f->session_pid, 1) == session_of(p->session_pid, 0)
                       && session_of(f->session_pid, 1) >= 0 && f->in_recovery == p->in_recovery
                       && f->ours == p->ours);
    seen.session_rows += f->status == ADVLOCK_FAKE_ROW_SESSION;
    seen.claims += f->status == ADVLOCK_FAKE_ROW_SESSION && f->ours;
    if (same_row && f->status == p->status && strcmp(f->command_tag, p->command_tag) == 0
        && strcmp(f->sqlstate, p->sqlstate) == 0 && strcmp(f->message, p->message) == 0
        && fake->warnings == pg->warnings && strcmp(f->warning_sqlstate, p->warning_sqlstate) == 0
        && strcmp(f->warning, p->warning) == 0)
        return;
    describe("fake:", fake);
    describe("postgres:", pg);
    mismatch(seq, "the statement's results differ");
}

static void compare_locks(uint64_t seq)
{
    lock_row f[MAX_ROWS], p[MAX_ROWS];
    int nf = fake_rows(f), np = pg_rows(p);
    int same = nf == np;
    for (int i = 0; same && i < nf; i++)
        same = row_order(&f[i], &p[i]) == 0 && f[i].session >= 0;
    if (w.verbose)
        print_rows("", p, np);
    if (same)
        return;
    print_rows("fake", f, nf);
    print_rows("postgres", p, np);
    mismatch(seq, "the pg_locks pictures differ");
}

static answer fake_answer(const advlock_fake_result *r)
{
    answer a;
    a.r = *r;
    a.warnings = r->warning[0] != '\0';
    return a;
}

static void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---- the holders query ------------------------------------------------------ */

typedef struct holder_row {
    int session;
    int granted;
    int mode;
    char state[32];
    long long seconds;
} holder_row;

static int holder_order(const void *pa, const void *pb)
{
    const holder_row *a = pa, *b = pb;
    if (a->session != b->session)
        return a->session - b->session;
    if (a->granted != b->granted)
        return b->granted - a->granted;
    return a->mode - b->mode;
}

static int mode_of(const char *mode)
{
    return strcmp(mode, "ExclusiveLock") == 0 ? ADVLOCK_FAKE_EXCLUSIVE
           : strcmp(mode, "ShareLock") == 0   ? ADVLOCK_FAKE_SHARED
                                              : -1;
}

static int pg_holders(int64_t key, holder_row *rows)
{
    char text[24];
    snprintf(text, sizeof text, "%" PRId64, key);
    const char *values[1] = {text};
    const unsigned int types[1] = {20};
    PGresult *r = PQexecParams(w.observer, advlock_sql_text(ADVLOCK_SQL_HOLDERS), 1, types, values,
                               NULL, NULL, 0);
    if (PQresultStatus(r) != PGRES_TUPLES_OK || PQnfields(r) != 8)
        die("holders query failed: %s", PQerrorMessage(w.observer));
    int n = PQntuples(r);
    if (n > MAX_ROWS)
        die("too many holders rows");
    for (int i = 0; i < n; i++) {
        rows[i].session = session_of(atoi(PQgetvalue(r, i, 0)), 0);
        rows[i].granted = strcmp(PQgetvalue(r, i, 1), "t") == 0;
        rows[i].mode = mode_of(PQgetvalue(r, i, 2));
        /* Unix-socket sessions with no application_name, as the fake says. */
        if (strcmp(PQgetvalue(r, i, 3), "") != 0 || strcmp(PQgetvalue(r, i, 4), "local") != 0)
            rows[i].mode = -2;
        copy(rows[i].state, sizeof rows[i].state, PQgetvalue(r, i, 5));
        rows[i].seconds = strtoll(PQgetvalue(r, i, 7), NULL, 10);
    }
    PQclear(r);
    qsort(rows, (size_t)n, sizeof *rows, holder_order);
    return n;
}

static int fake_holders(int64_t key, holder_row *rows)
{
    advlock_fake_result r;
    fake_clock_now();
    if (advlock_fake_db_exec(&w.fake, w.fake_observer, advlock_sql_text(ADVLOCK_SQL_HOLDERS), &key,
                             &r)
            != 0
        || r.status != ADVLOCK_FAKE_ROWS)
        die("the fake refused the holders query");
    advlock_holder h[MAX_ROWS];
    size_t n = advlock_fake_db_holders(&w.fake, w.fake_observer, key, h, MAX_ROWS);
    if (n > MAX_ROWS)
        die("too many fake holders rows");
    char tag[16];
    snprintf(tag, sizeof tag, "SELECT %u", (unsigned)n);
    if (strcmp(tag, r.command_tag) != 0)
        die("the fake's holders tag %s disagrees with its %u rows", r.command_tag, (unsigned)n);
    for (size_t i = 0; i < n; i++) {
        rows[i] = (holder_row){session_of(h[i].pid, 1), h[i].granted, mode_of(h[i].mode), "",
                               (long long)h[i].seconds};
        copy(rows[i].state, sizeof rows[i].state, h[i].state);
    }
    qsort(rows, n, sizeof *rows, holder_order);
    return (int)n;
}

static void print_holders(const char *side, const holder_row *rows, int n)
{
    fprintf(stderr, "    %s holders:", side);
    for (int i = 0; i < n; i++)
        fprintf(stderr, " [s%d %s %d '%s' %llds]", rows[i].session,
                rows[i].granted ? "holds" : "waits", rows[i].mode, rows[i].state, rows[i].seconds);
    fputc('\n', stderr);
}

/* Whole seconds on two clocks a few milliseconds apart may differ by one
 * across a boundary; 0 against 1 may not (the pauses keep ages far from it). */
static int same_seconds(long long fake, long long pg)
{
    return (fake == pg || fake - pg == 1 || pg - fake == 1) && (fake >= 1) == (pg >= 1);
}

static void compare_holders(uint64_t seq, int k)
{
    holder_row f[MAX_ROWS], p[MAX_ROWS];
    note("observer: holders of k%d", k);
    seen.holders_queries++;
    int nf = fake_holders(w.keys[k], f), np = pg_holders(w.keys[k], p);
    int same = nf == np;
    for (int i = 0; same && i < nf; i++) {
        same = f[i].session >= 0 && f[i].session == p[i].session && f[i].granted == p[i].granted
               && f[i].mode == p[i].mode && strcmp(f[i].state, p[i].state) == 0
               && same_seconds(f[i].seconds, p[i].seconds);
        seen.rows_held_a_second += p[i].seconds >= 1;
    }
    seen.holder_rows += nf;
    if (w.verbose)
        print_holders("", p, np);
    if (same)
        return;
    print_holders("fake", f, nf);
    print_holders("postgres", p, np);
    mismatch(seq, "the holders query's rows differ");
}

/* ---- steps ------------------------------------------------------------- */

static void note(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (w.logged < 64)
        vsnprintf(w.log[w.logged++], sizeof w.log[0], fmt, ap);
    va_end(ap);
    if (w.verbose) {
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        fputc('\n', stderr);
        va_end(ap);
    }
}

/* Blocks until the server shows the session waiting in pg_locks; fails if
 * the server answers instead. */
static void expect_waiting_on_server(uint64_t seq, int i)
{
    for (int waited = 0; waited < WAIT_LIMIT_MS; waited += 2) {
        if (PQconsumeInput(w.s[i].conn) == 0 || !PQisBusy(w.s[i].conn))
            mismatch(seq, "the fake waits, but PostgreSQL answered at once");
        if (observe_count("SELECT count(*) FROM pg_locks WHERE pid = $1 AND NOT granted",
                          w.s[i].pg_pid)
            > 0)
            return;
        pause_ms(2);
    }
    mismatch(seq, "the fake waits, but PostgreSQL never showed the session waiting");
}

/* A waiting statement the fake says has ended must end on the server too. */
static void settle_waiter(uint64_t seq)
{
    if (w.waiting < 0)
        return;
    session *s = &w.s[w.waiting];
    if (w.strikes_at > 0) {
        /* A short bound: let the lock timeout strike on both sides (the
         * server's timer started after the fake's, and ends a moment later:
         * await_result waits for it). */
        pause_ms((long)(w.strikes_at - now_ms() > 0 ? w.strikes_at - now_ms() : 0));
        fake_clock_now();
        if (advlock_fake_db_check_lock_timeout(&w.fake, s->fake_pid) == 1)
            seen.lock_timeouts++;
    }
    advlock_fake_result fr;
    int rc = advlock_fake_db_poll(&w.fake, s->fake_pid, &fr);
    if (rc == 0)
        return;
    if (rc != 1)
        die("fake poll failed: %d", rc);
    note("  s%d's waiting statement ended: %s %s", w.waiting, status_name((int)fr.status),
         fr.sqlstate);
    seen.granted_after_wait += fr.status == ADVLOCK_FAKE_ROW_VOID;
    answer pg, fake = fake_answer(&fr);
    if (await_result(s->conn, &pg, &s->notices) != 0)
        mismatch(seq, "the fake ended a wait that PostgreSQL still waits in");
    compare_answers(seq, &fake, &pg);
    w.waiting = -1;
    w.strikes_at = 0;
}

static void run_statement(uint64_t seq, int i, const statement *st, int k, const int64_t *params,
                          const advlock_fake_db *after, const advlock_fake_result *fr)
{
    char with[96] = "";
    if (st->sql == NULL) {
        int n = snprintf(with, sizeof with, "(the core's row %d):", (int)st->core);
        for (int p = 0; p < params_of(st) && n > 0 && (size_t)n < sizeof with; p++)
            n += snprintf(with + n, sizeof with - (size_t)n, " $%d %lld", p + 1,
                          (long long)params[p]);
    } else if (st->keyed) {
        snprintf(with, sizeof with, "  with k%d", k);
    }
    note("s%d: %s%s", i, st->sql != NULL ? st->sql : "", with);
    w.fake = *after;
    seen.guarded_nulls += fr->status == ADVLOCK_FAKE_ROW_NULL;
    send_pg(i, st, params);
    int64_t bound = st->waits && st->sql == NULL ? params[1] : 0;
    if (fr->status == ADVLOCK_FAKE_WAITING) {
        expect_waiting_on_server(seq, i);
        w.waiting = i;
        w.strikes_at = bound == SHORT_BOUND_MS ? now_ms() + bound : 0;
        seen.waits++;
        return;
    }
    answer pg, fake = fake_answer(fr);
    if (await_result(w.s[i].conn, &pg, &w.s[i].notices) != 0)
        mismatch(seq, "the fake answered at once, but PostgreSQL is still busy");
    compare_answers(seq, &fake, &pg);
}

/* Ends a session on both sides, waits until the server has let go of it,
 * and opens a new one in its place. */
static void reconnect(int i)
{
    note("s%d: close and reconnect", i);
    seen.reconnects++;
    int old = w.s[i].pg_pid;
    PQfinish(w.s[i].conn);
    fake_clock_now();
    advlock_fake_db_close(&w.fake, w.s[i].fake_pid);
    for (int waited = 0;; waited += 2) {
        if (observe_count("SELECT count(*) FROM pg_stat_activity WHERE pid = $1", old) == 0
            && observe_count("SELECT count(*) FROM pg_locks WHERE pid = $1", old) == 0)
            break;
        if (waited > WAIT_LIMIT_MS)
            die("backend %d did not exit", old);
        pause_ms(2);
    }
    open_session(i);
}

static void cancel_waiter(void)
{
    note("s%d: cancel its waiting statement", w.waiting);
    seen.cancels++;
    char err[256];
    PGcancel *c = PQgetCancel(w.s[w.waiting].conn);
    if (c == NULL || !PQcancel(c, err, sizeof err))
        die("cancel failed: %s", err);
    PQfreeCancel(c);
    fake_clock_now();
    if (advlock_fake_db_cancel(&w.fake, w.s[w.waiting].fake_pid) != 1)
        die("the fake had no waiting statement to cancel");
}

static int pick_statement(advlock_prng *p)
{
    int total = 0;
    for (int i = 0; i < NSTATEMENTS; i++)
        total += statements[i].weight;
    int r = (int)advlock_prng_below(p, (uint64_t)total);
    for (int i = 0; i < NSTATEMENTS; i++) {
        if (r < statements[i].weight)
            return i;
        r -= statements[i].weight;
    }
    return 0;
}

/* One step: a statement on a session not waiting, or a close, or a cancel
 * of the waiting session, or the observer's holders query. Statements whose
 * wait the fake predicts while another session waits are drawn again. */
/* The fake's answer, on a copy of it, to statement st on session i; 0, or
 * -1 when it would wait while another session waits. */
static int trial_run(int i, const statement *st, const int64_t *params, advlock_fake_db *trial,
                     advlock_fake_result *fr)
{
    fake_clock_now();
    *trial = w.fake;
    if (advlock_fake_db_exec_params(trial, w.s[i].fake_pid, text_of(st), params, params_of(st), fr)
        != 0)
        die("the fake refused a statement");
    return fr->status == ADVLOCK_FAKE_WAITING && w.waiting >= 0 ? -1 : 0;
}

static void step(uint64_t seq, advlock_prng *p)
{
    static advlock_fake_db trial;
    for (;;) {
        int i = (int)advlock_prng_below(p, SESSIONS);
        uint64_t r = advlock_prng_below(p, 100);
        if (r < 4 && w.waiting >= 0) {
            cancel_waiter();
            return;
        }
        if (r >= 95) {
            compare_holders(seq, (int)advlock_prng_below(p, KEYS));
            return;
        }
        if (i == w.waiting)
            continue;
        if (r < 8) {
            reconnect(i);
            return;
        }
        const statement *st = &statements[pick_statement(p)];
        int k = (int)advlock_prng_below(p, KEYS);
        int64_t bound = advlock_prng_below(p, 2) ? SHORT_BOUND_MS : LONG_BOUND_MS;
        int64_t params[3];
        params_for(st, w.keys[k], bound, tokens[advlock_prng_below(p, 3)], params);
        advlock_fake_result fr;
        if (trial_run(i, st, params, &trial, &fr) != 0)
            continue;
        run_statement(seq, i, st, k, params, &trial, &fr);
        return;
    }
}

static void reset(void);

/* The statement with this text, or the core's row sql (text NULL). */
static const statement *statement_of(const char *text, advlock_sql sql)
{
    for (int i = 0; i < NSTATEMENTS; i++)
        if (text != NULL ? statements[i].sql != NULL && strcmp(statements[i].sql, text) == 0
                         : statements[i].sql == NULL && statements[i].core == sql)
            return &statements[i];
    die("no such statement");
}

/* Sequence 0, before the random ones: the claim's paths that chance reaches
 * rarely, each checked against the server. A claim made in a block that
 * rolls back (or fails) is undone, one committed stays; a session holding a
 * lock is not claimed; DISCARD ALL (PgBouncer's reset) clears the claim
 * and the locks, and is refused in a block; guarded rows off their claim
 * answer NULL, a wait's too. */
static void run_claims_script(int *steps)
{
    static const struct {
        int session;
        const char *sql; /* NULL: the core's row */
        advlock_sql core;
        int token; /* index into tokens[] */
    } script[] = {
        {0, "BEGIN", 0, 0},
        {0, NULL, ADVLOCK_SQL_SESSION, 0},
        {0, NULL, ADVLOCK_SQL_TRY_LOCK_GUARDED, 0},
        {0, "ROLLBACK", 0, 0},
        {0, NULL, ADVLOCK_SQL_TRY_LOCK_GUARDED, 0},
        {0, NULL, ADVLOCK_SQL_SESSION, 0},
        {0, "DISCARD ALL", 0, 0},
        {0, NULL, ADVLOCK_SQL_SESSION, 1},
        {0, NULL, ADVLOCK_SQL_LOCK_SHARED_GUARDED, 1},
        {1, "BEGIN", 0, 0},
        {1, NULL, ADVLOCK_SQL_SESSION, 0},
        {1, "SELEC 1", 0, 0},
        {1, "COMMIT", 0, 0},
        {1, NULL, ADVLOCK_SQL_UNLOCK_GUARDED, 0},
        {1, "BEGIN", 0, 0},
        {1, NULL, ADVLOCK_SQL_SESSION, 0},
        {1, "DISCARD ALL", 0, 0},
        {1, "ROLLBACK", 0, 0},
        {1, "BEGIN", 0, 0},
        {1, NULL, ADVLOCK_SQL_SESSION, 0},
        {1, "COMMIT", 0, 0},
        {1, NULL, ADVLOCK_SQL_UNLOCK_GUARDED, 0},
        {1, NULL, ADVLOCK_SQL_SESSION, 1},
        {2, NULL, ADVLOCK_SQL_LOCK_GUARDED, 0},
        {2, NULL, ADVLOCK_SQL_SESSION, 2},
        {2, NULL, ADVLOCK_SQL_TRY_LOCK_GUARDED, 2},
        /* The guarded transaction rows: on a session holding the key at
         * session level and claimed by no token, NULL (try and wait); on
         * the holder's own claimed session, the function runs (re-entry);
         * on a session holding nothing of the key, it runs though another
         * token claimed it, and a second one there (the key now held)
         * answers NULL. */
        {2, "SELECT pg_try_advisory_lock_shared($1)", 0, 0},
        {2, "BEGIN", 0, 0},
        {2, NULL, ADVLOCK_SQL_TRY_XACT_LOCK_GUARDED, 1},
        {2, NULL, ADVLOCK_SQL_XACT_LOCK_SHARED_GUARDED, 0},
        {2, "ROLLBACK", 0, 0},
        {0, "BEGIN", 0, 0},
        {0, NULL, ADVLOCK_SQL_TRY_XACT_LOCK_SHARED_GUARDED, 1},
        {0, NULL, ADVLOCK_SQL_TRY_XACT_LOCK_GUARDED, 0},
        {0, "COMMIT", 0, 0},
        {2, "SELECT pg_advisory_unlock_shared($1)", 0, 0},
        {1, "BEGIN", 0, 0},
        {1, NULL, ADVLOCK_SQL_TRY_XACT_LOCK_SHARED_GUARDED, 1},
        {1, NULL, ADVLOCK_SQL_XACT_LOCK_GUARDED, 1},
        {1, "COMMIT", 0, 0},
    };
    static advlock_fake_db trial;
    reset();
    for (int k = 0; k < KEYS; k++)
        w.keys[k] = k + 1;
    for (size_t n = 0; n < sizeof script / sizeof script[0]; n++) {
        const statement *st = statement_of(script[n].sql, script[n].core);
        int64_t params[3];
        params_for(st, w.keys[0], LONG_BOUND_MS, tokens[script[n].token], params);
        advlock_fake_result fr;
        if (trial_run(script[n].session, st, params, &trial, &fr) != 0
            || fr.status == ADVLOCK_FAKE_WAITING)
            die("the claims script waits");
        run_statement(0, script[n].session, st, 0, params, &trial, &fr);
        compare_locks(0);
    }
    *steps += (int)(sizeof script / sizeof script[0]);
}

/* Back to no locks, no transactions, no waiters, on both sides. */
static void reset(void)
{
    if (w.waiting >= 0) {
        cancel_waiter();
        answer ignored;
        if (await_result(w.s[w.waiting].conn, &ignored, &w.s[w.waiting].notices) != 0)
            die("a cancelled statement did not end");
        w.waiting = -1;
        w.strikes_at = 0;
    }
    for (int i = 0; i < SESSIONS; i++) {
        PQclear(PQexec(w.s[i].conn, "ROLLBACK"));
        PQclear(PQexec(w.s[i].conn, "SELECT pg_advisory_unlock_all()"));
        PQclear(PQexec(w.s[i].conn, "RESET advlock.session"));
    }
    fake_init();
    fake_clock_now();
    for (int i = 0; i < SESSIONS; i++)
        if (advlock_fake_db_connect(&w.fake, &w.s[i].fake_pid) != 0)
            die("the fake database has no free session");
    if (advlock_fake_db_connect(&w.fake, &w.fake_observer) != 0)
        die("the fake database has no free session");
    w.logged = 0;
}

static void choose_keys(advlock_prng *p)
{
    static const int64_t edges[] = {INT64_MIN, INT64_MAX, 0, -1, 1, 4294967295, -4294967296};
    for (int k = 0; k < KEYS; k++) {
        int again;
        do {
            w.keys[k] = advlock_prng_chance(p, 150000)
                            ? edges[advlock_prng_below(p, sizeof edges / sizeof edges[0])]
                            : (int64_t)advlock_prng_next(p);
            again = 0;
            for (int j = 0; j < k; j++)
                again |= w.keys[j] == w.keys[k];
        } while (again);
    }
}

static void run_sequence(uint64_t seq, int *steps)
{
    advlock_prng p;
    advlock_prng_seed(&p, seq ^ UINT64_C(0xF1DE11770000));
    reset();
    choose_keys(&p);
    compare_locks(seq);
    int n = 20 + (int)advlock_prng_below(&p, 21);
    /* About one sequence in 75 pauses 1.5 s once, so that holders have held
     * (and waiters waited) whole seconds, far from a second's boundary. */
    int pause_at = advlock_prng_chance(&p, 13333) ? (int)advlock_prng_below(&p, (uint64_t)n) : -1;
    for (int s = 0; s < n; s++) {
        if (s == pause_at) {
            note("pause 1.5 s");
            seen.pauses++;
            pause_ms(1500);
            for (int k = 0; k < KEYS; k++)
                compare_holders(seq, k);
        }
        step(seq, &p);
        settle_waiter(seq);
        compare_locks(seq);
    }
    *steps += n;
}

int main(int argc, char **argv)
{
    uint64_t count = 600, start = 1;
    for (int i = 1; i < argc; i++) {
        if (i + 1 < argc && strcmp(argv[i], "--sequences") == 0)
            count = strtoull(argv[++i], NULL, 10);
        else if (i + 1 < argc && strcmp(argv[i], "--start") == 0)
            start = strtoull(argv[++i], NULL, 10);
        else if (i + 1 < argc && strcmp(argv[i], "--sequence") == 0)
            start = strtoull(argv[++i], NULL, 10), count = 1, w.verbose = 1;
        else
            die("usage: %s [--sequences N] [--start S] | --sequence S", argv[0]);
    }
    w.observer = connect_pg();
    fake_init();
    w.waiting = -1;
    for (int i = 0; i < SESSIONS; i++)
        open_session(i);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int steps = 0;
    run_claims_script(&steps);
    for (uint64_t seq = start; seq < start + count; seq++)
        run_sequence(seq, &steps);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    printf("fidelity: %" PRIu64 " sequences, %d steps over %d sessions and %d keys: the fake and "
           "PostgreSQL %s agreed on every result, warning, wait and pg_locks row (%.1f s)\n",
           count, steps, SESSIONS, KEYS, PQparameterStatus(w.observer, "server_version"), secs);
    printf("fidelity: covered %d waits (%d granted later, %d cancelled, %d ended by their "
           "lock_timeout), %d deadlocks, %d other errors, %d warnings, %d reconnects\n",
           seen.waits, seen.granted_after_wait, seen.cancels, seen.lock_timeouts, seen.deadlocks,
           seen.errors - seen.deadlocks, seen.warnings, seen.reconnects);
    printf("fidelity: %d holders queries agreed on %d rows (%d held or waited a second or more, "
           "after %d pauses)\n",
           seen.holders_queries, seen.holder_rows, seen.rows_held_a_second, seen.pauses);
    printf("fidelity: %d session rows agreed (%d claimed or the token's own), %d NULL answers "
           "(guarded rows off their claimed session)\n",
           seen.session_rows, seen.claims, seen.guarded_nulls);
    for (int i = 0; i < SESSIONS; i++)
        PQfinish(w.s[i].conn);
    PQfinish(w.observer);
    return 0;
}
