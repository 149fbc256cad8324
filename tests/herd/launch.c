/*
 * launch N LOG CMD [ARGS...]: starts N processes of CMD together, as one
 * launcher does (a supervisor, xargs -P, `advlock calibrate`): fork and exec
 * in a loop, no shell. Appends to LOG, with CLOCK_MONOTONIC microseconds:
 *     s CLIENT US        as each process starts (in the child, before exec)
 *     x CLIENT STATUS    as each ends: its exit status (128 + signal if killed)
 * Each process gets HERD_CLIENT=CLIENT (0 to N-1) in its environment.
 * Exits 0 once all have ended, 127 if one could not be started.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int append(const char *path, char kind, int client, long long value)
{
    FILE *log = fopen(path, "a");
    if (log == NULL)
        return -1;
    int failed = fprintf(log, "%c %d %lld\n", kind, client, value) < 0;
    return (fclose(log) != 0 || failed) ? -1 : 0;
}

int main(int argc, char **argv)
{
    int n = argc > 3 ? atoi(argv[1]) : 0;
    if (n < 1 || n > 1000) {
        fputs("usage: launch N LOG CMD [ARGS...]\n", stderr);
        return 127;
    }
    const char *log = argv[2];
    static pid_t pids[1000];
    for (int i = 0; i < n; i++) {
        pids[i] = fork();
        if (pids[i] < 0) {
            perror("fork");
            return 127;
        }
        if (pids[i] == 0) {
            struct timespec now;
            char client[16];
            clock_gettime(CLOCK_MONOTONIC, &now);
            snprintf(client, sizeof client, "%d", i);
            if (setenv("HERD_CLIENT", client, 1) != 0
                || append(log, 's', i, (long long)now.tv_sec * 1000000 + now.tv_nsec / 1000) != 0)
                _exit(127);
            execvp(argv[3], argv + 3);
            _exit(127);
        }
    }
    int status = 0;
    for (int i = 0; i < n; i++) {
        int st;
        while (waitpid(pids[i], &st, 0) < 0)
            if (errno != EINTR)
                return 127;
        int code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        if (code == 127)
            status = 127;
        if (append(log, 'x', i, code) != 0)
            return 127;
    }
    return status;
}
