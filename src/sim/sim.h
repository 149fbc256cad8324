/* Declarations shared by the simulation driver's files; none of this is
 * exported. */
#ifndef ADVLOCK_SIM_INTERNAL_H
#define ADVLOCK_SIM_INTERNAL_H

#include "../adapters/fake/fake.h"

#include <string.h>

/* ---- events (event_queue.c) ---- */

enum sim_event_kind {
    EV_STEP,        /* the client's plan takes its next step */
    EV_ARRIVE,      /* the client's query reaches the server */
    EV_DELIVER,     /* its result reaches the client */
    EV_WAKE,        /* the client's timer fires (serial: timer) */
    EV_CANCEL,      /* the plan's cancel of an acquire (serial: operation) */
    EV_KILL,        /* pg_terminate_backend of the client's session */
    EV_REAP,        /* the server notices a dropped connection (arg: pid) */
    EV_STALL,       /* the client's clock stalls (arg: ms) */
    EV_JUMP,        /* the client's clock jumps (arg: ms) */
    EV_CANCEL_LAND, /* a cancel request reaches the server (arg: pid) */
    EV_DEADLOCK,    /* deadlock_timeout after a wait began (serial: wait) */
    EV_RETURN       /* a granted waiter's statement finishes (serial: wait) */
};

/* Schedules an event at at_ms (never before now); 0, or -1 when full. */
int sim_schedule(advlock_sim *sim, int64_t at_ms, enum sim_event_kind kind, int client,
                 uint64_t serial, int64_t arg);
/* Removes the earliest event, by (time, sequence number); 0 when empty. */
int sim_next_event(advlock_sim *sim, advlock_sim_event_ *out);

/* ---- client session and query states ---- */

enum { SESSION_OPEN, SESSION_KILLED, SESSION_LOST };
/* A granted wait is QUERY_RETURNING until its statement finishes (later in
 * the same millisecond): a cancel landing first still ends it with 57014. */
enum { QUERY_NONE, QUERY_TO_SERVER, QUERY_WAITING, QUERY_RETURNING, QUERY_TO_CLIENT };
enum { SLOT_NONE = -1, SLOT_ORPHAN = -2 };

/* pg_stat_activity states a holders row can show; rows_[].state indexes it. */
extern const char *const sim_state_names[4];

/* Lock kinds index the views: mode * 2 + scope. */
enum { KINDS = 4 };
static inline int sim_kind(advlock_mode mode, advlock_scope scope)
{
    return (int)mode * 2 + (int)scope;
}
static inline int sim_kind_is_xact(int kind)
{
    return kind % 2 == ADVLOCK_TRANSACTION;
}
static inline int sim_kind_is_shared(int kind)
{
    return kind / 2 == ADVLOCK_SHARED;
}
/* Do two keys' holds agree in every kind? (One 64-bit compare: the
 * invariants run this after every event.) */
static inline int sim_same_holds(const int16_t a[KINDS], const int16_t b[KINDS])
{
    uint64_t x, y;
    memcpy(&x, a, sizeof x);
    memcpy(&y, b, sizeof y);
    return x == y;
}
static inline int sim_no_holds(const int16_t a[KINDS])
{
    uint64_t x;
    memcpy(&x, a, sizeof x);
    return x == 0;
}

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

/* ---- the policy, as an independent model (policy.c) ---- */

enum policy_input {
    IN_START_ACQUIRE,
    IN_START_RELEASE,
    IN_RESULT,
    IN_TIMER,
    IN_CANCEL,
    IN_CANCEL_SENT,
    IN_HOLDERS
};

/* Seeds the model's own jitter generator for a client's new options. */
void sim_policy_seed(advlock_sim_client_ *cl, uint64_t jitter_seed);

/*
 * Advances the model of what the machine must do after an input, given the
 * client's options, and compares the machine's actual next action (and
 * attempt count) with it. For IN_HOLDERS the rows are the client's rows_.
 * Returns 0, or -1 with a one-line reason in why.
 */
int sim_policy_check(advlock_sim_client_ *cl, enum policy_input input, advlock_result result,
                     const char *sqlstate, const char *message, int64_t reading,
                     const advlock_action *actual, uint64_t attempts, char *why, size_t size);
