//! Positions in the policy file: byte offsets to lines and columns, and
//! offsets inside a decoded string back to the file.

use crate::model::Span;

/// The 1-based line and column (in characters) of byte `offset` of
/// `text`.
pub(crate) fn line_col(text: &str, offset: usize) -> Span {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &text[..offset];
    let line = before.bytes().filter(|&b| b == b'\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let col = before[line_start..].chars().count() + 1;
    Span {
        line: u32::try_from(line).unwrap_or(u32::MAX),
        col: u32::try_from(col).unwrap_or(u32::MAX),
    }
}

/// Reads `n` hex digits of `raw` from `at` as a character's length in
/// UTF-8 (3 for what is not a character, as U+FFFD).
fn escaped_len(raw: &str, at: usize, n: usize) -> usize {
    raw.get(at..at + n)
        .and_then(|h| u32::from_str_radix(h, 16).ok())
        .and_then(char::from_u32)
        .map_or(3, char::len_utf8)
}

/// Where, in the quoted string `raw` as the file has it (TOML basic,
/// literal or multi-line, or JSON), the byte `offset` of its decoded value
/// is: an offset from the start of `raw`. `value` is the decoded string,
/// to tell how line ends were read. Never panics; a string it cannot
/// follow maps to its end.
pub(crate) fn string_offset(raw: &str, value: &str, offset: usize) -> usize {
    let b = raw.as_bytes();
    let multi = raw.starts_with("\"\"\"") || raw.starts_with("'''");
    let literal = raw.starts_with('\'');
    let delim = if multi { 3 } else { 1 };
    let end = raw.len().saturating_sub(delim).max(delim.min(raw.len()));
    let mut pos = delim.min(raw.len());
    if multi {
        if raw[pos..].starts_with("\r\n") {
            pos += 2;
        } else if raw[pos..].starts_with('\n') {
            pos += 1;
        }
    }
    let keeps_cr = value.contains('\r');
    let mut decoded = 0;
    while pos < end && decoded < offset {
        let Some(ch) = raw.get(pos..).and_then(|s| s.chars().next()) else {
            break;
        };
        if ch == '\\' && !literal {
            let e = b.get(pos + 1).copied().unwrap_or(b'"');
            match e {
                b'u' => {
                    decoded += escaped_len(raw, pos + 2, 4);
                    pos += 6;
                }
                b'U' => {
                    decoded += escaped_len(raw, pos + 2, 8);
                    pos += 10;
                }
                b'x' => {
                    decoded += escaped_len(raw, pos + 2, 2);
                    pos += 4;
                }
                b' ' | b'\t' | b'\r' | b'\n' if multi => {
                    pos += 1;
                    while matches!(b.get(pos), Some(b' ' | b'\t' | b'\r' | b'\n')) {
                        pos += 1;
                    }
                }
                _ => {
                    decoded += 1;
                    pos += 2;
                }
            }
        } else if ch == '\r' && multi && !keeps_cr && b.get(pos + 1) == Some(&b'\n') {
            pos += 1;
        } else {
            decoded += ch.len_utf8();
            pos += ch.len_utf8();
        }
    }
    // A line-ending backslash right before the offset decodes to nothing:
    // the offset is after it.
    if multi && !literal && b.get(pos) == Some(&b'\\') {
        let mut q = pos + 1;
        while matches!(b.get(q), Some(b' ' | b'\t' | b'\r' | b'\n')) {
            q += 1;
        }
        if q > pos + 1 && b[pos + 1..q].contains(&b'\n') {
            pos = q;
        }
    }
    pos.min(raw.len())
}
