/*
 * stamp LOG CMD [ARGS...]: appends "g CLIENT MICROSECONDS" to LOG, the
 * client being $HERD_CLIENT (set by tests/herd/launch.c; "-" when unset,
 * as when `advlock calibrate` times the herd's command) and the time
 * CLOCK_MONOTONIC, then runs CMD in this process (execvp). The herd makes it
 * the command `advlock run` runs: it stamps the moment the lock was got.
 * Exits 127 if LOG cannot be written or CMD cannot be run.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    struct timespec now;
    const char *client = getenv("HERD_CLIENT");
    if (client == NULL)
        client = "-";
    if (argc < 3 || clock_gettime(CLOCK_MONOTONIC, &now) != 0) {
        fputs("usage: stamp LOG CMD [ARGS...]\n", stderr);
        return 127;
    }
    FILE *log = fopen(argv[1], "a");
    if (log == NULL) {
        perror(argv[1]);
        return 127;
    }
    long long us = (long long)now.tv_sec * 1000000 + now.tv_nsec / 1000;
    int failed = fprintf(log, "g %s %lld\n", client, us) < 0;
    failed |= fclose(log) != 0;
    if (failed) {
        perror(argv[1]);
        return 127;
    }
    execvp(argv[2], argv + 2);
    perror(argv[2]);
    return 127;
}
