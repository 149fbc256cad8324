/*
 * advlock status with no name: every advisory lock of the database, its
 * holders and waiters, named where a name the operator gave maps to its
 * key, in text, JSON or the Prometheus text format, once or every few
 * seconds (--watch). One statement reads them all (the core's
 * ADVLOCK_SQL_LOCKS forms), after a question about which of advlock's
 * optional tables it may read (ADVLOCK_SQL_LOCKS_TABLES).
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "advlock_pq.h"
#include "cli.h"
#include "status.h"

/* The names known, sorted by key for bsearch. */
typedef struct known_name {
    int64_t key;
    char *name;
} known_name;

struct status_names {
    known_name *v;
    size_t n, cap;
    int bad; /* a name was not valid UTF-8 (said) */
};

status_names *status_names_new(void)
{
    return calloc(1, sizeof(status_names));
}

void status_names_free(status_names *names)
{
    if (names == NULL)
        return;
    for (size_t i = 0; i < names->n; i++)
        free(names->v[i].name);
    free(names->v);
    free(names);
}

int status_names_bad(const status_names *names)
{
    return names->bad;
}

/* Adds one name (len bytes, no NUL needed); origin says where it came from
 * when it is not a lock name. 0, or -1 out of memory (said). */
static int add_name(status_names *names, const char *name, size_t len, const char *origin)
{
    int64_t key;
    int rc = advlock_derive_key(name, len, &key);
    if (rc != 0) {
        char shown[ADVLOCK_KEY_ECHO_MAX + 4];
        advlock_escape_name(name, len, shown, sizeof shown);
        cli_error("%s: '%s': %s; skipped", origin, shown, advlock_strerror(rc));
        names->bad = 1;
        return 0;
    }
    if (names->n == names->cap) {
        size_t cap = names->cap ? names->cap * 2 : 16;
        known_name *v = realloc(names->v, cap * sizeof *v);
        if (v == NULL) {
            cli_error("out of memory reading names");
            return -1;
        }
        names->v = v;
        names->cap = cap;
    }
    char *copy = malloc(len + 1);
    if (copy == NULL) {
        cli_error("out of memory reading names");
        return -1;
    }
    memcpy(copy, name, len);
    copy[len] = '\0';
    names->v[names->n].key = key;
    names->v[names->n].name = copy;
    names->n++;
    return 0;
}

int status_names_add(status_names *names, const char *name)
{
    return add_name(names, name, strlen(name), "argument");
}

int status_names_read(status_names *names, const char *path)
{
    FILE *in = strcmp(path, "-") == 0 ? stdin : fopen(path, "r");
    if (in == NULL) {
        cli_error("--names-from %s: %s", path, strerror(errno));
        return EXIT_IO;
    }
    char *line = NULL, origin[64 + 32];
    size_t cap = 0;
    ssize_t got;
    unsigned long number = 0;
    int rc = EXIT_OK;
    while (rc == EXIT_OK && (got = getline(&line, &cap, in)) >= 0) {
        number++;
        size_t len = (size_t)got;
        if (len > 0 && line[len - 1] == '\n')
            len--;
        if (len > 0 && line[len - 1] == '\r')
            len--; /* a file written on Windows: CR LF ends the line */
        if (len == 0)
            continue;
        snprintf(origin, sizeof origin, "%.64s line %lu", path, number);
        if (add_name(names, line, len, origin) != 0)
            rc = EXIT_LOCK_ERROR;
    }
    if (rc == EXIT_OK && ferror(in)) {
        cli_error("--names-from %s: %s", path, strerror(errno));
        rc = EXIT_IO;
    }
    free(line);
    if (in != stdin)
        fclose(in);
    return rc;
}

static int by_key(const void *a, const void *b)
{
    int64_t x = ((const known_name *)a)->key, y = ((const known_name *)b)->key;
    return (x > y) - (x < y);
}

/* Sorts the names once all are in; a key given twice keeps one name. */
static void names_sort(status_names *names)
{
    if (names->n > 1)
        qsort(names->v, names->n, sizeof *names->v, by_key);
}

