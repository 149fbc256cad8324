/*
 * advlock run's names (run.h): ordered by key, each acquired as a member of
 * the run's one lock set under the run's one timeout, and given back, the
 * last taken first, whatever fails on the way.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "run.h"

int run_bind(run_locks *l, PGconn *conn, const run_options *o)
{
    l->conn = conn;
    for (int i = 0; i < o->name_count; i++)
        advlock_pq_member_init(&l->members[i]);
    int rc = advlock_pq_lockset_init(&l->set, conn);
    if (rc == 0)
        rc = advlock_pq_lockset_set_capacity_share(&l->set, o->capacity_share);
    if (rc == 0 && o->lease_ms > 0)
        rc = advlock_pq_lockset_set_lease(&l->set, o->lease_ms, o->kill_after_ms);
    if (rc != 0)
        cli_error("cannot set up the run's locks on its connection: %s", advlock_strerror(rc));
    return rc != 0 ? -1 : 0;
}

void run_settle(run_locks *l, int64_t until_ms)
{
    /* A stop signal ends the wait too, left on the pipe for the run. */
    while (!advlock_pq_lockset_quiet(&l->set)
           && !advlock_conn_must_close(advlock_pq_lockset_engine(&l->set))
           && PQstatus(l->conn) == CONNECTION_OK && advlock_pq_now_ms() < until_ms)
        if (advlock_pq_lockset_wait(&l->set, cli_signals_fd(), 50) == 1)
            return;
}

void run_close(run_locks *l)
{
    /* A cancelled acquire's grant is given back by the set: behind a
     * transaction pool closing would leave it on the server session. */
    run_settle(l, advlock_pq_now_ms() + SIGNAL_GRACE_MS);
    advlock_pq_lockset_finish(&l->set);
    PQfinish(l->conn);
}

int run_proxied(const run_locks *l)
{
    return advlock_conn_session(advlock_pq_lockset_engine(&l->set))->proxied;
}

void run_focus(run_options *o, int i)
{
    o->key = o->names[i].name;
    advlock_escape_name(o->key, strlen(o->key), o->shown_key, sizeof o->shown_key);
}

void run_focus_all(run_options *o)
{
    run_focus(o, 0);
    size_t used = strlen(o->shown_key);
    for (int i = 1; i < o->name_count; i++) {
        char one[sizeof o->shown_key];
        advlock_escape_name(o->names[i].name, strlen(o->names[i].name), one, sizeof one);
        size_t more = strlen(one) + 4; /* "', '" before it */
        /* Room is kept for the mark of a cut list, which the callers'
         * quotes close: 'a', 'b', '...' */
        if (used + more + sizeof "', '..." > sizeof o->shown_key) {
            if (used + sizeof "', '..." <= sizeof o->shown_key)
                memcpy(o->shown_key + used, "', '...", sizeof "', '...");
            return;
        }
        memcpy(o->shown_key + used, "', '", 4);
        memcpy(o->shown_key + used + 4, one, strlen(one) + 1);
        used += more;
    }
}

/* An operation's outcome in the core's words (the reference's sentences). */
static const char *describe(const advlock_pq_report *r, const char *key, char *buf, size_t size)
{
    if (advlock_pq_describe(r, key, strlen(key), buf, size) <= 0)
        return advlock_strerror(r->lock.failure);
    return buf;
}

/* How a run that did not get the lock exits: the timeout's status; a
 * standby, which cannot serve the lock, as an unavailable server; any other
 * failure (a lost connection, statements on different server sessions
 * behind a proxy) as a lock error. */
static int acquire_failed_status(const advlock_report *r, const run_options *o)
{
    if (r->outcome == ADVLOCK_TIMED_OUT)
        return o->conflict_exit_code;
    return r->failure == ADVLOCK_ESTANDBY ? EXIT_NO_SERVER : EXIT_LOCK_ERROR;
}

/* How long a release may take, grace aside: as long as the acquire, and
 * behind a proxy never less than a guarded unlock's retries
 * (ADVLOCK_GUARD_RETRY_MS), or a short --timeout would abandon the release
 * between its tries, the lock left on the claimed server session. */
static int64_t release_ms(const run_locks *l, const run_options *o)
{
    int retries = run_proxied(l) && o->timeout_ms < ADVLOCK_GUARD_RETRY_MS;
    return retries ? ADVLOCK_GUARD_RETRY_MS : o->timeout_ms;
}

