//! The lexer: OVN's tokens (lib/lex.c's rules, rewritten), one at a time.
//!
//! Identifiers are letters, digits, `_` and `.`, not starting with a
//! digit; "integers" are decimal, `0x` hexadecimal, MAC, IPv4 or IPv6
//! constants, each optionally `/` a mask; strings are JSON strings; `$name`
//! names an address set, `@name` a port group; `//` and `/* */` (on one
//! line) are comments.

use std::net::{Ipv4Addr, Ipv6Addr};

use super::LangError;

/// How a constant was written: it decides its width and how a `/mask`
/// after it reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Format {
    Decimal,
    Hex,
    Ipv4,
    Ipv6,
    Mac,
}

/// An integer constant, maybe masked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Const {
    pub(crate) value: u128,
    pub(crate) mask: Option<u128>,
    pub(crate) format: Format,
}

impl Const {
    /// The smallest field width the constant fits (OVN's
    /// `expr_constant_width`).
    pub(crate) fn width(&self) -> u32 {
        let bits = |x: u128| 128 - x.leading_zeros();
        match (self.mask, self.format) {
            (Some(m), _) => bits(m),
            (None, Format::Decimal | Format::Hex) => bits(self.value),
            (None, Format::Ipv4) => 32,
            (None, Format::Ipv6) => 128,
            (None, Format::Mac) => 48,
        }
    }
}

/// A token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Tok<'a> {
    Id(&'a str),
    Int(Const),
    Str(String),
    /// `$name`.
    AddrSet(&'a str),
    /// `@name`.
    PortGroup(&'a str),
    LParen,
    RParen,
    LCurly,
    RCurly,
    LSquare,
    Comma,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    Not,
    And,
    Or,
    /// Punctuation OVN lexes but a match never uses (`=`, `;`, `..`, `-`,
    /// `:`, `]`, `<->`, `--`).
    Other(&'static str),
    End,
}

impl Tok<'_> {
    /// How the token reads in a message.
    pub(crate) fn describe(&self) -> String {
        match self {
            Tok::Id(s) => format!("`{s}`"),
            Tok::Int(_) => "a number".into(),
            Tok::Str(s) => format!("string {s:?}"),
            Tok::AddrSet(s) => format!("`${s}`"),
            Tok::PortGroup(s) => format!("`@{s}`"),
            Tok::LParen => "`(`".into(),
            Tok::RParen => "`)`".into(),
            Tok::LCurly => "`{`".into(),
            Tok::RCurly => "`}`".into(),
            Tok::LSquare => "`[`".into(),
            Tok::Comma => "`,`".into(),
            Tok::Eq => "`==`".into(),
            Tok::Ne => "`!=`".into(),
            Tok::Lt => "`<`".into(),
            Tok::Le => "`<=`".into(),
            Tok::Gt => "`>`".into(),
            Tok::Ge => "`>=`".into(),
            Tok::Not => "`!`".into(),
            Tok::And => "`&&`".into(),
            Tok::Or => "`||`".into(),
            Tok::Other(s) => format!("`{s}`"),
            Tok::End => "the end of the match".into(),
        }
    }
}

/// A token and the byte offset where it starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Token<'a> {
    pub(crate) tok: Tok<'a>,
    pub(crate) at: usize,
}

/// Hands out the tokens of a match text, with one token of lookahead.
#[derive(Debug)]
pub(crate) struct Lexer<'a> {
    text: &'a str,
    pos: usize,
    peeked: Option<Token<'a>>,
}

fn is_id1(c: u8) -> bool {
    c.is_ascii_alphabetic() || c == b'_' || c == b'.'
}

fn is_idn(c: u8) -> bool {
    is_id1(c) || c.is_ascii_digit()
}

fn err(at: usize, message: impl Into<String>) -> LangError {
    LangError {
        offset: at,
        message: message.into(),
    }
}

impl<'a> Lexer<'a> {
    pub(crate) fn new(text: &'a str) -> Lexer<'a> {
        Lexer {
            text,
            pos: 0,
            peeked: None,
        }
    }

    /// The next token, without taking it.
    pub(crate) fn peek(&mut self) -> Result<&Token<'a>, LangError> {
        if self.peeked.is_none() {
            let t = self.lex()?;
            self.peeked = Some(t);
        }
        match &self.peeked {
            Some(t) => Ok(t),
            None => Err(err(self.pos, "internal: no token")),
        }
    }

