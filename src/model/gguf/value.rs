//! Metadata values: the thirteen GGUF value types, arrays (of any type,
//! nested arrays included) and typed access to them.

use std::fmt;

/// A GGUF metadata value type, with its numeric id in the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ValueType {
    /// `u8` (id 0).
    U8,
    /// `i8` (id 1).
    I8,
    /// `u16` (id 2).
    U16,
    /// `i16` (id 3).
    I16,
    /// `u32` (id 4).
    U32,
    /// `i32` (id 5).
    I32,
    /// `f32` (id 6).
    F32,
    /// `bool`, one byte 0 or 1 (id 7).
    Bool,
    /// UTF-8 string: `u64` length and bytes (id 8).
    String,
    /// Array: element type, `u64` count, elements (id 9).
    Array,
    /// `u64` (id 10).
    U64,
    /// `i64` (id 11).
    I64,
    /// `f64` (id 12).
    F64,
}

impl ValueType {
    /// The type with GGUF's id `id`.
    pub const fn from_id(id: u32) -> Option<ValueType> {
        Some(match id {
            0 => ValueType::U8,
            1 => ValueType::I8,
            2 => ValueType::U16,
            3 => ValueType::I16,
            4 => ValueType::U32,
            5 => ValueType::I32,
            6 => ValueType::F32,
            7 => ValueType::Bool,
            8 => ValueType::String,
            9 => ValueType::Array,
            10 => ValueType::U64,
            11 => ValueType::I64,
            12 => ValueType::F64,
            _ => return None,
        })
    }

    /// GGUF's id of the type.
    pub const fn id(self) -> u32 {
        match self {
            ValueType::U8 => 0,
            ValueType::I8 => 1,
            ValueType::U16 => 2,
            ValueType::I16 => 3,
            ValueType::U32 => 4,
            ValueType::I32 => 5,
            ValueType::F32 => 6,
            ValueType::Bool => 7,
            ValueType::String => 8,
            ValueType::Array => 9,
            ValueType::U64 => 10,
            ValueType::I64 => 11,
            ValueType::F64 => 12,
        }
    }

    /// The fewest bytes one value of this type takes in a file (a string's
    /// length prefix, an array's type and count). Used to reject counts the
    /// remaining bytes cannot hold before allocating for them.
    pub const fn min_encoded_size(self) -> usize {
        match self {
            ValueType::U8 | ValueType::I8 | ValueType::Bool => 1,
            ValueType::U16 | ValueType::I16 => 2,
            ValueType::U32 | ValueType::I32 | ValueType::F32 => 4,
            ValueType::U64 | ValueType::I64 | ValueType::F64 | ValueType::String => 8,
            ValueType::Array => 4 + 8,
        }
    }

    /// A lowercase name (`"u32"`, `"string"`, `"array"`).
    pub const fn name(self) -> &'static str {
        match self {
            ValueType::U8 => "u8",
            ValueType::I8 => "i8",
            ValueType::U16 => "u16",
            ValueType::I16 => "i16",
            ValueType::U32 => "u32",
            ValueType::I32 => "i32",
            ValueType::F32 => "f32",
            ValueType::Bool => "bool",
            ValueType::String => "string",
            ValueType::Array => "array",
            ValueType::U64 => "u64",
            ValueType::I64 => "i64",
            ValueType::F64 => "f64",
        }
    }
}

impl fmt::Display for ValueType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One metadata value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// `u8`.
    U8(u8),
    /// `i8`.
    I8(i8),
    /// `u16`.
    U16(u16),
    /// `i16`.
    I16(i16),
    /// `u32`.
    U32(u32),
    /// `i32`.
    I32(i32),
    /// `u64`.
    U64(u64),
    /// `i64`.
    I64(i64),
    /// `f32`.
    F32(f32),
    /// `f64`.
    F64(f64),
    /// `bool`.
    Bool(bool),
    /// A UTF-8 string.
    String(String),
    /// An array.
    Array(Array),
}

