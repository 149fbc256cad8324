/*
 * Giving up on a connection whose statement did not answer in time: a
 * cancel request for the statement, then the connection shut. Either
 * ends the statement's session once the server gets to it, and with the
 * session every lock it took, so nothing is left held for long.
 *
 * libpq 15's PQcancel() blocks until the server closes the cancel
 * connection, which a hung server (a stopped postmaster, a full accept
 * queue) never does, and it retries through signals. So it runs in a
 * child process that nothing waits for, ended by alarm() if the server
 * never answers; PQcancel() is async-signal-safe, fit for a forked child
 * of any program.
 */
#define _GNU_SOURCE /* close_range */
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cli.h"

/* How long the child may try to deliver the cancel request. */
enum { CANCEL_TRY_SECONDS = 10 };

void cli_abandon(PGconn *conn)
{
    PGcancel *cancel = PQgetCancel(conn);
    if (cancel != NULL) {
        if (fork() == 0) {
            char error[256];
            /* Nothing of advlock's stays open in the child: a caller reading
             * advlock's output to its end must not wait for it. */
            close_range(0, ~0U, 0);
            cli_signals_restore();
            signal(SIGALRM, SIG_DFL);
            alarm(CANCEL_TRY_SECONDS);
            (void)PQcancel(cancel, error, sizeof error);
            _exit(0);
        }
        PQfreeCancel(cancel);
    }
    /* The server sees the session end now, whoever still has the socket
     * open (the child above); libpq finds it shut at its next call. */
    shutdown(PQsocket(conn), SHUT_RDWR);
}
