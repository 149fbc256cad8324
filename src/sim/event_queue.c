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

int advlock_sim_schedule(sim_world *sim, int64_t at_ms, enum advlock_sim_event_kind kind,
                         int client, uint64_t serial, int64_t arg)
{
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
    sim_event *ev = sim->events_;
    *out = ev[0];
    ev[0] = ev[--sim->nevents_];
    int i = 0;
    for (;;) {
        int least = i, l = 2 * i + 1, r = l + 1;
        if (l < sim->nevents_ && earlier(&ev[l], &ev[least]))
            least = l;
        if (r < sim->nevents_ && earlier(&ev[r], &ev[least]))
            least = r;
        if (least == i)
            return 1;
        swap(&ev[i], &ev[least]);
        i = least;
    }
}
