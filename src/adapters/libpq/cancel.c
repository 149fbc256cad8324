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
 * "Server-side waiting" in advlock_pq.h.
 *
 * The PGcancel object is made for each request rather than kept per
 * connection: an adapter holds no heap memory between calls (so dropping one
 * needs no call), a kept object would go stale after PQreset(), and making
 * one costs a copy of a few fields next to the connection PQcancel() makes.
 */
#include "pq.h"

#include <stdio.h>

int advlock_pq_cancel_send(PGconn *conn, char *error, size_t size)
{
    PGcancel *cancel = PQgetCancel(conn);
    if (cancel == NULL) {
        snprintf(error, size, "no connection to cancel a statement on");
        return 0;
    }
    int sent = PQcancel(cancel, error, (int)size);
    PQfreeCancel(cancel);
    return sent;
}