    /// Takes the next token.
    pub(crate) fn next(&mut self) -> Result<Token<'a>, LangError> {
        self.peek()?;
        match self.peeked.take() {
            Some(t) => Ok(t),
            None => Err(err(self.pos, "internal: no token")),
        }
    }

    fn byte(&self, i: usize) -> u8 {
        self.text.as_bytes().get(i).copied().unwrap_or(0)
    }

    /// Skips white space and comments.
    fn skip(&mut self) -> Result<(), LangError> {
        loop {
            match (self.byte(self.pos), self.byte(self.pos + 1)) {
                (b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c, _) => self.pos += 1,
                (b'/', b'/') => {
                    while self.pos < self.text.len() && self.byte(self.pos) != b'\n' {
                        self.pos += 1;
                    }
                }
                (b'/', b'*') => {
                    let start = self.pos;
                    self.pos += 2;
                    loop {
                        if self.pos >= self.text.len() || self.byte(self.pos) == b'\n' {
                            return Err(err(start, "`/*` without `*/` on the same line"));
                        }
                        if self.byte(self.pos) == b'*' && self.byte(self.pos + 1) == b'/' {
                            self.pos += 2;
                            break;
                        }
                        self.pos += 1;
                    }
                }
                _ => return Ok(()),
            }
        }
    }

    fn lex(&mut self) -> Result<Token<'a>, LangError> {
        self.skip()?;
        let at = self.pos;
        let (c, d) = (self.byte(at), self.byte(at + 1));
        if at >= self.text.len() {
            return Ok(Token { tok: Tok::End, at });
        }
        let two = |t: Tok<'a>| (t, 2);
        let one = |t: Tok<'a>| (t, 1);
        let (tok, len) = match (c, d) {
            (b'(', _) => one(Tok::LParen),
            (b')', _) => one(Tok::RParen),
            (b'{', _) => one(Tok::LCurly),
            (b'}', _) => one(Tok::RCurly),
            (b'[', _) => one(Tok::LSquare),
            (b']', _) => one(Tok::Other("]")),
            (b',', _) => one(Tok::Comma),
            (b';', _) => one(Tok::Other(";")),
            (b'=', b'=') => two(Tok::Eq),
            (b'=', _) => one(Tok::Other("=")),
            (b'!', b'=') => two(Tok::Ne),
            (b'!', _) => one(Tok::Not),
            (b'&', b'&') => two(Tok::And),
            (b'|', b'|') => two(Tok::Or),
            (b'<', b'=') => two(Tok::Le),
            (b'<', b'-') if self.byte(at + 2) == b'>' => (Tok::Other("<->"), 3),
            (b'<', _) => one(Tok::Lt),
            (b'>', b'=') => two(Tok::Ge),
            (b'>', _) => one(Tok::Gt),
            (b'.', b'.') => two(Tok::Other("..")),
            (b'-', b'-') => two(Tok::Other("--")),
            (b'-', _) => one(Tok::Other("-")),
            (b':', b':') => return self.integer(),
            (b':', _) => one(Tok::Other(":")),
            (b'0'..=b'9', _) => return self.integer(),
            (b'"', _) => return self.string(),
            (b'$' | b'@', _) => return self.name(c),
            (b'a'..=b'f' | b'A'..=b'F', _) => {
                let hex = self.text.as_bytes()[at..]
                    .iter()
                    .take_while(|b| b.is_ascii_hexdigit())
                    .count();
                if self.byte(at + hex) == b':' {
                    return self.integer();
                }
                return Ok(self.id());
            }
            _ if is_id1(c) => return Ok(self.id()),
            (b'&', _) => return Err(err(at, "`&` is only valid as part of `&&`")),
            (b'|', _) => return Err(err(at, "`|` is only valid as part of `||`")),
            (b'/', _) => return Err(err(at, "`/` is only valid as part of `//`, `/*` or a mask")),
            (b'.', _) => return Err(err(at, "`.` is only valid as part of a name or a number")),
            _ => {
                let ch = self
                    .text
                    .get(at..)
                    .and_then(|t| t.chars().next())
                    .unwrap_or('?');
                return Err(err(at, format!("unexpected character {ch:?}")));
            }
        };
        self.pos += len;
        Ok(Token { tok, at })
    }

    fn id(&mut self) -> Token<'a> {
        let at = self.pos;
        self.pos += 1;
        while is_idn(self.byte(self.pos)) {
            self.pos += 1;
        }
        Token {
            tok: Tok::Id(&self.text[at..self.pos]),
            at,
        }
    }

    fn name(&mut self, sigil: u8) -> Result<Token<'a>, LangError> {
        let at = self.pos;
        self.pos += 1;
        if !is_id1(self.byte(self.pos)) {
            return Err(err(
                at,
                format!("`{}` must be followed by a name", char::from(sigil)),
            ));
        }
        let Token { tok, .. } = self.id();
        let Tok::Id(name) = tok else {
            return Err(err(at, "internal: name"));
        };
        let tok = if sigil == b'$' {
            Tok::AddrSet(name)
        } else {
            Tok::PortGroup(name)
        };
        Ok(Token { tok, at })
    }

    /// A JSON string, as OVN's string constants.
    fn string(&mut self) -> Result<Token<'a>, LangError> {
        let at = self.pos;
        let mut i = at + 1;
        loop {
            match self.byte(i) {
                _ if i >= self.text.len() => {
                    return Err(err(at, "the match ends inside a quoted string"));
                }
                b'"' => break,
                b'\\' => i += 2,
                _ => i += 1,
            }
        }
        let raw = self.text.get(at..=i).unwrap_or("");
        let s: String =
            serde_json::from_str(raw).map_err(|e| err(at, format!("bad quoted string: {e}")))?;
        self.pos = i + 1;
        Ok(Token {
            tok: Tok::Str(s),
            at,
        })
    }

    /// A number, address, or either with `/mask`.
    fn integer(&mut self) -> Result<Token<'a>, LangError> {
        let at = self.pos;
        let value = self.constant()?;
        if self.byte(self.pos) != b'/' {
            return Ok(Token {
                tok: Tok::Int(value),
                at,
            });
        }
        self.pos += 1;
        let mask_at = self.pos;
        let mask = self.constant()?;
        let m = match (value.format, mask.format) {
            (a, b) if a == b => mask.value,
            (Format::Ipv4, Format::Decimal) if mask.value <= 32 => {
                (u128::from(u32::MAX) << (32 - mask.value)) & u128::from(u32::MAX)
            }
            (Format::Ipv6, Format::Decimal) if mask.value <= 128 => {
                u128::MAX.checked_shl(128 - mask.value as u32).unwrap_or(0)
            }
            (Format::Decimal, Format::Hex) if value.value == 0 => mask.value,
            (f @ (Format::Ipv4 | Format::Ipv6), Format::Decimal) => {
                let (family, most) = if f == Format::Ipv4 {
                    ("IPv4", 32)
                } else {
                    ("IPv6", 128)
                };
                return Err(err(
                    mask_at,
                    format!(
                        "prefix length {} is longer than an {family} address (at most /{most})",
                        mask.value
                    ),
                ));
            }
            _ => {
                return Err(err(
                    mask_at,
                    "value and mask have incompatible forms (expected the same form, \
                     or a prefix length after an IP address)",
                ));
            }
        };
        let format = if value.format == Format::Decimal && mask.format == Format::Hex {
            Format::Hex
        } else {
            value.format
        };
        Ok(Token {
            tok: Tok::Int(Const {
                value: value.value & m,
                mask: Some(m),
                format,
            }),
            at,
        })
    }

    /// One constant without a mask: its extent is as OVN's (letters,
    /// digits, `:` before any `.`, `.` not followed by `.`).
    fn constant(&mut self) -> Result<Const, LangError> {
        let at = self.pos;
        let mut end = at;
        let mut saw_dot = false;
        loop {
            let c = self.byte(end);
            if c.is_ascii_alphanumeric() || (c == b':' && !saw_dot) {
                end += 1;
            } else if c == b'.' && self.byte(end + 1) != b'.' {
                saw_dot = true;
                end += 1;
            } else {
                break;
            }
        }
        self.pos = end;
        let s = &self.text[at..end];
        parse_constant(s).map_err(|m| err(at, m))
    }
}

