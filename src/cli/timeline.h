/*
 * advlock simulate --svg: the run's timeline as a picture. The command
 * tells it each client's events in the order of the trace; it keeps them
 * as bars (tries, sleeps, waits, holds) and marks (timeouts, failures),
 * and the owner of each lock over time, then draws them with svg.h's
 * primitives: one row per client, time in milliseconds across.
 */
#ifndef ADVLOCK_CLI_TIMELINE_H
#define ADVLOCK_CLI_TIMELINE_H

#include <stdint.h>
#include <stdio.h>

/* The most client rows drawn; the picture says how many more there were. */
#define CLI_TIMELINE_MAX_ROWS 50
/* The most locks given an owner row; the picture says how many more. */
#define CLI_TIMELINE_MAX_OWNER_ROWS 4

/* What a trace event means for the picture. */
typedef enum {
    CLI_TIMELINE_TRY,       /* a try query left (ends at its answer) */
    CLI_TIMELINE_WAIT,      /* a query that waits at the server left (ends at its answer) */
    CLI_TIMELINE_ANSWER,    /* the query's answer came back */
    CLI_TIMELINE_SLEEP,     /* a sleep began (ends at the client's next event) */
    CLI_TIMELINE_ACQUIRED,  /* the client holds the lock */
    CLI_TIMELINE_ENDED,     /* an operation ended otherwise: a hold ends */
    CLI_TIMELINE_TIMED_OUT, /* an acquire timed out (marked) */
    CLI_TIMELINE_FAILED,    /* an operation failed (marked) */
    CLI_TIMELINE_OTHER      /* anything else the client did */
} cli_timeline_event;

typedef struct cli_timeline cli_timeline;

/*
 * A timeline for clients (1 or more) racing for nkeys locks named
 * key_names (kept, not copied: they must outlive it), with title at its
 * top (copied). Returns NULL when memory runs out. Free with cli_timeline_free.
 */
cli_timeline *cli_timeline_new(int clients, int nkeys, const char *const *key_names,
                               const char *title);

/*
 * Notes an event of client's at t_ms (never earlier than the last),
 * concerning lock key (an index into key_names; -1: none known). Events of
 * unknown clients are ignored. Past a million bars the rest of the run is
 * left out, and the picture says from when.
 */
void cli_timeline_note(cli_timeline *s, int64_t t_ms, int client, int key,
                       cli_timeline_event event);

/*
 * Draws the timeline on out, caption (NULL: none) under the title. Bars
 * still open end at the last event. Returns 0, or -1 if memory ran out
 * (nothing is written then); write errors are out's to report (ferror).
 */
int cli_timeline_write(cli_timeline *s, FILE *out, const char *caption);

/* Frees s (NULL is fine). */
void cli_timeline_free(cli_timeline *s);

#endif