/* The reference's n-th sleep (n from 1): 100, 200, 400, 800, 1000, 1000, ...;
 * also the ceiling of full jitter's n-th sleep. */
int64_t sim_policy_sleep(uint64_t n);

/* ---- invariants over the whole world (invariants.c) ---- */

/* Checks everything that must hold between events; 0, or -1 with why. */
int sim_check_world(advlock_sim *sim, char *why, size_t size);
/* Checks what must hold when the run is over; 0, or -1 with why. */
int sim_check_end(advlock_sim *sim, char *why, size_t size);

/* ---- trace (trace.c) ---- */

typedef struct sim_trace_extra {
    const char *sql;      /* query */
    uint64_t attempt;     /* query of a lock statement, done of an acquire */
    const char *result;   /* result */
    const char *sqlstate; /* result, error */
    const char *fault;    /* result */
    int64_t rows;         /* result of the holders query: how many rows, else -1 */
    int64_t ms, wake;     /* sleep; wait (wake: the deadline, -1 for none) */
    const char *message;  /* done events */
    const char *error;    /* error */
} sim_trace_extra;

/* An extra with nothing set. */
sim_trace_extra sim_trace_none(void);
void sim_trace(advlock_sim *sim, int client, const char *event, const sim_trace_extra *extra);
const char *sim_result_name(advlock_result r);
const char *sim_outcome_event(advlock_outcome o);

/* ---- plans (plans.c) ---- */

void sim_script_plan(void *state, advlock_sim *sim, int client, const advlock_sim_done *last,
                     advlock_sim_step *next);
void sim_cycler_plan(void *state, advlock_sim *sim, int client, const advlock_sim_done *last,
                     advlock_sim_step *next);

/* ---- the driver, across files ---- */

/* sim.c: the run's bookkeeping. */
int sim_key_index(const advlock_sim *sim, int64_t key);
/* Records a violation "seed S: t=T ms, client C: what" and returns it. */
int sim_violation(advlock_sim *sim, int client, const char *what);
/* Schedules an event or records "event queue full". */
int sim_must_schedule(advlock_sim *sim, int64_t at_ms, enum sim_event_kind kind, int client,
                      uint64_t serial, int64_t arg);
/* What the client's clock reads now (it is first brought to virtual time). */
int64_t sim_reading(advlock_sim *sim, advlock_sim_client_ *cl);
int sim_open_session(advlock_sim *sim, int c);
void sim_close_session(advlock_sim *sim, int pid);
/* The session is gone: it holds nothing, and no transaction is open. */
void sim_forget_holds(advlock_sim_client_ *cl);

/* sim_ops.c: the machine's actions and inputs. */
/* Starts the step's ACQUIRE or RELEASE: 0, ADVLOCK_SIM_VIOLATION, or a
 * negative advlock_error when the machine refused to start (the step then
 * ends FAILED with it). */
int sim_start_operation(advlock_sim *sim, int c);
int sim_on_deliver(advlock_sim *sim, int c);
int sim_on_wake(advlock_sim *sim, int c, uint64_t serial);
int sim_on_cancel(advlock_sim *sim, int c, uint64_t serial);
/* Sends a statement (the machine's, or a transaction command) on the
 * client's session with a fresh round trip. */
int sim_send(advlock_sim *sim, int c, const char *sql, int is_lock);

/* sim_server.c: the server's side of queries, waits and cancels. */
int sim_on_arrive(advlock_sim *sim, int c);
/* Collects the answers of waits that ended (granted, cancelled, deadlocked). */
int sim_collect_waits(advlock_sim *sim);
/* A granted waiter's statement finishes: its answer leaves the server. */
int sim_on_return(advlock_sim *sim, int c, uint64_t serial);
int sim_on_cancel_land(advlock_sim *sim, int pid);
int sim_on_deadlock_check(advlock_sim *sim, int c, uint64_t serial);
int sim_on_kill(advlock_sim *sim, int c);

/* sim_steps.c: plans' steps. */
int sim_on_step(advlock_sim *sim, int c);
/* A transaction statement's answer reached the client: its step ends. */
int sim_command_done(advlock_sim *sim, int c);

#endif
