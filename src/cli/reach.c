/*
 * Reaching the claimed server session behind a transaction-pooling
 * PgBouncer. An unlock (or a verify) that lands on a server session this
 * connection did not claim is retried by the core on its backoff schedule,
 * but in a pool where nobody else is active every retry lands on the same
 * wrong session: PgBouncer hands out the idle server session used last, the
 * one the failed statement just used. So just before each retry, helper
 * connections take the sessions PgBouncer hands out first: one that is not
 * the claimed session (its advlock.session is not this connection's token)
 * they occupy for a moment (a short pg_sleep, which ends by itself: no
 * session stays pinned, and a pool of one only makes the retry wait for
 * it); the claimed one they give back at once, which makes it the session
 * used last, the one the retry gets. One more helper per retry.
 */
#include <limits.h>
#include <poll.h>
#include <signal.h>

#include "advlock_pq.h"
#include "cli.h"

/* How long before the retry goes PgBouncer has to hand the helpers their
 * sessions (a helper holds one as long as ADVLOCK_SQL_OCCUPY sleeps). */
enum { HANDOUT_MS = 20 };

void cli_reach_init(cli_reach *r, const char *conninfo, const char *application_name,
                    uint64_t token, cli_bound bound)
{
    r->bound = bound;
    r->conninfo = conninfo;
    r->application_name = application_name;
    r->token = (int64_t)token;
    r->helpers = 0;
    r->done_for_ms = -1;
}

/* Reads a helper's results to the end (its pg_sleep finishing), but not
 * past the release's bound: a helper queued in PgBouncer (query_wait_timeout)
 * or on a stopped backend may never answer. Then its statement is cancelled
 * and its socket shut (advlock_pq_abandon); the caller PQfinish()es it as usual. */
static void drain(const cli_reach *r, PGconn *helper)
{
    for (;;) {
        if (!PQconsumeInput(helper))
            return; /* broken: nothing more to read */
        while (!PQisBusy(helper)) {
            PGresult *res = PQgetResult(helper);
            if (res == NULL)
                return;
            PQclear(res);
        }
        int64_t now = advlock_pq_now_ms();
        if (now >= r->bound.until_ms) {
            advlock_pq_abandon(helper);
            return;
        }
        int64_t left = r->bound.until_ms - now;
        struct pollfd p = {.fd = PQsocket(helper), .events = POLLIN};
        (void)poll(&p, 1, left > INT_MAX ? INT_MAX : (int)left);
    }
}

static int occupy(cli_reach *r, PGconn *helper)
{
    return advlock_pq_send_row(helper, ADVLOCK_SQL_OCCUPY, &r->token) == 1;
}

void cli_reach_occupy(cli_reach *r)
{
    for (int i = 0; i < r->helpers; i++) {
        drain(r, r->helper[i]);
        (void)occupy(r, r->helper[i]);
    }
    if (r->helpers < CLI_REACH_HELPERS) {
        PGconn *helper;
        int rc = cli_connect_until(r->conninfo, r->application_name, NULL, NULL, r->bound, &helper);
        if (rc == EXIT_OK && occupy(r, helper))
            r->helper[r->helpers++] = helper;
        else if (rc == EXIT_OK)
            PQfinish(helper);
        else if (rc > 128)
            (void)raise(rc - 128); /* the release's wait sees it */
    }
    (void)poll(NULL, 0, HANDOUT_MS);
}

/* A helper closed while its statement runs would make PgBouncer close that
 * server session (another client's, perhaps, with its locks): each one's
 * statement is read to its end first. */
void cli_reach_end(cli_reach *r)
{
    for (int i = 0; i < r->helpers; i++) {
        drain(r, r->helper[i]);
        PQfinish(r->helper[i]);
    }
    r->helpers = 0;
}
