/* Helpers for the integration tests; see pg_test.h. */
#include "pg_test.h"

#include <fcntl.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

PGconn *pgt_connect(void)
{
    return pgt_connect_as("advlock_integration");
}

PGconn *pgt_connect_as(const char *application_name)
{
    const char *const keywords[] = {"application_name", NULL};
    const char *const values[] = {application_name, NULL};
    PGconn *conn = PQconnectdbParams(keywords, values, 1);
    if (PQstatus(conn) != CONNECTION_OK)
        fail_msg("cannot connect (run under tests/pg/with-postgres.sh): %s", PQerrorMessage(conn));
    return conn;
}

PGconn *pgt_connect_env(const char *variable)
{
    const char *conninfo = getenv(variable);
    if (conninfo == NULL || conninfo[0] == '\0')
        fail_msg("%s unset: run under the harness that sets it (tests/pg/)", variable);
    PGconn *conn = PQconnectdb(conninfo);
    if (PQstatus(conn) != CONNECTION_OK)
        fail_msg("cannot connect to %s: %s", variable, PQerrorMessage(conn));
    return conn;
}

enum { MAX_PARAMS = 4 };

static PGresult *run(PGconn *conn, const char *sql, va_list ap)
{
    const char *params[MAX_PARAMS];
    int n = 0;
    const char *p;
    while ((p = va_arg(ap, const char *)) != NULL) {
        assert_true(n < MAX_PARAMS);
        params[n++] = p;
    }
    PGresult *res = PQexecParams(conn, sql, n, NULL, params, NULL, NULL, 0);
    ExecStatusType status = PQresultStatus(res);
    if (status != PGRES_TUPLES_OK && status != PGRES_COMMAND_OK)
        fail_msg("%s: %s", sql, PQerrorMessage(conn));
    return res;
}

const char *pgt_query(PGconn *conn, char *buf, size_t size, const char *sql, ...)
{
    va_list ap;
    va_start(ap, sql);
    PGresult *res = run(conn, sql, ap);
    va_end(ap);
    snprintf(buf, size, "%s", PQntuples(res) > 0 ? PQgetvalue(res, 0, 0) : "");
    PQclear(res);
    return buf;
}

const char *pgt_session_claim(PGconn *conn, char *buf, size_t size)
{
    return pgt_query(conn, buf, size,
                     "SELECT coalesce(pg_catalog.current_setting('advlock.session', true), '')",
                     (char *)NULL);
}

long long pgt_query_int(PGconn *conn, const char *sql, ...)
{
    va_list ap;
    va_start(ap, sql);
    PGresult *res = run(conn, sql, ap);
    va_end(ap);
    assert_int_equal(PQntuples(res), 1);
    long long v = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
    PQclear(res);
    return v;
}

void pgt_exec(PGconn *conn, const char *sql)
{
    PGresult *res = PQexec(conn, sql);
    ExecStatusType status = PQresultStatus(res);
    if (status != PGRES_TUPLES_OK && status != PGRES_COMMAND_OK)
        fail_msg("%s: %s", sql, PQerrorMessage(conn));
    PQclear(res);
}

void pgt_sleep_ms(int64_t ms)
{
    struct timespec t = {.tv_sec = (time_t)(ms / 1000), .tv_nsec = (long)(ms % 1000) * 1000000};
    while (nanosleep(&t, &t) != 0)
        continue;
}

void pgt_unique_key(char *buf, size_t size, const char *what)
{
    static int serial;
    snprintf(buf, size, "advlock-it/ключ/%s/%d/%d", what, (int)getpid(), ++serial);
}

int64_t pgt_key_of(const char *name)
{
    int64_t key = 0;
    assert_int_equal(advlock_derive_key(name, strlen(name), &key), 0);
    return key;
}

void pgt_lock_begin(pgt_lock *l, const char *what, const char *observer_env)
{
    l->observer = observer_env ? pgt_connect_env(observer_env) : pgt_connect();
    pgt_unique_key(l->key, sizeof l->key, what);
    l->len = strlen(l->key);
    l->derived = pgt_key_of(l->key);
}

void pgt_lock_end(pgt_lock *l)
{
    PQfinish(l->observer);
    l->observer = NULL;
}

long long pgt_lock_count(PGconn *observer, int64_t key)
{
    char text[32];
    snprintf(text, sizeof text, "%lld", (long long)key);
    return pgt_query_int(observer,
                         "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'"
                         " AND objsubid = 1 AND granted"
                         " AND ((classid::bigint << 32) | objid::bigint) = $1::bigint",
                         text, (char *)NULL);
}

