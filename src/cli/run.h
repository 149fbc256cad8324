/*
 * advlock run, in three files: cmd_run.c (its options, the command while
 * the names are held, the whole run), drive.c (one member's operation
 * driven to its end, its progress shown) and names.c (the names: their
 * order, each one's acquire, giving them back). The names are the members
 * of one lock set on the run's connection (run_locks).
 */
#ifndef ADVLOCK_CLI_RUN_H
#define ADVLOCK_CLI_RUN_H

#include <stdint.h>

#include "advlock_pq.h"
#include "cli.h"
#include "log.h"

typedef struct run_options {
    const char *conninfo;
    const char *application_name;
    int64_t timeout_ms;
    /* The bound on connecting and the session check: --timeout's, or
     * without one CLI_DEFAULT_TIMEOUT_MS from the run's start (a run may
     * wait for the lock forever, not for a server that does not answer). */
    cli_bound handshake;
    int conflict_exit_code;
    int quiet;
    int keep_running;
    int xact;              /* --xact: one transaction around the command */
    int64_t kill_after_ms; /* from the stop signal to SIGKILL */
    int64_t verify_ms;     /* --verify-interval: behind a proxy; 0: never */
    int64_t lease_ms;      /* --lease; 0: none */
    int lease_given;       /* --lease was on the command line */
    int capacity_share;    /* --capacity-share: percent of the server's lock table */
    advlock_options lock;  /* --shared, --wait, --jitter, --diagnose, --xact, --allow-standby,
                              --fence */
    /* The names, in the order they are taken and the reverse of the order
     * they are given back: by key (run_order_names), so that runs naming the
     * same locks in any order take them in one order and never wait for
     * each other in a cycle. */
    cli_lock names[CLI_RUN_LOCKS_MAX];
    int name_count;
    /* The name in hand (run_focus): the one being acquired, released or
     * checked; while the command runs, all of them (run_focus_all). */
    const char *key;
    /* The key as messages show it (advlock_escape_name): one printable line
     * whatever the name holds, so no name can move the terminal's cursor. */
    char shown_key[ADVLOCK_KEY_ECHO_MAX + 4];
    char **command;
} run_options;

/* The run's locks: one lock set on the run's connection (docs/libpq.md,
 * "Lock sets"), whose engine holds the session check, the lease and the
 * watch for all of them; name i is members[i]. */
typedef struct run_locks {
    PGconn *conn;
    advlock_pq_lockset set;
    advlock_pq_member members[CLI_RUN_LOCKS_MAX];
} run_locks;

/* Binds the set to conn, with --capacity-share and the lease (take_lease's
 * o->lease_ms, --kill-after its stop time). Returns 0, or -1 after saying
 * why. */
int run_bind(run_locks *l, PGconn *conn, const run_options *o);

/* Lets the set go (its tables freed), then closes the connection. */
void run_close(run_locks *l);

/* Waits, till until_ms or a stop signal at the latest, for the set to
 * have read all it sent on the run's connection
 * (advlock_pq_lockset_quiet()): the run's own statements (a transaction's
 * end, the grants' check) go after. */
void run_settle(run_locks *l, int64_t until_ms);

/* 1 when the run's connection goes through a proxy (the session check
 * said so), else 0. */
int run_proxied(const run_locks *l);

/* What the acquire's events show (run_on_lock_event), and the progress
 * line on a terminal. */
typedef struct progress {
    const char *lock; /* the name the events say */
    int draw;         /* a progress line on the terminal */
    /* The run's start: the line's elapsed time counts from it, as --timeout
     * does, through every name (the set shares one timeout). */
    int64_t started_ms;
    uint64_t attempt;
    int64_t retry_at_ms; /* 0: no sleep under way */
    int server_wait;
    /* --diagnose with the JSON log: each name's first waiting event is held
     * back (pending) until the holder is asked (tend_diagnosis), and names
     * it. */
    int diagnose;
    int pending;
    cli_event waiting;
    advlock_report report; /* the waiting event's */
    advlock_report holder;
} progress;

/* How long past --timeout a run may take (see --timeout in advlock(1)): the
 * connect and every statement must end by --timeout plus the library's
 * grace (ADVLOCK_PQ_GRACE_MS), past which the connection is abandoned. A
 * statement cancelled by a stop signal has SIGNAL_GRACE_MS to answer (a
 * granted lock is then released), then it is abandoned too. */
enum { SIGNAL_GRACE_MS = 500 };

/* How an operation driven by run_drive() ended for the run. */
typedef struct drive_end {
    int signal;      /* the first stop signal that arrived, or 0 */
    int abandoned;   /* it did not end by its bound: the connection is closed */
    advlock_sql sql; /* abandoned: the statement in flight (ADVLOCK_SQL_COUNT: none) */
} drive_end;

/* advlock run --xact while acquiring: the transaction is open only while a
 * try is out. It ends (ROLLBACK: nothing was granted) when the acquire
 * starts a sleep and begins again when the sleep is over, so that the run
 * pins no pooled server session while it backs off: the session another
 * client holds the key on stays free for that client's unlock, and the next
 * try may land elsewhere. A try must never run outside a transaction (its
 * lock would end with its statement): if BEGIN or ROLLBACK fails, the
 * acquire is cancelled and failed set. */
