// ggml's scheduler placing the graph Gantry's `benches/sched.rs` places,
// timed the same way: `ggml_backend_sched_reset` + `ggml_backend_sched_alloc_graph`
// from scratch, over a test GPU (a device with its own non-host buffer type
// that needs no memory, supports every op and cannot read host memory) and
// the CPU, with the weights and KV cache in the test GPU's memory.
//
// The graph is SmolLM2-135M's prompt graph as Gantry's decoder builds it
// (30 layers, width 576, 9 heads / 3 KV heads of 64, FFN 1536, vocab 49152,
// Q4_0 matrices, an F16 cache of 256 rows, 64 tokens over all 256 rows,
// logits for every token, attention computed explicitly: K·Q, masked soft
// max, V). It prints its node count: 934, as Gantry's.
//
// "From scratch" as in Gantry's bench: between rounds every tensor the
// scheduler placed loses its memory again (outside the timed region), so that
// each round assigns, expands, splits and binds the whole graph as a freshly
// built graph would be (a tensor still holding compute memory would count as
// pre-allocated in ggml's first pass). The memory plan itself is reused, as
// in Gantry's bench.
//
// Build and run with run.sh beside this file.

#include "ggml.h"
#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-backend-impl.h"
#include "ggml-impl.h" // struct ggml_cgraph: the leafs
#include "ggml-cpu.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

// ---- the test GPU: placement only, no memory ---------------------------------

static const char * test_buft_name(ggml_backend_buffer_type_t buft) { (void) buft; return "TestGPU"; }
static size_t test_buft_alignment(ggml_backend_buffer_type_t buft) { (void) buft; return 256; }
static bool test_buft_is_host(ggml_backend_buffer_type_t buft) { (void) buft; return false; }

static void * test_buffer_base(ggml_backend_buffer_t buffer) { (void) buffer; return (void *) (uintptr_t) 0x1000; }
static void test_buffer_free(ggml_backend_buffer_t buffer) { (void) buffer; }
static void test_buffer_clear(ggml_backend_buffer_t buffer, uint8_t value) { (void) buffer; (void) value; }

static ggml_backend_buffer_t test_buft_alloc(ggml_backend_buffer_type_t buft, size_t size) {
    struct ggml_backend_buffer_i iface = {
        .free_buffer = test_buffer_free,
        .get_base = test_buffer_base,
        .clear = test_buffer_clear,
    };
    return ggml_backend_buffer_init(buft, iface, NULL, size);
}

static struct ggml_backend_device test_device;

static struct ggml_backend_buffer_type test_buft = {
    .iface = {
        .get_name = test_buft_name,
        .alloc_buffer = test_buft_alloc,
        .get_alignment = test_buft_alignment,
        .is_host = test_buft_is_host,
    },
    .device = &test_device,
    .context = NULL,
};

static const char * test_dev_name(ggml_backend_dev_t dev) { (void) dev; return "TestGPU"; }
static void test_dev_memory(ggml_backend_dev_t dev, size_t * free, size_t * total) {
    (void) dev;
    *free = *total = (size_t) 1 << 40;
}
static enum ggml_backend_dev_type test_dev_type(ggml_backend_dev_t dev) { (void) dev; return GGML_BACKEND_DEVICE_TYPE_GPU; }
static ggml_backend_buffer_type_t test_dev_buft(ggml_backend_dev_t dev) { (void) dev; return &test_buft; }
static bool test_dev_supports_op(ggml_backend_dev_t dev, const struct ggml_tensor * op) { (void) dev; (void) op; return true; }
static bool test_dev_supports_buft(ggml_backend_dev_t dev, ggml_backend_buffer_type_t buft) { (void) dev; return buft == &test_buft; }
static bool test_dev_offload_op(ggml_backend_dev_t dev, const struct ggml_tensor * op) { (void) dev; (void) op; return false; }
static void test_dev_props(ggml_backend_dev_t dev, struct ggml_backend_dev_props * props) {
    memset(props, 0, sizeof(*props));
    props->name = "TestGPU";
    props->description = "TestGPU";
    props->type = GGML_BACKEND_DEVICE_TYPE_GPU;
    test_dev_memory(dev, &props->memory_free, &props->memory_total);
}

static struct ggml_backend_device test_device = {
    .iface = {
        .get_name = test_dev_name,
        .get_description = test_dev_name,
        .get_memory = test_dev_memory,
        .get_type = test_dev_type,
        .get_props = test_dev_props,
        .get_buffer_type = test_dev_buft,
        .supports_op = test_dev_supports_op,
        .supports_buft = test_dev_supports_buft,
        .offload_op = test_dev_offload_op,
    },
    .reg = NULL,
    .context = NULL,
};

