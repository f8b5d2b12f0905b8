//! Tool calls for any model, llama.cpp's "generic" way: the tools are
//! described in a system message, and the reply is constrained (through
//! `llguidance`) to a JSON object that either calls one of them —
//! `{"tool_call": {"name": ..., "arguments": {...}}}`, the arguments valid
//! under the tool's parameter schema — or, with `tool_choice: "auto"`,
//! answers in words: `{"response": "..."}`. The route turns that object
//! back into OpenAI's `tool_calls` or `content`.

use gantry::model::chat_template::ChatMessage;
use serde_json::{Value, json};

use crate::error::ApiError;

/// Most tools one request may offer.
pub const MAX_TOOLS: usize = 128;

/// A function the model may call.
#[derive(Debug, Clone, PartialEq)]
pub struct Tool {
    /// Its name.
    pub name: String,
    /// What it does, for the model.
    pub description: String,
    /// The JSON schema of its arguments.
    pub parameters: Value,
}

/// Whether and which tool the reply must call (`tool_choice`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolChoice {
    /// A call or a reply in words (the default).
    Auto,
    /// A call of some tool.
    Required,
    /// A call of this tool.
    Named(String),
}

/// The tools of a request and how they may be used.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolUse {
    /// The tools offered.
    pub tools: Vec<Tool>,
    /// The rule.
    pub choice: ToolChoice,
}

/// Reads `tools` and `tool_choice`; `None` when no tool may be called
/// (none given, or `tool_choice: "none"`).
pub fn parse(tools: Option<&Value>, choice: Option<&Value>) -> Result<Option<ToolUse>, ApiError> {
    let bad = |m: String| ApiError::bad_request(m);
    // `None`: "none", no call.
    let choice = match choice {
        None | Some(Value::Null) => Some(ToolChoice::Auto),
        Some(Value::String(s)) => match s.as_str() {
            "none" => None,
            "auto" => Some(ToolChoice::Auto),
            "required" => Some(ToolChoice::Required),
            other => return Err(bad(format!("`tool_choice` {other:?}: none, auto, required or a function"))),
        },
        Some(v) => {
            let name = v.get("function").and_then(|f| f.get("name")).and_then(Value::as_str).ok_or_else(|| {
                bad("`tool_choice` must be a string or {\"type\": \"function\", \"function\": {\"name\": ...}}".into())
            })?;
            Some(ToolChoice::Named(name.to_owned()))
        }
    };
    let list = match tools {
        None | Some(Value::Null) => &Vec::new(),
        Some(Value::Array(list)) => list,
        Some(_) => return Err(bad("`tools` must be a list".into())),
    };
    if list.len() > MAX_TOOLS {
        return Err(bad(format!("`tools` has {} tools; at most {MAX_TOOLS}", list.len())));
    }
    let mut parsed = Vec::with_capacity(list.len());
    for (i, t) in list.iter().enumerate() {
        if t.get("type").and_then(Value::as_str) != Some("function") {
            return Err(bad(format!("`tools[{i}].type` must be \"function\"")));
        }
        let f = t.get("function").ok_or_else(|| bad(format!("`tools[{i}].function` is missing")))?;
        let name = f
            .get("name")
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
            .ok_or_else(|| bad(format!("`tools[{i}].function.name` is missing")))?;
        // A call names its tool: two of one name would leave it unclear which schema a call followed.
        if let Some(first) = parsed.iter().position(|t: &Tool| t.name == name) {
            return Err(bad(format!("`tools[{i}].function.name` {name:?} is the name of `tools[{first}]` too")));
        }
        let parameters = match f.get("parameters") {
            None | Some(Value::Null) => json!({"type": "object"}),
            Some(p) if p.is_object() => p.clone(),
            Some(_) => return Err(bad(format!("`tools[{i}].function.parameters` must be a JSON schema object"))),
        };
        parsed.push(Tool {
            name: name.to_owned(),
            description: f.get("description").and_then(Value::as_str).unwrap_or_default().to_owned(),
            parameters,
        });
    }
    match choice {
        None => Ok(None),
        Some(ToolChoice::Auto) if parsed.is_empty() => Ok(None),
        // A call is demanded: there must be something to call.
        Some(ToolChoice::Required) if parsed.is_empty() => {
            Err(bad("`tool_choice` \"required\" needs `tools` to choose from; none were given".into()))
        }
        Some(ToolChoice::Named(name)) if !parsed.iter().any(|t| t.name == name) => {
            Err(bad(format!("`tool_choice` names {name:?}, which is not among `tools`")))
        }
        Some(choice) => Ok(Some(ToolUse { tools: parsed, choice })),
    }
}