long long pgt_lock_rows(PGconn *observer, int64_t key, const char *mode, int granted,
                        PGconn *session)
{
    char key_text[32], granted_text[8], pid[16];
    snprintf(key_text, sizeof key_text, "%lld", (long long)key);
    snprintf(granted_text, sizeof granted_text, "%d", granted);
    snprintf(pid, sizeof pid, "%d", session != NULL ? PQbackendPID(session) : 0);
    return pgt_query_int(observer,
                         "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'"
                         " AND objsubid = 1"
                         " AND ((classid::bigint << 32) | objid::bigint) = $1::bigint"
                         " AND ($2 = '' OR mode = $2)"
                         " AND ($3::int < 0 OR granted = ($3::int = 1))"
                         " AND ($4::int = 0 OR pid = $4::int)",
                         key_text, mode != NULL ? mode : "", granted_text, pid, (char *)NULL);
}

void pgt_wait_until_waiting(PGconn *observer, int64_t key, PGconn *session, advlock_pq *a)
{
    int64_t limit = advlock_pq_now_ms() + 5000;
    while (pgt_lock_rows(observer, key, NULL, 0, session) == 0) {
        if (advlock_pq_now_ms() > limit)
            fail_msg("the session never waited for the lock");
        if (a != NULL) {
            advlock_pq *const one[1] = {a};
            pgt_loop_turn(one, 1, advlock_pq_now_ms() + 5);
        } else {
            pgt_sleep_ms(5);
        }
    }
}

const char *pgt_last_statement(PGconn *observer, PGconn *session, char *buf, size_t size)
{
    char pid[16];
    snprintf(pid, sizeof pid, "%d", PQbackendPID(session));
    return pgt_query(observer, buf, size, "SELECT query FROM pg_stat_activity WHERE pid = $1::int",
                     pid, (char *)NULL);
}

const char *pgt_describe(const advlock_pq_report *r, const char *name)
{
    static char sentence[ADVLOCK_MESSAGE_MAX];
    int len = advlock_pq_describe(r, name, strlen(name), sentence, sizeof sentence);
    assert_true(len >= 0 && (size_t)len < sizeof sentence);
    return sentence;
}

void pgt_expect_outcome(const advlock_pq_report *r, advlock_outcome outcome)
{
    assert_non_null(r);
    if (r->lock.outcome != outcome)
        fail_msg("expected %s, got %s (%s, SQLSTATE '%s'): %s", advlock_outcome_name(outcome),
                 advlock_outcome_name(r->lock.outcome), advlock_strerror(r->lock.failure),
                 r->lock.sqlstate, r->server_message);
}

void pgt_expect_connection_lost(const advlock_pq_report *r, const char *name, const char *function)
{
    pgt_expect_outcome(r, ADVLOCK_FAILED);
    assert_int_equal(r->lock.failure, ADVLOCK_ECONNLOST);
    if (r->lock.sqlstate[0] != '\0')
        assert_string_equal(r->lock.sqlstate, "57P01");
    const char *message = pgt_describe(r, name);
    assert_non_null(strstr(message, function));
    assert_non_null(strstr(message, "connection lost"));
    assert_non_null(strstr(message, "terminating connection due to administrator command"));
}

void pgt_record_event(void *user, const advlock_event *event)
{
    pgt_events *r = user;
    if (r->n >= PGT_MAX_EVENTS)
        return;
    r->events[r->n] = *event;
    snprintf(r->messages[r->n], sizeof r->messages[0], "%s", event->message);
    r->events[r->n].message = r->messages[r->n];
    if (event->report != NULL)
        r->reports[r->n] = *event->report;
    r->events[r->n].report = event->report != NULL ? &r->reports[r->n] : NULL;
    r->n++;
}

void pgt_record_events(advlock_options *o, pgt_events *seen)
{
    memset(seen, 0, sizeof *seen);
    o->on_event = pgt_record_event;
    o->event_user = seen;
}

int pgt_find_event(const pgt_events *r, advlock_event_kind kind, int from)
{
    for (int i = from < 0 ? 0 : from; i < r->n; i++)
        if (r->events[i].kind == kind)
            return i;
    return -1;
}

