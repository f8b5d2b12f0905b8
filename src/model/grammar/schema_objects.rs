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