/// `schema` with every `$ref` that points into its own document (`#`,
/// `#/…`) pointing at the same place once the document sits at `at` (a
/// JSON pointer) inside another, without its root `$id` (see
/// [`own_fragment`] for the spellings of "its own document"), and with its
/// anchors' names prefixed by the tool's. Walked without recursion: a schema nests
/// up to the JSON parser's depth.
fn rebase_refs(schema: &Value, at: &str) -> Value {
    let mut out = schema.clone();
    // The tool's own `$id` means nothing inside the wrapper, and a value
    // such as `""` would resolve to the wrapper's address and replace it:
    // dropped, its `#` pointers are rebased as any tool's, and so are
    // references through it.
    let own_id = match &mut out {
        Value::Object(map) => map.remove("$id").and_then(|id| id.as_str().map(str::to_owned)),
        _ => None,
    };
    // Anchors name schemas document-wide: each tool's get its name as a
    // prefix, so that one tool's `#A` cannot find another tool's anchor.
    let prefix = format!("{}_", at.rsplit('/').next().unwrap_or(at));
    let Ok(()) = gantry::model::grammar::for_each_schema_object(&mut out, &mut |map| {
        for key in ["$anchor", "$dynamicAnchor"] {
            if let Some(Value::String(name)) = map.get_mut(key) {
                name.insert_str(0, &prefix);
            }
        }
        if let Some(Value::String(r)) = map.get_mut("$ref")
            && let Some((pointer, kind)) = own_fragment(r, own_id.as_deref())
        {
            *r = match kind {
                Fragment::Pointer => format!("#{at}{pointer}"),
                Fragment::Anchor => format!("#{prefix}{pointer}"),
            };
        }
        Ok::<(), std::convert::Infallible>(())
    });
    out
}

/// What a `#` fragment of a reference names.
#[derive(Debug, PartialEq)]
enum Fragment {
    /// A JSON pointer (`""` for the whole document).
    Pointer,
    /// An anchor's name.
    Anchor,
}

/// The fragment of a `$ref` that names the tool's own document, and its
/// kind: a `#` after nothing, after a relative path that resolves to the
/// document (`.`, `/`, `a/..`, percent-encoded or not), after
/// `json-schema:///` (the address llguidance gives a document without an
/// `$id`, in any case), or after the tool's own `$id`; `None` for a
/// reference to another document.
fn own_fragment<'r>(reference: &'r str, own_id: Option<&str>) -> Option<(&'r str, Fragment)> {
    let (base, fragment) = reference.split_once('#').unwrap_or((reference, ""));
    let kind = if fragment.is_empty() || fragment.starts_with('/') { Fragment::Pointer } else { Fragment::Anchor };
    let decoded = percent_encoding::percent_decode_str(base).decode_utf8_lossy().to_ascii_lowercase();
    let path = decoded.strip_prefix("json-schema:").unwrap_or(&decoded);
    // RFC 3986's dot segments: the path resolves to the document's own when nothing is left.
    let mut segments = Vec::new();
    for segment in path.split('/') {
        match segment {
            "" | "." => {}
            ".." => {
                segments.pop();
            }
            s => segments.push(s),
        }
    }
    let own = segments.is_empty() || own_id.is_some_and(|id| id.trim_end_matches('#') == base);
    own.then_some((fragment, kind))
}

impl ToolUse {
    /// The schema the reply must follow.
    ///
    /// Each tool's parameter schema is put under the wrapper's `$defs`
    /// (`gantry_tool_N`) with its `#/…` pointers rebased there, so that a
    /// schema with local `$defs` and `$ref`s (as pydantic and most SDKs write
    /// them) resolves within itself, not against the wrapper.
    pub fn schema(&self) -> Value {
        let mut defs = serde_json::Map::new();
        let calls: Vec<Value> = self
            .tools
            .iter()
            .filter(|t| match &self.choice {
                ToolChoice::Named(n) => &t.name == n,
                _ => true,
            })
            .enumerate()
            .map(|(i, t)| {
                let name = format!("gantry_tool_{i}");
                defs.insert(name.clone(), rebase_refs(&t.parameters, &format!("/$defs/{name}")));
                json!({
                    "type": "object",
                    "properties": {"name": {"const": t.name}, "arguments": {"$ref": format!("#/$defs/{name}")}},
                    "required": ["name", "arguments"],
                    "additionalProperties": false,
                })
            })
            .collect();
        let call = json!({
            "type": "object",
            "properties": {"tool_call": {"anyOf": calls}},
            "required": ["tool_call"],
            "additionalProperties": false,
        });
        let mut schema = match self.choice {
            ToolChoice::Auto => json!({"anyOf": [call, {
                "type": "object",
                "properties": {"response": {"type": "string"}},
                "required": ["response"],
                "additionalProperties": false,
            }]}),
            _ => call,
        };
        schema["$defs"] = Value::Object(defs);
        schema
    }

