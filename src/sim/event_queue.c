/*
 * The simulation's one event queue: a binary min-heap ordered by virtual
 * time, then by the sequence number each event got when it was scheduled.
 * The sequence number makes simultaneous events run in the order they were
 * created, so nothing depends on the heap's internal layout.
 */
#include "sim.h"

static int earlier(const sim_event *a, const sim_event *b)
{
    return a->at_ms_ != b->at_ms_ ? a->at_ms_ < b->at_ms_ : a->seq_ < b->seq_;
}

static void swap(sim_event *a, sim_event *b)
{
    sim_event t = *a;
    *a = *b;
    *b = t;
}

/* Moves the event at i down to its place below. */
static void sift_down(sim_event *ev, int n, int i)
{
    for (;;) {
        int least = i, l = 2 * i + 1, r = l + 1;
        if (l < n && earlier(&ev[l], &ev[least]))
            least = l;
        if (r < n && earlier(&ev[r], &ev[least]))
            least = r;
        if (least == i)
            return;
        swap(&ev[i], &ev[least]);
        i = least;
    }
}

int advlock_sim_event_outdated(const sim_world *sim, const sim_event *ev)
{
    switch (ev->kind_) {
    case EV_WAKE: return ev->serial_ != sim->clients_[ev->client_].timer_serial_;
    case EV_CANCEL: return ev->serial_ != sim->clients_[ev->client_].op_serial_;
    case EV_DEADLOCK:
    case EV_RETURN:
    case EV_LOCK_TIMEOUT: return ev->serial_ != sim->clients_[ev->client_].wait_serial_;
    default: return 0;
    }
}

/* Drops the outdated events (the queue is full of them when many clients
 * each leave a long timeout's timer behind) and restores the heap. The
 * order the others come out in is (time, sequence number) whatever the
 * heap's layout, so a run goes exactly as it would have. */
static void drop_outdated(sim_world *sim)
{
    int kept = 0;
    for (int i = 0; i < sim->nevents_; i++)
        if (!advlock_sim_event_outdated(sim, &sim->events_[i]))
            sim->events_[kept++] = sim->events_[i];
    sim->nevents_ = kept;
    for (int i = kept / 2 - 1; i >= 0; i--)
        sift_down(sim->events_, kept, i);
}

int advlock_sim_schedule(sim_world *sim, int64_t at_ms, enum advlock_sim_event_kind kind,
                         int client, uint64_t serial, int64_t arg)
{
    if (sim->nevents_ == SIM_MAX_EVENTS)
        drop_outdated(sim);
    if (sim->nevents_ == SIM_MAX_EVENTS)
        return -1;
    sim_event *ev = sim->events_;
    int i = sim->nevents_++;
    ev[i] = (sim_event){at_ms < sim->now_ms_ ? sim->now_ms_ : at_ms,
                        sim->next_seq_++,
                        (int)kind,
                        client,
                        serial,
                        arg};
    while (i > 0 && earlier(&ev[i], &ev[(i - 1) / 2])) {
        swap(&ev[i], &ev[(i - 1) / 2]);
        i = (i - 1) / 2;
    }
    return 0;
}

int advlock_sim_next_event(sim_world *sim, sim_event *out)
{
    if (sim->nevents_ == 0)
        return 0;
    *out = sim->events_[0];
    sim->events_[0] = sim->events_[--sim->nevents_];
    sift_down(sim->events_, sim->nevents_, 0);
    return 1;
}
