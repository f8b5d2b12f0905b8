/* Loads SmolLM2 through Gantry's C API, tokenizes "The capital of France
 * is", generates 10 tokens greedily (printing each as it comes) and checks
 * the continuation starts with " Paris". Exits 0 only when it does.
 *
 *   generate MODEL.gguf [BACKENDS]
 */
#include <stdio.h>
#include <string.h>

#include "gantry.h"

#define CHECK(call)                                                              \
    do {                                                                         \
        GantryStatus s_ = (call);                                                \
        if (s_ != GANTRY_OK) {                                                   \
            fprintf(stderr, "%s:%d: %s -> %s: %s\n", __FILE__, __LINE__, #call, \
                    gantry_status_name(s_), gantry_last_error());                \
            return 1;                                                            \
        }                                                                        \
    } while (0)

struct text {
    char bytes[1024];
    size_t len;
};

static bool on_token(uint32_t token, const char *piece, size_t len, void *user_data) {
    struct text *text = user_data;
    if (text->len + len < sizeof text->bytes) {
        memcpy(text->bytes + text->len, piece, len);
        text->len += len;
    }
    printf("token %u: \"%.*s\"\n", token, (int)len, piece);
    fflush(stdout);
    return true;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s MODEL.gguf [BACKENDS]\n", argv[0]);
        return 2;
    }
    GantryModelParams params = {0};
    params.n_ctx = 256;
    params.kv_f32 = true;
    params.backends = argc > 2 ? argv[2] : NULL;
    GantryModel model;
    CHECK(gantry_model_load(argv[1], &params, &model));
    size_t n_vocab = 0;
    CHECK(gantry_model_n_vocab(model, &n_vocab));

    const char *prompt = "The capital of France is";
    uint32_t tokens[64];
    size_t n_tokens = 0;
    CHECK(gantry_model_tokenize(model, prompt, false, tokens, 64, &n_tokens));
    printf("vocab %zu; prompt \"%s\": %zu tokens:", n_vocab, prompt, n_tokens);
    for (size_t i = 0; i < n_tokens; i++) printf(" %u", tokens[i]);
    printf("\n");

    struct text text = {.len = 0};
    size_t n_generated = 0;
    CHECK(gantry_model_generate(model, tokens, n_tokens, 10, 0.0f, 0, on_token, &text, &n_generated));
    printf("continuation: \"%.*s\"\n", (int)text.len, text.bytes);

    /* Misuse after the real work: a wrong token, an empty prompt, a freed model. */
    uint32_t bad = (uint32_t)n_vocab;
    if (gantry_model_generate(model, &bad, 1, 1, 0.0f, 0, NULL, NULL, NULL) != GANTRY_ERROR_INVALID_ARGUMENT) {
        fprintf(stderr, "a token outside the vocabulary was accepted\n");
        return 1;
    }
    if (gantry_model_generate(model, tokens, 0, 1, 0.0f, 0, NULL, NULL, NULL) != GANTRY_ERROR_INVALID_ARGUMENT) {
        fprintf(stderr, "an empty prompt was accepted\n");
        return 1;
    }
    CHECK(gantry_model_free(model));
    if (gantry_model_generate(model, tokens, n_tokens, 1, 0.0f, 0, NULL, NULL, NULL) != GANTRY_ERROR_INVALID_HANDLE) {
        fprintf(stderr, "a freed model was accepted\n");
        return 1;
    }
    printf("misuse ok: %s\n", gantry_last_error());

    if (n_generated != 10 || text.len < 6 || strncmp(text.bytes, " Paris", 6) != 0) {
        fprintf(stderr, "FAIL: %zu tokens, continuation does not start with \" Paris\"\n", n_generated);
        return 1;
    }
    printf("generate.c: the continuation starts with \" Paris\"\n");
    return 0;
}
