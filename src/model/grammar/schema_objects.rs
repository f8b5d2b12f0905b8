//! Which objects of a JSON schema document are schemas (as llguidance may
//! compile them) and which are data, for the passes that rewrite a schema
//! before the compile.

use serde_json::{Map, Value};

/// The keywords whose value maps names to schemas: the names are not
/// keywords (a property may be called `const`).
pub(super) const SCHEMA_MAP_KEYWORDS: [&str; 5] =
    ["properties", "patternProperties", "$defs", "definitions", "dependentSchemas"];

/// The keywords whose value is data a reply must equal, never a schema.
pub(super) const DATA_KEYWORDS: [&str; 2] = ["const", "enum"];

/// Calls `visit` on every object of the schema document that may be
/// compiled as a schema: all of them but the data of `const` and `enum`
/// (which may look like schemas and must stay as written), and the maps
/// of names to schemas. Walking more than the keywords that hold schemas
/// matters: llguidance follows a `$ref` to any place in the document
/// (`#/x`, `#/properties/b/default`), so a number schema can sit where no
/// keyword says it is one; rewriting a `default` or an unknown keyword's
/// object changes nothing else, since llguidance reads neither as data.
/// (The number rewrite refuses a `$ref` into `const` or `enum` data.)
///
/// ```
/// use gantry::model::grammar::for_each_schema_object;
/// let mut schema = serde_json::json!({"properties": {"a": {"type": "integer"}}, "const": {"type": "x"}});
/// let mut types = Vec::new();
/// let Ok(()) = for_each_schema_object(&mut schema, &mut |map| {
///     types.extend(map.get("type").cloned());
///     Ok::<(), std::convert::Infallible>(())
/// });
/// assert_eq!(types, [serde_json::json!("integer")]); // not the constant's "x"
/// ```
pub fn for_each_schema_object<E>(
    schema: &mut Value,
    visit: &mut impl FnMut(&mut Map<String, Value>) -> Result<(), E>,
) -> Result<(), E> {
    // Each pending value, and whether it is a map of names to schemas.
    let mut pending = vec![(schema, false)];
    while let Some((value, names)) = pending.pop() {
        match value {
            Value::Array(items) => pending.extend(items.iter_mut().map(|v| (v, false))),
            Value::Object(map) => {
                if names {
                    pending.extend(map.values_mut().map(|v| (v, false)));
                    continue;
                }
                visit(map)?;
                for (key, child) in map.iter_mut() {
                    if !DATA_KEYWORDS.contains(&key.as_str()) {
                        pending.push((child, SCHEMA_MAP_KEYWORDS.contains(&key.as_str())));
                    }
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// Refuses an `$id` (draft 4's `id`) below the document's root, and an
/// anchor name (`$anchor`, `$dynamicAnchor`) declared twice, naming it. llguidance
/// resolves references with the `referencing` crate, which registers every
/// `$id` as a resource: one that resolves to the document's own address
/// (`""`, `"#"`, the root's `$id`) replaced the whole schema, even from a
/// `$defs` entry nothing used, and of two anchors of one name the last
/// won. The root's own `$id` is its address and is kept.
pub(super) fn check_ids_and_anchors(schema: &mut Value) -> crate::Result<()> {
    let mut root = true;
    let mut anchors = std::collections::HashSet::new();
    // Draft 4 (and 3) spell it `id`, read so only under their `$schema`;
    // elsewhere `id` is data (`default: {"id": "u1"}`) or unknown.
    let draft = schema.get("$schema").and_then(Value::as_str).unwrap_or_default();
    let id_keys: &[&str] =
        if draft.contains("draft-04") || draft.contains("draft-03") { &["$id", "id"] } else { &["$id"] };
    for_each_schema_object(schema, &mut |map| {
        let is_root = std::mem::replace(&mut root, false);
        // Only a string is an identifier (`dependentRequired` may list a
        // property called `$id`).
        for &key in id_keys {
            if !is_root && let Some(Value::String(id)) = map.get(key) {
                return Err(crate::Error::Model(format!(
                    "the JSON schema's \"{key}\": {id:?} is below its root: a nested `{key}` is not supported (one \
                     that resolves to the document's own address would replace the whole schema)"
                )));
            }
        }
        for key in ["$anchor", "$dynamicAnchor"] {
            if let Some(Value::String(name)) = map.get(key)
                && !anchors.insert(name.clone())
            {
                return Err(crate::Error::Model(format!(
                    "the JSON schema's anchor {name:?} is declared twice (`#{name}` would resolve to one of them)"
                )));
            }
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn an_id_below_the_root_and_an_anchor_declared_twice_are_refused() {
        for (mut schema, says) in [
            (json!({"properties": {"a": {"$id": "", "type": "integer"}}}), "nested `$id`"),
            (json!({"$id": "http://x/s", "$defs": {"u": {"$id": "http://x/s", "type": "string"}}}), "nested `$id`"),
            (json!({"$defs": {"a": {"$anchor": "A"}, "b": {"$dynamicAnchor": "A"}}}), "anchor \"A\" is declared twice"),
            (
                json!({"$schema": "http://json-schema.org/draft-04/schema#", "definitions": {"u": {"id": ""}}}),
                "nested `id`",
            ),
        ] {
            let e = check_ids_and_anchors(&mut schema).unwrap_err().to_string();
            assert!(e.contains(says), "{schema}: {e}");
        }
        let mut fine = json!({"$id": "http://x/s", "$defs": {"a": {"$anchor": "A"}}, "const": {"$id": ""},
            "dependentRequired": {"$id": ["a"]}, "properties": {"id": {"type": "string"}}, "default": {"id": "u1"}});
        check_ids_and_anchors(&mut fine).unwrap();
    }
}