impl Value {
    /// The value's type.
    pub fn value_type(&self) -> ValueType {
        match self {
            Value::U8(_) => ValueType::U8,
            Value::I8(_) => ValueType::I8,
            Value::U16(_) => ValueType::U16,
            Value::I16(_) => ValueType::I16,
            Value::U32(_) => ValueType::U32,
            Value::I32(_) => ValueType::I32,
            Value::U64(_) => ValueType::U64,
            Value::I64(_) => ValueType::I64,
            Value::F32(_) => ValueType::F32,
            Value::F64(_) => ValueType::F64,
            Value::Bool(_) => ValueType::Bool,
            Value::String(_) => ValueType::String,
            Value::Array(_) => ValueType::Array,
        }
    }

    /// The value as a signed 128-bit integer when it is an integer of any width.
    pub fn as_integer(&self) -> Option<i128> {
        Some(match *self {
            Value::U8(v) => v.into(),
            Value::I8(v) => v.into(),
            Value::U16(v) => v.into(),
            Value::I16(v) => v.into(),
            Value::U32(v) => v.into(),
            Value::I32(v) => v.into(),
            Value::U64(v) => v.into(),
            Value::I64(v) => v.into(),
            _ => return None,
        })
    }

    /// The string, when the value is one.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    /// The array, when the value is one.
    pub fn as_array(&self) -> Option<&Array> {
        match self {
            Value::Array(a) => Some(a),
            _ => None,
        }
    }

    /// A short description for messages: the type, and the value when it is
    /// short (a scalar, a string of at most 40 bytes, an array's length).
    pub fn describe(&self) -> String {
        match self {
            Value::String(s) if s.len() <= 40 => format!("string {s:?}"),
            Value::String(s) => format!("string of {} bytes", s.len()),
            Value::Array(a) => format!("array of {} {}", a.len(), a.element_type()),
            Value::Bool(b) => format!("bool {b}"),
            Value::F32(v) => format!("f32 {v}"),
            Value::F64(v) => format!("f64 {v}"),
            other => format!("{} {}", other.value_type(), other.as_integer().unwrap_or_default()),
        }
    }
}

/// An array value: elements of one type, stored as a typed vector.
#[derive(Debug, Clone, PartialEq)]
pub enum Array {
    /// `u8` elements.
    U8(Vec<u8>),
    /// `i8` elements.
    I8(Vec<i8>),
    /// `u16` elements.
    U16(Vec<u16>),
    /// `i16` elements.
    I16(Vec<i16>),
    /// `u32` elements.
    U32(Vec<u32>),
    /// `i32` elements.
    I32(Vec<i32>),
    /// `u64` elements.
    U64(Vec<u64>),
    /// `i64` elements.
    I64(Vec<i64>),
    /// `f32` elements.
    F32(Vec<f32>),
    /// `f64` elements.
    F64(Vec<f64>),
    /// `bool` elements.
    Bool(Vec<bool>),
    /// String elements.
    String(Vec<String>),
    /// Nested arrays (each may have its own element type).
    Array(Vec<Array>),
}

impl Array {
    /// The element type.
    pub fn element_type(&self) -> ValueType {
        match self {
            Array::U8(_) => ValueType::U8,
            Array::I8(_) => ValueType::I8,
            Array::U16(_) => ValueType::U16,
            Array::I16(_) => ValueType::I16,
            Array::U32(_) => ValueType::U32,
            Array::I32(_) => ValueType::I32,
            Array::U64(_) => ValueType::U64,
            Array::I64(_) => ValueType::I64,
            Array::F32(_) => ValueType::F32,
            Array::F64(_) => ValueType::F64,
            Array::Bool(_) => ValueType::Bool,
            Array::String(_) => ValueType::String,
            Array::Array(_) => ValueType::Array,
        }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        match self {
            Array::U8(v) => v.len(),
            Array::I8(v) => v.len(),
            Array::U16(v) => v.len(),
            Array::I16(v) => v.len(),
            Array::U32(v) => v.len(),
            Array::I32(v) => v.len(),
            Array::U64(v) => v.len(),
            Array::I64(v) => v.len(),
            Array::F32(v) => v.len(),
            Array::F64(v) => v.len(),
            Array::Bool(v) => v.len(),
            Array::String(v) => v.len(),
            Array::Array(v) => v.len(),
        }
    }