static const char *name_of(const status_names *names, int64_t key)
{
    known_name probe = {key, NULL};
    const known_name *hit =
        names->n > 0 ? bsearch(&probe, names->v, names->n, sizeof *names->v, by_key) : NULL;
    return hit != NULL ? hit->name : NULL;
}

/* One lock: the result's rows [first, first + rows), holders first. */
typedef struct lock_group {
    int first, rows, holders;
    int64_t key;
    int pair;           /* the two-int4 form: no name, no mark, no token */
    const char *name;   /* NULL: unknown */
    long long held_max; /* the oldest holder's seconds, -1 unknown */
    long long wait_max; /* the longest waiter's seconds, -1 unknown */
} lock_group;

/* A session row: its pid and where it is in the result. */
typedef struct session_row {
    int pid, row;
    char *json; /* its facts as JSON fields, once written (render_json) */
} session_row;

typedef struct listing {
    PGresult *res;
    lock_group *groups;
    int count;
    int any_held;
    session_row *sessions; /* by pid */
    int session_count;
} listing;

static const char *cell(const PGresult *res, int row, advlock_locks_column col)
{
    return PQgetvalue(res, row, (int)col);
}

static int is_null(const PGresult *res, int row, advlock_locks_column col)
{
    return PQgetisnull(res, row, (int)col);
}

static int is_true(const PGresult *res, int row, advlock_locks_column col)
{
    return strcmp(cell(res, row, col), "t") == 0;
}

/* A column's text, or instead when it is NULL (a prepared transaction's
 * lock has no pid). */
static const char *or_null(const PGresult *res, int row, advlock_locks_column col,
                           const char *instead)
{
    return is_null(res, row, col) ? instead : cell(res, row, col);
}

static long long seconds_or_unknown(const PGresult *res, int row, advlock_locks_column col)
{
    if (is_null(res, row, col))
        return -1;
    long long s = strtoll(cell(res, row, col), NULL, 10);
    return s < 0 ? 0 : s;
}

static int by_pid(const void *a, const void *b)
{
    int x = ((const session_row *)a)->pid, y = ((const session_row *)b)->pid;
    return (x > y) - (x < y);
}

/* The session of lock row i, or NULL when it has left pg_stat_activity
 * (or is a prepared transaction's). */
static session_row *session_of(const listing *l, int i)
{
    session_row probe = {(int)strtol(cell(l->res, i, ADVLOCK_LOCKS_PID), NULL, 10), 0, NULL};
    return l->session_count > 0
               ? bsearch(&probe, l->sessions, (size_t)l->session_count, sizeof *l->sessions, by_pid)
               : NULL;
}

/* Sorts the session rows out by pid, and groups the lock rows by lock
 * (they come ordered by key and form). 0, or -1 out of memory (said). */
static int group_rows(listing *l, const status_names *names)
{
    int rows = PQntuples(l->res);
    size_t room = rows > 0 ? (size_t)rows : 1;
    l->groups = calloc(room, sizeof *l->groups);
    l->sessions = calloc(room, sizeof *l->sessions);
    if (l->groups == NULL || l->sessions == NULL) {
        cli_error("out of memory listing the locks");
        return -1;
    }
    for (int i = 0; i < rows; i++) {
        if (is_null(l->res, i, ADVLOCK_LOCKS_KEY)) {
            int pid = (int)strtol(cell(l->res, i, ADVLOCK_LOCKS_PID), NULL, 10);
            l->sessions[l->session_count++] = (session_row){pid, i, NULL};
            continue;
        }
        int64_t key = strtoll(cell(l->res, i, ADVLOCK_LOCKS_KEY), NULL, 10);
        int pair = is_true(l->res, i, ADVLOCK_LOCKS_PAIR);
        lock_group *g = l->count > 0 ? &l->groups[l->count - 1] : NULL;
        if (g == NULL || g->key != key || g->pair != pair) {
            g = &l->groups[l->count++];
            *g = (lock_group){i, 0, 0, key, pair, pair ? NULL : name_of(names, key), -1, -1};
        }
        g->rows++;
        if (is_true(l->res, i, ADVLOCK_LOCKS_GRANTED)) {
            g->holders++;
            l->any_held = 1;
            long long s = seconds_or_unknown(l->res, i, ADVLOCK_LOCKS_HELD);
            if (s > g->held_max)
                g->held_max = s;
        } else {
            long long s = seconds_or_unknown(l->res, i, ADVLOCK_LOCKS_WAITED);
            if (s > g->wait_max)
                g->wait_max = s;
        }
    }
    qsort(l->sessions, (size_t)l->session_count, sizeof *l->sessions, by_pid);
    return 0;
}