/* Drives member i's release to its end, from now to its bound
 * (release_ms), its retries helped to the claimed server session behind a
 * proxy. */
static drive_end drive_release(run_locks *l, int i, const run_options *o, int64_t now)
{
    cli_bound bound = cli_bound_from(now, release_ms(l, o));
    cli_reach reach;
    cli_reach_init(&reach, o->conninfo, o->application_name,
                   advlock_conn_session(advlock_pq_lockset_engine(&l->set))->token, bound);
    drive_end end = run_drive(l, i, o, NULL, bound.until_ms, NULL, run_proxied(l) ? &reach : NULL);
    cli_reach_end(&reach);
    return end;
}

/* Starts giving back name i's key: the member's hold, or the key itself
 * (a grant in doubt, a lock a verify could not show held), which the
 * session may hold without the set knowing. */
static int start_release(run_locks *l, int i, const run_options *o, int64_t now)
{
    return advlock_pq_lockset_start_release_key(&l->set, &l->members[i], o->names[i].key, &o->lock,
                                                now);
}

/* Releases what the acquire took, by its key: no second hash. Anything but
 * RELEASED means the lock was not where the run held it (NOT_HELD, or
 * ESESSION: the unlock reached another server session behind a proxy, and
 * the lock may be left on the one that took it), so the run fails. */
static int release(run_locks *l, int i, const run_options *o)
{
    int64_t now = advlock_pq_now_ms(), key = o->names[i].key;
    char said[2 * ADVLOCK_MESSAGE_MAX];
    cli_event failed = {.kind = CLI_EVENT_RELEASE_FAILED, .lock = o->key, .key = key, .said = said};
    if (start_release(l, i, o, now) != 0) {
        snprintf(said, sizeof said, "could not release lock '%s'; closing the session releases it",
                 o->shown_key);
        cli_log(&failed);
        return -1;
    }
    drive_end end = drive_release(l, i, o, now);
    if (end.abandoned) {
        run_say_abandoned(&end, o, key, end.signal != 0 ? SIGNAL_GRACE_MS : release_ms(l, o),
                          CLI_EVENT_RELEASE_FAILED);
        return -1;
    }
    const advlock_pq_report *r = advlock_pq_member_report(&l->members[i]);
    if (r->lock.outcome != ADVLOCK_RELEASED) {
        char message[ADVLOCK_MESSAGE_MAX];
        snprintf(said, sizeof said, "releasing lock '%s': %s", o->shown_key,
                 describe(r, o->key, message, sizeof message));
        failed.report = &r->lock;
        cli_log(&failed);
        return -1;
    }
    return 0;
}

/* After a verify that could not show the lock held, or an acquire that
 * ended with a grant in doubt: the claimed server session may still hold it
 * (busy with another client's transaction when the statement came), and it
 * outlives advlock's connection in the pool. The release (which keeps trying
 * to reach that session, within its bound) gives the lock back; unreported:
 * whatever it says, the message before has said the lock is gone or in
 * doubt. */
static void release_quietly(run_locks *l, int i, const run_options *o)
{
    int64_t now = advlock_pq_now_ms();
    if (start_release(l, i, o, now) == 0)
        (void)drive_release(l, i, o, now);
}

int run_give_back(run_locks *l, run_options *o, int taken, int commit, int say_each)
{
    cli_bound bound = cli_bound_from(advlock_pq_now_ms(), o->timeout_ms);
    if (o->xact) {
        run_settle(l, bound.until_ms);
        if (cli_xact_end(l->conn, commit, bound) != 0)
            return -1;
    }
    int failed = 0;
    for (int i = taken - 1; i >= 0; i--) {
        run_focus(o, i);
        if (!o->xact && (PQstatus(l->conn) != CONNECTION_OK || release(l, i, o) != 0)) {
            failed = 1;
            continue;
        }
        char said[ADVLOCK_KEY_ECHO_MAX + 64];
        snprintf(said, sizeof said, "lock '%s' released: the run holds all its names or none",
                 o->shown_key);
        cli_log(&(cli_event){.kind = CLI_EVENT_RELEASED,
                             .lock = o->key,
                             .key = o->names[i].key,
                             .said = say_each ? said : NULL,
                             .reason = !o->xact ? "unlock"
                                       : commit ? "commit"
                                                : "rollback"});
    }
    return failed ? -1 : 0;
}

