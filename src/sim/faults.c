/*
 * Drawing latency and faults from the seeded stream. Each draw consumes the
 * same number of random numbers whatever its outcome, where that is cheap,
 * so that changing one probability disturbs the rest of a run little.
 */
#include "sim.h"

int64_t advlock_sim_draw_latency(advlock_prng *p, const advlock_fake_latency *lat)
{
    int slow = advlock_prng_chance(p, lat->tail_ppm);
    int64_t normal = advlock_prng_between(p, lat->min_ms, lat->max_ms);
    return slow ? advlock_prng_between(p, lat->max_ms, lat->tail_max_ms) : normal;
}

int64_t advlock_sim_latency_bound(const advlock_fake_latency *lat)
{
    return lat->tail_ppm > 0 && lat->tail_max_ms > lat->max_ms ? lat->tail_max_ms : lat->max_ms;
}

int advlock_sim_faults_on(const advlock_fake_faults *f)
{
    return (f->null_ppm | f->error_ppm | f->drop_before_ppm | f->drop_after_ppm | f->kill_ppm
            | f->stall_ppm | f->jump_ppm)
           != 0;
}

/* One draw in [0, 1e6) split into consecutive bands, one per fault. */
enum query_fault advlock_sim_draw_query_fault(advlock_prng *p, const advlock_fake_faults *f)
{
    uint64_t r = advlock_prng_below(p, 1000000);
    const uint32_t bands[] = {f->null_ppm, f->error_ppm, f->drop_before_ppm, f->drop_after_ppm};
    const enum query_fault faults[] = {FAULT_NULL, FAULT_ERROR, FAULT_DROP_BEFORE,
                                       FAULT_DROP_AFTER};
    uint64_t edge = 0;
    for (int i = 0; i < 4; i++) {
        edge += bands[i];
        if (r < edge)
            return faults[i];
    }
    return FAULT_NONE;
}

void advlock_sim_draw_server_error(advlock_prng *p, const char **sqlstate, const char **message)
{
    static const char *const errors[][2] = {
        {"57014", "canceling statement due to statement timeout"},
        {"40001", "could not serialize access due to concurrent update"},
        {"XX000", "internal error"},
    };
    uint64_t i = advlock_prng_below(p, 3);
    *sqlstate = errors[i][0];
    *message = errors[i][1];
}

const char *advlock_sim_fault_name(enum query_fault fault)
{
    static const char *const names[] = {NULL, "null", "error", "drop_before", "drop_after"};
    return names[fault];
}