/* A session's fact of lock row i, or "" when its session is gone. */
static const char *fact(const listing *l, int i, advlock_locks_column col)
{
    const session_row *s = session_of(l, i);
    return s != NULL ? cell(l->res, s->row, col) : "";
}

/* The lock's key as the JSON and the metrics show it: the bigint, or the
 * two-int4 form's two keys. */
static void key_text(const listing *l, const lock_group *g, char *buf, size_t size)
{
    if (g->pair)
        snprintf(buf, size, "%s,%s", cell(l->res, g->first, ADVLOCK_LOCKS_CLASSID),
                 cell(l->res, g->first, ADVLOCK_LOCKS_OBJID));
    else
        snprintf(buf, size, "%" PRId64, g->key);
}

static void format_duration(long long seconds, char *buf, size_t size)
{
    if (seconds < 0)
        snprintf(buf, size, "unknown");
    else
        snprintf(buf, size, "%lld:%02lld:%02lld", seconds / 3600, seconds / 60 % 60, seconds % 60);
}

/* A session's fact, "?" when unknown. */
static const char *or_unknown(const listing *l, int i, advlock_locks_column col)
{
    const char *v = fact(l, i, col);
    return v[0] != '\0' ? v : "?";
}

static void render_text(const listing *l)
{
    if (l->count == 0)
        puts("no advisory lock is held or awaited in this database");
    for (int k = 0; k < l->count; k++) {
        const lock_group *g = &l->groups[k];
        const PGresult *res = l->res;
        char label[ADVLOCK_KEY_ECHO_MAX + 4];
        if (g->name != NULL)
            advlock_escape_name(g->name, strlen(g->name), label, sizeof label);
        else
            key_text(l, g, label, sizeof label);
        printf("%s\t%s\t", label, g->holders > 0 ? "held" : "free, with waiters");
        if (g->pair)
            printf("int4 keys %s %s", cell(res, g->first, ADVLOCK_LOCKS_CLASSID),
                   cell(res, g->first, ADVLOCK_LOCKS_OBJID));
        else
            printf("key %" PRId64 "\tclassid %s\tobjid %s", g->key,
                   cell(res, g->first, ADVLOCK_LOCKS_CLASSID),
                   cell(res, g->first, ADVLOCK_LOCKS_OBJID));
        if (!is_null(res, g->first, ADVLOCK_LOCKS_TOKEN))
            printf("\tfence token %s", cell(res, g->first, ADVLOCK_LOCKS_TOKEN));
        putchar('\n');
        for (int i = g->first; i < g->first + g->rows; i++) {
            int granted = is_true(res, i, ADVLOCK_LOCKS_GRANTED);
            char duration[32];
            format_duration(
                seconds_or_unknown(res, i, granted ? ADVLOCK_LOCKS_HELD : ADVLOCK_LOCKS_WAITED),
                duration, sizeof duration);
            printf("  %s\tpid %s\tmode %s\tapplication '%s'\tclient %s\tstate %s\t"
                   "backend start %s\t%s %s",
                   granted ? "holder" : "waiter", or_null(res, i, ADVLOCK_LOCKS_PID, "?"),
                   cell(res, i, ADVLOCK_LOCKS_MODE), fact(l, i, ADVLOCK_LOCKS_APPLICATION),
                   or_unknown(l, i, ADVLOCK_LOCKS_CLIENT), or_unknown(l, i, ADVLOCK_LOCKS_STATE),
                   or_unknown(l, i, ADVLOCK_LOCKS_START), granted ? "held for" : "waiting for",
                   duration);
            if (granted && !is_null(res, i, ADVLOCK_LOCKS_HELD_SINCE))
                printf(" since %s", cell(res, i, ADVLOCK_LOCKS_HELD_SINCE));
            putchar('\n');
        }
    }
}