void run_release_all_quietly(run_locks *l, const run_options *o)
{
    for (int i = o->name_count - 1; i >= 0; i--)
        release_quietly(l, i, o);
}

int run_order_names(run_options *o)
{
    for (int i = 0; i < o->name_count; i++) {
        run_focus(o, i);
        int rc = advlock_derive_key(o->key, strlen(o->key), &o->names[i].key);
        if (rc != 0) {
            cli_error("lock key '%s': %s", o->shown_key, advlock_strerror(rc));
            return EXIT_BAD_KEY;
        }
    }
    /* Insertion sort: a handful of names, and no callback to write. */
    for (int i = 1; i < o->name_count; i++) {
        cli_lock n = o->names[i];
        int j = i;
        for (; j > 0 && o->names[j - 1].key > n.key; j--)
            o->names[j] = o->names[j - 1];
        o->names[j] = n;
    }
    for (int i = 1; i < o->name_count; i++) {
        if (o->names[i].key == o->names[i - 1].key) {
            run_focus(o, i);
            cli_error("lock '%s' is named twice", o->shown_key);
            return EXIT_USAGE;
        }
    }
    return EXIT_OK;
}

/* The settings' row, read in text: 0 with out set, or -1 after saying why. */
static int read_capacity(PGconn *conn, const run_options *o, advlock_capacity *out)
{
    PGresult *res, *last = NULL;
    while ((res = PQgetResult(conn)) != NULL) {
        PQclear(last);
        last = res;
    }
    int ok = last != NULL && PQresultStatus(last) == PGRES_TUPLES_OK && PQntuples(last) == 1
             && PQnfields(last) == 3
             && advlock_capacity_init(out, strtoll(PQgetvalue(last, 0, 0), NULL, 10),
                                      strtoll(PQgetvalue(last, 0, 1), NULL, 10),
                                      strtoll(PQgetvalue(last, 0, 2), NULL, 10), o->capacity_share)
                    == 0;
    if (!ok) {
        const char *why = last != NULL ? PQresultErrorMessage(last) : PQerrorMessage(conn);
        cli_error("cannot read the server's lock-table settings: %.*s", cli_trimmed_length(why),
                  why);
    }
    PQclear(last);
    return ok ? 0 : -1;
}

int run_check_capacity(PGconn *conn, const run_options *o, cli_bound bound)
{
    if (o->name_count < 2)
        return 0;
    if (advlock_pq_send_row(conn, ADVLOCK_SQL_CAPACITY, NULL) != 1) {
        const char *why = PQerrorMessage(conn);
        cli_error("cannot read the server's lock-table settings: %.*s", cli_trimmed_length(why),
                  why);
        return -1;
    }
    int rc = cli_await_results(conn, "the lock-table settings' query", bound);
    advlock_capacity capacity;
    if (rc != 0 || (rc = read_capacity(conn, o, &capacity)) != 0)
        return rc;
    char words[ADVLOCK_MESSAGE_MAX];
    if (advlock_capacity_refuse(&capacity, o->name_count - 1, words, sizeof words) != 1)
        return 0;
    cli_error(
        "cannot take %d names: %s (--capacity-share; docs/design.md, \"The server's lock table\")",
        o->name_count, words);
    return -1;
}

int run_wait_needs_no_lease(const run_options *o)
{
    if (o->name_count < 2 || o->lock.wait != ADVLOCK_WAIT_SERVER || o->lease_ms == 0)
        return 0;
    cli_error("--wait with several names: not under a lease (no heartbeat can go while a "
              "later name waits in the server's queue); add --lease 0, or poll (no --wait)");
    return -1;
}

/* Says that a stop signal ended the acquire of the name in hand (key), and
 * returns how the run exits for it. */
static int say_cancelled(const run_options *o, int64_t key, int sig)
{
    cli_log(&(cli_event){.kind = CLI_EVENT_CANCELLED, .lock = o->key, .key = key, .signal = sig});
    return 128 + sig;
}

