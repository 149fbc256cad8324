/*
 * advlock run's signals, through a self-pipe: each signal it handles becomes
 * a byte on a pipe that its waits (advlock_pq_wait) watch beside the
 * session's socket, so a signal is seen at once and handled outside the
 * handler.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

static int signal_pipe[2] = {-1, -1};

/* The signals that ask advlock to stop: forwarded to the command, or ending
 * the wait for the lock. */
static const int stop_signals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};

static void on_signal(int sig)
{
    int saved = errno;
    unsigned char byte = (unsigned char)sig;
    ssize_t ignored = write(signal_pipe[1], &byte, 1);
    (void)ignored;
    errno = saved;
}

int cli_signals_install(void)
{
    if (pipe(signal_pipe) != 0)
        return -1;
    for (int i = 0; i < 2; i++) {
        fcntl(signal_pipe[i], F_SETFD, FD_CLOEXEC);
        fcntl(signal_pipe[i], F_SETFL, O_NONBLOCK);
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < sizeof stop_signals / sizeof stop_signals[0]; i++)
        sigaction(stop_signals[i], &sa, NULL);
    /* The command's end (or stop) wakes the wait like any other signal. */
    sigaction(SIGCHLD, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    return 0;
}

void cli_signals_restore(void)
{
    for (size_t i = 0; i < sizeof stop_signals / sizeof stop_signals[0]; i++)
        signal(stop_signals[i], SIG_DFL);
    signal(SIGCHLD, SIG_DFL);
    signal(SIGPIPE, SIG_DFL);
}

int cli_signals_fd(void)
{
    return signal_pipe[0];
}

int cli_signals_next(void)
{
    unsigned char byte;
    return read(signal_pipe[0], &byte, 1) == 1 ? byte : 0;
}

int cli_signals_stop(void)
{
    int sig, stop = 0;
    while ((sig = cli_signals_next()) != 0)
        if (sig != SIGCHLD && stop == 0)
            stop = sig;
    return stop;
}
