/*
 * The command of advlock run, and how it is stopped.
 *
 * The command runs in a process group of its own, so that stopping it
 * reaches everything it started (a shell's children, a script's pipeline)
 * and touches nothing else. Two guards keep it from outliving advlock when
 * advlock dies with no chance to act (kill -9, the OOM killer), which also
 * ends advlock's session and so its lock:
 * - on Linux the kernel sends the command SIGKILL when advlock dies
 *   (PR_SET_PDEATHSIG); immediate, but only for the process advlock forked;
 * - a watchdog process, in a group of its own (a kill of advlock's whole
 *   job does not reach it), waits on a pipe from advlock and kills the
 *   command's group when the pipe closes without a word: the grandchildren.
 * SIGKILL, not SIGTERM: once advlock is gone the server has dropped the
 * lock, every further moment of the command runs unprotected, and nobody is
 * left to escalate if it ignores a polite signal.
 *
 * On Linux advlock is also the reaper of everything the command starts
 * (PR_SET_CHILD_SUBREAPER): a grandchild orphaned by a stop comes to
 * advlock, not to pid 1, so its zombie is gone as soon as advlock reaps it,
 * and the group's end is seen at once rather than whenever pid 1 gets to
 * it (a second or two late on some machines: a failover's LOST came late).
 */
#define _GNU_SOURCE /* close_range */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif
#include <sys/wait.h>

#include "child.h"
#include "cli.h"

/* Moves the terminal's foreground to group. SIGTTOU is blocked because
 * advlock may itself be in the background when it takes the terminal back. */
static void give_terminal(int tty, pid_t group)
{
    sigset_t ttou, old;
    sigemptyset(&ttou);
    sigaddset(&ttou, SIGTTOU);
    sigprocmask(SIG_BLOCK, &ttou, &old);
    tcsetpgrp(tty, group);
    sigprocmask(SIG_SETMASK, &old, NULL);
}

static int owns_terminal(const cli_child *c)
{
    return c->tty >= 0 && tcgetpgrp(c->tty) == getpgrp();
}

/* Blocks for one byte; returns whether it came (EOF: the writer died). */
static int read_byte(int fd)
{
    char byte;
    ssize_t n;
    do
        n = read(fd, &byte, 1);
    while (n < 0 && errno == EINTR);
    return n == 1;
}

/* In the forked command: its own group, bound to advlock's life, then the
 * word from advlock (watchdog set, terminal handed over) before exec. */
static void exec_command(char **command, pid_t parent, int go_fd)
{
    cli_signals_restore();
    setpgid(0, 0);
#ifdef __linux__
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    /* advlock may have died before prctl; then no signal will come. */
    if (getppid() != parent)
        _exit(EXIT_LOCK_ERROR);
#endif
    if (!read_byte(go_fd))
        _exit(EXIT_LOCK_ERROR); /* advlock died before the command began */
    close(go_fd);
    execvp(command[0], command);
    int code = errno == ENOENT ? EXIT_NO_COMMAND : EXIT_NO_EXEC;
    cli_error("cannot run '%s': %s", command[0], strerror(errno));
    _exit(code);
}

/* In the forked watchdog: nothing open but its pipe (no copy of the
 * session's socket, no hold on advlock's output), then one read. */
static void watch(int fd, pid_t group)
{
    cli_signals_restore();
    setpgid(0, 0);
    if (fd != 0)
        dup2(fd, 0);
    close_range(1, ~0U, 0);
    if (!read_byte(0))
        kill(-group, SIGKILL);
    _exit(0);
}

