/*
 * libuv_lock: two connections take turns on one advisory lock, on libuv.
 *
 * The glue is the first half: per adapter, a uv_poll_t for its socket and a
 * uv_timer_t for its deadline, and update_watchers() to tell libuv what the
 * adapter wants after every call, including while a lock is held (the
 * adapter then watches the session, to notice a lost connection at once).
 * The second half is the program: "first" acquires the lock and holds it for
 * 300 ms while "second" waits for it on the server (server-side waiting);
 * second gets it as soon as first releases it.
 *
 *     make examples && PGHOST=... build/examples/libuv_lock
 */
#include <stdio.h>
#include <string.h>
#include <uv.h>

#include "advlock_pq.h"

/* ---- glue: one nonblocking adapter on a libuv loop ---- */

typedef struct uv_lock uv_lock;
typedef void done_fn(uv_lock *l, const advlock_pq_report *r);

struct uv_lock {
    advlock_pq lock;
    uv_poll_t poll;
    uv_timer_t timer;
    int running;      /* an operation is under way: on_done is due at its end */
    done_fn *on_done; /* the operation ended */
    done_fn *on_lost; /* the session holding the lock is gone */
    const char *name;
};

static void on_socket(uv_poll_t *poll, int status, int events);
static void on_timer(uv_timer_t *timer);

/* Tells libuv what the adapter wants now (the socket stays watched while a
 * lock is held); reports the end of an operation, or a lost lock, once. */
static void update_watchers(uv_lock *l)
{
    unsigned wants = advlock_pq_async_wants(&l->lock);
    int events = ((wants & ADVLOCK_PQ_READ) ? UV_READABLE : 0)
                 | ((wants & ADVLOCK_PQ_WRITE) ? UV_WRITABLE : 0);
    if (events != 0)
        uv_poll_start(&l->poll, events, on_socket);
    else
        uv_poll_stop(&l->poll);

    int64_t at, now = (int64_t)uv_now(l->timer.loop);
    if (advlock_pq_async_deadline(&l->lock, &at))
        uv_timer_start(&l->timer, on_timer, at > now ? (uint64_t)(at - now) : 0, 0);
    else
        uv_timer_stop(&l->timer);

    if (l->running && !advlock_pq_async_busy(&l->lock)) {
        l->running = 0;
        l->on_done(l, advlock_pq_async_report(&l->lock));
    } else if (!l->running && advlock_pq_async_lost(&l->lock) && l->on_lost != NULL) {
        done_fn *lost = l->on_lost;
        l->on_lost = NULL;
        lost(l, advlock_pq_async_report(&l->lock));
    }
}

static void on_socket(uv_poll_t *poll, int status, int events)
{
    uv_lock *l = poll->data;
    unsigned ready = ((events & UV_READABLE) || status < 0 ? ADVLOCK_PQ_READ : 0)
                     | ((events & UV_WRITABLE) ? ADVLOCK_PQ_WRITE : 0);
    advlock_pq_async_process(&l->lock, ready, (int64_t)uv_now(poll->loop));
    update_watchers(l);
}

static void on_timer(uv_timer_t *timer)
{
    uv_lock *l = timer->data;
    advlock_pq_async_process(&l->lock, 0, (int64_t)uv_now(timer->loop));
    update_watchers(l);
}

static int uv_lock_init(uv_loop_t *loop, uv_lock *l, PGconn *conn, const advlock_options *o)
{
    if (advlock_pq_async_init(&l->lock, conn) != 0 || advlock_pq_set_options(&l->lock, o) != 0
        || uv_poll_init(loop, &l->poll, PQsocket(conn)) != 0 || uv_timer_init(loop, &l->timer) != 0)
        return -1;
    l->poll.data = l->timer.data = l;
    return 0;
}

/* Starts an operation (start returned 0) and hands it to the loop. */
static void uv_lock_started(uv_lock *l, int rc)
{
    l->running = rc == 0;
    update_watchers(l);
}

