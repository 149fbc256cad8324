/*
 * Profiles: the world a simulation's clients live in, as measured on a real
 * server by `advlock calibrate` and read by `advlock simulate --profile`.
 * A small text file, versioned; docs/simulation.md documents the format:
 *
 *     advlock-profile 1
 *     # comments and blank lines are ignored
 *     clients 30
 *     servers 2
 *     launch_us 0 120 ... (1 to 21 values, microseconds, at evenly spaced
 *     startup_us ...       quantiles from the least to the greatest,
 *     statement_us ...     never decreasing)
 *     wakeup_us ...
 *     command_us ...
 *
 * No libpq here: the parser's unit test links it alone.
 */
#ifndef ADVLOCK_CLI_PROFILE_H
#define ADVLOCK_CLI_PROFILE_H

#include <stddef.h>
#include <stdio.h>

#include "advlock_fake.h"

/* The version this program reads and writes. */
#define CLI_PROFILE_VERSION 1
/* The most clients a profile may say it was measured with. */
#define CLI_PROFILE_MAX_CLIENTS 1000

typedef struct cli_profile {
    int clients;             /* how many processes started together when measured */
    advlock_sim_model model; /* servers and the five distributions */
} cli_profile;

/*
 * Reads a profile from in; name is what error messages call the input (a
 * file name). Fills *out and returns 0; or returns -1 with one line in why
 * (cut to size bytes) naming the input and, where there is one, the line:
 * "FILE:3: statement_us: values must not decrease (900 after 1200)". Every
 * key must be given exactly once. Reads in to its end or the error; does
 * not close it.
 */
int cli_profile_parse(FILE *in, const char *name, cli_profile *out, char *why, size_t size);

/* As cli_profile_parse, from the file at path (opened and closed here; a
 * file that cannot be opened is an error naming it). */
int cli_profile_read(const char *path, cli_profile *out, char *why, size_t size);

/* As cli_profile_parse, from text (NUL-terminated; read from a copy made and
 * freed here, so running out of memory is an error too). */
int cli_profile_parse_text(const char *text, const char *name, cli_profile *out, char *why,
                           size_t size);

/*
 * Writes p to out in the format above, each line of comment (may be NULL,
 * may hold several lines) as a "# " line after the header. Returns 0, or -1
 * when writing failed (errno says why).
 */
int cli_profile_write(FILE *out, const cli_profile *p, const char *comment);

/*
 * The profile as a simulation of `clients` clients uses it: launch and
 * startup scaled by clients / p->clients (processes starting together
 * compete for the machine, so their spread grows with their number).
 * Integer arithmetic, rounding down.
 */
advlock_sim_model cli_profile_model_for(const cli_profile *p, int clients);

/* The profile measured on the project's machine that `advlock simulate`
 * uses without --profile (profile_default.c). */
extern const char cli_profile_default_text[];

#endif
