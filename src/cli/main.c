/*
 * advlock: PostgreSQL advisory locks by name, for operators.
 * Dispatches to one subcommand per file; see docs/advlock.1.
 */
#include <stdarg.h>
#include <stdio.h>
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
          "  setup           install the schema fencing tokens need (run --fence)\n"
          "\n"
          "Run 'advlock COMMAND --help' for a command's options; see advlock(1).\n",
          to);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return EXIT_USAGE;
    }
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
            return cli_log_exit(commands[i].run(argc - 1, argv + 1));
        }
    cli_error("unknown command '%s'", argv[1]);
    usage(stderr);
    return EXIT_USAGE;
}