/* text as a JSON string to out, with the core's one escaper. */
static void json_text(FILE *out, const char *text)
{
    char small[256];
    int n = advlock_json_string(text, small, sizeof small);
    if (n < 0) {
        fputs("null", out);
        return;
    }
    if ((size_t)n < sizeof small) {
        fputs(small, out);
        return;
    }
    char *big = malloc((size_t)n + 1);
    if (big == NULL) {
        fputs("null", out); /* out of memory for one name: the rest stands */
        return;
    }
    advlock_json_string(text, big, (size_t)n + 1);
    fputs(big, out);
    free(big);
}

static void json_field(FILE *out, const char *field, const char *text, int first)
{
    fprintf(out, "%s\"%s\":", first ? "" : ",", field);
    json_text(out, text);
}

/* A text: '' is unknown, null in JSON. */
static void json_known(FILE *out, const char *field, const char *v)
{
    if (v[0] == '\0')
        fprintf(out, ",\"%s\":null", field);
    else
        json_field(out, field, v, 0);
}

static void json_number(const char *field, const PGresult *res, int row, advlock_locks_column col)
{
    if (is_null(res, row, col))
        printf(",\"%s\":null", field);
    else
        printf(",\"%s\":%s", field, cell(res, row, col));
}

/* A session's facts as JSON fields, written once per session however
 * many locks it holds (NULL: out of memory, then written each time). */
static char *session_json(const PGresult *res, int row)
{
    char *text = NULL;
    size_t size = 0;
    FILE *out = open_memstream(&text, &size);
    if (out == NULL)
        return NULL;
    json_field(out, "application_name", cell(res, row, ADVLOCK_LOCKS_APPLICATION), 0);
    json_known(out, "client", cell(res, row, ADVLOCK_LOCKS_CLIENT));
    json_known(out, "state", cell(res, row, ADVLOCK_LOCKS_STATE));
    json_known(out, "backend_start", cell(res, row, ADVLOCK_LOCKS_START));
    if (fclose(out) != 0) {
        free(text);
        return NULL;
    }
    return text;
}

/* The session fields of lock row i: its session's, or nulls when it is gone. */
static void json_session(listing *l, int i)
{
    session_row *s = session_of(l, i);
    if (s == NULL) {
        fputs(",\"application_name\":null,\"client\":null,\"state\":null,"
              "\"backend_start\":null",
              stdout);
        return;
    }
    if (s->json == NULL)
        s->json = session_json(l->res, s->row);
    if (s->json != NULL) {
        fputs(s->json, stdout);
        return;
    }
    char *once = session_json(l->res, s->row);
    fputs(once != NULL ? once : ",\"application_name\":null", stdout);
    free(once);
}

