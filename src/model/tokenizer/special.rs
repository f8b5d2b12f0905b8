//! Splitting special tokens out of text before tokenizing it
//! (llama.cpp's `tokenizer_st_partition`).

use std::ops::Range;

use super::{TokenAttr, TokenId, Tokenizer};

/// A piece of the input: text still to tokenize, or a special token found in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Fragment {
    Text(Range<usize>),
    Token(TokenId),
}

/// Splits `text` at every occurrence of a special token, longest tokens
/// first. Control and unknown tokens count only with `parse_special`;
/// user-defined ones always. A token marked LSTRIP / RSTRIP swallows the
/// ASCII whitespace before / after it.
pub(crate) fn partition(tok: &Tokenizer, text: &str, parse_special: bool) -> Vec<Fragment> {
    let mut fragments = if text.is_empty() { Vec::new() } else { vec![Fragment::Text(0..text.len())] };
    let bytes = text.as_bytes();
    let skipped = TokenAttr::CONTROL.with(TokenAttr::UNKNOWN);
    for &id in &tok.special_by_length {
        let token = &tok.tokens[id as usize];
        if !parse_special && token.attr.intersects(skipped) {
            continue;
        }
        let needle = token.text.as_str();
        if !fragments.iter().any(|f| matches!(f, Fragment::Text(r) if text[r.clone()].contains(needle))) {
            continue;
        }
        let mut next = Vec::with_capacity(fragments.len() + 2);
        for fragment in fragments {
            let Fragment::Text(mut range) = fragment else {
                next.push(fragment);
                continue;
            };
            while let Some(at) = text[range.clone()].find(needle) {
                let start = range.start + at;
                let mut left_end = start;
                if token.attr.intersects(TokenAttr::LSTRIP) {
                    while left_end > range.start && is_c_space(bytes[left_end - 1]) {
                        left_end -= 1;
                    }
                }
                if left_end > range.start {
                    next.push(Fragment::Text(range.start..left_end));
                }
                next.push(Fragment::Token(id));
                let mut right_start = start + needle.len();
                if token.attr.intersects(TokenAttr::RSTRIP) {
                    while right_start < range.end && is_c_space(bytes[right_start]) {
                        right_start += 1;
                    }
                }
                range = right_start..range.end;
            }
            if !range.is_empty() {
                next.push(Fragment::Text(range));
            }
        }
        fragments = next;
    }
    fragments
}

/// C's `isspace` in the "C" locale (it includes vertical tab, which Rust's
/// `is_ascii_whitespace` does not).
fn is_c_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}
