/* Declarations shared by the simulation driver's files; none of this is
 * exported. */
#ifndef ADVLOCK_SIM_INTERNAL_H
#define ADVLOCK_SIM_INTERNAL_H

#include "fake.h"

/* ---- events (event_queue.c) ---- */

enum sim_event_kind {
    EV_STEP,    /* the client's plan takes its next step */
    EV_ARRIVE,  /* the client's query reaches the server */
    EV_DELIVER, /* its result reaches the client */
    EV_WAKE,    /* the client's timer fires (serial: timer) */
    EV_CANCEL,  /* the plan's cancel of an acquire (serial: operation) */
    EV_KILL,    /* pg_terminate_backend of the client's session */
    EV_REAP,    /* the server notices a dropped connection (arg: pid) */
    EV_STALL,   /* the client's clock stalls (arg: ms) */
    EV_JUMP     /* the client's clock jumps (arg: ms) */
};

/* Schedules an event at at_ms (never before now); 0, or -1 when full. */
int sim_schedule(advlock_sim *sim, int64_t at_ms, enum sim_event_kind kind, int client,
                 uint64_t serial, int64_t arg);
/* Removes the earliest event, by (time, sequence number); 0 when empty. */
int sim_next_event(advlock_sim *sim, advlock_sim_event_ *out);

/* ---- client session and query states ---- */

enum { SESSION_OPEN, SESSION_KILLED, SESSION_LOST };
enum { QUERY_NONE, QUERY_TO_SERVER, QUERY_TO_CLIENT };

/* ---- faults (faults.c) ---- */

enum query_fault { FAULT_NONE, FAULT_NULL, FAULT_ERROR, FAULT_DROP_BEFORE, FAULT_DROP_AFTER };

int64_t sim_draw_latency(advlock_prng *p, const advlock_fake_latency *lat);
/* The most a round trip can take under this latency. */
int64_t sim_latency_bound(const advlock_fake_latency *lat);
enum query_fault sim_draw_query_fault(advlock_prng *p, const advlock_fake_faults *f);
/* A server error's SQLSTATE and message, one of three at random. */
void sim_draw_server_error(advlock_prng *p, const char **sqlstate, const char **message);
int sim_faults_on(const advlock_fake_faults *f);
const char *sim_fault_name(enum query_fault fault);

/* ---- the reference policy, as a model (policy.c) ---- */

enum policy_input { IN_START_ACQUIRE, IN_START_RELEASE, IN_RESULT, IN_TIMER, IN_CANCEL };

/*
 * Advances the model of what the reference machine must do after an input,
 * and compares the machine's actual next action (and attempt count) with
 * it. Returns 0, or -1 with a one-line reason in why.
 */
int sim_policy_check(advlock_sim_client_ *cl, enum policy_input input, advlock_result result,
                     const char *sqlstate, int64_t reading, const advlock_action *actual,
                     uint64_t attempts, char *why, size_t size);
/* The reference's n-th sleep (n from 1): 100, 200, 400, 800, 1000, 1000, ... */
int64_t sim_policy_sleep(uint64_t n);

/* ---- invariants over the whole world (invariants.c) ---- */

/* Checks everything that must hold between events; 0, or -1 with why. */
int sim_check_world(advlock_sim *sim, char *why, size_t size);
/* Checks what must hold when the run is over; 0, or -1 with why. */
int sim_check_end(advlock_sim *sim, char *why, size_t size);

/* ---- trace (trace.c) ---- */

typedef struct sim_trace_extra {
    const char *sql;       /* query */
    uint64_t attempt;      /* query of a try-lock, done of an acquire */
    const char *result;    /* result */
    const char *sqlstate;  /* result, error */
    const char *fault;     /* result */
    int64_t ms, wake;      /* sleep */
    const char *message;   /* done events */
    const char *error;     /* error */
} sim_trace_extra;

void sim_trace(advlock_sim *sim, int client, const char *event, const sim_trace_extra *extra);
const char *sim_result_name(advlock_result r);
const char *sim_outcome_event(advlock_outcome o);

/* ---- plans (plans.c) ---- */

void sim_script_plan(void *state, advlock_sim *sim, int client, const advlock_sim_done *last,
                     advlock_sim_step *next);
void sim_cycler_plan(void *state, advlock_sim *sim, int client, const advlock_sim_done *last,
                     advlock_sim_step *next);

/* ---- driver helpers used across files (sim.c) ---- */

/* The index of a derived key in the run's key table, or -1. */
int sim_key_index(const advlock_sim *sim, int64_t key);
/* Records a violation "seed S: t=T ms, client C: what" and returns it. */
int sim_violation(advlock_sim *sim, int client, const char *what);

#endif
