/*
 * Question 6: how much memory does a lock cost its caller? The lock machine
 * and the nonblocking adapter live in the caller's memory, one per lock in
 * flight, so their sizes are what ten thousand locks in one process cost.
 * The goals: a machine of at most 256 bytes (it was 1,848 when it kept
 * its messages) and an adapter of at most 1 KB (5,136). The server
 * session check kept the machine within its goal by storing the options
 * compactly (256 bytes with the session's token, pid and facts); the
 * fencing token in its report takes it past 256 (ADVLOCK_MACHINE_SIZE), and the lease the adapter
 * runs takes the adapter past 1 KB: both goals are missed now. Since the
 * adapter became the connection engine with one member (the engine, its
 * member and slots, the pump's state: 3,264 bytes), it is shown without a
 * goal. The report a blocking call fills is shown beside them; it lives
 * only as long as the caller keeps it.
 *
 *     sizes
 */
#include <math.h>

#include "advlock_pq.h"
#include "bench.h"

static void emit_size(const char *name, size_t size, const char *goal, size_t most)
{
    bench_emit(&(bench_figure){name, (double)size, "bytes", NULL, NAN, goal,
                               goal != NULL ? size <= most : -1});
}

int main(int argc, char **argv)
{
    static const char *const options[] = {NULL};
    bench_check_options(argc, argv, options);
    emit_size("sizeof_advlock_machine", sizeof(advlock_machine), "<= 256", 256);
    emit_size("sizeof_advlock_pq", sizeof(advlock_pq), NULL, 0);
    emit_size("sizeof_advlock_pq_report", sizeof(advlock_pq_report), NULL, 0);
    return 0;
}
