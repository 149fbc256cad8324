/*
 * One reader of the subcommands' option tables (option_table.h): the
 * table becomes getopt_long's long options and short letters; an entry's
 * long option answers 256 plus its index.
 */
#define _POSIX_C_SOURCE 200809L
#include "option_table.h"

#include <getopt.h>
#include <stdint.h>

#include "cli.h"

/* The entry getopt_long's answer names, or NULL (an unknown option). */
static const cli_opt *entry_of(int opt, const cli_opt *opts, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (opt == 256 + (int)i || (opts[i].letter != 0 && opt == opts[i].letter))
            return &opts[i];
    return NULL;
}

/* Takes the entry's value; 0, or -1 once its message is said. */
static int take(const cli_opt *o, char *arg)
{
    int bad = 0;
    switch (o->kind) {
    case CLI_OPT_SET: *(int *)o->to = (int)o->hi; return 0;
    case CLI_OPT_TEXT: *(const char **)o->to = arg; return 0;
    case CLI_OPT_CALL: return o->call(arg);
    case CLI_OPT_WHOLE:
        if (o->wants == NULL)
            return cli_whole_option(o->name, arg, o->lo, o->hi, o->to);
        bad = cli_parse_whole(arg, o->lo, o->hi, o->to) != 0;
        break;
    case CLI_OPT_SECONDS:
        if (o->wants == NULL)
            return cli_timeout_option(arg, o->to);
        bad = cli_parse_seconds(arg, o->to) != 0;
        break;
    }
    if (bad)
        cli_error("--%s wants %s", o->name, o->wants);
    return bad ? -1 : 0;
}

int cli_parse_options(int argc, char **argv, const char *command, const cli_opt *opts, size_t n,
                      int permute, void (*usage)(FILE *to))
{
    struct option longs[CLI_OPTS_MAX + 2];
    char letters[2 * CLI_OPTS_MAX + 3];
    size_t used = 0;
    if (n > CLI_OPTS_MAX)
        return cli_usage_error(command, "too many options in its table");
    if (!permute)
        letters[used++] = '+';
    for (size_t i = 0; i < n; i++) {
        int arg = opts[i].kind == CLI_OPT_SET ? no_argument : required_argument;
        longs[i] = (struct option){opts[i].name, arg, NULL, 256 + (int)i};
        if (opts[i].letter != 0) {
            letters[used++] = opts[i].letter;
            if (arg == required_argument)
                letters[used++] = ':';
        }
    }
    longs[n] = (struct option){"help", no_argument, NULL, 'h'};
    longs[n + 1] = (struct option){NULL, 0, NULL, 0};
    letters[used++] = 'h';
    letters[used] = '\0';
    int opt;
    while ((opt = getopt_long(argc, argv, letters, longs, NULL)) != -1) {
        if (opt == 'h') {
            usage(stdout);
            return EXIT_OK;
        }
        const cli_opt *o = entry_of(opt, opts, n);
        if (o == NULL)
            return cli_usage_error(command, NULL);
        if (take(o, optarg) != 0)
            return EXIT_USAGE;
    }
    return CLI_OPTS_PARSED;
}
