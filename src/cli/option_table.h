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
    CLI_OPT_CALL,    /* call takes the argument at once (to unused) */
} cli_opt_kind;

typedef struct cli_opt {
    const char *name; /* --name */
    char letter;      /* -letter too, or 0 ('h' is --help's) */
    cli_opt_kind kind;
    void *to;
    long long lo, hi;
    /* What a WHOLE or SECONDS value must be, said as "--name wants ..."
     * when it is not (NULL: cli_whole_option's, cli_timeout_option's words) */
    const char *wants;
    /* CLI_OPT_CALL: takes the argument; 0, or -1 once it said why not */
    int (*call)(const char *arg);
} cli_opt;

/* A table's entries, by kind: letter 0 for none; wants as cli_opt's (NULL:
 * the common words). */
#define CLI_SET(name, letter, to)  ((cli_opt){name, letter, CLI_OPT_SET, to, 0, 1, NULL, NULL})
#define CLI_TEXT(name, letter, to) ((cli_opt){name, letter, CLI_OPT_TEXT, to, 0, 0, NULL, NULL})
#define CLI_CALL(name, call)       ((cli_opt){name, 0, CLI_OPT_CALL, NULL, 0, 0, NULL, call})
#define CLI_SECONDS(name, letter, to, wants) \
    ((cli_opt){name, letter, CLI_OPT_SECONDS, to, 0, 0, wants, NULL})
#define CLI_WHOLE(name, letter, to, lo, hi, wants) \
    ((cli_opt){name, letter, CLI_OPT_WHOLE, to, lo, hi, wants, NULL})

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
/* cli_parse_options of a whole array, table. */
#define CLI_PARSE(argc, argv, command, table, permute, usage) \
    cli_parse_options(argc, argv, command, table, sizeof(table) / sizeof *(table), permute, usage)

#endif
