/*
 * advlock key: names to the bigint PostgreSQL locks on, and back. pg_locks
 * shows a derived key as two opaque 32-bit halves; this is how an operator
 * turns a row into a name again.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "advlock.h"
#include "cli.h"
#include "option_table.h"

typedef struct key_job {
    int lookup; /* --lookup: print matching names instead of keys */
    uint32_t classid;
    uint32_t objid;
    int bad_keys;
    int matches;
} key_job;

/* Where a key came from, for error messages: "argument 3" or "line 12". */
static void handle_key(key_job *job, const char *name, size_t len, const char *origin,
                       unsigned long index)
{
    int64_t key;
    int rc = advlock_derive_key(name, len, &key);
    if (rc != 0) {
        cli_error("%s %lu: %s", origin, index, advlock_strerror(rc));
        job->bad_keys++;
        return;
    }
    uint64_t bits = (uint64_t)key;
    uint32_t classid = (uint32_t)(bits >> 32), objid = (uint32_t)bits;
    if (!job->lookup) {
        printf("%" PRId64 "\t0x%016" PRIx64 "\t%" PRIu32 "\t%" PRIu32 "\n", key, bits, classid,
               objid);
    } else if (classid == job->classid && objid == job->objid) {
        fwrite(name, 1, len, stdout);
        putchar('\n');
        job->matches++;
    }
}

/* One key per line; the line's end, a newline or a CR LF (a file written
 * on Windows), ends the key and is not part of it. */
static int keys_from_stdin(key_job *job)
{
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    unsigned long number = 0;
    while ((n = getline(&line, &cap, stdin)) >= 0) {
        number++;
        size_t len = (size_t)n;
        if (len > 0 && line[len - 1] == '\n')
            len--;
        if (len > 0 && line[len - 1] == '\r' && (size_t)n > len)
            len--;
        handle_key(job, line, len, "line", number);
    }
    int failed = ferror(stdin);
    free(line);
    if (failed) {
        cli_error("reading standard input: %s", strerror(errno));
        return -1;
    }
    return 0;
}

static void usage(FILE *to)
{
    fputs("usage: advlock key KEY...              print bigint, hex, classid, objid per key\n"
          "       advlock key -                   read keys from standard input, one per line\n"
          "       advlock key --lookup CLASSID OBJID KEY...|-\n"
          "                                       print the names that map to that pg_locks row\n",
          to);
}

int cmd_key(int argc, char **argv)
{
    key_job job = {0};
    const cli_opt options[] = {CLI_SET("lookup", 'l', &job.lookup)};
    int rc = CLI_PARSE(argc, argv, "key", options, 0, usage);
    if (rc != CLI_OPTS_PARSED)
        return rc;
    argv += optind;
    argc -= optind;
    long long classid, objid;
    if (job.lookup) {
        if (argc < 2 || cli_parse_whole(argv[0], 0, UINT32_MAX, &classid) != 0
            || cli_parse_whole(argv[1], 0, UINT32_MAX, &objid) != 0) {
            cli_error("--lookup needs CLASSID and OBJID as pg_locks shows them "
                      "(unsigned 32-bit decimals)");
            return EXIT_USAGE;
        }
        job.classid = (uint32_t)classid;
        job.objid = (uint32_t)objid;
        argv += 2;
        argc -= 2;
    }
    if (argc == 0)
        return cli_usage_error("key", "a KEY (or -, to read them) is needed");

    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "-") == 0) {
            if (keys_from_stdin(&job) != 0)
                return EXIT_IO;
        } else {
            handle_key(&job, argv[i], strlen(argv[i]), "argument", (unsigned long)i + 1);
        }
    }
    if (job.bad_keys > 0)
        return EXIT_BAD_KEY;
    if (job.lookup && job.matches == 0) {
        cli_error("no candidate maps to classid %" PRIu32 ", objid %" PRIu32, job.classid,
                  job.objid);
        return EXIT_BUSY;
    }
    return EXIT_OK;
}
