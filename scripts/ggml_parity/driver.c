// Runs Gantry's conformance cases through ggml's CPU backend.
//
// `driver --ops` prints every op name this ggml knows, one a line: its ops
// (ggml_op_name), its unary ops (ggml_unary_op_name) and its gated linear
// units (ggml_glu_op_name), so that the Rust side picks the cases of the ops
// both engines have.
//
// `driver DIR [THREADS]` reads every DIR/*.case file that Gantry's
// `examples/ggml_parity.rs` wrote: the case's graph, every tensor in
// topological order (leafs, then nodes, views included) with its type, ne,
// nb, op (by ggml's name), op_params (in ggml's layout), sources, view
// source and byte offset, and the bytes of the leafs. It recreates that
// graph tensor by tensor (struct ggml_tensor is public: no builder
// re-derives shapes or strides, so ggml computes exactly the layouts Gantry
// did), computes it with ggml_graph_compute_with_ctx, and writes the output
// tensor's bytes (ggml_nbytes from its data pointer) to DIR/<case>.out.
//
// Each case runs in a child process: a GGML_ASSERT in a kernel (a layout or
// type ggml's CPU backend does not take) aborts that case alone. A case that
// fails leaves DIR/<case>.err with why (the assert's message included)
// instead; the driver goes on with the next case and exits non-zero if any
// failed.
//
// Build and run with run.sh beside this file.

#include "ggml.h"
#include "ggml-cpu.h"

#include <dirent.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

// ---- the case file ------------------------------------------------------------
//
// Little-endian, written by backends/conformance/src/ggml/case_file.rs:
//   "GGPARITY" u32 version (1)
//   str case name, u32 tensor count, u32 output index
//   per tensor: str type, str op, i64 ne[4], u64 nb[4], i32 op_params[16],
//               i32 src[8] (Gantry's MAX_SRC) (-1: none), i32 view_src (-1: none), u64 view_offs,
//               u64 data length, data bytes (leafs only)
// where str is a u32 length and that many bytes.

#define MAGIC "GGPARITY"
#define VERSION 1
#define N_SRC 8

typedef struct {
    const uint8_t * p;
    const uint8_t * end;
    int bad;
} reader;

static void take(reader * r, void * out, size_t n) {
    if (r->bad || (size_t) (r->end - r->p) < n) {
        r->bad = 1;
        memset(out, 0, n);
        return;
    }
    memcpy(out, r->p, n);
    r->p += n;
}

static uint32_t take_u32(reader * r) { uint32_t v; take(r, &v, sizeof v); return v; }
static uint64_t take_u64(reader * r) { uint64_t v; take(r, &v, sizeof v); return v; }
static int32_t take_i32(reader * r) { int32_t v; take(r, &v, sizeof v); return v; }
static int64_t take_i64(reader * r) { int64_t v; take(r, &v, sizeof v); return v; }

// A string of at most cap - 1 bytes, NUL-terminated.
static void take_str(reader * r, char * out, size_t cap) {
    uint32_t n = take_u32(r);
    if (n >= cap) {
        r->bad = 1;
        out[0] = 0;
        return;
    }
    take(r, out, n);
    out[n] = 0;
}

// ---- names to ggml's enums ------------------------------------------------------

static int type_by_name(const char * name) {
    for (int t = 0; t < GGML_TYPE_COUNT; t++) {
        const char * n = ggml_type_name((enum ggml_type) t);
        if (n && strcmp(n, name) == 0) {
            return t;
        }
    }
    return -1;
}

// An op name resolved as ggml resolves it: one of its ops, else a unary op
// (GGML_OP_UNARY, op_params[0] = the unary op), else a gated linear unit
// (GGML_OP_GLU, op_params[0] = the unit). Returns 0 when ggml has no such op.
static int op_by_name(const char * name, enum ggml_op * op, int32_t * param0, int * has_param0) {
    *has_param0 = 0;
    for (int o = 0; o < GGML_OP_COUNT; o++) {
        if (strcmp(ggml_op_name((enum ggml_op) o), name) == 0) {
            *op = (enum ggml_op) o;
            return 1;
        }
    }
    for (int u = 0; u < GGML_UNARY_OP_COUNT; u++) {
        if (strcmp(ggml_unary_op_name((enum ggml_unary_op) u), name) == 0) {
            *op = GGML_OP_UNARY;
            *param0 = u;
            *has_param0 = 1;
            return 1;
        }
    }
    for (int g = 0; g < GGML_GLU_OP_COUNT; g++) {
        if (strcmp(ggml_glu_op_name((enum ggml_glu_op) g), name) == 0) {
            *op = GGML_OP_GLU;
            *param0 = g;
            *has_param0 = 1;
            return 1;
        }
    }
    return 0;
}

static void print_ops(void) {
    for (int o = 0; o < GGML_OP_COUNT; o++) {
        printf("%s\n", ggml_op_name((enum ggml_op) o));
    }
    for (int u = 0; u < GGML_UNARY_OP_COUNT; u++) {
        printf("%s\n", ggml_unary_op_name((enum ggml_unary_op) u));
    }
    for (int g = 0; g < GGML_GLU_OP_COUNT; g++) {
        printf("%s\n", ggml_glu_op_name((enum ggml_glu_op) g));
    }
}

