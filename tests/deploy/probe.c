/*
 * A libpq probe for the facts the server session check's design rests on:
 * what a transaction-pooling PgBouncer does to named and unnamed extended-
 * protocol statements, which server session runs each statement, and what
 * libpq reports when the server of an idle lock holder goes away.
 *
 *   probe CONNINFO prepared N [SLEEP_MS]
 *       As the libpq adapter does: prepare "advlock_probe" (PQprepare) while
 *       idle, then N x PQexecPrepared; on 26000 (no such statement)
 *       prepare again once and retry. Prints one line per statement and the
 *       tally: ok, 26000, prepare errors (42P05 = already exists), hops.
 *   probe CONNINFO params N [SLEEP_MS]
 *       N x PQexecParams (unnamed statement, binary int8 parameter) of
 *       SELECT pg_backend_pid(), $1: ok, errors, distinct server pids, hops.
 *   probe CONNINFO trylock N KEY [SLEEP_MS]
 *       N x SELECT pg_try_advisory_lock($1), pg_backend_pid() (unnamed):
 *       the answers, and the server pid of each.
 *   probe CONNINFO watch KEY
 *       Take the lock (session scope), then wait on the socket, idle, as the
 *       adapter's watch does; when it becomes readable, print the wall clock
 *       in ms, what PQconsumeInput, PQgetResult, PQstatus and
 *       PQerrorMessage say, and exit.
 * Lines start with the client's own pid (libpq's PQbackendPID is the
 * pooler's, shown once at the start as "frontend pid").
 */
#define _DEFAULT_SOURCE
#include <libpq-fe.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

enum { INT8_OID = 20, MAX_PIDS = 256 };

static long long wall_ms(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (long long)tv.tv_sec * 1000 + tv.tv_usec / 1000;
}

