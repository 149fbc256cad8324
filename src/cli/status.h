/*
 * advlock status with no name (locks.c): every advisory lock of the
 * database, named where the operator's names map to its keys.
 */
#ifndef ADVLOCK_CLI_STATUS_H
#define ADVLOCK_CLI_STATUS_H

#include <stdint.h>

#include <libpq-fe.h>

/* How the listing is written (--format). */
typedef enum status_format { STATUS_TEXT, STATUS_JSON, STATUS_PROMETHEUS } status_format;

typedef struct status_listing {
    status_format format;
    int64_t watch_ms;   /* --watch: redraw every so often until a stop signal; 0: once */
    int64_t timeout_ms; /* --timeout: the bound of each frame's questions */
} status_listing;

/* The names the operator knows (the command line's, --names-from's), by key. */
typedef struct status_names status_names;

/* A new, empty set (NULL: out of memory); status_names_free frees it and
 * every name it holds. */
status_names *status_names_new(void);
void status_names_free(status_names *names);

/* Adds a name from the command line (copied), or says that it is not a
 * lock name (not valid UTF-8) and skips it. 0, or -1 out of memory
 * (said). */
int status_names_add(status_names *names, const char *name);

/* Adds the names of path ("-": standard input), one a line (a CR LF ends
 * a line too; empty lines skipped); a line that is not a lock name is
 * said with its number and skipped, the others kept. EXIT_OK, EXIT_IO
 * when the file cannot be read (said), EXIT_LOCK_ERROR out of memory. */
int status_names_read(status_names *names, const char *path);

/* 1 if a name was skipped as not valid UTF-8. */
int status_names_bad(const status_names *names);

/*
 * Lists every advisory lock of conn's database as opts says, once, or
 * every opts->watch_ms until SIGINT or SIGTERM (then EXIT_OK). Returns 0
 * (nothing held), 1 (a lock held: the last frame's), EXIT_NO_SERVER (no
 * answer within the timeout, said), EXIT_LOCK_ERROR (a question failed,
 * said) or EXIT_IO.
 */
int status_list(PGconn *conn, const status_listing *opts, status_names *names);

#endif
