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

#[cfg(test)]
mod tests {
    use super::{line_col, string_offset};
    use crate::model::Span;

    fn span(line: u32, col: u32) -> Span {
        Span { line, col }
    }

    #[test]
    fn lines_and_columns_count_characters() {
        let text = "aé\nbcd";
        assert_eq!(line_col(text, 0), span(1, 1));
        assert_eq!(line_col(text, 1), span(1, 2));
        // Inside `é`: the column of the character it is part of.
        assert_eq!(line_col(text, 2), span(1, 2));
        assert_eq!(line_col(text, 3), span(1, 3));
        assert_eq!(line_col(text, 4), span(2, 1));
        assert_eq!(line_col(text, 6), span(2, 3));
        // Past the end: the end.
        assert_eq!(line_col(text, 99), span(2, 4));
    }

    /// `raw` as the file has it, `value` as decoded, and where each
    /// decoded byte offset lies in `raw`.
    fn check(raw: &str, value: &str, want: &[(usize, usize)]) {
        for &(offset, at) in want {
            assert_eq!(string_offset(raw, value, offset), at, "{raw} at {offset}");
        }
    }

    #[test]
    fn escapes_map_back_to_where_the_file_wrote_them() {
        // `\u00e9` is `é`, two bytes decoded, six written.
        check(r#""\u00e9x""#, "éx", &[(0, 1), (2, 7), (3, 8)]);
        // `\U0001F600` is four bytes decoded, ten written.
        check(
            r#""\U0001F600x""#,
            "\u{1F600}x",
            &[(0, 1), (4, 11), (5, 12)],
        );
        // TOML 1.1's `\xe9`: two bytes decoded, four written.
        check(r#""\xe9x""#, "éx", &[(2, 5), (3, 6)]);
        // A short escape is one byte decoded, two written.
        check(r#""\"x""#, "\"x", &[(1, 3)]);
        // A literal string has no escapes.
        check(r"'\u00e9x'", r"\u00e9x", &[(6, 7)]);
        // An offset past the value maps to the string's end, the closing
        // quote, never beyond it.
        check(r#""ab""#, "ab", &[(2, 3), (5, 3)]);
        check(r#""""ab""""#, "ab", &[(2, 5), (9, 5)]);
    }

    #[test]
    fn a_multi_line_strings_line_ends_and_continuations() {
        // The line end right after the opening quotes is not part of the
        // value.
        check("\"\"\"\nab\"\"\"", "ab", &[(0, 4), (1, 5)]);
        check("\"\"\"\r\nab\"\"\"", "ab", &[(1, 6)]);
        // A line-ending backslash and the white space after it decode to
        // nothing.
        let raw = "\"\"\"a \\\n   b c\"\"\"";
        check(raw, "a b c", &[(1, 4), (2, 10), (4, 12)]);
        // A `\r\n` read as `\n` is one byte decoded, two written.
        check("\"\"\"a\r\nb\"\"\"", "a\nb", &[(2, 6)]);
        check("\"\"\"a\r\nb\"\"\"", "a\r\nb", &[(2, 5), (3, 6)]);
    }
}