typedef struct xact_pause {
    PGconn *conn; /* NULL: not --xact */
    int ended;    /* the transaction is ended for the sleep */
    int failed;   /* BEGIN or ROLLBACK failed: -1, or a stop signal's number */
} xact_pause;

/* ---- drive.c: one operation, driven to its end ------------------------------ */

/* The shorter of two waits in ms, -1 meaning none. */
int64_t run_shorter_wait(int64_t a, int64_t b);

/* The acquire's events (advlock_options.on_event; user: the progress):
 * said to the log, and noted for the progress line; with --diagnose and
 * the JSON log, the first waiting event of each name held back for its
 * holder (progress.pending). */
void run_on_lock_event(void *user, const advlock_event *e);

/* Runs member i's operation to its end, or to until_ms, cancelling an
 * acquire if a forwarded signal arrives; a statement still unanswered at
 * until_ms (or SIGNAL_GRACE_MS after the signal; at once after a second one) is
 * cancelled and the run's connection closed. The waiting is the set's
 * own (advlock_pq_lockset_wait), with the signal pipe beside it; x: see
 * xact_pause (NULL but for an acquire); r: see tend_reach (NULL but for a
 * release). */
drive_end run_drive(run_locks *l, int i, const run_options *o, progress *seen, int64_t until_ms,
                    xact_pause *x, cli_reach *r);

/* Says that an abandoned operation's statement got no answer within
 * bound_ms: as kind, the operation's failure (the acquire's or the
 * release's) on the lock, key. */
void run_say_abandoned(const drive_end *end, const run_options *o, int64_t key, int64_t bound_ms,
                       cli_event_kind kind);

/* ---- names.c: the run's names --------------------------------------------- */

/* Puts name i in hand: messages from now on name it. */
void run_focus(run_options *o, int i);

/* Puts every name in hand, for what concerns them all (the session that
 * holds them): messages name them as 'A', 'B', cut with "..." where the
 * line would grow too long. */
void run_focus_all(run_options *o);

/* With several names, before the first is taken: do they fit in the
 * --capacity-share of the server's lock table (docs/design.md, "The
 * server's lock table")? Reads the server's settings on conn within bound.
 * Returns 0 (they fit, or one name), -1 after saying why not (or why the
 * settings could not be read), or as cli_xact_begin (CLI_NO_ANSWER, a stop
 * signal's number). */
int run_check_capacity(PGconn *conn, const run_options *o, cli_bound bound);

/* Derives every name's key and sorts the names by it (signed order), so
 * that every run takes the same names in the same order. Returns EXIT_OK,
 * or how the run exits, said: a name that is no lock name, or one named
 * twice (its key found twice: distinct names never share one). */
int run_order_names(run_options *o);

/* --wait with several names and a lease: a later name's wait in the
 * server's queue holds the connection, so the lease of the names taken
 * before it could send no heartbeat and would run out. Said, and refused. */
int run_wait_needs_no_lease(const run_options *o);

/* Acquires name i, put in hand (run_focus), as member i of the run's set, with what
 * is left of --timeout: all the names share it, from started, each phase
 * bounded by bound. One after another in key order: the session holds them
 * all, and its end, or the transaction's with --xact, frees them all; only
 * the first name's acquire may have --xact's pause give the transaction back while
 * it backs off (see xact_pause). Returns NAME_TAKEN once the lock is held,
 * else how the run exits, said, the lock not held; *gone is then set if
 * the connection was closed (its statement did not answer), which ends the
 * session and its locks. */
enum { NAME_TAKEN = -1 };
int run_acquire_name(run_locks *l, run_options *o, progress *shown, int64_t started,
                     cli_bound bound, int i, int *gone);

/* Gives back the first taken names, the last taken first: with --xact by
 * the transaction's end, COMMIT only if commit is set; else one release
 * each, its name in hand (say_each: and said once released). A release that
 * fails (said) does not stop the others: behind a transaction pool, closing
 * the connection would leave them held on the server session that took
 * them. Only a connection that is gone ends it. Returns 0, or -1 if
 * anything failed. */
int run_give_back(run_locks *l, run_options *o, int taken, int commit, int say_each);

/* After a verify that could not show a name held: the release that says
 * nothing (names.c), for every name, the last taken first. */
void run_release_all_quietly(run_locks *l, const run_options *o);

/* ---- session_name.c: the session's application_name --------------------- */

/* PostgreSQL keeps 63 bytes of an application_name (NAMEDATALEN - 1). */
enum { RUN_SESSION_NAME_SIZE = 64 };

/* Writes "advlock: " and the names, ", " between them, to out (the
 * caller's): printable ASCII only (every other byte as \xNN), at most 63
 * bytes, ended by "..." where the names do not fit. The run connects with
 * it as libpq's fallback_application_name, so a name the user gives
 * (--application-name, application_name in conninfo, PGAPPNAME) wins. */
void run_session_name(const cli_lock *names, int count, char out[RUN_SESSION_NAME_SIZE]);

#endif