static const char * test_backend_name(ggml_backend_t backend) { (void) backend; return "TestGPU"; }
static void test_backend_free(ggml_backend_t backend) { (void) backend; }
static enum ggml_status test_backend_compute(ggml_backend_t backend, struct ggml_cgraph * graph) {
    (void) backend;
    (void) graph;
    return GGML_STATUS_SUCCESS;
}

static ggml_guid test_guid = {0x67, 0x61, 0x6e, 0x74, 0x72, 0x79, 0x2d, 0x74, 0x65, 0x73, 0x74, 0x2d, 0x67, 0x70, 0x75, 0x00};

static struct ggml_backend test_backend = {
    .guid = &test_guid,
    .iface = {
        .get_name = test_backend_name,
        .free = test_backend_free,
        .graph_compute = test_backend_compute,
    },
    .device = &test_device,
    .context = NULL,
};

// ---- the graph -----------------------------------------------------------------

enum {
    N_VOCAB = 49152,
    N_EMBD = 576,
    N_LAYER = 30,
    N_HEAD = 9,
    N_HEAD_KV = 3,
    HEAD_DIM = 64,
    N_FF = 1536,
    N_CTX = 256,
    N_TOKENS = 64,
    N_KV = 256,
};

struct layer {
    struct ggml_tensor *attn_norm, *wq, *wk, *wv, *wo, *ffn_norm, *up, *gate, *down, *k, *v;
};

struct model {
    struct ggml_tensor *tok_embd, *output_norm, *output;
    struct layer layers[N_LAYER];
};

static struct ggml_tensor * rms_mul(struct ggml_context * ctx, struct ggml_tensor * x, struct ggml_tensor * w) {
    return ggml_mul(ctx, ggml_rms_norm(ctx, x, 1e-5f), w);
}

static struct ggml_tensor * rope(struct ggml_context * ctx, struct ggml_tensor * x, struct ggml_tensor * pos) {
    return ggml_rope_ext(ctx, x, pos, NULL, HEAD_DIM, 0, 8192, 100000.0f, 1.0f, 0.0f, 1.0f, 32.0f, 1.0f);
}

static struct ggml_tensor * input(struct ggml_context * ctx, enum ggml_type type, int64_t ne0, int64_t ne1) {
    struct ggml_tensor * t = ne1 > 1 ? ggml_new_tensor_2d(ctx, type, ne0, ne1) : ggml_new_tensor_1d(ctx, type, ne0);
    ggml_set_input(t);
    return t;
}

static struct ggml_cgraph * build_graph(struct ggml_context * ctx, const struct model * m) {
    const int kv_width = HEAD_DIM * N_HEAD_KV;
    struct ggml_tensor * tokens = input(ctx, GGML_TYPE_I32, N_TOKENS, 1);
    struct ggml_tensor * positions = input(ctx, GGML_TYPE_I32, N_TOKENS, 1);
    struct ggml_tensor * kv_slots = input(ctx, GGML_TYPE_I32, N_TOKENS, 1);
    struct ggml_tensor * mask = input(ctx, GGML_TYPE_F16, N_KV, N_TOKENS);
    const size_t cache_row = ggml_row_size(GGML_TYPE_F16, kv_width);
    const size_t head_row = ggml_row_size(GGML_TYPE_F16, HEAD_DIM);

