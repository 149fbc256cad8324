/*
 * advlock: PostgreSQL advisory locks by name, for operators.
 * Dispatches to one subcommand per file; see docs/advlock.1.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdio_ext.h>
#include <string.h>

#include "advlock.h"
#include "cli.h"
#include "log.h"

void cli_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    cli_log_vmessage(CLI_ERROR, fmt, ap);
    va_end(ap);
}

void cli_warning(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    cli_log_vmessage(CLI_WARNING, fmt, ap);
    va_end(ap);
}

int cli_usage_error(const char *command, const char *fmt, ...)
{
    char what[512] = "";
    if (fmt != NULL) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(what, sizeof what, fmt, ap);
        va_end(ap);
    }
    cli_error("%s%stry 'advlock%s%s --help'", what, what[0] != '\0' ? "; " : "",
              command != NULL ? " " : "", command != NULL ? command : "");
    return EXIT_USAGE;
}

/* What a subcommand wrote to standard output must have reached it: a write
 * that failed (a full disk, /dev/full, a closed pipe's EPIPE) turns the
 * exit status into EXIT_IO, said, as any failed output does. A stdout
 * closed by the caller (>&-) is no failure when nothing was written to it
 * (run's output is its command's). */
static int close_stdout(int rc)
{
    int pending = __fpending(stdout) != 0;
    int failed_before = ferror(stdout) != 0;
    int failed_close = fclose(stdout) != 0;
    if (failed_before || (failed_close && (pending || errno != EBADF))) {
        cli_error("writing standard output: %s",
                  failed_close && errno != 0 ? strerror(errno) : "write error");
        return EXIT_IO;
    }
    return rc;
}

static const struct {
    const char *name;
    int (*run)(int argc, char **argv);
} commands[] = {
    {"key", cmd_key},
    {"run", cmd_run},
    {"status", cmd_status},
    {"simulate", cmd_simulate},
    {"calibrate", cmd_calibrate},
    {"setup", cmd_setup},
};

static void usage(FILE *to)
{
    fputs("usage: advlock COMMAND [OPTIONS] [ARGS]\n"
          "\n"
          "PostgreSQL advisory locks by name (key = first 8 bytes of SHA-256(\"74726:\" + name)).\n"
          "\n"
          "commands:\n"
          "  key KEY...      print each name's bigint, hex, and pg_locks classid/objid\n"
          "  run KEY -- CMD  run CMD while holding the lock, like flock(1)\n"
          "  status KEY...   say whether each lock is held, by whom, and who waits\n"
          "  simulate        clients racing for locks on the fake database, no server\n"
          "  calibrate       measure a server as a herd meets it: a profile for simulate\n"
          "  setup           install the schema run --fence and --lock-delay need\n"
          "\n"
          "Run 'advlock COMMAND --help' for a command's options; see advlock(1).\n",
          to);
}

/* The subcommand argv[1] names, or advlock's own --help and --version. */
static int dispatch(int argc, char **argv)
{
    if (argc < 2)
        return cli_usage_error(NULL, "a command is needed");
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        usage(stdout);
        return EXIT_OK;
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("advlock %s\n", ADVLOCK_VERSION);
        return EXIT_OK;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(argv[1], commands[i].name) == 0) {
            /* getopt prefixes its messages with argv[0]: "advlock:", like
             * every other error, rather than the subcommand's name. */
            static char program[] = "advlock";
            argv[1] = program;
            return commands[i].run(argc - 1, argv + 1);
        }
    return cli_usage_error(NULL, "unknown command '%s'", argv[1]);
}

int main(int argc, char **argv)
{
    return cli_log_exit(close_stdout(dispatch(argc, argv)));
}