static void nap(int ms)
{
    if (ms > 0) {
        struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
}

static const char *sqlstate(const PGresult *r)
{
    const char *s = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
    return s ? s : "-----";
}

static void notice(void *arg, const char *message)
{
    (void)arg;
    fprintf(stderr, "notice: %s", message);
}

/* The binary int8 parameter, as the adapter sends it. */
typedef struct {
    char bytes[8];
    const char *values[1];
    int lengths[1];
    int formats[1];
} param;

static void encode(param *p, int64_t v)
{
    uint64_t u = (uint64_t)v;
    for (int i = 7; i >= 0; i--) {
        p->bytes[i] = (char)(u & 0xFF);
        u >>= 8;
    }
    p->values[0] = p->bytes;
    p->lengths[0] = 8;
    p->formats[0] = 1;
}

static const Oid types[1] = {INT8_OID};

typedef struct {
    int pids[MAX_PIDS];
    int count, last, hops;
} pid_set;

static void saw_pid(pid_set *s, int pid)
{
    if (s->last != 0 && s->last != pid)
        s->hops++;
    s->last = pid;
    for (int i = 0; i < s->count; i++)
        if (s->pids[i] == pid)
            return;
    if (s->count < MAX_PIDS)
        s->pids[s->count++] = pid;
}

static int prepare(PGconn *conn, const char *text, int *errors)
{
    PGresult *r = PQprepare(conn, "advlock_probe", text, 1, types);
    int ok = PQresultStatus(r) == PGRES_COMMAND_OK;
    printf("%d prepare: %s %s", (int)getpid(), ok ? "ok" : sqlstate(r),
           ok ? "\n" : PQresultErrorMessage(r));
    if (!ok)
        (*errors)++;
    PQclear(r);
    return ok;
}

static int run_prepared(PGconn *conn, int n, int sleep_ms)
{
    const char *text = "SELECT pg_backend_pid(), $1::int8";
    int ok = 0, missing = 0, other = 0, prepare_errors = 0, reprepared_ok = 0;
    pid_set pids = {{0}, 0, 0, 0};
    param p;
    encode(&p, 42);
    prepare(conn, text, &prepare_errors);
    for (int i = 0; i < n; i++) {
        for (int attempt = 0; attempt < 2; attempt++) {
            PGresult *r =
                PQexecPrepared(conn, "advlock_probe", 1, p.values, p.lengths, p.formats, 0);
            if (PQresultStatus(r) == PGRES_TUPLES_OK) {
                int pid = atoi(PQgetvalue(r, 0, 0));
                saw_pid(&pids, pid);
                ok++;
                if (attempt == 1)
                    reprepared_ok++;
                printf("%d exec %d: ok server pid %d%s\n", (int)getpid(), i, pid,
                       attempt ? " (after re-prepare)" : "");
                PQclear(r);
                break;
            }
            printf("%d exec %d: %s %s", (int)getpid(), i, sqlstate(r), PQresultErrorMessage(r));
            int is_missing = strcmp(sqlstate(r), "26000") == 0;
            PQclear(r);
            if (is_missing)
                missing++;
            else
                other++;
            if (!is_missing || attempt == 1 || PQtransactionStatus(conn) != PQTRANS_IDLE)
                break;
            prepare(conn, text, &prepare_errors);
        }
        nap(sleep_ms);
    }
    printf("%d prepared: statements=%d ok=%d ok_after_reprepare=%d err_26000=%d err_other=%d "
           "prepare_errors=%d distinct_server_pids=%d hops=%d\n",
           (int)getpid(), n, ok, reprepared_ok, missing, other, prepare_errors, pids.count,
           pids.hops);
    return 0;
}

static int run_params(PGconn *conn, int n, int sleep_ms, const char *text, int64_t key)
{
    int ok = 0, errors = 0, trues = 0;
    pid_set pids = {{0}, 0, 0, 0};
    param p;
    encode(&p, key);
    for (int i = 0; i < n; i++) {
        PGresult *r = PQexecParams(conn, text, 1, types, p.values, p.lengths, p.formats, 0);
        if (PQresultStatus(r) == PGRES_TUPLES_OK) {
            ok++;
            const char *first = PQgetvalue(r, 0, 0);
            const char *second = PQgetvalue(r, 0, 1);
            int trylock = strcmp(first, "t") == 0 || strcmp(first, "f") == 0;
            int pid = atoi(trylock ? second : first);
            if (trylock && first[0] == 't')
                trues++;
            saw_pid(&pids, pid);
            printf("%d stmt %d: %s%s server pid %d\n", (int)getpid(), i, trylock ? first : "",
                   trylock ? "" : "ok", pid);
        } else {
            errors++;
            printf("%d stmt %d: %s %s", (int)getpid(), i, sqlstate(r), PQresultErrorMessage(r));
        }
        PQclear(r);
        nap(sleep_ms);
    }
    printf("%d params: statements=%d ok=%d errors=%d true=%d distinct_server_pids=%d hops=%d\n",
           (int)getpid(), n, ok, errors, trues, pids.count, pids.hops);
    return 0;
}

static int run_watch(PGconn *conn, int64_t key)
{
    param p;
    encode(&p, key);
    PGresult *r = PQexecParams(conn, "SELECT pg_try_advisory_lock($1), pg_backend_pid()", 1, types,
                               p.values, p.lengths, p.formats, 0);
    if (PQresultStatus(r) != PGRES_TUPLES_OK) {
        printf("watch: lock failed: %s", PQresultErrorMessage(r));
        return 1;
    }
    printf("watch: locked %s on server pid %s at %lld\n", PQgetvalue(r, 0, 0), PQgetvalue(r, 0, 1),
           wall_ms());
    PQclear(r);
    fflush(stdout);
    struct pollfd fd = {PQsocket(conn), POLLIN, 0};
    for (;;) {
        int n = poll(&fd, 1, 60000);
        long long at = wall_ms();
        if (n == 0) {
            printf("watch: nothing for 60 s\n");
            return 1;
        }
        printf("watch: readable at %lld (revents 0x%x)\n", at, (unsigned)fd.revents);
        int consumed = PQconsumeInput(conn);
        printf("watch: PQconsumeInput=%d PQstatus=%s PQisBusy=%d\n", consumed,
               PQstatus(conn) == CONNECTION_OK ? "CONNECTION_OK" : "CONNECTION_BAD",
               PQisBusy(conn));
        while (!PQisBusy(conn) && (r = PQgetResult(conn)) != NULL) {
            printf("watch: result %s %s %s", PQresStatus(PQresultStatus(r)), sqlstate(r),
                   PQresultErrorMessage(r));
            PQclear(r);
        }
        printf("watch: PQerrorMessage: %s", PQerrorMessage(conn));
        if (!consumed || PQstatus(conn) != CONNECTION_OK)
            return 0;
    }
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr,
                "usage: probe CONNINFO prepared|params N [SLEEP_MS] | trylock N KEY [SLEEP_MS]"
                " | watch KEY\n");
        return 2;
    }
    PGconn *conn = PQconnectdb(argv[1]);
    if (PQstatus(conn) != CONNECTION_OK) {
        fprintf(stderr, "connect: %s", PQerrorMessage(conn));
        return 1;
    }
    PQsetNoticeProcessor(conn, notice, NULL);
    printf("%d connected: frontend pid %d\n", (int)getpid(), PQbackendPID(conn));
    const char *mode = argv[2];
    int status;
    if (strcmp(mode, "prepared") == 0)
        status = run_prepared(conn, atoi(argv[3]), argc > 4 ? atoi(argv[4]) : 0);
    else if (strcmp(mode, "params") == 0)
        status = run_params(conn, atoi(argv[3]), argc > 4 ? atoi(argv[4]) : 0,
                            "SELECT pg_backend_pid(), $1::int8", 42);
    else if (strcmp(mode, "trylock") == 0 && argc > 4)
        status = run_params(conn, atoi(argv[3]), argc > 5 ? atoi(argv[5]) : 0,
                            "SELECT pg_try_advisory_lock($1), pg_backend_pid()",
                            strtoll(argv[4], NULL, 10));
    else if (strcmp(mode, "watch") == 0)
        status = run_watch(conn, strtoll(argv[3], NULL, 10));
    else {
        fprintf(stderr, "probe: unknown mode %s\n", mode);
        status = 2;
    }
    PQfinish(conn);
    return status;
}
