/*
 * The command advlock run supervises: in a process group of its own, bound
 * to advlock's life, given the terminal when advlock had it. See child.c.
 */
#ifndef ADVLOCK_CLI_CHILD_H
#define ADVLOCK_CLI_CHILD_H

#include <sys/types.h>

typedef struct cli_child {
    pid_t pid;       /* the command, leader of its own process group */
    pid_t watchdog;  /* kills that group if advlock dies; 0 once reaped */
    int watchdog_fd; /* a byte on it stands the watchdog down; EOF sets it off */
    int tty;         /* advlock's controlling terminal, or -1 */
    int has_tty;     /* the command's group is the terminal's foreground */
} cli_child;

/*
 * Starts command (execvp) in a new process group with the watchdog beside
 * it; hands it the terminal when advlock leads the terminal's foreground
 * group (an interactive job). Returns 0, or -1 with errno set and nothing
 * left running.
 */
int cli_child_start(cli_child *c, char **command);

/*
 * Collects, without blocking, every child of advlock's that has ended: the
 * command's orphans, which advlock inherits on Linux, and the watchdog if
 * someone killed it. Returns 1 with *status (waitpid's) when the command
 * itself ended or stopped, 0 when nothing more is to be collected, -1 on a
 * failure of waitpid (errno set).
 */
int cli_child_reap(cli_child *c, int *status);

/* Sends sig to the command's whole group, and to nothing else. */
void cli_child_signal(const cli_child *c, int sig);

/* Whether no process is left in the command's group (a zombie counts until
 * reaped: call cli_child_reap first). */
int cli_child_group_gone(const cli_child *c);

/*
 * The command stopped with sig: a read from the terminal when advlock's
 * group has it (the terminal is handed over and the command continued), or
 * a job-control stop (SIGTSTP, SIGTTIN, SIGTTOU with a terminal), which
 * advlock takes too so that its shell sees the job stopped; the command is
 * continued when advlock is. Other stops are left to whoever made them.
 */
void cli_child_stopped(cli_child *c, int sig);

/* advlock is done with the command: takes the terminal back, stands the
 * watchdog down. Processes left in the group are not touched. */
void cli_child_finish(cli_child *c);

#endif
