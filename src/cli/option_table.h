/*
 * The options of advlock's subcommands as a table (option_table.c): each
 * entry names an option, its short letter and where its value goes, and
 * one parser reads them all with getopt_long, so that every subcommand
 * takes, checks and refuses its options the same way.
 */
#ifndef ADVLOCK_CLI_OPTION_TABLE_H
#define ADVLOCK_CLI_OPTION_TABLE_H

#include <stddef.h>
#include <stdio.h>
#include <unistd.h> /* optind, the first operand once parsed */

/* What an option does with its argument, and the type `to` points at. */
typedef enum cli_opt_kind {
    CLI_OPT_SET,     /* no argument: int, set to hi */
    CLI_OPT_TEXT,    /* const char *: the argument, borrowed from argv */
    CLI_OPT_WHOLE,   /* long long: a whole number from lo to hi (cli_whole_option) */
    CLI_OPT_SECONDS, /* int64_t: milliseconds, as --timeout takes them (cli_timeout_option) */
} cli_opt_kind;

typedef struct cli_opt {
    const char *name; /* --name */
    char letter;      /* -letter too, or 0 ('h' is --help's) */
    cli_opt_kind kind;
    void *to;
    long long lo, hi;
} cli_opt;

/* The most entries a table may have. */
enum { CLI_OPTS_MAX = 24 };

/* How cli_parse_options ends when the subcommand goes on. */
enum { CLI_OPTS_PARSED = -1 };

/*
 * Reads argv's options by the n entries of opts (and -h, --help, which
 * print usage on stdout), for the subcommand command: with permute, as
 * getopt_long does, else up to the first operand. Returns CLI_OPTS_PARSED
 * (optind is then the first operand), EXIT_OK after --help, or EXIT_USAGE
 * once a wrong option or value was said (cli_usage_error, or the value's
 * own message). Values already read stay set.
 */
int cli_parse_options(int argc, char **argv, const char *command, const cli_opt *opts, size_t n,
                      int permute, void (*usage)(FILE *to));

#endif