// ---- one case -----------------------------------------------------------------

static char err_path[4096];

// Writes why the case failed to its .err file and ends the child.
static void fail(const char * fmt, ...) {
    FILE * f = fopen(err_path, "w");
    va_list ap;
    va_start(ap, fmt);
    vfprintf(f ? f : stderr, fmt, ap);
    va_end(ap);
    if (f) {
        fputc('\n', f);
        fclose(f);
    }
    _exit(2);
}

static uint8_t * read_file(const char * path, size_t * len) {
    FILE * f = fopen(path, "rb");
    if (!f) {
        return NULL;
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t * buf = malloc(n > 0 ? (size_t) n : 1);
    if (buf && fread(buf, 1, (size_t) n, f) != (size_t) n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    *len = (size_t) n;
    return buf;
}

// Runs in the child: builds, computes and writes the output of one case.
static void run_case(const char * case_path, const char * out_path, int n_threads) {
    size_t len = 0;
    uint8_t * buf = read_file(case_path, &len);
    if (!buf) {
        fail("cannot read %s", case_path);
    }
    reader r = { buf, buf + len, 0 };
    char magic[8];
    take(&r, magic, sizeof magic);
    if (memcmp(magic, MAGIC, sizeof magic) != 0 || take_u32(&r) != VERSION) {
        fail("%s is not a version %d case file", case_path, VERSION);
    }
    char case_name[1024];
    take_str(&r, case_name, sizeof case_name);
    uint32_t n_tensors = take_u32(&r);
    uint32_t output = take_u32(&r);
    if (r.bad || n_tensors == 0 || output >= n_tensors) {
        fail("%s: bad header", case_path);
    }

    // Every tensor gets its own memory (views too, unused), so the context
    // needs at most the file's size for data plus ggml's headroom; the
    // remainder is the work buffer of ggml_graph_compute_with_ctx.
    struct ggml_init_params params = {
        .mem_size = len * 2 + n_tensors * (ggml_tensor_overhead() + 64) + ggml_graph_overhead() + ((size_t) 256 << 20),
        .mem_buffer = NULL,
        .no_alloc = false,
    };
    struct ggml_context * ctx = ggml_init(params);
    struct ggml_tensor ** tensors = calloc(n_tensors, sizeof *tensors);
    for (uint32_t i = 0; i < n_tensors; i++) {
        char type_name[32], op_name[64];
        take_str(&r, type_name, sizeof type_name);
        take_str(&r, op_name, sizeof op_name);
        int64_t ne[4];
        uint64_t nb[4];
        int32_t op_params[16];
        int32_t src[N_SRC];
        for (int d = 0; d < 4; d++) ne[d] = take_i64(&r);
        for (int d = 0; d < 4; d++) nb[d] = take_u64(&r);
        for (int k = 0; k < 16; k++) op_params[k] = take_i32(&r);
        for (int k = 0; k < N_SRC; k++) src[k] = take_i32(&r);
        int32_t view_src = take_i32(&r);
        uint64_t view_offs = take_u64(&r);
        uint64_t data_len = take_u64(&r);
        const uint8_t * data = r.p;
        if (r.bad || (uint64_t) (r.end - r.p) < data_len) {
            fail("%s: tensor %u is cut short", case_name, i);
        }
        r.p += data_len;

        int type = type_by_name(type_name);
        if (type < 0) {
            fail("%s: ggml has no type %s (tensor %u)", case_name, type_name, i);
        }
        enum ggml_op op = GGML_OP_NONE;
        int32_t param0 = 0;
        int has_param0 = 0;
        if (!op_by_name(op_name, &op, &param0, &has_param0)) {
            fail("%s: ggml has no op %s (tensor %u)", case_name, op_name, i);
        }
        struct ggml_tensor * t = ggml_new_tensor(ctx, (enum ggml_type) type, 4, ne);
        if (view_src >= 0) {
            if ((uint32_t) view_src >= i) {
                fail("%s: tensor %u views tensor %d, not an earlier one", case_name, i, view_src);
            }
            struct ggml_tensor * base = tensors[view_src];
            t->view_src = base;
            t->view_offs = (size_t) view_offs;
            t->data = (char *) base->data + view_offs;
        }
        for (int d = 0; d < 4; d++) {
            t->nb[d] = (size_t) nb[d];
        }
        if (view_src >= 0 && view_offs + ggml_nbytes(t) > ggml_nbytes(t->view_src)) {
            fail("%s: tensor %u reaches past its view source", case_name, i);
        }
        if (data_len > 0) {
            if (view_src >= 0 || data_len != ggml_nbytes(t)) {
                fail("%s: tensor %u has %llu bytes of data, needs %zu", case_name, i,
                     (unsigned long long) data_len, ggml_nbytes(t));
            }
            memcpy(t->data, data, data_len);
        }
        t->op = op;
        memcpy(t->op_params, op_params, sizeof op_params);
        if (has_param0) {
            t->op_params[0] = param0;
        }
        for (int k = 0; k < N_SRC; k++) {
            if (src[k] >= 0) {
                if ((uint32_t) src[k] >= i) {
                    fail("%s: tensor %u reads tensor %d, not an earlier one", case_name, i, src[k]);
                }
                t->src[k] = tensors[src[k]];
            }
        }
        snprintf(t->name, sizeof t->name, "t%u", i);
        tensors[i] = t;
    }
    if (r.p != r.end) {
        fail("%s: %zu bytes after the last tensor", case_name, (size_t) (r.end - r.p));
    }

    struct ggml_cgraph * gf = ggml_new_graph_custom(ctx, n_tensors + 16, false);
    ggml_build_forward_expand(gf, tensors[output]);
    enum ggml_status status = ggml_graph_compute_with_ctx(ctx, gf, n_threads);
    if (status != GGML_STATUS_SUCCESS) {
        fail("%s: ggml_graph_compute_with_ctx: %s", case_name, ggml_status_to_string(status));
    }
    FILE * f = fopen(out_path, "wb");
    struct ggml_tensor * out = tensors[output];
    if (!f || fwrite(out->data, 1, ggml_nbytes(out), f) != ggml_nbytes(out) || fclose(f) != 0) {
        fail("%s: cannot write %s", case_name, out_path);
    }
    ggml_free(ctx);
    free(tensors);
    free(buf);
}

static int has_suffix(const char * s, const char * suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

// The last line of a file (a failed child's .err or captured stderr), or "".
static void last_line(const char * path, char * out, size_t cap) {
    out[0] = 0;
    FILE * f = fopen(path, "r");
    if (!f) {
        return;
    }
    char line[1024];
    while (fgets(line, sizeof line, f)) {
        size_t n = strlen(line);
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = 0;
        if (n > 0) {
            snprintf(out, cap, "%s", line);
        }
    }
    fclose(f);
}

int main(int argc, char ** argv) {
    if (argc >= 2 && strcmp(argv[1], "--ops") == 0) {
        print_ops();
        return 0;
    }
    if (argc < 2) {
        fprintf(stderr, "usage: %s --ops | %s DIR [THREADS]\n", argv[0], argv[0]);
        return 2;
    }
    const char * dir = argv[1];
    int n_threads = argc >= 3 ? atoi(argv[2]) : 2;
    if (n_threads < 1) n_threads = 1;
    // A failed assert's message is the last thing a case prints, not a
    // debugger's backtrace after it.
    setenv("GGML_NO_BACKTRACE", "1", 1);
    ggml_cpu_init();

    DIR * d = opendir(dir);
    if (!d) {
        fprintf(stderr, "cannot open %s\n", dir);
        return 2;
    }
    int ran = 0, failed = 0;
    struct dirent * e;
    while ((e = readdir(d)) != NULL) {
        if (!has_suffix(e->d_name, ".case")) {
            continue;
        }
        size_t stem = strlen(e->d_name) - strlen(".case");
        char case_path[4096], out_path[4096], log_path[4096];
        snprintf(case_path, sizeof case_path, "%s/%s", dir, e->d_name);
        snprintf(out_path, sizeof out_path, "%s/%.*s.out", dir, (int) stem, e->d_name);
        snprintf(err_path, sizeof err_path, "%s/%.*s.err", dir, (int) stem, e->d_name);
        snprintf(log_path, sizeof log_path, "%s/%.*s.log", dir, (int) stem, e->d_name);
        remove(out_path);
        remove(err_path);
        fflush(stdout);
        fflush(stderr);
        pid_t pid = fork();
        if (pid < 0) {
            perror("fork");
            return 2;
        }
        if (pid == 0) {
            // ggml reports a failed assert on stderr before it aborts.
            if (!freopen(log_path, "w", stderr)) {
                _exit(3);
            }
            // Unbuffered: abort() flushes nothing.
            setvbuf(stderr, NULL, _IONBF, 0);
            run_case(case_path, out_path, n_threads);
            _exit(0);
        }
        int status = 0;
        waitpid(pid, &status, 0);
        ran++;
        int ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
        if (!ok) {
            failed++;
            FILE * f = fopen(err_path, "r");
            if (f) {
                fclose(f);
            } else {
                // Killed (an assert, a fault): what it printed says why.
                char line[1024];
                last_line(log_path, line, sizeof line);
                f = fopen(err_path, "w");
                if (f) {
                    if (WIFSIGNALED(status)) {
                        fprintf(f, "ggml stopped with signal %d: %s\n", WTERMSIG(status), line);
                    } else {
                        fprintf(f, "ggml exited with %d: %s\n", WEXITSTATUS(status), line);
                    }
                    fclose(f);
                }
            }
        }
        remove(log_path);
    }
    closedir(d);
    printf("ggml %s (commit %s): %d cases run, %d stopped or failed (see their .err)\n", ggml_version(), ggml_commit(), ran, failed);
    return failed == 0 ? 0 : 1;
}