void pgt_expect_lock_row(PGconn *observer, int64_t key, PGconn *holder)
{
    char key_text[32], pid[16];
    snprintf(key_text, sizeof key_text, "%lld", (long long)key);
    snprintf(pid, sizeof pid, "%d", PQbackendPID(holder));
    const char *params[1] = {key_text};
    PGresult *res = PQexecParams(
        observer,
        "SELECT locktype, mode, granted, objsubid, pid FROM pg_locks"
        " WHERE locktype = 'advisory' AND ((classid::bigint << 32) | objid::bigint) = $1::bigint",
        1, NULL, params, NULL, NULL, 0);
    assert_int_equal(PQresultStatus(res), PGRES_TUPLES_OK);
    assert_int_equal(PQntuples(res), 1);
    assert_string_equal(PQgetvalue(res, 0, 0), "advisory");
    assert_string_equal(PQgetvalue(res, 0, 1), "ExclusiveLock");
    assert_string_equal(PQgetvalue(res, 0, 2), "t");
    assert_string_equal(PQgetvalue(res, 0, 3), "1");
    assert_string_equal(PQgetvalue(res, 0, 4), pid);
    PQclear(res);
}

void pgt_expect_try_lock_statement(PGconn *observer, PGconn *holder)
{
    const char *text = advlock_sql_text(ADVLOCK_SQL_TRY_LOCK);
    char pid[16], buf[256];
    snprintf(pid, sizeof pid, "%d", PQbackendPID(holder));
    pgt_query(observer, buf, sizeof buf, "SELECT query FROM pg_stat_activity WHERE pid = $1::int",
              pid, (char *)NULL);
    assert_string_equal(buf, text);
    assert_non_null(strstr(buf, "pg_try_advisory_lock("));
    assert_non_null(strstr(buf, "$1"));
    assert_null(strstr(buf, "$2"));
    assert_null(strstr(buf, "hashtext"));

    pgt_query(holder, buf, sizeof buf,
              "SELECT parameter_types::text FROM pg_prepared_statements"
              " WHERE name = $1 AND statement = $2",
              advlock_pq_statement_name(ADVLOCK_SQL_TRY_LOCK), text, (char *)NULL);
    assert_string_equal(buf, "{bigint}");
}

void pgt_terminate(PGconn *observer, int pid)
{
    char text[16];
    snprintf(text, sizeof text, "%d", pid);
    /* The timeout makes the call wait until the backend has exited. */
    char buf[8];
    assert_string_equal(pgt_query(observer, buf, sizeof buf,
                                  "SELECT pg_terminate_backend($1::int, 10000)", text,
                                  (char *)NULL),
                        "t");
}

void pgt_freeze(int pid)
{
    assert_int_equal(kill(pid, SIGSTOP), 0);
}

void pgt_terminate_frozen(PGconn *observer, int pid)
{
    char text[16], buf[8];
    snprintf(text, sizeof text, "%d", pid);
    assert_string_equal(pgt_query(observer, buf, sizeof buf, "SELECT pg_terminate_backend($1::int)",
                                  text, (char *)NULL),
                        "t");
    assert_int_equal(kill(pid, SIGCONT), 0);
}

void pgt_stderr_begin(pgt_stderr_capture *c)
{
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    fflush(stderr);
    c->saved_fd = dup(2);
    assert_true(c->saved_fd >= 0);
    assert_int_equal(dup2(fds[1], 2), 2);
    close(fds[1]);
    c->read_fd = fds[0];
}

const char *pgt_stderr_end(pgt_stderr_capture *c, char *buf, size_t size)
{
    fflush(stderr);
    assert_int_equal(dup2(c->saved_fd, 2), 2);
    close(c->saved_fd);
    /* fd 2 was the pipe's only writer: reading now ends at EOF. */
    size_t len = 0;
    ssize_t n;
    while (len + 1 < size && (n = read(c->read_fd, buf + len, size - 1 - len)) > 0)
        len += (size_t)n;
    buf[len] = '\0';
    close(c->read_fd);
    return buf;
}

/* Runs "pg_ctl -D $ADVLOCK_PG_DATA -w ARGS..." quietly, as the data
 * directory's owner (root may not run the server); fails the test if it
 * fails. */
