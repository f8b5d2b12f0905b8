//! A JSON schema's numbers, made ready for llguidance before the compile.
//!
//! llguidance reads every number of a schema as a 64-bit float and turns a
//! number's range into a regular expression over its decimal digits. Three
//! of its readings let through replies the schema forbids or refuse schemas
//! that have replies, so the schema is checked and rewritten first, each
//! rewrite allowing the same numbers as read back by a float parser (the
//! exceptions, replies within 1e-60 of an exclusive 0 and decimals that
//! round onto an excluded bound, are refused, never let through):
//!
//! - an integer bound outside the 64-bit range is refused
//!   ([`check_integer_bounds`]), as is a number the float cannot hold
//!   exactly ([`check_exact`]);
//! - an exclusive bound becomes the inclusive bound of the next float past
//!   it ([`exclusive_as_inclusive`]): llguidance's range let an
//!   integer-valued exclusive minimum through when the range ended before
//!   the next integer (`exclusiveMinimum 0, exclusiveMaximum 0.5` allowed
//!   `0`; `exclusiveMaximum 0` allowed `-0`);
//! - a decimal `multipleOf`'s bounds move onto its grid ([`snap_to_step`]):
//!   llguidance's range demanded as many digits as the bounds had, which
//!   no multiple has when the bounds are off the grid (`multipleOf 0.1`
//!   within `[0.25, 0.35]` allowed nothing).

use serde_json::{Map, Value};

use super::schema_objects::{DATA_KEYWORDS, SCHEMA_MAP_KEYWORDS, for_each_schema_object};
use crate::{Error, Result};

/// Checks and rewrites the numbers of `schema` (see the module's doc).
pub(super) fn prepare(schema: &mut Value) -> Result<()> {
    for_each_schema_object(schema, &mut |map| {
        if let Some(Value::String(reference)) = map.get("$ref") {
            check_ref(reference)?;
        }
        check_integer_bounds(map)?;
        check_step(map)?;
        check_bounds_spellable(map)?;
        check_exact(map)?;
        exclusive_as_inclusive(map);
        snap_to_step(map);
        Ok(())
    })
}

/// Refuses a `$ref` whose JSON pointer leads into `const` or `enum` data,
/// which llguidance would compile as a schema while the walk leaves
/// it unrewritten (rewriting it would change the data), or stops at a map
/// of names (`#/$defs`), which the walk does not rewrite as a schema. The
/// pointer is the reference's fragment, whatever comes before the `#`
/// (`json-schema:///#/…`, an `$id`'s URI, a relative `s#/…`: each
/// resolves to a schema of the document, where the same keywords hold
/// data), read as the `referencing` crate reads it: percent-decoded as a
/// whole, split at `/`, then `~1` as `/` and `~0` as `~` in each segment;
/// a segment after a names keyword is a name. A reference without a
/// pointer (an anchor, an `$id`) names a schema, never data; a pointer
/// that does not decode is left for llguidance to refuse.
fn check_ref(reference: &str) -> Result<()> {
    let Some((_, fragment)) = reference.split_once('#') else { return Ok(()) };
    let Ok(pointer) = percent_encoding::percent_decode_str(fragment).decode_utf8() else { return Ok(()) };
    let Some(pointer) = pointer.strip_prefix('/') else { return Ok(()) };
    let refused = |why: &str| Err(Error::Model(format!("the JSON schema's \"$ref\": \"{reference}\" {why}")));
    let mut after_names_keyword = false;
    for segment in pointer.split('/') {
        let segment = segment.replace("~1", "/").replace("~0", "~");
        if !after_names_keyword && DATA_KEYWORDS.contains(&segment.as_str()) {
            return refused(&format!("points into `{segment}` data, which is not a schema"));
        }
        after_names_keyword = !after_names_keyword && SCHEMA_MAP_KEYWORDS.contains(&segment.as_str());
    }
    if after_names_keyword {
        return refused("points at a map of names to schemas, not at a schema");
    }
    Ok(())
}

/// Refuses a `multipleOf` that is not a number above 0 (JSON Schema's
/// rule), naming it: llguidance took a negative step as its magnitude and
/// then failed partway with "NoExtensionBias".
fn check_step(map: &Map<String, Value>) -> Result<()> {
    match map.get("multipleOf") {
        Some(step) if !step.as_f64().is_some_and(|s| s > 0.0) => {
            Err(Error::Model(format!("the JSON schema's \"multipleOf\": {step} is not a number above 0")))
        }
        _ => Ok(()),
    }
}

