//! The Unicode facts tokenizers need: category classes of code points
//! (as llama.cpp's tables give them, Unicode 15.1), and GPT-2's mapping of
//! bytes to printable characters.

use super::unicode_tables::CATEGORY_RANGES;

/// The general category class of a code point (the first letter of its
/// Unicode general category; unassigned code points apart).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Category {
    /// Unassigned (`Cn`).
    Unassigned,
    /// `\p{N}`.
    Number,
    /// `\p{L}`.
    Letter,
    /// `\p{Z}`.
    Separator,
    /// `\p{M}` (combining marks).
    Mark,
    /// `\p{P}`.
    Punctuation,
    /// `\p{S}`.
    Symbol,
    /// `\p{C}` other than unassigned: controls, format, surrogates, private use.
    Other,
}

const CLASSES: [Category; 8] = [
    Category::Unassigned,
    Category::Number,
    Category::Letter,
    Category::Separator,
    Category::Mark,
    Category::Punctuation,
    Category::Symbol,
    Category::Other,
];

/// The category class of `c`.
///
/// ```
/// use gantry::model::tokenizer::{Category, category};
/// assert_eq!(category('a'), Category::Letter);
/// assert_eq!(category('٣'), Category::Number);
/// assert_eq!(category('\u{301}'), Category::Mark);
/// assert_eq!(category('🦙'), Category::Symbol);
/// ```
pub fn category(c: char) -> Category {
    let cp = c as u32;
    // The ranges are sorted by first code point; find the last one starting at or before `cp`.
    let i = CATEGORY_RANGES.partition_point(|&(start, _)| start <= cp);
    let class = CATEGORY_RANGES[i.saturating_sub(1)].1;
    CLASSES[usize::from(class) & 7]
}

/// What the pre-tokenizers ask about a code point. `NONE` stands for a
/// position outside the text being split (it matches no class).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CharClass {
    pub category: Option<Category>,
    pub whitespace: bool,
}

impl CharClass {
    pub const NONE: CharClass = CharClass { category: None, whitespace: false };

    pub fn of(c: char) -> CharClass {
        CharClass { category: Some(category(c)), whitespace: c.is_whitespace() }
    }

    pub fn is_letter(self) -> bool {
        self.category == Some(Category::Letter)
    }

    pub fn is_number(self) -> bool {
        self.category == Some(Category::Number)
    }

    pub fn is_mark(self) -> bool {
        self.category == Some(Category::Mark)
    }

    pub fn is_punctuation(self) -> bool {
        self.category == Some(Category::Punctuation)
    }

    /// A code point inside the text (any class).
    pub fn exists(self) -> bool {
        self.category.is_some()
    }
}

/// GPT-2's printable stand-in for byte `b`: bytes that are printable Latin-1
/// characters stand for themselves, the others for U+0100 upwards in order.
pub fn byte_to_char(b: u8) -> char {
    BYTE_CHARS[usize::from(b)]
}

/// The byte GPT-2's printable character `c` stands for.
pub fn char_to_byte(c: char) -> Option<u8> {
    let cp = c as u32;
    if cp < 256 {
        let b = cp as u8;
        return (byte_to_char(b) == c).then_some(b);
    }
    // U+0100 + n stands for the n-th byte (in order) that is not printable.
    let n = (cp - 256) as usize;
    NON_PRINTABLE.get(n).copied()
}

const fn is_printable_byte(b: u8) -> bool {
    matches!(b, 0x21..=0x7e | 0xa1..=0xac | 0xae..=0xff)
}

const NON_PRINTABLE: [u8; 68] = {
    let mut out = [0u8; 68];
    let (mut b, mut n) = (0usize, 0usize);
    while b < 256 {
        if !is_printable_byte(b as u8) {
            out[n] = b as u8;
            n += 1;
        }
        b += 1;
    }
    out
};

const BYTE_CHARS: [char; 256] = {
    let mut out = ['\0'; 256];
    let (mut b, mut n) = (0usize, 0u32);
    while b < 256 {
        out[b] = if is_printable_byte(b as u8) {
            match char::from_u32(b as u32) {
                Some(c) => c,
                None => '\0',
            }
        } else {
            n += 1;
            match char::from_u32(255 + n) {
                Some(c) => c,
                None => '\0',
            }
        };
        b += 1;
    }
    out
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gpt2_byte_mapping_is_a_bijection_with_the_known_anchors() {
        // From GPT-2's bytes_to_unicode: space -> 'Ġ' (U+0120), newline -> 'Ċ' (U+010A).
        assert_eq!(byte_to_char(b' '), 'Ġ');
        assert_eq!(byte_to_char(b'\n'), 'Ċ');
        assert_eq!(byte_to_char(0), '\u{100}');
        assert_eq!(byte_to_char(b'a'), 'a');
        assert_eq!(byte_to_char(0xad), '\u{143}');
        let mut seen = std::collections::HashSet::new();
        for b in 0..=255u8 {
            let c = byte_to_char(b);
            assert!(seen.insert(c));
            assert_eq!(char_to_byte(c), Some(b));
        }
        assert_eq!(char_to_byte(' '), None);
        assert_eq!(char_to_byte('\u{144}'), None);
    }

    #[test]
    fn categories_of_known_code_points() {
        let cases = [
            ('A', Category::Letter),
            ('é', Category::Letter),
            ('ж', Category::Letter),
            ('中', Category::Letter),
            ('7', Category::Number),
            ('½', Category::Number),
            (' ', Category::Separator),
            ('\u{a0}', Category::Separator),
            ('!', Category::Punctuation),
            ('$', Category::Symbol),
            ('\n', Category::Other),
            ('\u{e000}', Category::Other),
            ('\u{378}', Category::Unassigned),
            // Added in Unicode 15.0 (Kawi) and 15.1 (CJK Ext. I): llama.cpp's tables know them.
            ('\u{11f04}', Category::Letter),
            ('\u{2ebf0}', Category::Letter),
            ('\u{10ffff}', Category::Unassigned),
        ];
        for (c, want) in cases {
            assert_eq!(category(c), want, "{c:?}");
        }
    }
}