    /// Whether the array has no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Element `i` as a [`Value`] (copied; strings and nested arrays cloned).
    pub fn get(&self, i: usize) -> Option<Value> {
        Some(match self {
            Array::U8(v) => Value::U8(*v.get(i)?),
            Array::I8(v) => Value::I8(*v.get(i)?),
            Array::U16(v) => Value::U16(*v.get(i)?),
            Array::I16(v) => Value::I16(*v.get(i)?),
            Array::U32(v) => Value::U32(*v.get(i)?),
            Array::I32(v) => Value::I32(*v.get(i)?),
            Array::U64(v) => Value::U64(*v.get(i)?),
            Array::I64(v) => Value::I64(*v.get(i)?),
            Array::F32(v) => Value::F32(*v.get(i)?),
            Array::F64(v) => Value::F64(*v.get(i)?),
            Array::Bool(v) => Value::Bool(*v.get(i)?),
            Array::String(v) => Value::String(v.get(i)?.clone()),
            Array::Array(v) => Value::Array(v.get(i)?.clone()),
        })
    }

    /// The elements as a typed slice, when the element type is `T`'s.
    ///
    /// ```
    /// use gantry::model::gguf::Array;
    /// let a = Array::I32(vec![1, 2, 3]);
    /// assert_eq!(a.as_slice::<i32>(), Some(&[1, 2, 3][..]));
    /// assert_eq!(a.as_slice::<f32>(), None);
    /// ```
    pub fn as_slice<T: ArrayElement>(&self) -> Option<&[T]> {
        T::slice_of(self)
    }

    /// The string elements, when this is an array of strings.
    pub fn as_strings(&self) -> Option<&[String]> {
        match self {
            Array::String(v) => Some(v),
            _ => None,
        }
    }

    /// Every integer element widened to `i128`, when the elements are integers
    /// of any width (for metadata written with varying integer types).
    pub fn integers(&self) -> Option<Box<dyn Iterator<Item = i128> + '_>> {
        Some(match self {
            Array::U8(v) => Box::new(v.iter().map(|&x| x.into())),
            Array::I8(v) => Box::new(v.iter().map(|&x| x.into())),
            Array::U16(v) => Box::new(v.iter().map(|&x| x.into())),
            Array::I16(v) => Box::new(v.iter().map(|&x| x.into())),
            Array::U32(v) => Box::new(v.iter().map(|&x| x.into())),
            Array::I32(v) => Box::new(v.iter().map(|&x| x.into())),
            Array::U64(v) => Box::new(v.iter().map(|&x| x.into())),
            Array::I64(v) => Box::new(v.iter().map(|&x| x.into())),
            _ => return None,
        })
    }
}

/// An element type an [`Array`] can be viewed as a slice of.
pub trait ArrayElement: Sized {
    /// The slice, when `array` holds elements of this type.
    fn slice_of(array: &Array) -> Option<&[Self]>;
}

macro_rules! array_element {
    ($($t:ty => $variant:ident),* $(,)?) => {
        $(impl ArrayElement for $t {
            fn slice_of(array: &Array) -> Option<&[Self]> {
                match array {
                    Array::$variant(v) => Some(v),
                    _ => None,
                }
            }
        })*
    };
}

array_element!(
    u8 => U8, i8 => I8, u16 => U16, i16 => I16, u32 => U32, i32 => I32, u64 => U64, i64 => I64,
    f32 => F32, f64 => F64, bool => Bool, String => String, Array => Array,
);

/// A Rust type a metadata [`Value`] converts to, for the typed getters of
/// [`crate::model::gguf::Gguf`].
///
/// Integers convert from any integer type when the value fits (files differ
/// in which width they write, e.g. token ids as `u32` or `i32`); floats from
/// `f32` or `f64`; strings, bools and arrays only from their own type.
pub trait FromValue<'a>: Sized {
    /// What the getter expected, for error messages (`"u32"`).
    const EXPECTED: &'static str;

    /// The converted value, or `None` when the type does not fit.
    fn from_value(value: &'a Value) -> Option<Self>;
}