/// The keys that bound an integer schema's values.
const INTEGER_BOUNDS: [&str; 4] = ["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"];

/// Refuses an integer schema (`"type": "integer"`, alone or in a list)
/// whose bound is not inside the 64-bit range (see [`inside_i64`]), and a
/// `const` or `enum` number outside it in any schema, naming the key.
/// llguidance clamps such bounds to `i64` (a constant is a range of one
/// value): `1e19 .. 1e20` became `[i64::MAX, i64::MAX]` and replies the
/// schema forbids, and a range at `i64::MIN` recursed without end (a stack
/// overflow at any stack size, which aborts the process). A constant is
/// checked whatever its own object's type: `allOf`, a `$ref` or an `anyOf`
/// beside it can give it the integer type from another object
/// (`{"allOf": [{"type": "integer"}, {"const": -1e20}]}` aborted). A number
/// schema's bounds past ±1e18 are refused anyway ([`check_bounds_spellable`]).
fn check_integer_bounds(map: &Map<String, Value>) -> Result<()> {
    let integer = match map.get("type") {
        Some(Value::String(t)) => t == "integer",
        Some(Value::Array(types)) => types.iter().any(|t| t == "integer"),
        _ => false,
    };
    // Draft 4's `exclusiveMinimum: true` is a flag, not a bound.
    let bounds = INTEGER_BOUNDS.iter().filter(|_| integer).filter_map(|&key| map.get(key).map(|v| (key, v)));
    let bounds = bounds.filter(|(_, v)| !v.is_boolean());
    // `const` and `enum` values become ranges of one value: their numbers are held to the same bound.
    let constant = map.get("const").filter(|v| v.is_number()).map(|v| ("const", v));
    let listed = map.get("enum").and_then(Value::as_array).into_iter().flatten();
    let listed = listed.filter(|v| v.is_number()).map(|v| ("enum", v));
    for (key, value) in bounds.chain(constant).chain(listed) {
        if !inside_i64(value) {
            return Err(Error::Model(format!(
                "the JSON schema's integer \"{key}\": {value} is not a number of magnitude below 2^63 (9.2e18) as a \
                 64-bit float, the range integer replies are checked in (a `const` or `enum` number may meet an \
                 integer type through `allOf` or `$ref`)"
            )));
        }
    }
    Ok(())
}

/// Whether `bound` is a JSON number that, read as llguidance reads it (a
/// 64-bit float, then cast to `i64`), lies strictly between −2^63 and
/// 2^63: `-9223372036854775807` is the float −2^63, whose negation the
/// cast cannot hold.
fn inside_i64(bound: &Value) -> bool {
    const EDGE: f64 = 9_223_372_036_854_775_808.0; // 2^63
    bound.as_f64().is_some_and(|x| x > -EDGE && x < EDGE)
}