static void pg_ctl(const char *const *args, size_t nargs)
{
    const char *bin = getenv("ADVLOCK_PG_BIN");
    const char *data = getenv("ADVLOCK_PG_DATA");
    if (bin == NULL || data == NULL) {
        fail_msg("ADVLOCK_PG_BIN and ADVLOCK_PG_DATA unset: run under tests/pg/with-postgres.sh");
        return; /* fail_msg does not return; the analyzer cannot tell */
    }
    struct stat st;
    assert_int_equal(stat(data, &st), 0);
    struct passwd *owner = getpwuid(st.st_uid);
    assert_non_null(owner);
    char user[64], pg_ctl_path[4096];
    snprintf(user, sizeof user, "%s", owner->pw_name);
    snprintf(pg_ctl_path, sizeof pg_ctl_path, "%s/pg_ctl", bin);

    const char *argv[16];
    size_t argc = 0;
    if (geteuid() == 0 && st.st_uid != 0) {
        argv[argc++] = "runuser";
        argv[argc++] = "-u";
        argv[argc++] = user;
        argv[argc++] = "--";
    }
    argv[argc++] = pg_ctl_path;
    argv[argc++] = "-D";
    argv[argc++] = data;
    argv[argc++] = "-w";
    for (size_t i = 0; i < nargs; i++)
        argv[argc++] = args[i];
    argv[argc] = NULL;

    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int null_fd = open("/dev/null", O_RDWR);
        dup2(null_fd, 1);
        dup2(null_fd, 2);
        /* Out of the caller's directory, which the owner may not read. */
        if (chdir(data) != 0)
            _exit(126);
        execvp(argv[0], (char *const *)argv);
        _exit(127);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        fail_msg("pg_ctl %s failed (status %d)", args[nargs - 1], status);
}

void pgt_server_stop_immediate(void)
{
    static const char *const args[] = {"-m", "immediate", "stop"};
    pg_ctl(args, 3);
}

void pgt_server_start(void)
{
    static const char *const args[] = {"-t", "60", "start"};
    pg_ctl(args, 3);
}

/* ---- the poll() loop ---- */

enum { MAX_ADAPTERS = 64 };

/* An adapter the loop must serve: one busy, or one watching a held lock. */
static int active(const advlock_pq *a)
{
    return advlock_pq_async_busy(a) || advlock_pq_async_wants(a) != 0;
}

size_t pgt_loop_turn(advlock_pq *const *adapters, size_t n, int64_t limit_ms)
{
    struct pollfd fds[MAX_ADAPTERS];
    assert_true(n <= MAX_ADAPTERS);
    int64_t now = advlock_pq_now_ms();
    int64_t wake = limit_ms;
    size_t serving = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned wants = advlock_pq_async_wants(adapters[i]);
        int64_t at;
        fds[i].fd = wants != 0 ? advlock_pq_async_socket(adapters[i]) : -1;
        fds[i].events = (short)(((wants & ADVLOCK_PQ_READ) ? POLLIN : 0)
                                | ((wants & ADVLOCK_PQ_WRITE) ? POLLOUT : 0));
        fds[i].revents = 0;
        if (advlock_pq_async_deadline(adapters[i], &at) && at < wake)
            wake = at;
        serving += (size_t)active(adapters[i]);
    }
    if (serving == 0)
        return 0;
    int timeout = wake > now ? (int)(wake - now) : 0;
    assert_true(poll(fds, n, timeout) >= 0);

    now = advlock_pq_now_ms();
    size_t busy = 0;
    for (size_t i = 0; i < n; i++) {
        advlock_pq *a = adapters[i];
        unsigned ready = 0;
        if (fds[i].revents & (POLLIN | POLLHUP | POLLERR))
            ready |= ADVLOCK_PQ_READ;
        if (fds[i].revents & POLLOUT)
            ready |= ADVLOCK_PQ_WRITE;
        int64_t at;
        int due = advlock_pq_async_deadline(a, &at) && now >= at;
        if (active(a) && (ready != 0 || due))
            assert_int_equal(advlock_pq_async_process(a, ready, now), 0);
        busy += (size_t)advlock_pq_async_busy(a);
    }
    return busy;
}

void pgt_loop_until_idle(advlock_pq *const *adapters, size_t n, int64_t limit_ms)
{
    for (;;) {
        size_t busy = 0;
        for (size_t i = 0; i < n; i++)
            busy += (size_t)advlock_pq_async_busy(adapters[i]);
        /* Adapters watching held locks alone do not keep the loop going. */
        if (busy == 0)
            return;
        if (advlock_pq_now_ms() > limit_ms)
            fail_msg("adapters still busy at the time limit");
        pgt_loop_turn(adapters, n, limit_ms);
    }
}

void pgt_loop_until_sleeping(advlock_pq *a, uint64_t attempts, int64_t limit_ms)
{
    advlock_pq *const one[1] = {a};
    for (;;) {
        advlock_action next = advlock_next_action(advlock_pq_async_machine(a));
        if (next.kind == ADVLOCK_ACTION_SLEEP && next.report->attempts >= attempts)
            return;
        if (!advlock_pq_async_busy(a))
            fail_msg("adapter ended (%s) before sleeping after %llu attempts",
                     advlock_outcome_name(next.report->outcome), (unsigned long long)attempts);
        if (advlock_pq_now_ms() > limit_ms)
            fail_msg("adapter not sleeping at the time limit");
        pgt_loop_turn(one, 1, limit_ms);
    }
}
