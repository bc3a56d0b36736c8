//! The policy file as written: serde structures shared by the TOML and the
//! JSON reader, every value that is checked later carrying where it is in
//! the file.

use std::collections::BTreeMap;
use std::fmt;
use std::marker::PhantomData;

use serde::de::{DeserializeOwned, Error as _, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;

/// How a reader finds where a value is: TOML through `toml::Spanned`,
/// JSON through `serde_json`'s raw values.
pub(crate) trait Format {
    /// Reads a `T` and the start and end of its text, as
    /// [`Format::offset`] takes them.
    fn spanned<'de, T: DeserializeOwned, D: Deserializer<'de>>(
        d: D,
    ) -> Result<(T, usize, usize), D::Error>;

    /// A position as `spanned` gave it, as a byte offset in `text`.
    fn offset(pos: usize, text: &str) -> usize;
}

/// The TOML reader.
#[derive(Debug)]
pub(crate) enum Toml {}

/// The JSON reader.
#[derive(Debug)]
pub(crate) enum Json {}

impl Format for Toml {
    fn spanned<'de, T: DeserializeOwned, D: Deserializer<'de>>(
        d: D,
    ) -> Result<(T, usize, usize), D::Error> {
        let s = toml::Spanned::<T>::deserialize(d)?;
        let span = s.span();
        Ok((s.into_inner(), span.start, span.end))
    }

    fn offset(pos: usize, _text: &str) -> usize {
        pos
    }
}

impl Format for Json {
    fn spanned<'de, T: DeserializeOwned, D: Deserializer<'de>>(
        d: D,
    ) -> Result<(T, usize, usize), D::Error> {
        // The raw value borrows the file's text: its address, less the
        // text's, is where it is (see `offset`).
        let raw = <&'de RawValue>::deserialize(d)?;
        let s = raw.get();
        let v = serde_json::from_str(s).map_err(|e| {
            let m = strip_position(&e.to_string()).to_string();
            if m.starts_with(MARK) {
                return D::Error::custom(m);
            }
            // The error's place in `s`, as an address like `at` (see
            // `json_place`), since the outer reader would only know where
            // this value ends.
            let at = s.as_ptr() as usize + byte_offset(s, e.line(), e.column());
            D::Error::custom(format!("{MARK}{at}{MARK}{m}"))
        })?;
        let at = s.as_ptr() as usize;
        Ok((v, at, at + s.len()))
    }

    fn offset(pos: usize, text: &str) -> usize {
        pos.wrapping_sub(text.as_ptr() as usize).min(text.len())
    }
}

/// Starts and ends the place of an error found inside a JSON value.
const MARK: char = '\u{1}';

/// `serde_json`'s message without its " at line L column C".
pub(crate) fn strip_position(m: &str) -> &str {
    m.rfind(" at line ").map_or(m, |i| &m[..i])
}

/// The byte offset in `s` of 1-based `line` and `col` (as `serde_json`
/// counts them).
fn byte_offset(s: &str, line: usize, col: usize) -> usize {
    let start: usize = s
        .split_inclusive('\n')
        .take(line.saturating_sub(1))
        .map(str::len)
        .sum();
    (start + col.saturating_sub(1)).min(s.len())
}

/// For a JSON error: its byte offset in `text` and its message, if the
/// error was found inside a value (see [`Json`]'s `spanned`).
pub(crate) fn json_place<'m>(message: &'m str, text: &str) -> Option<(usize, &'m str)> {
    let rest = message.strip_prefix(MARK)?;
    let (at, m) = rest.split_once(MARK)?;
    Some((Json::offset(at.parse().ok()?, text), m))
}

/// A value and where its text starts and ends (as its [`Format`] gives
/// them; [`Sp::range`] turns them into byte offsets).
#[derive(Debug)]
pub(crate) struct Sp<T, F> {
    pub(crate) value: T,
    start: usize,
    end: usize,
    _f: PhantomData<F>,
}

impl<T, F: Format> Sp<T, F> {
    /// Byte offsets of the value's text in `text`.
    pub(crate) fn range(&self, text: &str) -> (usize, usize) {
        let s = F::offset(self.start, text);
        (s, F::offset(self.end, text).max(s))
    }
}

impl<'de, T: DeserializeOwned, F: Format> Deserialize<'de> for Sp<T, F> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let (value, start, end) = F::spanned(d)?;
        Ok(Sp {
            value,
            start,
            end,
            _f: PhantomData,
        })
    }
}

