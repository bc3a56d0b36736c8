//! Checks of command-line values: clap value parsers that name the range
//! they accept, so that a value out of it is a usage error (exit status 2)
//! that says what is allowed.

use std::fmt::Display;
use std::num::{IntErrorKind, ParseIntError};
use std::str::FromStr;

/// The most connections a table may be sized for: the default 64 shards
/// hold 2^23 connections each (a shard's slot numbers have 23 bits).
pub const MAX_CONNS: usize = 1 << 29;

/// The most threads a benchmark may start.
pub const MAX_THREADS: usize = 1024;

/// The most runs of a benchmark.
pub const MAX_RUNS: usize = 1000;

/// A value parser for a whole number in `min..=max`.
pub fn bounded<T>(min: T, max: T) -> impl Fn(&str) -> Result<T, String> + Clone + Send + Sync
where
    T: FromStr<Err = ParseIntError> + PartialOrd + Display + Copy + Send + Sync,
{
    move |s: &str| {
        whole(s, min, max, || {
            format!("must be a whole number from {min} to {max}")
        })
    }
}

/// A value parser for a whole number of at least `min` (up to the type's
/// largest).
pub fn at_least<T>(min: T) -> impl Fn(&str) -> Result<T, String> + Clone + Send + Sync
where
    T: FromStr<Err = ParseIntError> + PartialOrd + Display + Copy + Send + Sync + Bounded,
{
    move |s: &str| {
        whole(s, min, T::MAX, || {
            format!("must be a whole number of at least {min}")
        })
    }
}

/// Integer types' largest values.
pub trait Bounded {
    /// The largest value.
    const MAX: Self;
}

impl Bounded for u64 {
    const MAX: u64 = u64::MAX;
}

fn whole<T>(s: &str, min: T, max: T, range: impl Fn() -> String) -> Result<T, String>
where
    T: FromStr<Err = ParseIntError> + PartialOrd + Copy,
{
    match s.trim().parse::<T>() {
        Ok(v) if v >= min && v <= max => Ok(v),
        Ok(_) => Err(range()),
        Err(e) => match e.kind() {
            IntErrorKind::PosOverflow => Err(format!("too large: {}", range())),
            IntErrorKind::NegOverflow => Err(range()),
            _ if s.trim().starts_with('-') => Err(range()),
            _ => Err(format!("not a number: {}", range())),
        },
    }
}

/// A value parser for a power of two from 1 to `max`.
pub fn power_of_two(max: usize) -> impl Fn(&str) -> Result<usize, String> + Clone + Send + Sync {
    move |s: &str| {
        let range = || format!("must be a power of two from 1 to {max}");
        match s.trim().parse::<usize>() {
            Ok(v) if v.is_power_of_two() && v <= max => Ok(v),
            _ => Err(range()),
        }
    }
}

/// A value parser for a positive, finite number.
pub fn positive(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if v > 0.0 && v.is_finite() => Ok(v),
        _ => Err("must be a positive number".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_values() {
        let p = bounded(1usize, 32);
        assert_eq!(p("1"), Ok(1));
        assert_eq!(p("32"), Ok(32));
        assert_eq!(p("33"), Err("must be a whole number from 1 to 32".into()));
        assert_eq!(p("0"), Err("must be a whole number from 1 to 32".into()));
        assert_eq!(p("-1"), Err("must be a whole number from 1 to 32".into()));
        assert!(
            p("99999999999999999999999")
                .unwrap_err()
                .starts_with("too large")
        );
        assert!(p("x").unwrap_err().starts_with("not a number"));
        assert_eq!(
            bounded(0u8, 1)("2"),
            Err("must be a whole number from 0 to 1".into())
        );
    }

    #[test]
    fn powers_of_two_and_positive_numbers() {
        let p = power_of_two(64);
        assert_eq!(p("1"), Ok(1));
        assert_eq!(p("64"), Ok(64));
        for bad in ["0", "3", "128", "x"] {
            assert!(p(bad).is_err(), "{bad}");
        }
        assert_eq!(positive("1.5"), Ok(1.5));
        for bad in ["0", "-1", "inf", "NaN", "x"] {
            assert!(positive(bad).is_err(), "{bad}");
        }
    }
}