    struct ggml_tensor * x = ggml_get_rows(ctx, m->tok_embd, tokens);
    for (int l = 0; l < N_LAYER; l++) {
        const struct layer * lw = &m->layers[l];
        struct ggml_tensor * cur = rms_mul(ctx, x, lw->attn_norm);
        struct ggml_tensor * q = ggml_reshape_3d(ctx, ggml_mul_mat(ctx, lw->wq, cur), HEAD_DIM, N_HEAD, N_TOKENS);
        q = rope(ctx, q, positions);
        struct ggml_tensor * k = ggml_reshape_3d(ctx, ggml_mul_mat(ctx, lw->wk, cur), HEAD_DIM, N_HEAD_KV, N_TOKENS);
        k = rope(ctx, k, positions);
        struct ggml_tensor * v = ggml_mul_mat(ctx, lw->wv, cur);
        struct ggml_tensor * k_rows = ggml_reshape_2d(ctx, k, kv_width, N_TOKENS);
        struct ggml_tensor * k_stored = ggml_set_rows(ctx, lw->k, k_rows, kv_slots);
        struct ggml_tensor * v_stored = ggml_set_rows(ctx, lw->v, v, kv_slots);
        struct ggml_tensor * k_all = ggml_view_3d(ctx, k_stored, HEAD_DIM, N_KV, N_HEAD_KV, cache_row, head_row, 0);
        struct ggml_tensor * v_all = ggml_view_3d(ctx, v_stored, HEAD_DIM, N_KV, N_HEAD_KV, cache_row, head_row, 0);
        struct ggml_tensor * qp = ggml_permute(ctx, q, 0, 2, 1, 3);
        struct ggml_tensor * kq = ggml_mul_mat(ctx, k_all, qp);
        kq = ggml_soft_max_ext(ctx, kq, mask, 0.125f, 0.0f);
        struct ggml_tensor * vt = ggml_cont(ctx, ggml_transpose(ctx, v_all));
        struct ggml_tensor * kqv = ggml_mul_mat(ctx, vt, kq);
        struct ggml_tensor * merged = ggml_permute(ctx, kqv, 0, 2, 1, 3);
        struct ggml_tensor * attn = ggml_cont_2d(ctx, merged, HEAD_DIM * N_HEAD, N_TOKENS);
        attn = ggml_mul_mat(ctx, lw->wo, attn);
        struct ggml_tensor * ffn_inp = ggml_add(ctx, x, attn);
        cur = rms_mul(ctx, ffn_inp, lw->ffn_norm);
        struct ggml_tensor * up = ggml_mul_mat(ctx, lw->up, cur);
        struct ggml_tensor * gate = ggml_mul_mat(ctx, lw->gate, cur);
        struct ggml_tensor * down = ggml_mul_mat(ctx, lw->down, ggml_swiglu_split(ctx, gate, up));
        x = ggml_add(ctx, ffn_inp, down);
    }
    struct ggml_tensor * logits = ggml_mul_mat(ctx, m->output, rms_mul(ctx, x, m->output_norm));
    ggml_set_output(logits);
    struct ggml_cgraph * graph = ggml_new_graph_custom(ctx, 4096, false);
    ggml_build_forward_expand(graph, logits);
    return graph;
}

static struct ggml_tensor * weight(struct ggml_context * ctx, enum ggml_type type, int64_t ne0, int64_t ne1) {
    return ne1 > 1 ? ggml_new_tensor_2d(ctx, type, ne0, ne1) : ggml_new_tensor_1d(ctx, type, ne0);
}

static void make_model(struct ggml_context * ctx, struct model * m) {
    const enum ggml_type q = GGML_TYPE_Q4_0;
    const int kv_width = HEAD_DIM * N_HEAD_KV;
    m->tok_embd = weight(ctx, q, N_EMBD, N_VOCAB);
    m->output_norm = weight(ctx, GGML_TYPE_F32, N_EMBD, 1);
    m->output = weight(ctx, q, N_EMBD, N_VOCAB);
    for (int l = 0; l < N_LAYER; l++) {
        struct layer * lw = &m->layers[l];
        lw->attn_norm = weight(ctx, GGML_TYPE_F32, N_EMBD, 1);
        lw->wq = weight(ctx, q, N_EMBD, HEAD_DIM * N_HEAD);
        lw->wk = weight(ctx, q, N_EMBD, kv_width);
        lw->wv = weight(ctx, q, N_EMBD, kv_width);
        lw->wo = weight(ctx, q, HEAD_DIM * N_HEAD, N_EMBD);
        lw->ffn_norm = weight(ctx, GGML_TYPE_F32, N_EMBD, 1);
        lw->up = weight(ctx, q, N_EMBD, N_FF);
        lw->gate = weight(ctx, q, N_EMBD, N_FF);
        lw->down = weight(ctx, q, N_FF, N_EMBD);
    }
}

static void make_cache(struct ggml_context * ctx, struct model * m) {
    for (int l = 0; l < N_LAYER; l++) {
        m->layers[l].k = weight(ctx, GGML_TYPE_F16, HEAD_DIM * N_HEAD_KV, N_CTX);
        m->layers[l].v = weight(ctx, GGML_TYPE_F16, HEAD_DIM * N_HEAD_KV, N_CTX);
    }
}

// ---- timing ----------------------------------------------------------------------

static double now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec * 1e9 + (double) ts.tv_nsec;
}

// Every node's sources as built: ggml's split pass points sources at its
// input copies for good (llama.cpp builds a new graph for every batch).
static struct ggml_tensor * built_srcs[4096][GGML_MAX_SRC];

static void save_sources(struct ggml_cgraph * graph) {
    for (int i = 0; i < ggml_graph_n_nodes(graph); i++) {
        memcpy(built_srcs[i], ggml_graph_node(graph, i)->src, sizeof(built_srcs[i]));
    }
}

