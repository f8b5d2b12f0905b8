#!/usr/bin/env python3
"""Drives `gantry serve` with the `openai` Python package (and raw HTTP for
requests that client cannot send), printing one JSON object of what came
back; cli/tests/cli/serve_cli.rs checks it against `gantry run` and
`gantry embed`.

usage: openai_client.py BASE_URL MODEL CHECK [ARGS...]
checks:
  chat PROMPT MAX_TOKENS          one greedy chat, whole and streamed
  stream PROMPT MAX_TOKENS        one greedy streamed chat
  json                            replies constrained to a JSON schema (chat, stream, completion)
  tools                           tool calls (required, auto, named, streamed) and a second turn
  concurrent N MAX_TOKENS         N seeded streams at once, then each alone
  disconnect                      a stream dropped after two chunks; the slot afterwards
  errors SEQ_CTX                  the bad requests and their statuses
  busy                            requests past --parallel 1 --queue 1; a key check
  embed TEXT...                   embeddings, as floats and base64
"""

import http.client
import json
import sys
import threading
import time
import urllib.parse

import openai

BASE, MODEL, CHECK = sys.argv[1], sys.argv[2], sys.argv[3]
ARGS = sys.argv[4:]
client = openai.OpenAI(base_url=BASE + "/v1", api_key="none", max_retries=0, timeout=120)


def chat_messages(text):
    return [{"role": "user", "content": text}]


def streamed_chat(prompt, max_tokens, **kw):
    text, finish, usage, chunks = "", None, None, 0
    stream = client.chat.completions.create(
        model=MODEL, messages=chat_messages(prompt), max_tokens=max_tokens, stream=True,
        stream_options={"include_usage": True}, **kw)
    for chunk in stream:
        chunks += 1
        if chunk.usage is not None:
            usage = chunk.usage.model_dump()
        for c in chunk.choices:
            text += c.delta.content or ""
            finish = c.finish_reason or finish
    return {"text": text, "finish": finish, "usage": usage, "chunks": chunks}


def raw(method, path, body=None, headers=None):
    u = urllib.parse.urlparse(BASE)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
    conn.request(method, path, body=body, headers=headers or {})
    r = conn.getresponse()
    data = r.read().decode("utf-8", "replace")
    out = {"status": r.status, "retry_after": r.getheader("Retry-After"), "body": data}
    conn.close()
    return out


def metric(name):
    for line in raw("GET", "/metrics")["body"].splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return None


def status_of(fn):
    try:
        fn()
        return {"status": 200}
    except openai.APIStatusError as e:
        return {"status": e.status_code, "body": e.response.text}


def check_chat():
    prompt, n = ARGS[0], int(ARGS[1])
    whole = client.chat.completions.create(model=MODEL, messages=chat_messages(prompt), max_tokens=n, temperature=0)
    streamed = streamed_chat(prompt, n, temperature=0)
    return {
        "whole": whole.choices[0].message.content,
        "whole_finish": whole.choices[0].finish_reason,
        "whole_usage": whole.usage.model_dump(),
        "stream": streamed,
    }


def check_stream():
    return streamed_chat(ARGS[0], int(ARGS[1]), temperature=0)


PERSON = {"type": "object", "additionalProperties": False, "required": ["name", "age"],
          "properties": {"name": {"type": "string", "maxLength": 24},
                         "age": {"type": "integer", "minimum": 0, "maximum": 150}}}