static void render_json(listing *l, const char *database)
{
    fputs("{", stdout);
    json_field(stdout, "database", database, 1);
    fputs(",\"locks\":[", stdout);
    for (int k = 0; k < l->count; k++) {
        const lock_group *g = &l->groups[k];
        const PGresult *res = l->res;
        char key[64];
        key_text(l, g, key, sizeof key);
        fputs(k > 0 ? ",{" : "{", stdout);
        if (g->name != NULL)
            json_field(stdout, "name", g->name, 1);
        else
            fputs("\"name\":null", stdout);
        json_field(stdout, "key", key, 0);
        printf(",\"form\":\"%s\",\"classid\":%s,\"objid\":%s", g->pair ? "int4 pair" : "bigint",
               cell(res, g->first, ADVLOCK_LOCKS_CLASSID),
               cell(res, g->first, ADVLOCK_LOCKS_OBJID));
        json_number("fence_token", res, g->first, ADVLOCK_LOCKS_TOKEN);
        for (int part = 0; part < 2; part++) {
            printf(",\"%s\":[", part == 0 ? "holders" : "waiters");
            int first = 1;
            for (int i = g->first; i < g->first + g->rows; i++) {
                int granted = is_true(res, i, ADVLOCK_LOCKS_GRANTED);
                if (granted != (part == 0))
                    continue;
                printf("%s{\"pid\":%s", first ? "" : ",",
                       or_null(res, i, ADVLOCK_LOCKS_PID, "null"));
                first = 0;
                json_known(stdout, "mode", cell(res, i, ADVLOCK_LOCKS_MODE));
                json_session(l, i);
                if (granted) {
                    json_number("held_seconds", res, i, ADVLOCK_LOCKS_HELD);
                    json_known(stdout, "held_since", cell(res, i, ADVLOCK_LOCKS_HELD_SINCE));
                } else {
                    json_number("waited_seconds", res, i, ADVLOCK_LOCKS_WAITED);
                }
                fputs("}", stdout);
            }
            fputs("]", stdout);
        }
        fputs("}", stdout);
    }
    fputs("]}\n", stdout);
}

/* A label value in the exposition format: backslash, double quote and
 * newline escaped, everything else as it is (names are valid UTF-8). */
static void prom_label_value(const char *v)
{
    putchar('"');
    for (const char *p = v; *p != '\0'; p++) {
        if (*p == '\\')
            fputs("\\\\", stdout);
        else if (*p == '"')
            fputs("\\\"", stdout);
        else if (*p == '\n')
            fputs("\\n", stdout);
        else
            putchar(*p);
    }
    putchar('"');
}

static void prom_sample(const listing *l, const lock_group *g, const char *metric, long long value)
{
    char key[64];
    key_text(l, g, key, sizeof key);
    printf("%s{key=", metric);
    prom_label_value(key);
    if (g->name != NULL) {
        fputs(",name=", stdout);
        prom_label_value(g->name);
    }
    printf("} %lld\n", value);
}

static void render_prometheus(const listing *l)
{
    static const struct {
        const char *metric, *help;
        int which; /* 0 holders, 1 waiters, 2 oldest holder, 3 longest waiter */
    } families[] = {
        {"advlock_lock_holders",
         "Sessions holding the advisory lock (granted rows of pg_locks), by key and known name.",
         0},
        {"advlock_lock_waiters", "Sessions waiting for the advisory lock on the server.", 1},
        {"advlock_lock_oldest_holder_seconds",
         "Seconds since the oldest holder took the lock, from its lock-delay mark; absent where "
         "unknown.",
         2},
        {"advlock_lock_oldest_waiter_seconds",
         "Seconds the longest waiter has waited (pg_locks.waitstart); absent where unknown.", 3},
    };
    for (size_t f = 0; f < sizeof families / sizeof families[0]; f++) {
        printf("# HELP %s %s\n# TYPE %s gauge\n", families[f].metric, families[f].help,
               families[f].metric);
        for (int k = 0; k < l->count; k++) {
            const lock_group *g = &l->groups[k];
            long long v = families[f].which == 0   ? g->holders
                          : families[f].which == 1 ? g->rows - g->holders
                          : families[f].which == 2 ? g->held_max
                                                   : g->wait_max;
            if (families[f].which < 2 || v >= 0)
                prom_sample(l, g, families[f].metric, v);
        }
    }
}

/* Runs the probe and the listing's form it picks; returns the rows, or
 * NULL with *rc set: a stop signal's number or CLI_NO_ANSWER (as
 * cli_exec_row), or EXIT_LOCK_ERROR after saying why. */
