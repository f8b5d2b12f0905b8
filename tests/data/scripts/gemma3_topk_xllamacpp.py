"""usage: gemma3_topk_xllamacpp.py MODEL.gguf PROMPTS_JSON OUT.json
llama.cpp (the prebuilt `xllamacpp` wheel: `pip install xllamacpp`) continues each prompt greedily for
16 tokens and records, at every step, the chosen token and the 20 most likely tokens with their raw
log-probabilities: the format of tests/data/gemma3_270m_topk.json. Works for any GGUF llama.cpp runs."""
import sys, json
import xllamacpp as xlc

path, prompts, out = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
p = xlc.CommonParams()
p.model.path = path
p.n_ctx = 512
p.n_predict = 16
p.cpuparams.n_threads = 2
p.cpuparams_batch.n_threads = 2
srv = xlc.Server(p)
cases = []
for prompt in prompts:
    r = srv.handle_completions({"prompt": prompt, "max_tokens": 16, "temperature": 0.0,
                                "n_probs": 20, "post_sampling_probs": False})
    choice = r["choices"][0]
    steps = [{"id": s["id"], "token": s["token"], "logprob": s["logprob"],
              "top": [[t["id"], t["token"], t["logprob"]] for t in s["top_logprobs"]]}
             for s in choice["logprobs"]["content"]]
    cases.append({"prompt": prompt, "add_bos": True, "prompt_tokens": r["usage"]["prompt_tokens"],
                  "greedy_text": choice["text"], "steps": steps})
json.dump({"engine": f"llama.cpp through xllamacpp {getattr(xlc, '__version__', '?')}, CPU, 2 threads, n_ctx 512",
           "cases": cases}, open(out, "w"), indent=1, ensure_ascii=False)
print("wrote", len(cases), "cases to", out)