macro_rules! from_value_int {
    ($($t:ty),*) => {
        $(impl FromValue<'_> for $t {
            const EXPECTED: &'static str = stringify!($t);
            fn from_value(value: &Value) -> Option<Self> {
                value.as_integer().and_then(|v| <$t>::try_from(v).ok())
            }
        })*
    };
}

from_value_int!(u8, i8, u16, i16, u32, i32, u64, i64, usize);

impl FromValue<'_> for f32 {
    const EXPECTED: &'static str = "f32";
    fn from_value(value: &Value) -> Option<Self> {
        match *value {
            Value::F32(v) => Some(v),
            Value::F64(v) => Some(v as f32),
            _ => None,
        }
    }
}

impl FromValue<'_> for f64 {
    const EXPECTED: &'static str = "f64";
    fn from_value(value: &Value) -> Option<Self> {
        match *value {
            Value::F32(v) => Some(v.into()),
            Value::F64(v) => Some(v),
            _ => None,
        }
    }
}

impl FromValue<'_> for bool {
    const EXPECTED: &'static str = "bool";
    fn from_value(value: &Value) -> Option<Self> {
        match *value {
            Value::Bool(v) => Some(v),
            _ => None,
        }
    }
}

impl<'a> FromValue<'a> for &'a str {
    const EXPECTED: &'static str = "string";
    fn from_value(value: &'a Value) -> Option<Self> {
        value.as_str()
    }
}

impl<'a> FromValue<'a> for &'a Array {
    const EXPECTED: &'static str = "array";
    fn from_value(value: &'a Value) -> Option<Self> {
        value.as_array()
    }
}

impl<'a> FromValue<'a> for &'a Value {
    const EXPECTED: &'static str = "any value";
    fn from_value(value: &'a Value) -> Option<Self> {
        Some(value)
    }
}

macro_rules! from_value_slice {
    ($($t:ty),*) => {
        $(impl<'a> FromValue<'a> for &'a [$t] {
            const EXPECTED: &'static str = concat!("array of ", stringify!($t));
            fn from_value(value: &'a Value) -> Option<Self> {
                value.as_array()?.as_slice::<$t>()
            }
        })*
    };
}

from_value_slice!(u8, i8, u16, i16, u32, i32, u64, i64, f32, f64, bool, String);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn type_ids_round_trip_and_unknown_ids_are_none() {
        for id in 0..13 {
            assert_eq!(ValueType::from_id(id).map(ValueType::id), Some(id));
        }
        assert_eq!(ValueType::from_id(13), None);
        assert_eq!(ValueType::from_id(u32::MAX), None);
    }

    #[test]
    fn integer_conversion_is_lossless_or_none() {
        assert_eq!(u32::from_value(&Value::I32(7)), Some(7));
        assert_eq!(u32::from_value(&Value::I32(-1)), None);
        assert_eq!(u32::from_value(&Value::U64(u64::from(u32::MAX) + 1)), None);
        assert_eq!(i64::from_value(&Value::U8(200)), Some(200));
        assert_eq!(u32::from_value(&Value::F32(1.0)), None);
        assert_eq!(f32::from_value(&Value::F64(0.5)), Some(0.5));
        assert_eq!(<&str>::from_value(&Value::U8(1)), None);
    }

    #[test]
    fn arrays_give_typed_slices() {
        let a = Value::Array(Array::F32(vec![1.0, 2.5]));
        assert_eq!(<&[f32]>::from_value(&a), Some(&[1.0f32, 2.5][..]));
        assert_eq!(<&[i32]>::from_value(&a), None);
        let nested = Array::Array(vec![Array::U8(vec![1]), Array::String(vec!["x".into()])]);
        assert_eq!(nested.len(), 2);
        assert_eq!(nested.get(1), Some(Value::Array(Array::String(vec!["x".into()]))));
        assert_eq!(nested.get(2), None);
        let ints: Vec<i128> = Array::I16(vec![-3, 4]).integers().unwrap().collect();
        assert_eq!(ints, [-3, 4]);
    }
}