/// A table of named things whose names must differ (JSON objects may
/// repeat a key; a policy may not).
#[derive(Debug)]
pub(crate) struct UniqueMap<V>(pub(crate) BTreeMap<String, V>);

impl<V> Default for UniqueMap<V> {
    fn default() -> Self {
        UniqueMap(BTreeMap::new())
    }
}

impl<'de, V: Deserialize<'de>> Deserialize<'de> for UniqueMap<V> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V_<V>(PhantomData<V>);
        impl<'de, V: Deserialize<'de>> Visitor<'de> for V_<V> {
            type Value = UniqueMap<V>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a table of names")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<Self::Value, A::Error> {
                let mut m = BTreeMap::new();
                while let Some((k, v)) = a.next_entry::<String, V>()? {
                    if m.contains_key(&k) {
                        return Err(A::Error::custom(format!("duplicate name `{k}`")));
                    }
                    m.insert(k, v);
                }
                Ok(UniqueMap(m))
            }
        }
        d.deserialize_map(V_(PhantomData))
    }
}

/// The whole file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, bound(deserialize = "F: Format"))]
pub(crate) struct RawPolicy<F> {
    #[serde(default)]
    pub(crate) default: Option<RawDefault<F>>,
    #[serde(default)]
    pub(crate) port: Vec<RawPort<F>>,
    #[serde(default)]
    pub(crate) address_sets: UniqueMap<Sp<Vec<Sp<String, F>>, F>>,
    #[serde(default)]
    pub(crate) port_groups: UniqueMap<Sp<Vec<Sp<String, F>>, F>>,
    #[serde(default)]
    pub(crate) acl: Vec<Sp<RawAcl<F>, F>>,
    #[serde(default)]
    pub(crate) meters: UniqueMap<Sp<RawMeter<F>, F>>,
    /// `[copp]`: OVN's `Copp` meters by key (only `reject` is taken).
    #[serde(default)]
    pub(crate) copp: UniqueMap<Sp<String, F>>,
}

/// One `[meters.NAME]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, bound(deserialize = "F: Format"))]
pub(crate) struct RawMeter<F> {
    #[serde(default)]
    pub(crate) unit: Option<Sp<String, F>>,
    pub(crate) rate: Sp<i64, F>,
    #[serde(default)]
    pub(crate) burst: Option<Sp<i64, F>>,
    #[serde(default)]
    pub(crate) fair: Option<bool>,
}

/// `[default]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, bound(deserialize = "F: Format"))]
pub(crate) struct RawDefault<F> {
    #[serde(default)]
    pub(crate) action: Option<Sp<String, F>>,
}

/// One `[[port]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, bound(deserialize = "F: Format"))]
pub(crate) struct RawPort<F> {
    pub(crate) name: Sp<String, F>,
    #[serde(default)]
    pub(crate) addresses: Vec<Sp<String, F>>,
    #[serde(default)]
    pub(crate) zone: Option<Sp<i64, F>>,
    #[serde(default)]
    pub(crate) port_security: Vec<Sp<String, F>>,
    #[serde(default)]
    pub(crate) enabled: Option<bool>,
}

/// One `[[acl]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, bound(deserialize = "F: Format"))]
pub(crate) struct RawAcl<F> {
    #[serde(default)]
    pub(crate) name: Option<Sp<String, F>>,
    pub(crate) direction: Sp<String, F>,
    pub(crate) priority: Sp<i64, F>,
    #[serde(rename = "match")]
    pub(crate) match_: Sp<String, F>,
    pub(crate) action: Sp<String, F>,
    #[serde(default)]
    pub(crate) tier: Option<Sp<i64, F>>,
    #[serde(default)]
    pub(crate) label: Option<Sp<i64, F>>,
    #[serde(default)]
    pub(crate) log: Option<bool>,
    #[serde(default)]
    pub(crate) severity: Option<Sp<String, F>>,
    #[serde(default)]
    pub(crate) meter: Option<Sp<String, F>>,
    #[serde(default, rename = "log-related")]
    pub(crate) log_related: Option<bool>,
    #[serde(default, rename = "persist-established")]
    pub(crate) persist_established: Option<bool>,
    #[serde(default)]
    pub(crate) nat: Option<Sp<String, F>>,
    #[serde(default)]
    pub(crate) alg: Option<Sp<String, F>>,
}
