/*
 * Virtual time, and the reading a program would get from CLOCK_MONOTONIC,
 * which may stall or jump. The reading is virtual time plus a skew, except
 * during a stall, when it is frozen; a stall moves the skew back by its
 * length, so the reading resumes exactly where it froze and never goes back.
 */
#include "../../core/saturating.h"
#include "advlock_fake.h"

void advlock_fake_clock_init(advlock_fake_clock *c, int64_t start_ms)
{
    *c = (advlock_fake_clock){
        .now_ms_ = start_ms, .stall_until_ms_ = start_ms, .frozen_ms_ = start_ms};
}

int64_t advlock_fake_clock_now(const advlock_fake_clock *c)
{
    return c->now_ms_;
}

static int stalled(const advlock_fake_clock *c)
{
    return c->now_ms_ < c->stall_until_ms_;
}

int64_t advlock_fake_clock_read(const advlock_fake_clock *c)
{
    return stalled(c) ? c->frozen_ms_ : advlock_add_saturating(c->now_ms_, c->skew_ms_);
}

int advlock_fake_clock_advance_to(advlock_fake_clock *c, int64_t now_ms)
{
    if (c == NULL || now_ms < c->now_ms_)
        return ADVLOCK_EINVAL;
    c->now_ms_ = now_ms;
    return 0;
}

int advlock_fake_clock_stall(advlock_fake_clock *c, int64_t ms)
{
    if (c == NULL || ms < 0)
        return ADVLOCK_EINVAL;
    int64_t until = advlock_add_saturating(c->now_ms_, ms);
    if (!stalled(c)) {
        c->frozen_ms_ = advlock_fake_clock_read(c);
        c->stall_until_ms_ = c->now_ms_;
    }
    if (until > c->stall_until_ms_) {
        int64_t extra = until - c->stall_until_ms_;
        c->skew_ms_ = advlock_add_saturating(c->skew_ms_, -extra);
        c->stalled_ms_ = advlock_add_saturating(c->stalled_ms_, extra);
        c->stall_until_ms_ = until;
    }
    return 0;
}

int advlock_fake_clock_jump(advlock_fake_clock *c, int64_t ms)
{
    if (c == NULL || ms < 0)
        return ADVLOCK_EINVAL;
    c->skew_ms_ = advlock_add_saturating(c->skew_ms_, ms);
    c->frozen_ms_ = advlock_add_saturating(c->frozen_ms_, ms);
    c->jumped_ms_ = advlock_add_saturating(c->jumped_ms_, ms);
    return 0;
}