def check_json():
    fmt = {"type": "json_schema", "json_schema": {"name": "person", "schema": PERSON, "strict": True}}
    replies = []
    for temperature, seed in [(0, 1), (0.9, 2), (0.9, 3), (1.2, 4)]:
        r = client.chat.completions.create(
            model=MODEL, messages=chat_messages("Describe a person as JSON with a name and an age."),
            max_tokens=120, temperature=temperature, seed=seed, response_format=fmt)
        replies.append({"text": r.choices[0].message.content, "finish": r.choices[0].finish_reason})
    streamed = streamed_chat("Invent a character.", 120, temperature=0.9, seed=7, response_format=fmt)
    replies.append({"text": streamed["text"], "finish": streamed["finish"]})
    completion = client.completions.create(model=MODEL, prompt="A person, as JSON:", max_tokens=120, temperature=0.9,
                                           seed=5, extra_body={"response_format": fmt})
    replies.append({"text": completion.choices[0].text, "finish": completion.choices[0].finish_reason})
    bad = status_of(lambda: client.chat.completions.create(
        model=MODEL, messages=chat_messages("x"),
        response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": {"$ref": "#/nowhere"}}}))
    return {"schema": PERSON, "replies": replies, "bad_schema": bad}


WEATHER = [{"type": "function", "function": {
    "name": "get_weather", "description": "The current weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 40}},
                   "required": ["city"], "additionalProperties": False}}}]


def check_tools():
    msgs = chat_messages("What is the weather in Paris?")
    out = {}
    for choice in ["required", "auto", {"type": "function", "function": {"name": "get_weather"}}]:
        r = client.chat.completions.create(model=MODEL, messages=msgs, tools=WEATHER, tool_choice=choice,
                                           max_tokens=80, temperature=0)
        m = r.choices[0].message
        out[json.dumps(choice)] = {
            "finish": r.choices[0].finish_reason, "content": m.content,
            "calls": [{"id": c.id, "name": c.function.name, "arguments": c.function.arguments}
                      for c in (m.tool_calls or [])]}
    calls, finish = [], None
    for chunk in client.chat.completions.create(model=MODEL, messages=msgs, tools=WEATHER, tool_choice="required",
                                                max_tokens=80, temperature=0, stream=True):
        for c in chunk.choices:
            finish = c.finish_reason or finish
            for tc in c.delta.tool_calls or []:
                calls.append({"name": tc.function.name, "arguments": tc.function.arguments})
    out["stream"] = {"finish": finish, "calls": calls}
    # The second turn: the call and its result go back to the model.
    first = out['"required"']["calls"][0]
    follow = msgs + [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": first["id"], "type": "function", "function": {"name": first["name"], "arguments": first["arguments"]}}]},
        {"role": "tool", "tool_call_id": first["id"], "content": "{\"temperature_c\": 18, \"sky\": \"clear\"}"}]
    r = client.chat.completions.create(model=MODEL, messages=follow, tools=WEATHER, tool_choice="none", max_tokens=24,
                                       temperature=0)
    out["second_turn"] = {"finish": r.choices[0].finish_reason, "content": r.choices[0].message.content}
    out["with_format"] = status_of(lambda: client.chat.completions.create(
        model=MODEL, messages=msgs, tools=WEATHER, response_format={"type": "json_object"}))
    out["unknown_tool"] = status_of(lambda: client.chat.completions.create(
        model=MODEL, messages=msgs, tools=WEATHER, tool_choice={"type": "function", "function": {"name": "nope"}}))
    return out


def check_concurrent():
    n, max_tokens = int(ARGS[0]), int(ARGS[1])
    prompts = [f"Tell me about the number {i}." if i % 2 else f"Write a short line about colour {i}." for i in range(n)]
    together = [None] * n

    def one(i):
        together[i] = streamed_chat(prompts[i], max_tokens, temperature=0.8, seed=1000 + i, top_p=0.95)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    t0 = time.time()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.time() - t0
    alone = [streamed_chat(prompts[i], max_tokens, temperature=0.8, seed=1000 + i, top_p=0.95) for i in range(n)]
    return {"together": [t["text"] for t in together], "alone": [a["text"] for a in alone], "wall_s": wall,
            "max_slots_busy_after": metric("gantry_slots_busy")}


def check_disconnect():
    cancelled_before = metric("gantry_requests_cancelled_total") or 0
    stream = client.chat.completions.create(model=MODEL, messages=chat_messages("Count from one to a thousand."),
                                            max_tokens=2000, stream=True, temperature=0)
    seen = 0
    for _ in stream:
        seen += 1
        if seen == 2:
            break
    busy_during = metric("gantry_slots_busy")
    stream.close()
    deadline = time.time() + 10
    while time.time() < deadline:
        if metric("gantry_slots_busy") == 0 and (metric("gantry_requests_cancelled_total") or 0) > cancelled_before:
            break
        time.sleep(0.05)
    return {"busy_during": busy_during, "busy_after": metric("gantry_slots_busy"),
            "cancelled": (metric("gantry_requests_cancelled_total") or 0) - cancelled_before,
            "seconds": 10 - max(0.0, deadline - time.time())}


def check_errors():
    seq_ctx = int(ARGS[0])
    msgs = chat_messages("hi")
    out = {
        "bad_json": raw("POST", "/v1/chat/completions", b"{not json", {"Content-Type": "application/json"}),
        "missing_messages": raw("POST", "/v1/chat/completions", json.dumps({"model": MODEL}).encode()),
        "bad_temperature": status_of(lambda: client.chat.completions.create(model=MODEL, messages=msgs, temperature=5)),
        "bad_max_tokens": status_of(lambda: client.chat.completions.create(model=MODEL, messages=msgs, max_tokens=0)),
        "unknown_model": status_of(lambda: client.chat.completions.create(model="gpt-nothing", messages=msgs)),
        "too_long": status_of(lambda: client.completions.create(model=MODEL, prompt=[1] * (seq_ctx + 10), max_tokens=4)),
        "bad_token": status_of(lambda: client.completions.create(model=MODEL, prompt=[10**9], max_tokens=4)),
        "no_route": raw("GET", "/v1/nothing"),
        "wrong_method": raw("GET", "/v1/chat/completions"),
        "too_large": raw("POST", "/v1/completions", b"{" + b" " * (5 << 20) + b"}"),
        "no_embedder": status_of(lambda: client.embeddings.create(model=MODEL, input="x")),
        "completion_ok": status_of(lambda: client.completions.create(model=MODEL, prompt="Hello", max_tokens=2)),
    }
    for v in out.values():
        v.pop("retry_after", None) if v.get("retry_after") is None else None
    return out


def check_busy():
    # --parallel 1 --queue 1: one runs, one waits, the rest are refused with 503 + Retry-After.
    results = [None] * 6
    key = ARGS[0]
    keyed = openai.OpenAI(base_url=BASE + "/v1", api_key=key, max_retries=0, timeout=120)

    def one(i):
        try:
            keyed.completions.create(model=MODEL, prompt="Once upon a time", max_tokens=64, temperature=0)
            results[i] = {"status": 200}
        except openai.APIStatusError as e:
            results[i] = {"status": e.status_code, "retry_after": e.response.headers.get("retry-after"),
                          "body": e.response.text}

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(results))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    unauthorized = status_of(lambda: client.completions.create(model=MODEL, prompt="x", max_tokens=1))
    health = raw("GET", "/health")
    # The scheme's name is case-insensitive.
    lower_scheme = raw("GET", "/v1/models", headers={"Authorization": "bearer " + key})["status"]
    return {"results": results, "unauthorized": unauthorized, "health_without_key": health["status"],
            "lower_scheme": lower_scheme, "stalled": stalled_clients(key)}