int cli_child_start(cli_child *c, char **command)
{
    c->pid = c->watchdog = 0;
    c->watchdog_fd = c->tty = -1;
    c->has_tty = 0;
    int go[2], wd[2];
    if (pipe2(go, O_CLOEXEC) != 0)
        return -1;
    pid_t parent = getpid();
#ifdef __linux__
    prctl(PR_SET_CHILD_SUBREAPER, 1);
#endif
    if ((c->pid = fork()) == 0)
        exec_command(command, parent, go[0]);
    close(go[0]);
    if (c->pid < 0) {
        close(go[1]);
        return -1;
    }
    /* Here too: advlock's next kill must find the group however the two
     * processes are scheduled. */
    setpgid(c->pid, c->pid);
    if (pipe2(wd, O_CLOEXEC) != 0 || (c->watchdog = fork()) < 0) {
        int saved = errno;
        kill(c->pid, SIGKILL); /* still before exec */
        waitpid(c->pid, NULL, 0);
        close(go[1]);
        errno = saved;
        return -1;
    }
    if (c->watchdog == 0) {
        close(go[1]);
        close(wd[1]);
        watch(wd[0], c->pid);
    }
    setpgid(c->watchdog, c->watchdog);
    close(wd[0]);
    c->watchdog_fd = wd[1];

    /* An interactive job (advlock leads the terminal's foreground group, as
     * a shell prompt starts it): the command gets the terminal, so it can
     * read it, and Ctrl-C and Ctrl-Z reach it as if advlock were not there. */
    c->tty = open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (getpgrp() == getpid() && owns_terminal(c)) {
        give_terminal(c->tty, c->pid);
        c->has_tty = 1;
    }
    ssize_t ignored = write(go[1], "g", 1);
    (void)ignored;
    close(go[1]);
    return 0;
}

void cli_child_signal(const cli_child *c, int sig)
{
    kill(-c->pid, sig);
}

int cli_child_reap(cli_child *c, int *status)
{
    for (;;) {
        int st;
        pid_t pid = waitpid(-1, &st, WNOHANG | WUNTRACED);
        if (pid < 0 && errno == EINTR)
            continue;
        if (pid <= 0)
            return pid == 0 || errno == ECHILD ? 0 : -1;
        if (pid == c->pid) {
            *status = st;
            return 1;
        }
        if (pid == c->watchdog && !WIFSTOPPED(st))
            c->watchdog = 0; /* killed by someone: nothing left to stand down */
        /* Anything else is an orphan of the command's that advlock inherited:
         * collected, it leaves the group (a stop of one is its own affair). */
    }
}

int cli_child_group_gone(const cli_child *c)
{
    return kill(-c->pid, 0) != 0 && errno == ESRCH;
}

void cli_child_stopped(cli_child *c, int sig)
{
    /* A read from (or a setting of) the terminal that advlock's group has:
     * the command is the one to use it. */
    if ((sig == SIGTTIN || sig == SIGTTOU) && owns_terminal(c)) {
        give_terminal(c->tty, c->pid);
        c->has_tty = 1;
        cli_child_signal(c, SIGCONT);
        return;
    }
    /* A stop by someone else (SIGSTOP, or any stop with no terminal to
     * control jobs) is theirs to undo: advlock waits for the continue. */
    if (c->tty < 0 || (sig != SIGTSTP && sig != SIGTTIN && sig != SIGTTOU))
        return;
    if (c->has_tty && tcgetpgrp(c->tty) == c->pid) {
        give_terminal(c->tty, getpgrp());
        c->has_tty = 0;
    }
    kill(getpid(), sig); /* returns when advlock is continued (fg, bg) */
    if (owns_terminal(c)) {
        give_terminal(c->tty, c->pid);
        c->has_tty = 1;
    }
    cli_child_signal(c, SIGCONT);
}

void cli_child_finish(cli_child *c)
{
    if (c->has_tty && tcgetpgrp(c->tty) == c->pid)
        give_terminal(c->tty, getpgrp());
    if (c->tty >= 0)
        close(c->tty);
    ssize_t ignored = write(c->watchdog_fd, "s", 1);
    (void)ignored;
    close(c->watchdog_fd);
    if (c->watchdog > 0)
        waitpid(c->watchdog, NULL, 0);
    c->watchdog = 0;
}