static PGresult *ask(PGconn *conn, cli_bound bound, int *rc)
{
    PGresult *res = cli_exec_row(conn, ADVLOCK_SQL_LOCKS_TABLES, NULL,
                                 "the check of advlock's tables", bound, rc);
    if (*rc != 0)
        return NULL;
    int form = 0;
    if (PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1) {
        form = (strcmp(PQgetvalue(res, 0, 0), "t") == 0)
               + 2 * (strcmp(PQgetvalue(res, 0, 1), "t") == 0);
        PQclear(res);
    } else {
        cli_error("status: the check of advlock's tables: %.*s",
                  cli_trimmed_length(PQerrorMessage(conn)), PQerrorMessage(conn));
        PQclear(res);
        *rc = EXIT_LOCK_ERROR;
        return NULL;
    }
    res = cli_exec_row(conn, (advlock_sql)(ADVLOCK_SQL_LOCKS + form), NULL,
                       "the list of advisory locks", bound, rc);
    if (*rc != 0)
        return NULL;
    if (PQresultStatus(res) != PGRES_TUPLES_OK || PQnfields(res) != ADVLOCK_LOCKS_COLUMNS) {
        cli_error("status: the list of advisory locks: %.*s",
                  cli_trimmed_length(PQerrorMessage(conn)), PQerrorMessage(conn));
        PQclear(res);
        *rc = EXIT_LOCK_ERROR;
        return NULL;
    }
    return res;
}

static void listing_free(listing *l)
{
    for (int i = 0; i < l->session_count; i++)
        free(l->sessions[i].json);
    free(l->sessions);
    free(l->groups);
    PQclear(l->res);
}

/* One frame: asks, renders; 0 or 1 (a lock is held), or as ask's *rc. */
static int frame(PGconn *conn, const status_listing *opts, const status_names *names)
{
    int rc;
    cli_bound bound = cli_bound_from(advlock_pq_now_ms(), opts->timeout_ms);
    listing l = {0};
    l.res = ask(conn, bound, &rc);
    if (l.res == NULL)
        return rc;
    if (group_rows(&l, names) != 0) {
        listing_free(&l);
        return EXIT_LOCK_ERROR;
    }
    if (opts->watch_ms > 0)
        fputs("\033[H\033[2J", stdout); /* as watch(1): home, clear the screen */
    if (opts->format == STATUS_JSON)
        render_json(&l, PQdb(conn));
    else if (opts->format == STATUS_PROMETHEUS)
        render_prometheus(&l);
    else
        render_text(&l);
    fflush(stdout);
    rc = l.any_held;
    listing_free(&l);
    return rc;
}

/* Waits ms, or until a stop signal: returns 1 if one came. */
static int pause_or_stop(int64_t ms)
{
    int64_t until = advlock_pq_now_ms() + ms;
    for (;;) {
        int64_t left = until - advlock_pq_now_ms();
        if (left <= 0)
            return 0;
        struct pollfd p = {.fd = cli_signals_fd(), .events = POLLIN};
        if (poll(&p, 1, left > 60000 ? 60000 : (int)left) > 0 && cli_signals_stop() != 0)
            return 1;
    }
}

int status_list(PGconn *conn, const status_listing *opts, status_names *names)
{
    names_sort(names);
    if (opts->watch_ms <= 0) {
        int rc = frame(conn, opts, names);
        return rc == CLI_NO_ANSWER ? EXIT_NO_SERVER : rc;
    }
    if (cli_signals_install() != 0) {
        cli_error("status --watch: cannot set up signals: %s", strerror(errno));
        return EXIT_IO;
    }
    for (;;) {
        int rc = frame(conn, opts, names);
        if (rc == CLI_NO_ANSWER)
            return EXIT_NO_SERVER;
        if (rc == EXIT_LOCK_ERROR)
            return rc;
        if (rc != 0 && rc != 1)
            return EXIT_OK; /* a stop signal's number, while asking */
        if (ferror(stdout))
            return EXIT_IO;
        if (pause_or_stop(opts->watch_ms))
            return EXIT_OK;
    }
}