/// Reads one unmasked constant.
fn parse_constant(s: &str) -> Result<Const, String> {
    let c = |value, format| {
        Ok(Const {
            value,
            mask: None,
            format,
        })
    };
    if s.is_empty() {
        return Err("expected a number or an address".into());
    }
    if let Some(mac) = parse_mac(s) {
        return c(u128::from(mac), Format::Mac);
    }
    if s.bytes().all(|b| b.is_ascii_digit()) {
        if s.len() > 1 && s.starts_with('0') {
            return Err("decimal constants must not have leading zeros".into());
        }
        return match s.parse::<u128>() {
            Ok(v) => c(v, Format::Decimal),
            Err(_) => Err("decimal constant too large".into()),
        };
    }
    if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        if h.is_empty() {
            return Err("hex digits expected after 0x".into());
        }
        if !h.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err("invalid hexadecimal constant".into());
        }
        let digits = h.trim_start_matches('0');
        if digits.len() > 32 {
            return Err("hexadecimal constant wider than 128 bits".into());
        }
        return match u128::from_str_radix(if digits.is_empty() { "0" } else { digits }, 16) {
            Ok(v) => c(v, Format::Hex),
            Err(_) => Err("invalid hexadecimal constant".into()),
        };
    }
    if let Ok(a) = s.parse::<Ipv4Addr>() {
        return c(u128::from(u32::from(a)), Format::Ipv4);
    }
    if let Ok(a) = s.parse::<Ipv6Addr>() {
        return c(u128::from(a), Format::Ipv6);
    }
    Err(format!(
        "invalid constant `{s}` (expected decimal, 0x hex, MAC, IPv4 or IPv6)"
    ))
}

/// `xx:xx:xx:xx:xx:xx`, two hex digits each, as a 48-bit number.
pub(crate) fn parse_mac(s: &str) -> Option<u64> {
    let b = s.as_bytes();
    if b.len() != 17 {
        return None;
    }
    let mut v = 0u64;
    for (i, part) in s.split(':').enumerate() {
        if i >= 6 || part.len() != 2 || !part.bytes().all(|c| c.is_ascii_hexdigit()) {
            return None;
        }
        v = (v << 8) | u64::from(u8::from_str_radix(part, 16).ok()?);
    }
    Some(v)
}