def stalled_clients(key):
    """With --header-timeout 1: half a header is cut off, half a body gets 408; an idle kept-alive connection closes."""
    import socket
    u = urllib.parse.urlparse(BASE)
    out = {}

    def closed_within(sock, seconds):
        sock.settimeout(seconds)
        t0 = time.time()
        try:
            data = sock.recv(4096)
        except socket.timeout:
            return {"closed": False, "seconds": seconds, "reply": ""}
        return {"closed": True, "seconds": time.time() - t0, "reply": data.decode("utf-8", "replace")[:40]}

    s = socket.create_connection((u.hostname, u.port))
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n")
    out["half_header"] = closed_within(s, 5)
    s.close()
    s = socket.create_connection((u.hostname, u.port))
    s.sendall(f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {key}\r\n"
              "Content-Length: 100\r\n\r\n{\"prompt\":".encode())
    out["half_body"] = closed_within(s, 5)
    s.close()
    s = socket.create_connection((u.hostname, u.port))
    s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
    time.sleep(0.3)
    s.recv(4096)
    out["idle_keepalive"] = closed_within(s, 5)
    s.close()
    return out


def check_embed():
    floats = client.embeddings.create(model=MODEL, input=ARGS, encoding_format="float")
    b64 = client.embeddings.create(model=MODEL, input=ARGS)  # the client's default: base64, decoded by it
    return {"float": [d.embedding for d in floats.data], "base64": [d.embedding for d in b64.data],
            "usage": floats.usage.model_dump()}


print(json.dumps({"chat": check_chat, "stream": check_stream, "json": check_json, "tools": check_tools, "concurrent": check_concurrent, "disconnect": check_disconnect,
                  "errors": check_errors, "busy": check_busy, "embed": check_embed}[CHECK]()))