/* ---- the program ---- */

#define LOCK_NAME "BrighterMigration_public.Outbox"

static uv_lock first, second;
static uv_timer_t hold;
static int acquired, released;

/* The report in words (rendered on request), after ": " when there are any. */
static void print_outcome(const uv_lock *l, const advlock_pq_report *r, const char *extra)
{
    char message[ADVLOCK_MESSAGE_MAX];
    advlock_pq_describe(r, LOCK_NAME, strlen(LOCK_NAME), message, sizeof message);
    printf("%-6s %s%s%s%s\n", l->name, advlock_outcome_name(r->lock.outcome), extra,
           message[0] != '\0' ? ": " : "", message);
}

static void finished(uv_lock *l, const advlock_pq_report *r)
{
    print_outcome(l, r, "");
    released += r->lock.outcome == ADVLOCK_RELEASED;
}

static void lost(uv_lock *l, const advlock_pq_report *r)
{
    print_outcome(l, r, "");
}

static void acquire(uv_lock *l, const char *name);

static void release(uv_lock *l)
{
    l->on_done = finished;
    /* By the key the acquire's report carries: no second hash of the name. */
    int64_t key = advlock_pq_async_report(&l->lock)->lock.key;
    uv_lock_started(
        l, advlock_pq_async_start_release_key(&l->lock, key, (int64_t)uv_now(l->timer.loop)));
}

static void release_first(uv_timer_t *timer)
{
    (void)timer;
    release(&first);
}

static void got_it(uv_lock *l, const advlock_pq_report *r)
{
    char attempts[48];
    snprintf(attempts, sizeof attempts, " after %llu attempt(s)",
             (unsigned long long)r->lock.attempts);
    print_outcome(l, r, attempts);
    if (r->lock.outcome != ADVLOCK_ACQUIRED)
        return;
    acquired++;
    if (l == &first) { /* hold it for a while, and let second wait for it */
        uv_timer_start(&hold, release_first, 300, 0);
        acquire(&second, "second");
    } else {
        release(l);
    }
}

static void acquire(uv_lock *l, const char *name)
{
    l->name = name;
    l->on_done = got_it;
    l->on_lost = lost;
    uv_lock_started(l, advlock_pq_async_start_acquire(&l->lock, LOCK_NAME, strlen(LOCK_NAME), 10000,
                                                      (int64_t)uv_now(l->timer.loop)));
}

int main(void)
{
    uv_loop_t *loop = uv_default_loop();
    PGconn *a = PQconnectdb("application_name=libuv_lock");
    PGconn *b = PQconnectdb("application_name=libuv_lock");
    advlock_options o;
    advlock_options_init(&o);
    o.wait = ADVLOCK_WAIT_SERVER; /* the lock is handed over as soon as it is free */
    if (PQstatus(a) != CONNECTION_OK || PQstatus(b) != CONNECTION_OK
        || uv_lock_init(loop, &first, a, &o) != 0 || uv_lock_init(loop, &second, b, &o) != 0) {
        fprintf(stderr, "libuv_lock: cannot connect: %s", PQerrorMessage(a));
        return 1;
    }
    uv_timer_init(loop, &hold);

    acquire(&first, "first");
    uv_run(loop, UV_RUN_DEFAULT);

    /* Close the handles before libpq closes the sockets they watch. */
    uv_close((uv_handle_t *)&first.poll, NULL);
    uv_close((uv_handle_t *)&second.poll, NULL);
    uv_close((uv_handle_t *)&first.timer, NULL);
    uv_close((uv_handle_t *)&second.timer, NULL);
    uv_close((uv_handle_t *)&hold, NULL);
    uv_run(loop, UV_RUN_DEFAULT);
    PQfinish(a);
    PQfinish(b);
    return acquired == 2 && released == 2 ? 0 : 1;
}
