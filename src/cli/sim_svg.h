/*
 * advlock simulate --svg: the run's timeline as a picture. The command
 * tells it each client's events in the order of the trace; it keeps them
 * as bars (tries, sleeps, waits, holds) and marks (timeouts, failures),
 * and the owner of each lock over time, then draws them with svg.h's
 * primitives: one row per client, time in milliseconds across.
 */
#ifndef ADVLOCK_CLI_SIM_SVG_H
#define ADVLOCK_CLI_SIM_SVG_H

#include <stdint.h>
#include <stdio.h>

/* The most client rows drawn; the picture says how many more there were. */
#define SIM_SVG_MAX_ROWS 50
/* The most locks given an owner row; the picture says how many more. */
#define SIM_SVG_MAX_OWNER_ROWS 4

/* What a trace event means for the picture. */
typedef enum {
    SIM_SVG_TRY,       /* a try query left (ends at its answer) */
    SIM_SVG_WAIT,      /* a query that waits at the server left (ends at its answer) */
    SIM_SVG_ANSWER,    /* the query's answer came back */
    SIM_SVG_SLEEP,     /* a sleep began (ends at the client's next event) */
    SIM_SVG_ACQUIRED,  /* the client holds the lock */
    SIM_SVG_ENDED,     /* an operation ended otherwise: a hold ends */
    SIM_SVG_TIMED_OUT, /* an acquire timed out (marked) */
    SIM_SVG_FAILED,    /* an operation failed (marked) */
    SIM_SVG_OTHER      /* anything else the client did */
} sim_svg_event;

typedef struct sim_svg sim_svg;

/*
 * A timeline for clients (1 or more) racing for nkeys locks named
 * key_names (kept, not copied: they must outlive it), with title at its
 * top (copied). Returns NULL when memory runs out. Free with sim_svg_free.
 */
sim_svg *sim_svg_new(int clients, int nkeys, const char *const *key_names, const char *title);

/*
 * Notes an event of client's at t_ms (never earlier than the last),
 * concerning lock key (an index into key_names; -1: none known). Events of
 * unknown clients are ignored. Past a million bars the rest of the run is
 * left out, and the picture says from when.
 */
void sim_svg_note(sim_svg *s, int64_t t_ms, int client, int key, sim_svg_event event);

/*
 * Draws the timeline on out, caption (NULL: none) under the title. Bars
 * still open end at the last event. Returns 0, or -1 if memory ran out
 * (nothing is written then); write errors are out's to report (ferror).
 */
int sim_svg_write(sim_svg *s, FILE *out, const char *caption);

/* Frees s (NULL is fine). */
void sim_svg_free(sim_svg *s);

#endif