// Gives every node its sources as built back and takes the scheduler's
// memory away from every graph tensor not in `keep` (the weights' and
// cache's buffers): the graph is as freshly built.
static void as_built(struct ggml_cgraph * graph, ggml_backend_buffer_t * keep, int n_keep) {
    for (int i = 0; i < ggml_graph_n_nodes(graph); i++) {
        memcpy(ggml_graph_node(graph, i)->src, built_srcs[i], sizeof(built_srcs[i]));
    }
    for (int pass = 0; pass < 2; pass++) {
        int n = pass == 0 ? ggml_graph_n_nodes(graph) : graph->n_leafs;
        for (int i = 0; i < n; i++) {
            struct ggml_tensor * t = pass == 0 ? ggml_graph_node(graph, i) : graph->leafs[i];
            int kept = 0;
            for (int k = 0; k < n_keep; k++) {
                kept |= t->buffer == keep[k];
            }
            if (!kept) {
                t->buffer = NULL;
                t->data = NULL;
            }
        }
    }
}

static int compare_doubles(const void * a, const void * b) {
    double x = *(const double *) a, y = *(const double *) b;
    return (x > y) - (x < y);
}

int main(int argc, char ** argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 7;
    int iters = argc > 2 ? atoi(argv[2]) : 1000;

    struct ggml_init_params weights_params = {.mem_size = 1024 * ggml_tensor_overhead(), .no_alloc = true};
    struct ggml_context * ctx_w = ggml_init(weights_params);
    struct ggml_context * ctx_kv = ggml_init(weights_params);
    struct model m;
    make_model(ctx_w, &m);
    make_cache(ctx_kv, &m);
    ggml_backend_buffer_t weights = ggml_backend_alloc_ctx_tensors_from_buft(ctx_w, &test_buft);
    ggml_backend_buffer_set_usage(weights, GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
    ggml_backend_buffer_t cache = ggml_backend_alloc_ctx_tensors_from_buft(ctx_kv, &test_buft);
    ggml_backend_buffer_t keep[2] = {weights, cache};

    struct ggml_init_params graph_params = {
        .mem_size = 8192 * ggml_tensor_overhead() + ggml_graph_overhead_custom(4096, false),
        .no_alloc = true,
    };
    struct ggml_context * ctx_g = ggml_init(graph_params);
    struct ggml_cgraph * graph = build_graph(ctx_g, &m);
    int n_nodes = ggml_graph_n_nodes(graph);
    save_sources(graph);

    ggml_backend_t cpu = ggml_backend_cpu_init();
    ggml_backend_t backends[2] = {&test_backend, cpu};
    ggml_backend_sched_t sched = ggml_backend_sched_new(backends, NULL, 2, 4096, false, true);
    if (!ggml_backend_sched_reserve(sched, graph)) {
        fprintf(stderr, "reserve failed\n");
        return 1;
    }
    as_built(graph, keep, 2);
    ggml_backend_sched_reset(sched);
    if (!ggml_backend_sched_alloc_graph(sched, graph)) {
        fprintf(stderr, "alloc_graph failed\n");
        return 1;
    }
    printf("ggml %d nodes, %d leafs, %d splits\n", n_nodes, graph->n_leafs, ggml_backend_sched_get_n_splits(sched));

    double * per_round = calloc((size_t) rounds, sizeof(double));
    for (int r = 0; r < rounds; r++) {
        double total = 0;
        for (int i = 0; i < iters; i++) {
            as_built(graph, keep, 2);
            double t0 = now_ns();
            ggml_backend_sched_reset(sched);
            if (!ggml_backend_sched_alloc_graph(sched, graph)) {
                fprintf(stderr, "alloc_graph failed\n");
                return 1;
            }
            total += now_ns() - t0;
        }
        per_round[r] = total / iters;
    }
    qsort(per_round, (size_t) rounds, sizeof(double), compare_doubles);
    double best = per_round[0], median = per_round[rounds / 2];
    printf("ggml reset+alloc_graph from scratch: best %.1f us (%.1f ns/node), median %.1f us (%.1f ns/node), %d rounds x %d\n",
           best / 1e3, best / n_nodes, median / 1e3, median / n_nodes, rounds, iters);

    free(per_round);
    ggml_backend_sched_free(sched);
    ggml_backend_free(cpu);
    ggml_backend_buffer_free(weights);
    ggml_backend_buffer_free(cache);
    ggml_free(ctx_g);
    ggml_free(ctx_kv);
    ggml_free(ctx_w);
    return 0;
}
