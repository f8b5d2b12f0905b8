/* Builds a small graph by hand through Gantry's C API, computes it on the
 * CPU, checks the numbers, then checks that misuse (null and freed handles,
 * wrong shapes, bad arguments) is answered with error codes; then computes
 * a larger product on a CPU backend whose kernels run as tasks of the host's
 * own job system (two pthreads and the caller). Exits 0 only when every
 * check holds.
 *
 *   cc -fsanitize=address -I capi/include capi/examples/graph.c \
 *      -L target/release -lgantry_capi -Wl,-rpath,target/release -lm -pthread -o graph
 */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "gantry.h"

static int failures = 0;

#define CHECK(call)                                                              \
    do {                                                                         \
        GantryStatus s_ = (call);                                                \
        if (s_ != GANTRY_OK) {                                                   \
            fprintf(stderr, "%s:%d: %s -> %s: %s\n", __FILE__, __LINE__, #call, \
                    gantry_status_name(s_), gantry_last_error());                \
            return 1;                                                            \
        }                                                                        \
    } while (0)

/* A call that must fail with `want` and leave a message. */
#define EXPECT_FAIL(call, want)                                                      \
    do {                                                                             \
        GantryStatus s_ = (call);                                                    \
        if (s_ != (want) || gantry_last_error()[0] == '\0') {                        \
            fprintf(stderr, "%s:%d: %s -> %s (wanted %s)\n", __FILE__, __LINE__,     \
                    #call, gantry_status_name(s_), gantry_status_name(want));        \
            failures++;                                                              \
        } else {                                                                     \
            printf("misuse ok: %-28s %s\n", gantry_status_name(s_), gantry_last_error()); \
        }                                                                            \
    } while (0)

static bool abort_now(void *user_data) {
    int *polls = user_data;
    (*polls)++;
    return true;
}

/* An abort callback that calls back into Gantry (the scheduler its compute
 * holds): the call is refused with GANTRY_ERROR_REENTRANT, not deadlocked.
 * Polled from the computing threads, possibly at once: the status is atomic. */
typedef struct {
    GantryScheduler sched;
    _Atomic int inner;
} Reenter;

static bool reenter(void *user_data) {
    Reenter *r = user_data;
    atomic_store(&r->inner, (int)gantry_scheduler_wait(r->sched));
    return false;
}

/* The host's job system: worker threads and the caller take task indices
 * from a shared counter; one batch at a time. */
typedef struct {
    pthread_mutex_t batch; /* one caller at a time */
    pthread_mutex_t lock;
    pthread_cond_t wake, done;
    GantryTaskFn task;
    void *task_data;
    size_t n_tasks, next, finished, tasks_run;
    int quit;
    pthread_t threads[2];
} Jobs;

/* Runs tasks of the current batch until none is left; `lock` is held on entry and exit. */
static void run_some(Jobs *j) {
    while (j->task != NULL && j->next < j->n_tasks) {
        size_t i = j->next++;
        GantryTaskFn task = j->task;
        void *data = j->task_data;
        pthread_mutex_unlock(&j->lock);
        task(data, i);
        pthread_mutex_lock(&j->lock);
        j->tasks_run++;
        if (++j->finished == j->n_tasks) pthread_cond_broadcast(&j->done);
    }
}

static void *worker(void *arg) {
    Jobs *j = arg;
    pthread_mutex_lock(&j->lock);
    while (!j->quit) {
        run_some(j);
        if (!j->quit) pthread_cond_wait(&j->wake, &j->lock);
    }
    pthread_mutex_unlock(&j->lock);
    return NULL;
}

/* GantryRunTasksFn: post the batch, take part, wait for the last task. */
static void jobs_run(void *user_data, size_t n_tasks, GantryTaskFn task, void *task_data) {
    Jobs *j = user_data;
    pthread_mutex_lock(&j->batch);
    pthread_mutex_lock(&j->lock);
    j->task = task;
    j->task_data = task_data;
    j->n_tasks = n_tasks;
    j->next = 0;
    j->finished = 0;
    pthread_cond_broadcast(&j->wake);
    run_some(j);
    while (j->finished < j->n_tasks) pthread_cond_wait(&j->done, &j->lock);
    j->task = NULL;
    pthread_mutex_unlock(&j->lock);
    pthread_mutex_unlock(&j->batch);
}

/* y = W x with W [256, 256] and x [256, 64] on a CPU backend over `jobs`: big
 * enough that the product splits into tasks. Returns 0 when the numbers hold. */
static int product_on_host_jobs(Jobs *jobs) {
    enum { K = 256, M = 256, N = 64 };
    GantryJobSystem js = {3, jobs_run, jobs};
    GantryBackend cpu;
    CHECK(gantry_cpu_backend_new_with_jobs(&js, &cpu));
    GantryJobSystem no_run = {3, NULL, jobs};
    EXPECT_FAIL(gantry_cpu_backend_new_with_jobs(&no_run, &cpu), GANTRY_ERROR_INVALID_ARGUMENT);
    EXPECT_FAIL(gantry_backend_set_n_threads(cpu, 8), GANTRY_ERROR_UNSUPPORTED); /* the host sizes its jobs */

    GantryContext ctx;
    CHECK(gantry_context_new(&ctx));
    GantryTensor w, x, y;
    int64_t ne_w[2] = {K, M}, ne_x[2] = {K, N};
    CHECK(gantry_tensor_new(ctx, GANTRY_F32, 2, ne_w, &w));
    CHECK(gantry_tensor_new(ctx, GANTRY_F32, 2, ne_x, &x));
    GantryTensor weights[2] = {w, x};
    CHECK(gantry_context_alloc_weights(ctx, cpu, weights, 2));
    static float wv[K * M], xv[K * N], out[M * N];
    for (int i = 0; i < K * M; i++) wv[i] = (float)((i * 7) % 13 - 6) / 64.0f;
    for (int i = 0; i < K * N; i++) xv[i] = (float)((i * 5) % 11 - 5) / 32.0f;
    CHECK(gantry_tensor_set_f32(ctx, w, wv, K * M));
    CHECK(gantry_tensor_set_f32(ctx, x, xv, K * N));
    CHECK(gantry_mul_mat(ctx, w, x, &y));
    GantryGraph graph;
    CHECK(gantry_graph_build(ctx, &y, 1, &graph));
    GantryScheduler sched;
    CHECK(gantry_scheduler_new(&cpu, 1, NULL, &sched));
    CHECK(gantry_scheduler_compute(sched, ctx, graph));
    CHECK(gantry_tensor_get_f32(ctx, y, out, M * N));
    double worst = 0.0;
    for (int col = 0; col < N; col++) {
        for (int row = 0; row < M; row++) {
            double acc = 0.0;
            for (int k = 0; k < K; k++) acc += (double)wv[row * K + k] * (double)xv[col * K + k];
            double err = fabs(acc - (double)out[col * M + row]);
            if (err > worst) worst = err;
        }
    }
    pthread_mutex_lock(&jobs->lock);
    size_t tasks_run = jobs->tasks_run;
    pthread_mutex_unlock(&jobs->lock);
    printf("host job system: %dx%dx%d product in %zu tasks of the host's, max |error| %.3g\n", M, N, K, tasks_run,
           worst);
    if (worst > 1e-3 || tasks_run < 2) {
        fprintf(stderr, "the product on the host's job system is wrong (max |error| %.3g) or ran no tasks (%zu)\n",
                worst, tasks_run);
        failures++;
    }
    CHECK(gantry_graph_free(graph));
    CHECK(gantry_scheduler_release(sched, ctx));
    CHECK(gantry_scheduler_free(sched));
    CHECK(gantry_context_free(ctx));
    CHECK(gantry_backend_free(cpu));
    return 0;
}

int main(void) {
    GantryRegistry reg;
    CHECK(gantry_registry_new(&reg));
    size_t n_devices = 0;
    CHECK(gantry_registry_device_count(reg, &n_devices));
    for (size_t i = 0; i < n_devices; i++) {
        char name[64];
        GantryDeviceInfo info;
        CHECK(gantry_registry_device(reg, i, name, sizeof name, NULL, &info));
        printf("device %zu: %s (type %d, %llu MiB total)\n", i, name, (int)info.device_type,
               (unsigned long long)(info.memory_total >> 20));
    }
    GantryBackend cpu;
    CHECK(gantry_registry_backend(reg, "cpu", &cpu));

    /* y = silu(0.5 * W x + b): W is [k=4, m=3] (3 rows of 4), x is [4, n=2]. */
    GantryContext ctx;
    CHECK(gantry_context_new(&ctx));
    GantryTensor w, b, x, y;
    int64_t ne_w[2] = {4, 3}, ne_b[1] = {3}, ne_x[2] = {4, 2};
    CHECK(gantry_tensor_new(ctx, GANTRY_F32, 2, ne_w, &w));
    CHECK(gantry_tensor_new(ctx, GANTRY_F32, 1, ne_b, &b));
    CHECK(gantry_tensor_new(ctx, GANTRY_F32, 2, ne_x, &x));
    CHECK(gantry_tensor_set_name(ctx, x, "x"));
    CHECK(gantry_tensor_set_input(ctx, x));
    GantryTensor weights[2] = {w, b};
    CHECK(gantry_context_alloc_weights(ctx, cpu, weights, 2));
    float wv[12], bv[3] = {0.5f, -1.0f, 0.25f}, xv[8];
    for (int i = 0; i < 12; i++) wv[i] = 0.1f * (float)(i - 5);
    for (int i = 0; i < 8; i++) xv[i] = (float)(i % 5) - 1.5f;
    CHECK(gantry_tensor_set_f32(ctx, w, wv, 12));
    CHECK(gantry_tensor_set_f32(ctx, b, bv, 3));
    GantryTensor wx, scaled, biased;
    CHECK(gantry_mul_mat(ctx, w, x, &wx));
    CHECK(gantry_scale(ctx, wx, 0.5f, 0.0f, &scaled));
    CHECK(gantry_add(ctx, scaled, b, &biased));
    CHECK(gantry_silu(ctx, biased, &y));
    CHECK(gantry_tensor_set_output(ctx, y));
    int64_t ne_y[4];
    GantryDType dt;
    CHECK(gantry_tensor_shape(ctx, y, ne_y, &dt));
    if (ne_y[0] != 3 || ne_y[1] != 2 || dt != GANTRY_F32) {
        fprintf(stderr, "y has shape [%lld, %lld], dtype %d\n", (long long)ne_y[0], (long long)ne_y[1], (int)dt);
        return 1;
    }

    GantryGraph graph;
    CHECK(gantry_graph_build(ctx, &y, 1, &graph));
    size_t n_nodes = 0;
    CHECK(gantry_graph_n_nodes(graph, &n_nodes));
    GantryScheduler sched;
    CHECK(gantry_scheduler_new(&cpu, 1, NULL, &sched));
    size_t bytes[4], n_bytes = 0;
    CHECK(gantry_scheduler_reserve(sched, ctx, graph, bytes, 4, &n_bytes));
    printf("graph: %zu nodes; compute memory: %zu bytes on %zu backend(s)\n", n_nodes, bytes[0], n_bytes);
    CHECK(gantry_scheduler_alloc(sched, ctx, graph));
    CHECK(gantry_tensor_set_f32(ctx, x, xv, 8));
    CHECK(gantry_scheduler_compute(sched, ctx, graph));
    float out[6];
    CHECK(gantry_tensor_get_f32(ctx, y, out, 6));

    double worst = 0.0;
    for (int col = 0; col < 2; col++) {
        for (int row = 0; row < 3; row++) {
            double acc = 0.0;
            for (int k = 0; k < 4; k++) acc += (double)wv[row * 4 + k] * (double)xv[col * 4 + k];
            double v = 0.5 * acc + bv[row];
            double want = v / (1.0 + exp(-v));
            double err = fabs(want - (double)out[col * 3 + row]);
            if (err > worst) worst = err;
            printf("y[%d][%d] = %+.6f (expected %+.6f)\n", col, row, out[col * 3 + row], want);
        }
    }
    if (worst > 1e-5) {
        fprintf(stderr, "max |error| %.3g is over 1e-5\n", worst);
        return 1;
    }
    printf("numbers ok: max |error| %.3g\n", worst);

    /* Asynchronous compute: start, poll until done, wait; the same numbers. */
    CHECK(gantry_scheduler_compute_async(sched, ctx, graph));
    bool done = false;
    int polls_until_done = 0;
    while (!done) {
        CHECK(gantry_scheduler_is_done(sched, &done));
        polls_until_done++;
    }
    CHECK(gantry_scheduler_wait(sched));
    float again[6];
    CHECK(gantry_tensor_get_f32(ctx, y, again, 6));
    if (memcmp(again, out, sizeof again) != 0) {
        fprintf(stderr, "the asynchronous compute gave other numbers\n");
        failures++;
    }
    printf("async compute: done after %d poll(s), same numbers\n", polls_until_done);
    EXPECT_FAIL(gantry_scheduler_is_done(sched, NULL), GANTRY_ERROR_INVALID_ARGUMENT);

    /* The abort callback stops a compute; removing it lets the next one run. */
    int polls = 0;
    CHECK(gantry_backend_set_abort_callback(cpu, abort_now, &polls));
    EXPECT_FAIL(gantry_scheduler_compute(sched, ctx, graph), GANTRY_ERROR_ABORTED);
    if (polls < 1) {
        fprintf(stderr, "the abort callback was never polled\n");
        failures++;
    }
    CHECK(gantry_backend_set_abort_callback(cpu, NULL, NULL));
    CHECK(gantry_scheduler_compute(sched, ctx, graph));

    /* A callback that re-enters gets an error; the compute completes. */
    Reenter re = {sched, -1};
    CHECK(gantry_backend_set_abort_callback(cpu, reenter, &re));
    CHECK(gantry_scheduler_compute(sched, ctx, graph));
    CHECK(gantry_backend_set_abort_callback(cpu, NULL, NULL));
    if (atomic_load(&re.inner) != GANTRY_ERROR_REENTRANT) {
        fprintf(stderr, "a call from the abort callback gave %s\n", gantry_status_name(atomic_load(&re.inner)));
        failures++;
    }
    printf("re-entry: refused inside the abort callback, the compute completed\n");

    /* A scheduler is bound to the context it first worked in: another is
       refused, naming both, and its weights stay as written. */
    GantryContext other;
    CHECK(gantry_context_new(&other));
    GantryTensor ow, ox, oy;
    CHECK(gantry_tensor_new(other, GANTRY_F32, 2, ne_w, &ow));
    CHECK(gantry_tensor_new(other, GANTRY_F32, 2, ne_x, &ox));
    CHECK(gantry_context_alloc_weights(other, cpu, &ow, 1));
    CHECK(gantry_tensor_set_f32(other, ow, wv, 12));
    CHECK(gantry_mul_mat(other, ow, ox, &oy));
    GantryGraph other_graph;
    CHECK(gantry_graph_build(other, &oy, 1, &other_graph));
    EXPECT_FAIL(gantry_scheduler_compute(sched, other, other_graph), GANTRY_ERROR_STATE);
    EXPECT_FAIL(gantry_scheduler_release(sched, other), GANTRY_ERROR_STATE);
    float back[12];
    CHECK(gantry_tensor_get_f32(other, ow, back, 12));
    if (memcmp(back, wv, sizeof back) != 0) {
        fprintf(stderr, "the other context's weights changed\n");
        failures++;
    }
    CHECK(gantry_graph_free(other_graph));
    CHECK(gantry_context_free(other));

    /* A memory budget: a second scheduler allowed 16 bytes on the CPU (which
       holds the weights and the first scheduler's memory already) refuses to
       reserve, naming the device, and allocates nothing; without it, it can. */
    GantryScheduler budgeted;
    CHECK(gantry_scheduler_new(&cpu, 1, NULL, &budgeted));
    CHECK(gantry_scheduler_set_budget(budgeted, cpu, 16));
    EXPECT_FAIL(gantry_scheduler_reserve(budgeted, ctx, graph, bytes, 4, &n_bytes), GANTRY_ERROR_OUT_OF_MEMORY);
    if (strstr(gantry_last_error(), "memory budget of CPU") == NULL) {
        fprintf(stderr, "the budget error does not name the CPU: %s\n", gantry_last_error());
        failures++;
    }
    CHECK(gantry_scheduler_set_budget(budgeted, cpu, 0));
    CHECK(gantry_scheduler_reserve(budgeted, ctx, graph, bytes, 4, &n_bytes));
    printf("budget: refused within 16 bytes (the CPU holds more), reserved without one\n");
    CHECK(gantry_scheduler_release(budgeted, ctx));
    CHECK(gantry_scheduler_free(budgeted));

    /* Misuse: every one an error code and a message, never a crash. */
    GantryContext null_ctx = {0};
    GantryTensor t;
    EXPECT_FAIL(gantry_tensor_new(null_ctx, GANTRY_F32, 2, ne_w, &t), GANTRY_ERROR_INVALID_HANDLE);
    GantryContext made_up = {0x123456789abcULL};
    EXPECT_FAIL(gantry_tensor_new(made_up, GANTRY_F32, 2, ne_w, &t), GANTRY_ERROR_INVALID_HANDLE);
    GantryTensor bad_x;
    int64_t ne_bad[2] = {5, 2};
    CHECK(gantry_tensor_new(ctx, GANTRY_F32, 2, ne_bad, &bad_x));
    EXPECT_FAIL(gantry_mul_mat(ctx, w, bad_x, &t), GANTRY_ERROR_INVALID_ARGUMENT); /* 4 vs 5 */
    EXPECT_FAIL(gantry_tensor_new(ctx, 99, 2, ne_w, &t), GANTRY_ERROR_INVALID_ARGUMENT);
    EXPECT_FAIL(gantry_tensor_new(ctx, GANTRY_F32, 7, ne_w, &t), GANTRY_ERROR_INVALID_ARGUMENT);
    EXPECT_FAIL(gantry_tensor_new(ctx, GANTRY_F32, 2, NULL, &t), GANTRY_ERROR_INVALID_ARGUMENT);
    EXPECT_FAIL(gantry_tensor_new(ctx, GANTRY_F32, 2, ne_w, NULL), GANTRY_ERROR_INVALID_ARGUMENT);
    EXPECT_FAIL(gantry_tensor_get_f32(ctx, y, out, 5), GANTRY_ERROR_INVALID_ARGUMENT);
    float ten[10] = {0};
    EXPECT_FAIL(gantry_tensor_set_f32(ctx, bad_x, ten, 10), GANTRY_ERROR_STATE); /* not in memory */
    EXPECT_FAIL(gantry_tensor_set_f32(ctx, w, xv, 8), GANTRY_ERROR_INVALID_ARGUMENT); /* 8 values, 12 elements */
    char tiny[2];
    size_t len = 0;
    EXPECT_FAIL(gantry_backend_name(cpu, tiny, sizeof tiny, &len), GANTRY_ERROR_BUFFER_TOO_SMALL);
    if (len == 0) failures++;
    EXPECT_FAIL(gantry_registry_backend(reg, "no-such-device", &cpu), GANTRY_ERROR_NOT_FOUND);
    GantryTensor stale = {0x7fffffff00000001ULL};
    EXPECT_FAIL(gantry_silu(ctx, stale, &t), GANTRY_ERROR_INVALID_HANDLE);

    /* A freed handle is stale, and freeing it again is an error too. */
    CHECK(gantry_graph_free(graph));
    EXPECT_FAIL(gantry_scheduler_compute(sched, ctx, graph), GANTRY_ERROR_INVALID_HANDLE);
    EXPECT_FAIL(gantry_graph_free(graph), GANTRY_ERROR_INVALID_HANDLE);

    CHECK(gantry_scheduler_release(sched, ctx));
    CHECK(gantry_scheduler_free(sched));
    CHECK(gantry_context_free(ctx));
    EXPECT_FAIL(gantry_tensor_get_f32(ctx, y, out, 6), GANTRY_ERROR_INVALID_HANDLE);
    CHECK(gantry_backend_free(cpu));
    CHECK(gantry_registry_free(reg));

    Jobs jobs = {.batch = PTHREAD_MUTEX_INITIALIZER, .lock = PTHREAD_MUTEX_INITIALIZER,
                 .wake = PTHREAD_COND_INITIALIZER, .done = PTHREAD_COND_INITIALIZER};
    for (int i = 0; i < 2; i++) pthread_create(&jobs.threads[i], NULL, worker, &jobs);
    int product = product_on_host_jobs(&jobs);
    pthread_mutex_lock(&jobs.lock);
    jobs.quit = 1;
    pthread_cond_broadcast(&jobs.wake);
    pthread_mutex_unlock(&jobs.lock);
    for (int i = 0; i < 2; i++) pthread_join(jobs.threads[i], NULL);
    if (product != 0) return 1;
    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    printf("graph.c: all checks hold\n");
    return 0;
}
