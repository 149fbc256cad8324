/*
 * Cancel requests, for the machine's CANCEL_QUERY action (a server-side wait
 * that reached its deadline, or that the caller cancelled).
 *
 * A cancel request travels on a new connection to the server, not on the
 * session's own. libpq 15 offers only the blocking form, PQcancel(): it
 * connects, sends the request, and waits for the server to close that
 * connection, which on a local socket takes about a millisecond (the
 * integration tests measure it). libpq 17's nonblocking PQcancelStart() and
 * PQcancelPoll() would need the event loop to watch a second socket for the
 * duration, which the adapters' one-socket contract has no room for; see
 * "Server-side waiting" in docs/libpq.md.
 *
 * A server that does not answer (a stopped postmaster, a full accept queue:
 * the connect succeeds, the close never comes) would hold PQcancel(), and
 * the caller with it, forever, through signals too (it retries on EINTR).
 * So the request is delivered by a thread of its own, and the caller waits
 * for it CANCEL_WAIT_MS at most: past that the request goes on in the
 * background (the server may still get it), the caller is told it was not
 * sent, and the thread frees what it holds when it ends.
 *
 * A program that gives a connection up (advlock_pq_abandon: the advlock
 * command past a bound) sends its request the same way, then shuts the
 * socket.
 *
 * The PGcancel object is made for each request rather than kept per
 * connection: an adapter holds no heap memory between calls (so dropping one
 * needs no call), a kept object would go stale after PQreset(), and making
 * one costs a copy of a few fields next to the connection PQcancel() makes.
 */
#include "pq.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>

/* How long the caller waits for a cancel request to be delivered; and how
 * many requests a process leaves undelivered in the background before it
 * sends no more (the machine repeats its request every 250 ms while the
 * statement is unanswered: a server that never answers would otherwise
 * collect a thread and a socket each time). */
enum { CANCEL_WAIT_MS = 250, MAX_UNDELIVERED = 8 };

static atomic_int undelivered;

/* One request, shared by the caller and the thread delivering it; the last
 * of the two to be done with it frees it. */
typedef struct cancel_request {
    PGcancel *cancel;
    pthread_mutex_t lock;
    pthread_cond_t ended;
    int done;      /* PQcancel() returned: sent and error say how */
    int abandoned; /* the caller stopped waiting */
    int sent;
    char error[256];
} cancel_request;

static void free_request(cancel_request *r)
{
    PQfreeCancel(r->cancel);
    pthread_cond_destroy(&r->ended);
    pthread_mutex_destroy(&r->lock);
    free(r);
}

static void *deliver(void *arg)
{
    cancel_request *r = arg;
    int sent = PQcancel(r->cancel, r->error, (int)sizeof r->error);
    pthread_mutex_lock(&r->lock);
    r->sent = sent;
    r->done = 1;
    int abandoned = r->abandoned;
    pthread_cond_signal(&r->ended);
    pthread_mutex_unlock(&r->lock);
    if (abandoned) {
        free_request(r);
        atomic_fetch_sub(&undelivered, 1);
    }
    return NULL;
}

/* A new request for conn, or NULL (error says why). */
static cancel_request *new_request(PGconn *conn, char *error, size_t size)
{
    cancel_request *r = calloc(1, sizeof *r);
    if (r == NULL) {
        snprintf(error, size, "out of memory");
        return NULL;
    }
    if ((r->cancel = PQgetCancel(conn)) == NULL) {
        snprintf(error, size, "no connection to cancel a statement on");
        free(r);
        return NULL;
    }
    pthread_condattr_t monotonic;
    pthread_condattr_init(&monotonic);
    pthread_condattr_setclock(&monotonic, CLOCK_MONOTONIC);
    pthread_mutex_init(&r->lock, NULL);
    pthread_cond_init(&r->ended, &monotonic);
    pthread_condattr_destroy(&monotonic);
    return r;
}

/* Starts the thread that delivers r, with every signal blocked there: the
 * caller's handlers keep running on the caller's threads. */
static int start_delivery(cancel_request *r)
{
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_t thread;
    int rc = pthread_create(&thread, NULL, deliver, r);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc == 0)
        pthread_detach(thread);
    return rc;
}

int advlock_pq_cancel_send(PGconn *conn, char *error, size_t size)
{
    if (atomic_load(&undelivered) >= MAX_UNDELIVERED) {
        snprintf(error, size, "%d earlier cancel requests are still undelivered", MAX_UNDELIVERED);
        return 0;
    }
    cancel_request *r = new_request(conn, error, size);
    if (r == NULL)
        return 0;
    if (start_delivery(r) != 0) {
        /* No thread to spare: the request is still worth its wait. */
        int sent = PQcancel(r->cancel, error, (int)size);
        free_request(r);
        return sent;
    }
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_nsec += (long)CANCEL_WAIT_MS * 1000000L;
    until.tv_sec += until.tv_nsec / 1000000000L;
    until.tv_nsec %= 1000000000L;
    pthread_mutex_lock(&r->lock);
    int waited = 0; /* spurious wake-ups return 0 too */
    while (!r->done && waited == 0)
        waited = pthread_cond_timedwait(&r->ended, &r->lock, &until);
    if (!r->done) {
        r->abandoned = 1;
        atomic_fetch_add(&undelivered, 1);
        pthread_mutex_unlock(&r->lock);
        snprintf(error, size, "no answer from the server within %d ms (still trying)",
                 CANCEL_WAIT_MS);
        return 0;
    }
    pthread_mutex_unlock(&r->lock);
    int sent = r->sent;
    snprintf(error, size, "%s", r->error);
    free_request(r);
    return sent;
}

void advlock_pq_abandon(PGconn *conn)
{
    if (conn == NULL || PQsocket(conn) < 0)
        return;
    char error[256]; /* the caller says why it gave up; how the request went is moot */
    (void)advlock_pq_cancel_send(conn, error, sizeof error);
    /* The server sees the session end now, whoever still has the socket
     * open; libpq finds it shut at its next call. */
    shutdown(PQsocket(conn), SHUT_RDWR);
}