    /// The system message that tells the model the tools and the format,
    /// put before the conversation (merged into its own system message).
    pub fn instruct(&self, messages: &mut Vec<ChatMessage>) {
        let tools: Vec<Value> = self
            .tools
            .iter()
            .map(|t| json!({"name": t.name, "description": t.description, "parameters": t.parameters}))
            .collect();
        let how = match &self.choice {
            ToolChoice::Auto => {
                "Respond in JSON: {\"tool_call\": {\"name\": TOOL, \"arguments\": {...}}} to call a tool, or \
                 {\"response\": \"...\"} to answer directly."
                    .to_owned()
            }
            ToolChoice::Required => {
                "Respond in JSON: {\"tool_call\": {\"name\": TOOL, \"arguments\": {...}}}.".to_owned()
            }
            ToolChoice::Named(n) => {
                format!("Respond in JSON, calling {n}: {{\"tool_call\": {{\"name\": {n:?}, \"arguments\": {{...}}}}}}.")
            }
        };
        let text =
            format!("You can call these tools:\n{}\n{how}", serde_json::to_string_pretty(&tools).unwrap_or_default());
        match messages.first_mut() {
            Some(m) if m.role == "system" => m.content = format!("{}\n\n{text}", m.content),
            _ => messages.insert(0, ChatMessage::new("system", &text)),
        }
    }
}

/// The assistant's earlier tool calls (`tool_calls` of a message), written as
/// the JSON this format has the model produce, so that the model sees them.
pub fn calls_as_text(message: &Value) -> Option<String> {
    let calls = message.get("tool_calls")?.as_array()?;
    let texts: Vec<String> = calls
        .iter()
        .filter_map(|c| {
            let f = c.get("function")?;
            let arguments = match f.get("arguments") {
                Some(Value::String(s)) => serde_json::from_str(s).unwrap_or(Value::String(s.clone())),
                Some(v) => v.clone(),
                None => json!({}),
            };
            Some(json!({"tool_call": {"name": f.get("name")?, "arguments": arguments}}).to_string())
        })
        .collect();
    (!texts.is_empty()).then(|| texts.join("\n"))
}

/// What a constrained reply said: a call (name, arguments as JSON text) or words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolReply {
    /// A call.
    Call {
        /// The tool.
        name: String,
        /// Its arguments, a JSON object as text (OpenAI's `arguments`).
        arguments: String,
    },
    /// An answer in words.
    Text(String),
}

/// A reply of [`ToolUse::schema`]'s shape, its arguments kept as written.
#[derive(serde::Deserialize)]
struct Reply<'a> {
    #[serde(borrow)]
    tool_call: Option<Call<'a>>,
    response: Option<String>,
}

#[derive(serde::Deserialize)]
struct Call<'a> {
    name: String,
    #[serde(borrow)]
    arguments: &'a serde_json::value::RawValue,
}