/// The keywords whose numbers llguidance reads as 64-bit floats: the
/// bounds, the step, and the data of `const` and `enum`.
const NUMBER_KEYWORDS: [&str; 7] =
    ["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "const", "enum"];

/// Refuses a number of the schema that a 64-bit float does not hold
/// exactly (an integer beyond 2^53 that is not a multiple of its power of
/// two), naming the keyword: llguidance would round it, so that
/// `enum [9007199254740993]` answered `9007199254740992`, a value the
/// schema does not list.
fn check_exact(map: &Map<String, Value>) -> Result<()> {
    for key in NUMBER_KEYWORDS {
        let mut pending: Vec<&Value> = map.get(key).into_iter().collect();
        while let Some(value) = pending.pop() {
            match value {
                Value::Array(items) => pending.extend(items),
                Value::Object(fields) => pending.extend(fields.values()),
                Value::Number(n) if !exact_as_f64(n) => {
                    return Err(Error::Model(format!(
                        "the JSON schema's \"{key}\" number {n} is an integer past 2^53 that a 64-bit float, which \
                         is how the grammar reads numbers, does not hold exactly (the reply would be another number)"
                    )));
                }
                _ => {}
            }
        }
    }
    Ok(())
}

/// Whether `n` is written back as it was read: an integer the nearest
/// 64-bit float holds exactly, or a float whose integer value past 2^53
/// its shortest decimal spells exactly (2^64, as `18446744073709552000`,
/// does not: an integer literal past `u64` is read as a float, and its
/// reply would be that decimal). Other floats are read as floats (parsed
/// correctly rounded) and replies are held to them.
fn exact_as_f64(n: &serde_json::Number) -> bool {
    const EXACT_INTEGERS: f64 = 9_007_199_254_740_992.0; // 2^53
    let as_float = |f: f64| f as i128;
    match (n.as_i64(), n.as_u64(), n.as_f64()) {
        (Some(i), _, Some(f)) => as_float(f) == i128::from(i),
        (_, Some(u), Some(f)) => as_float(f) == i128::from(u),
        (_, _, Some(f)) if f.fract() == 0.0 && f.abs() >= EXACT_INTEGERS => {
            f.abs() < 2f64.powi(127) && format!("{f}") == as_float(f).to_string()
        }
        _ => true,
    }
}

/// The smallest magnitude a bound other than zero may have: llguidance
/// spells each decimal digit of a bound as one more nested group of a
/// regular expression, whose parser stops at 250 (`minimum 1e-300` was
/// refused with a screenful of regular expression).
pub(super) const SMALLEST_BOUND: f64 = 1e-60;

/// The largest magnitude a bound of a number (not an integer) schema may
/// have: llguidance spells a number's range through the power of ten above
/// its bound as an `i64`, which 10^19 is not (`minimum: 1e18` was refused
/// as "Failed to generate regex for float range"). Integer schemas take
/// bounds to ±2^63 ([`check_integer_bounds`]).
const LARGEST_NUMBER_BOUND: f64 = 1e18;

/// Refuses a bound nearer zero than [`SMALLEST_BOUND`], or a number
/// schema's bound past [`LARGEST_NUMBER_BOUND`], naming it.
fn check_bounds_spellable(map: &Map<String, Value>) -> Result<()> {
    let integer_only = map.get("type").and_then(Value::as_str) == Some("integer");
    for key in INTEGER_BOUNDS {
        let Some(x) = map.get(key).and_then(Value::as_f64) else { continue };
        if x != 0.0 && x.abs() < SMALLEST_BOUND {
            return Err(Error::Model(format!(
                "the JSON schema's \"{key}\": {x:e} is nearer zero than {SMALLEST_BOUND:e}, the nearest a bound other \
                 than 0 may be (the grammar spells every digit of a bound)"
            )));
        }
        if !integer_only && x.abs() >= LARGEST_NUMBER_BOUND {
            return Err(Error::Model(format!(
                "the JSON schema's \"{key}\": {x:e} is not inside ±{LARGEST_NUMBER_BOUND:e}, the range a number's \
                 bound may have (an \"integer\" schema's bounds may reach ±2^63)"
            )));
        }
    }
    Ok(())
}

/// Replaces `exclusiveMinimum` (`exclusiveMaximum`) by the `minimum`
/// (`maximum`) of the next float past it, or keeps the inclusive bound
/// where it is tighter. Both allow the same floats; the inclusive one also
/// refuses the decimals strictly between the two floats, which a reader
/// of the reply would round onto the excluded bound. A draft-4 `true`
/// makes the inclusive bound exclusive in place; a bound with no float
/// past it, or an inclusive bound that is not a number, is left as it is.
/// Past 0 the bound is ±[`SMALLEST_BOUND`] (the next float, 5e-324, has
/// more digits than the grammar spells): the numbers nearer zero than
/// that are not generated.
fn exclusive_as_inclusive(map: &mut Map<String, Value>) {
    let above = |x: f64| if x == 0.0 { SMALLEST_BOUND } else { x.next_up() };
    let below = |x: f64| if x == 0.0 { -SMALLEST_BOUND } else { x.next_down() };
    one_side_inclusive(map, "exclusiveMinimum", "minimum", above, f64::max);
    one_side_inclusive(map, "exclusiveMaximum", "maximum", below, f64::min);
}

/// [`exclusive_as_inclusive`] for one side: `past` gives the float past an
/// exclusive bound, `tighter` the tighter of two inclusive bounds.
fn one_side_inclusive(
    map: &mut Map<String, Value>,
    exclusive_key: &str,
    inclusive_key: &str,
    past: impl Fn(f64) -> f64,
    tighter: impl Fn(f64, f64) -> f64,
) {
    let inclusive = match map.get(inclusive_key) {
        None => None,
        Some(Value::Number(n)) => n.as_f64(),
        Some(_) => return,
    };
    let exclusive = match map.get(exclusive_key) {
        Some(Value::Number(n)) => n.as_f64(),
        Some(Value::Bool(true)) => inclusive,
        _ => None,
    };
    let Some(bound) = exclusive.map(past).filter(|b| b.is_finite()) else { return };
    let bound = inclusive.map_or(bound, |i| tighter(i, bound));
    map.insert(inclusive_key.into(), Value::from(bound));
    map.remove(exclusive_key);
}

/// Moves a `multipleOf` schema's `minimum` up and `maximum` down to the
/// nearest multiples inside them, computed in decimal (as the bounds and
/// the step are written, not as their floats), and drops the step when
/// one multiple is left (that value alone, which llguidance's own float
/// check of the step could call unsatisfiable: 0.3 / 0.1 is not 3 in
/// floats). A range that holds no multiple, or numbers too long for the
/// exact arithmetic, are left for llguidance to judge.
fn snap_to_step(map: &mut Map<String, Value>) {
    let step = map.get("multipleOf").and_then(Value::as_f64).filter(|s| s.is_finite() && *s > 0.0);
    let Some(step) = step else { return };
    if map.contains_key("exclusiveMinimum") || map.contains_key("exclusiveMaximum") {
        return;
    }
    let lower = map.get("minimum").and_then(Value::as_f64).map(|b| nearest_multiple(b, step, Towards::Up));
    let upper = map.get("maximum").and_then(Value::as_f64).map(|b| nearest_multiple(b, step, Towards::Down));
    if matches!(lower, Some(None)) || matches!(upper, Some(None)) {
        return;
    }
    let (lower, upper) = (lower.flatten(), upper.flatten());
    if let (Some(l), Some(u)) = (lower, upper) {
        if l > u {
            return;
        }
        if l == u {
            map.remove("multipleOf");
        }
    }
    for (key, bound) in [("minimum", lower), ("maximum", upper)] {
        if let Some(b) = bound {
            map.insert(key.into(), Value::from(b));
        }
    }
}

/// Which way [`nearest_multiple`] rounds.
#[derive(Clone, Copy)]
enum Towards {
    Up,
    Down,
}

/// The multiple of `step` nearest `bound` on the side `towards`, both read
/// as the shortest decimals that give their floats back, as the float
/// nearest it; `None` where the arithmetic would leave 128 bits.
fn nearest_multiple(bound: f64, step: f64, towards: Towards) -> Option<f64> {
    let (bound_digits, bound_exp) = decimal(bound)?;
    let (step_digits, step_exp) = decimal(step)?;
    // bound / step = bound_digits * 10^(bound_exp - step_exp) / step_digits.
    let shift = bound_exp - step_exp;
    let scale = 10i128.checked_pow(shift.unsigned_abs())?;
    let (num, den) = if shift >= 0 {
        (bound_digits.checked_mul(scale)?, step_digits)
    } else {
        (bound_digits, step_digits.checked_mul(scale)?)
    };
    let (quotient, remainder) = (num / den, num % den);
    let k = match towards {
        Towards::Up if remainder > 0 => quotient + 1,
        Towards::Down if remainder < 0 => quotient - 1,
        _ => quotient,
    };
    format!("{}e{step_exp}", k.checked_mul(step_digits)?).parse().ok()
}

/// `x` as `digits × 10^exp`, from the shortest decimal that reads back as
/// `x`.
fn decimal(x: f64) -> Option<(i128, i32)> {
    let text = format!("{x:e}");
    let (mantissa, exp) = text.split_once('e')?;
    let fraction_digits = mantissa.split_once('.').map_or(0, |(_, f)| f.len());
    let digits: i128 = mantissa.replace('.', "").parse().ok()?;
    Some((digits, exp.parse::<i32>().ok()? - i32::try_from(fraction_digits).ok()?))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn decimals_are_the_shortest_digits_of_the_float() {
        assert_eq!(decimal(0.1), Some((1, -1)));
        assert_eq!(decimal(-2.5), Some((-25, -1)));
        assert_eq!(decimal(1e20), Some((1, 20)));
        assert_eq!(decimal(0.30000000000000004), Some((30000000000000004, -17)));
    }

    #[test]
    fn multiples_are_found_in_decimal() {
        assert_eq!(nearest_multiple(0.25, 0.1, Towards::Up), Some(0.3));
        assert_eq!(nearest_multiple(0.35, 0.1, Towards::Down), Some(0.3));
        assert_eq!(nearest_multiple(0.3, 0.1, Towards::Up), Some(0.3));
        assert_eq!(nearest_multiple(-0.25, 0.1, Towards::Up), Some(-0.2));
        assert_eq!(nearest_multiple(-0.25, 0.1, Towards::Down), Some(-0.3));
        assert_eq!(nearest_multiple(7.0, 2.5, Towards::Down), Some(5.0));
        assert_eq!(nearest_multiple(1e300, 0.1, Towards::Up), None);
    }

    #[test]
    fn exclusive_bounds_become_the_next_float_and_keep_a_tighter_inclusive_one() {
        let mut m = json!({"exclusiveMinimum": 0, "exclusiveMaximum": 0.5, "maximum": 0.25});
        exclusive_as_inclusive(m.as_object_mut().unwrap());
        assert_eq!(m, json!({"minimum": SMALLEST_BOUND, "maximum": 0.25}));
        let mut draft4 = json!({"minimum": 1, "exclusiveMinimum": true, "exclusiveMaximum": false});
        exclusive_as_inclusive(draft4.as_object_mut().unwrap());
        assert_eq!(draft4, json!({"minimum": 1.0000000000000002, "exclusiveMaximum": false}));
        let mut kept = json!({"exclusiveMinimum": 1.7976931348623157e308, "exclusiveMaximum": 1, "maximum": "x"});
        let before = kept.clone();
        exclusive_as_inclusive(kept.as_object_mut().unwrap());
        assert_eq!(kept, before);
    }

    #[test]
    fn only_schemas_are_rewritten_not_constants_that_look_like_them() {
        let mut s = json!({
            "type": "object",
            "properties": {"a": {"exclusiveMinimum": 0}, "exclusiveMinimum": {"type": "number"}},
            "anyOf": [{"exclusiveMaximum": 0}],
            "const": {"exclusiveMinimum": 0},
            "enum": [{"exclusiveMinimum": 0}],
        });
        prepare(&mut s).unwrap();
        assert_eq!(s["properties"]["a"], json!({"minimum": SMALLEST_BOUND}));
        assert_eq!(s["properties"]["exclusiveMinimum"], json!({"type": "number"}));
        assert_eq!(s["anyOf"][0], json!({"maximum": -SMALLEST_BOUND}));
        assert_eq!(s["const"], json!({"exclusiveMinimum": 0}));
        assert_eq!(s["enum"][0], json!({"exclusiveMinimum": 0}));
    }

    #[test]
    fn bounds_nearer_zero_than_the_grammar_spells_are_refused_naming_the_key() {
        for (mut schema, key) in [
            (json!({"minimum": 1e-300}), "minimum"),
            (json!({"items": {"exclusiveMaximum": -1e-61}}), "exclusiveMaximum"),
        ] {
            let e = prepare(&mut schema).unwrap_err().to_string();
            assert!(e.contains(&format!("\"{key}\"")) && e.contains("nearer zero than 1e-60"), "{e}");
        }
        prepare(&mut json!({"minimum": 0, "maximum": SMALLEST_BOUND, "exclusiveMinimum": -SMALLEST_BOUND})).unwrap();
    }

    #[test]
    fn a_constant_past_the_64_bit_range_is_refused_whatever_its_objects_type() {
        for mut schema in [
            json!({"allOf": [{"type": "integer"}, {"const": -1e20}]}),
            json!({"anyOf": [{"type": "integer"}], "const": -1e20}),
            json!({"$ref": "#/$defs/i", "enum": [1, 1e20], "$defs": {"i": {"type": "integer"}}}),
        ] {
            let e = prepare(&mut schema).unwrap_err().to_string();
            assert!(e.contains("is not a number of magnitude below 2^63"), "{schema}: {e}");
        }
        // Inside constant data a number is only a number.
        prepare(&mut json!({"allOf": [{"type": "object"}, {"const": {"a": 1e20}}]})).unwrap();
    }

    #[test]
    fn a_step_not_above_zero_is_refused_and_a_draft_4_flag_is_no_bound() {
        for step in [json!(-0.1), json!(0), json!("0.1")] {
            let e = prepare(&mut json!({"type": "number", "multipleOf": step})).unwrap_err().to_string();
            assert!(e.contains("\"multipleOf\"") && e.contains("not a number above 0"), "{e}");
        }
        let mut draft4 = json!({"type": "integer", "minimum": 5, "exclusiveMinimum": true, "exclusiveMaximum": false});
        prepare(&mut draft4).unwrap();
        assert_eq!(draft4, json!({"type": "integer", "minimum": 5.000000000000001, "exclusiveMaximum": false}));
    }

    #[test]
    fn a_number_bound_past_1e18_is_refused_and_an_integer_bound_is_not() {
        for (mut schema, key) in [
            (json!({"type": "number", "minimum": 1e18}), "minimum"),
            (json!({"maximum": -1e300}), "maximum"),
            (json!({"type": ["number", "null"], "exclusiveMinimum": -2e18}), "exclusiveMinimum"),
        ] {
            let e = prepare(&mut schema).unwrap_err().to_string();
            assert!(e.contains(&format!("\"{key}\"")) && e.contains("inside ±1e18"), "{e}");
        }
        prepare(&mut json!({"type": "integer", "minimum": 5e18})).unwrap();
        prepare(&mut json!({"type": "number", "maximum": 9.9e17})).unwrap();
    }

    #[test]
    fn a_ref_into_const_or_enum_data_is_refused_and_one_to_a_property_so_named_is_not() {
        for reference in [
            "#/$defs/c/const",
            "#/$defs/c/enum/0",
            "#/%24defs/c/%63onst",
            "#/properties/const/const",
            "json-schema:///#/$defs/c/const",
            "http://x.example/s#/$defs/c/enum",
            "s#/$defs/c/const",
            "#/$defs",
            "#/properties/a/properties",
        ] {
            let mut schema = json!({
                "properties": {"a": {"$ref": reference}, "const": {"const": {"type": "number"}}},
                "$defs": {"c": {"const": {"type": "number"}, "enum": [{"type": "number"}]}},
            });
            let e = prepare(&mut schema).unwrap_err().to_string();
            assert!(e.contains(&format!("\"$ref\": \"{reference}\" points")), "{e}");
        }
        for reference in
            ["#/properties/const", "#/$defs/const", "#/x", "#anchor", "#/$defs/c/enum~1x", "http://x/s", "#"]
        {
            let mut schema = json!({"properties": {"a": {"$ref": reference}}});
            prepare(&mut schema).unwrap_or_else(|e| panic!("{reference}: {e}"));
        }
    }

    #[test]
    fn a_schema_a_ref_reaches_anywhere_is_rewritten() {
        let mut s = json!({
            "properties": {"a": {"$ref": "#/x/y"}, "b": {"default": {"exclusiveMinimum": 1}}},
            "x": {"y": {"exclusiveMaximum": 0.5}},
            "examples": [{"exclusiveMinimum": 2}],
        });
        prepare(&mut s).unwrap();
        assert_eq!(s["x"]["y"], json!({"maximum": 0.5f64.next_down()}));
        assert_eq!(s["properties"]["b"]["default"], json!({"minimum": 1f64.next_up()}));
        assert_eq!(s["examples"][0], json!({"minimum": 2f64.next_up()}));
    }

    #[test]
    fn numbers_a_float_cannot_hold_are_refused_naming_the_keyword() {
        for (mut schema, key) in [
            (json!({"enum": [1, 9007199254740993u64]}), "enum"),
            (json!({"const": {"a": [-9007199254740993i64]}}), "const"),
            (json!({"properties": {"n": {"minimum": 9007199254740995u64}}}), "minimum"),
            (json!({"type": "integer", "multipleOf": 18446744073709551615u64}), "multipleOf"),
        ] {
            let e = prepare(&mut schema).unwrap_err().to_string();
            assert!(e.contains(&format!("\"{key}\" number")) && e.contains("2^53"), "{e}");
        }
        // A float past 2^53 whose shortest decimal is not its value (123456789012345664).
        for text in [r#"{"const": 1.2345678901234567e17}"#, r#"{"minimum": 123456789012345678}"#] {
            let mut schema: Value = serde_json::from_str(text).unwrap();
            assert!(prepare(&mut schema).unwrap_err().to_string().contains("2^53"), "{text}");
        }
        // Integers written past `u64` are read as floats, past 2^63 too.
        for text in [r#"{"const": 18446744073709551617}"#, r#"{"enum": [-9223372036854775809]}"#, r#"{"const": 1e300}"#]
        {
            let mut schema: Value = serde_json::from_str(text).unwrap();
            assert!(prepare(&mut schema).unwrap_err().to_string().contains("2^63"), "{text}");
        }
        // Floats whose decimal is their value, and floats below 2^53 (read as floats, correctly rounded).
        let text = r#"{"enum": [9007199254740992, 9007199254740994, 0.1, 1e17, 9007199254740993.0, 3.5e15]}"#;
        prepare(&mut serde_json::from_str(text).unwrap()).unwrap();
    }
}