int run_acquire_name(run_locks *l, run_options *o, progress *shown, int64_t started,
                     cli_bound bound, int i, int *gone)
{
    run_focus(o, i);
    PGconn *conn = l->conn;
    advlock_pq_member *m = &l->members[i];
    int64_t key = o->names[i].key;
    int first = i == 0;
    int64_t now = advlock_pq_now_ms();
    int64_t left = o->timeout_ms == INT64_MAX          ? INT64_MAX
                   : started + o->timeout_ms - now > 0 ? started + o->timeout_ms - now
                                                       : 0;
    int rc;
    shown->lock = o->key; /* the name the events say, from its first try */
    shown->diagnose = o->lock.diagnose && cli_log_structured(); /* asked for each name */
    shown->pending = 0;
    if ((rc = advlock_pq_lockset_start_acquire_key(&l->set, m, key, left, &o->lock, now)) != 0) {
        const char *why = PQerrorMessage(conn);
        char said[ADVLOCK_MESSAGE_MAX + 512];
        snprintf(said, sizeof said, "cannot start acquiring '%s': %s: %.*s", o->shown_key,
                 advlock_strerror(rc), cli_trimmed_length(why), why);
        cli_log(&(cli_event){.kind = CLI_EVENT_FAILED, .lock = o->key, .key = key, .said = said});
        return EXIT_LOCK_ERROR;
    }
    xact_pause pause = {.conn = o->xact && first ? conn : NULL};
    drive_end end = run_drive(l, i, o, shown, bound.until_ms, &pause, NULL);
    if (end.abandoned) {
        run_say_abandoned(&end, o, key,
                          end.signal != 0                  ? SIGNAL_GRACE_MS
                          : end.sql == ADVLOCK_SQL_SESSION ? o->handshake.named_ms
                                                           : o->timeout_ms,
                          CLI_EVENT_FAILED);
        *gone = 1;
        if (end.signal != 0)
            return say_cancelled(o, key, end.signal);
        /* Only a diagnosis comes after the timeout: the lock was busy. */
        return end.sql == ADVLOCK_SQL_HOLDERS ? o->conflict_exit_code : EXIT_NO_SERVER;
    }
    int interrupted = end.signal;
    const advlock_pq_report *r = advlock_pq_member_report(m);
    if (pause.failed < 0 && !interrupted)
        return EXIT_LOCK_ERROR;
    /* A signal that came too late to stop the grant still means stop: the
     * rollback gives a transaction-scoped lock back, an unlock a session
     * lock (closing the connection would not, behind a pooler). */
    if (r->lock.outcome == ADVLOCK_CANCELLED
        || (interrupted && r->lock.outcome == ADVLOCK_ACQUIRED)) {
        if (r->lock.outcome == ADVLOCK_ACQUIRED && !o->xact)
            release_quietly(l, i, o);
        return say_cancelled(o, key, interrupted);
    }
    if (r->lock.outcome != ADVLOCK_ACQUIRED) {
        /* The message names --timeout, all the run had, not what the
         * connect and the names before left of it for this acquire. */
        advlock_pq_report told = *r;
        told.lock.timeout_ms = o->timeout_ms;
        char message[ADVLOCK_MESSAGE_MAX];
        cli_log(&(cli_event){.kind = r->lock.outcome == ADVLOCK_TIMED_OUT ? CLI_EVENT_TIMED_OUT
                                                                          : CLI_EVENT_FAILED,
                             .lock = o->key,
                             .key = key,
                             .report = &told.lock,
                             .said = describe(&told, o->key, message, sizeof message)});
        if (advlock_detail_in_doubt(r->lock.detail) && !o->xact)
            release_quietly(l, i, o);
        if ((o->lock.fence || o->lock.lock_delay) && strcmp(r->lock.sqlstate, "42501") == 0) {
            run_settle(l, bound.until_ms);
            if (o->lock.fence)
                cli_say_missing_grants(conn, bound, ADVLOCK_SQL_FENCE_GRANTS,
                                       "fencing tokens need");
            if (o->lock.lock_delay)
                cli_say_missing_grants(conn, bound, ADVLOCK_SQL_MARK_GRANTS, "lock-delay needs");
        }
        return acquire_failed_status(&r->lock, o);
    }
    cli_log(&(cli_event){.kind = CLI_EVENT_ACQUIRED,
                         .lock = o->key,
                         .key = key,
                         .report = &r->lock,
                         .lease_ms = o->lease_ms});
    return NAME_TAKEN;
}