/// Reads a reply of [`ToolUse::schema`]'s shape (`None`: it is not one, e.g. cut short).
///
/// A call's arguments are the text the grammar accepted, not a value parsed
/// and written again: through `f64` numbers, `0.10000000000000001` (above
/// an exclusive minimum of 0.1) came back as `0.1`, which the schema forbids.
pub fn read_reply(text: &str) -> Option<ToolReply> {
    let reply: Reply<'_> = serde_json::from_str(text).ok()?;
    match (reply.tool_call, reply.response) {
        (Some(call), _) => Some(ToolReply::Call { name: call.name, arguments: call.arguments.get().to_owned() }),
        (None, Some(words)) => Some(ToolReply::Text(words)),
        (None, None) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn weather() -> Value {
        json!([{"type": "function", "function": {"name": "get_weather", "description": "The weather in a city",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}])
    }

    #[test]
    fn choices_and_errors() {
        assert_eq!(parse(None, None).expect("none"), None);
        assert_eq!(parse(Some(&weather()), Some(&json!("none"))).expect("none"), None);
        let t = parse(Some(&weather()), None).expect("tools").expect("some");
        assert_eq!(t.choice, ToolChoice::Auto);
        let named = json!({"type": "function", "function": {"name": "get_weather"}});
        assert_eq!(
            parse(Some(&weather()), Some(&named)).expect("named").expect("some").choice,
            ToolChoice::Named("get_weather".into())
        );
        let other = json!({"type": "function", "function": {"name": "nope"}});
        assert!(parse(Some(&weather()), Some(&other)).is_err());
        assert!(parse(Some(&json!([{"type": "retrieval"}])), None).is_err());
        assert!(parse(Some(&weather()), Some(&json!("sometimes"))).is_err());
        // A call demanded of no tools is refused, not ignored; "auto" and "none" of no tools are no tools.
        for choice in [json!("required"), named] {
            for tools in [None, Some(json!([]))] {
                let e = parse(tools.as_ref(), Some(&choice)).unwrap_err();
                assert!(e.body().to_string().contains("tool_choice"), "{}", e.body());
            }
        }
        assert_eq!(parse(None, Some(&json!("auto"))).expect("auto"), None);
        assert_eq!(parse(Some(&json!([])), Some(&json!("none"))).expect("none"), None);
        assert!(parse(None, Some(&json!("sometimes"))).is_err());
        // Two tools of one name: a call could follow either's schema.
        let twice =
            json!([{"type": "function", "function": {"name": "f"}}, {"type": "function", "function": {"name": "f"}}]);
        let e = parse(Some(&twice), None).unwrap_err();
        assert!(e.body().to_string().contains("is the name of `tools[0]` too"), "{}", e.body());
    }

    #[test]
    fn a_tools_own_refs_point_into_its_schema_once_wrapped() {
        let params = json!({"type": "object", "properties": {"a": {"$ref": "#/$defs/A"}, "b": {"$ref": "#"},
            "c": {"$ref": "https://example.com/x"}, "d": {"$ref": "json-schema:///#"}}, "$defs": {"A": {"type": "integer"}}});
        let tools = json!([{"type": "function", "function": {"name": "f", "parameters": params}}]);
        let schema = parse(Some(&tools), Some(&json!("required"))).unwrap().unwrap().schema();
        let rebased = &schema["$defs"]["gantry_tool_0"];
        assert_eq!(rebased["properties"]["a"]["$ref"], "#/$defs/gantry_tool_0/$defs/A");
        assert_eq!(rebased["properties"]["b"]["$ref"], "#/$defs/gantry_tool_0");
        assert_eq!(rebased["properties"]["c"]["$ref"], "https://example.com/x");
        assert_eq!(rebased["properties"]["d"]["$ref"], "#/$defs/gantry_tool_0");
        assert_eq!(
            schema["properties"]["tool_call"]["anyOf"][0]["properties"]["arguments"]["$ref"],
            "#/$defs/gantry_tool_0"
        );
    }

    /// Every spelling of "this document" reaches the tool, not the wrapper
    /// (`""` and `.` resolved to the wrapper's address); anchors and other
    /// documents are left as written.
    #[test]
    fn each_spelling_of_the_tools_own_document_is_rebased() {
        let own = |r: &str, id: Option<&str>| own_fragment(r, id).map(|(f, _)| f.to_owned());
        for r in [
            "#",
            "",
            ".",
            "./",
            "/",
            "json-schema:///",
            "JSON-SCHEMA:///#",
            "..",
            "a/..",
            "x/../#",
            "%2e",
            "%2E#",
            "json-schema:///a/..",
            "http://e.x/f",
            "http://e.x/f#",
        ] {
            assert_eq!(own(r, Some("http://e.x/f")).as_deref(), Some(""), "{r}");
        }
        assert_eq!(own("http://e.x/f#/$defs/A", Some("http://e.x/f#")).as_deref(), Some("/$defs/A"));
        assert_eq!(own("json-schema:///#/$defs/A", None).as_deref(), Some("/$defs/A"));
        assert_eq!(own_fragment("#A", None), Some(("A", Fragment::Anchor)));
        for r in ["http://e.x/g", "g#/x", "http://e.x/f#/x", "a/b/.."] {
            assert_eq!(own(r, None), None, "{r}");
        }
    }

    /// One tool's `#A` found another tool's `$anchor: "A"` (the tools are
    /// one document): anchors are named per tool.
    #[test]
    fn a_tools_anchor_is_its_own() {
        let f = json!({"type": "object", "properties": {"x": {"$ref": "#A"}}});
        let g = json!({"type": "object", "properties": {"y": {"$anchor": "A", "type": "string"}}});
        let tools = json!([{"type": "function", "function": {"name": "f", "parameters": f}},
            {"type": "function", "function": {"name": "g", "parameters": g}}]);
        let schema = parse(Some(&tools), Some(&json!("required"))).unwrap().unwrap().schema();
        assert_eq!(schema["$defs"]["gantry_tool_0"]["properties"]["x"]["$ref"], "#gantry_tool_0_A");
        assert_eq!(schema["$defs"]["gantry_tool_1"]["properties"]["y"]["$anchor"], "gantry_tool_1_A");
    }

    /// `const` and `enum` data with a `$ref` member are values the reply
    /// must equal, not references (they were rebased, and the reply forced
    /// to the rebased value); a property named `const` is a schema still; a
    /// tool's own `$id` is dropped (`""` replaced the wrapper) and its
    /// pointers rebased.
    #[test]
    fn constant_data_and_a_schema_with_its_own_id_keep_their_refs() {
        let params = json!({"type": "object", "properties": {
            "x": {"const": {"$ref": "#/y"}},
            "y": {"enum": [{"$ref": "#/components/schemas/Pet"}]},
            "const": {"$ref": "#/$defs/A"}},
            "$defs": {"A": {"type": "integer"}}});
        let with_id = json!({"$id": "https://example.com/s", "type": "object",
            "properties": {"a": {"$ref": "#/$defs/A"}}, "$defs": {"A": {"type": "integer"}}});
        let tools = json!([{"type": "function", "function": {"name": "f", "parameters": params}},
            {"type": "function", "function": {"name": "g", "parameters": with_id}}]);
        let schema = parse(Some(&tools), Some(&json!("required"))).unwrap().unwrap().schema();
        let f = &schema["$defs"]["gantry_tool_0"]["properties"];
        assert_eq!(f["x"]["const"], json!({"$ref": "#/y"}));
        assert_eq!(f["y"]["enum"][0], json!({"$ref": "#/components/schemas/Pet"}));
        assert_eq!(f["const"]["$ref"], "#/$defs/gantry_tool_0/$defs/A");
        let g = &schema["$defs"]["gantry_tool_1"];
        assert_eq!((g.get("$id"), &g["properties"]["a"]["$ref"]), (None, &json!("#/$defs/gantry_tool_1/$defs/A")));
    }

    #[test]
    fn replies_read_back_and_the_system_message_is_merged() {
        assert_eq!(
            read_reply(r#"{"tool_call": {"name": "f", "arguments": {"a": 1}}}"#),
            Some(ToolReply::Call { name: "f".into(), arguments: r#"{"a": 1}"#.into() })
        );
        // Numbers as the grammar accepted them, not rounded through f64.
        assert_eq!(
            read_reply("{\"tool_call\": {\"name\": \"f\", \"arguments\": {\n  \"x\": 0.10000000000000001}}}"),
            Some(ToolReply::Call { name: "f".into(), arguments: "{\n  \"x\": 0.10000000000000001}".into() })
        );
        assert_eq!(read_reply(r#"{"response": "hi"}"#), Some(ToolReply::Text("hi".into())));
        assert_eq!(read_reply(r#"{"tool_call": {"na"#), None);
        let t = parse(Some(&weather()), Some(&json!("required"))).expect("tools").expect("some");
        let mut messages = vec![ChatMessage::new("system", "Be brief."), ChatMessage::new("user", "Weather?")];
        t.instruct(&mut messages);
        assert_eq!(messages.len(), 2);
        assert!(messages[0].content.starts_with("Be brief.") && messages[0].content.contains("get_weather"));
        assert!(t.schema()["anyOf"].is_null(), "required: a call only");
        let m = json!({"role": "assistant", "tool_calls": [{"id": "c", "type": "function",
            "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]});
        let text: Value = serde_json::from_str(&calls_as_text(&m).expect("text")).expect("JSON");
        assert_eq!(text, json!({"tool_call": {"name": "get_weather", "arguments": {"city": "Paris"}}}));
    }
}
