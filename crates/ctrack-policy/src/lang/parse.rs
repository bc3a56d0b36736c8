//! The parser: OVN's grammar (lib/expr.c's `expr_parse__`, rewritten) into
//! a [`Node`] tree with `!` already pushed down to the comparisons, and
//! OVN's checks on types, widths and levels of measurement.

use super::lex::{Const, Format, Lexer, Tok, Token};
use super::symbols::{self, Kind, Level, Symbol};
use super::{Context, LangError, MAX_DEPTH, ip_u128};

/// A relational operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Relop {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl Relop {
    fn of(t: &Tok<'_>) -> Option<Relop> {
        Some(match t {
            Tok::Eq => Relop::Eq,
            Tok::Ne => Relop::Ne,
            Tok::Lt => Relop::Lt,
            Tok::Le => Relop::Le,
            Tok::Gt => Relop::Gt,
            Tok::Ge => Relop::Ge,
            _ => return None,
        })
    }

    /// The relation with its operands swapped (`80 < f` is `f > 80`).
    fn turn(self) -> Relop {
        match self {
            Relop::Lt => Relop::Gt,
            Relop::Le => Relop::Ge,
            Relop::Gt => Relop::Lt,
            Relop::Ge => Relop::Le,
            r => r,
        }
    }

    /// The opposite relation (`!(f < 80)` is `f >= 80`).
    fn invert(self) -> Relop {
        match self {
            Relop::Eq => Relop::Ne,
            Relop::Ne => Relop::Eq,
            Relop::Lt => Relop::Ge,
            Relop::Le => Relop::Gt,
            Relop::Gt => Relop::Le,
            Relop::Ge => Relop::Lt,
        }
    }

    fn ordered(self) -> bool {
        !matches!(self, Relop::Eq | Relop::Ne)
    }
}

/// One value a field is compared with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Value {
    Int(Const),
    /// A port, by index.
    Port(usize),
}

/// What a comparison reads: a symbol, or bits `lo .. lo + width` of one
/// (OVN's subfield, `ip6.dst[120..127]`; bit 0 the least significant).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Target {
    pub(crate) sym: &'static Symbol,
    pub(crate) lo: u32,
    pub(crate) width: u32,
}

impl Target {
    fn whole(sym: &'static Symbol) -> Target {
        Target {
            sym,
            lo: 0,
            width: sym.width,
        }
    }

    /// A subfield: fewer bits than the symbol has.
    pub(crate) fn is_sub(&self) -> bool {
        self.width != self.sym.width
    }

    /// The target as written: `name`, or `name[lo..hi]` for a subfield.
    fn display(&self) -> String {
        if self.is_sub() {
            format!("{}[{}]", self.sym.name, bit_range(*self))
        } else {
            self.sym.name.to_string()
        }
    }

    /// The largest value the target holds.
    pub(crate) fn max(&self) -> u128 {
        u128::MAX.checked_shr(128 - self.width).unwrap_or(0)
    }
}

/// A match with `!` pushed down to the comparisons.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Node {
    Bool(bool),
    /// `target relop values`: with `==`, any of the values; with `!=`, none
    /// of them; an ordered relation has exactly one value.
    Cmp {
        target: Target,
        relop: Relop,
        values: Vec<Value>,
    },
    And(Vec<Node>),
    Or(Vec<Node>),
}

impl Node {
    /// `!self`, pushed down (OVN's `expr_not`).
    fn invert(self) -> Node {
        match self {
            Node::Bool(b) => Node::Bool(!b),
            Node::Cmp {
                target,
                relop,
                values,
            } => Node::Cmp {
                target,
                relop: relop.invert(),
                values,
            },
            Node::And(xs) => Node::Or(xs.into_iter().map(Node::invert).collect()),
            Node::Or(xs) => Node::And(xs.into_iter().map(Node::invert).collect()),
        }
    }
}

/// A constant set as written: its values, whether it was in `{}`, and
/// where it starts.
#[derive(Debug)]
struct Set {
    values: Vec<Item>,
    curlies: bool,
    at: usize,
}

/// One member of a constant set.
#[derive(Debug, Clone, Copy)]
enum Item {
    Int(Const, usize),
    /// A member of an address set (kept only if its family fits the field).
    SetAddr(Const, usize),
    Port(usize, usize),
}

impl Item {
    fn is_string(&self) -> bool {
        matches!(self, Item::Port(..))
    }
}

struct Parser<'c, 'p, 'a> {
    cx: &'c Context<'p>,
    lex: Lexer<'a>,
    text_len: usize,
    /// Inside an odd number of `!`.
    not: bool,
    /// Values and comparisons made so far, against `max`.
    nodes: usize,
    max: usize,
}

fn err(at: usize, message: impl Into<String>) -> LangError {
    LangError {
        offset: at,
        message: message.into(),
    }
}

/// Parses `text` in `cx`.
pub(crate) fn parse(cx: &Context<'_>, text: &str, max: usize) -> Result<Node, LangError> {
    let mut p = Parser {
        cx,
        lex: Lexer::new(text),
        text_len: text.len(),
        not: false,
        nodes: 0,
        max,
    };
    let n = p.expr(0)?;
    let t = p.lex.next()?;
    if t.tok != Tok::End {
        return Err(err(
            t.at,
            format!(
                "expected `&&`, `||` or the end of the match, found {}",
                t.tok.describe()
            ),
        ));
    }
    Ok(n)
}

impl Parser<'_, '_, '_> {
    fn count(&mut self, n: usize, at: usize) -> Result<(), LangError> {
        self.nodes = self.nodes.saturating_add(n);
        if self.nodes > self.max {
            return Err(err(
                at,
                format!(
                    "match too large: more than {} nodes once sets are expanded",
                    self.max
                ),
            ));
        }
        Ok(())
    }

    /// `not (('&&' not)* | ('||' not)*)`: OVN refuses `&&` and `||` mixed
    /// without parentheses.
    fn expr(&mut self, depth: usize) -> Result<Node, LangError> {
        let first = self.not_expr(depth)?;
        let op = self.lex.peek()?.tok.clone();
        if op != Tok::And && op != Tok::Or {
            return Ok(first);
        }
        let mut xs = vec![first];
        while self.lex.peek()?.tok == op {
            self.lex.next()?;
            xs.push(self.not_expr(depth)?);
        }
        let t = self.lex.peek()?;
        if t.tok == Tok::And || t.tok == Tok::Or {
            return Err(err(
                t.at,
                "`&&` and `||` must be parenthesized when used together (as in OVN)",
            ));
        }
        Ok(if op == Tok::And {
            Node::And(xs)
        } else {
            Node::Or(xs)
        })
    }

    /// `'!' primary | primary`; the operand of `!` must be atomic.
    fn not_expr(&mut self, depth: usize) -> Result<Node, LangError> {
        if self.lex.peek()?.tok != Tok::Not {
            return Ok(self.primary(depth)?.0);
        }
        let bang = self.lex.next()?.at;
        self.not = !self.not;
        let r = self.primary(depth);
        self.not = !self.not;
        let (n, atomic) = r?;
        if !atomic {
            return Err(err(
                bang,
                "missing parentheses around the operand of `!` (write `!(a == b)`)",
            ));
        }
        Ok(n.invert())
    }

    /// A parenthesized expression, a field (compared or alone), a
    /// comparison written constant first, or `0`/`1`. Also says whether it
    /// is atomic (may follow `!`).
    fn primary(&mut self, depth: usize) -> Result<(Node, bool), LangError> {
        let t = self.lex.next()?;
        match t.tok {
            Tok::LParen => {
                if depth >= MAX_DEPTH {
                    return Err(err(
                        t.at,
                        format!("parentheses nested deeper than {MAX_DEPTH}"),
                    ));
                }
                let n = self.expr(depth + 1)?;
                let c = self.lex.next()?;
                if c.tok != Tok::RParen {
                    return Err(err(
                        c.at,
                        format!("expected `)` or an operator, found {}", c.tok.describe()),
                    ));
                }
                Ok((n, true))
            }
            Tok::Id(name) => self.field_first(name, t.at),
            _ => self.constant_first(t),
        }
    }

    fn symbol(&mut self, name: &str, at: usize) -> Result<Target, LangError> {
        if self.lex.peek()?.tok == Tok::LParen {
            return Err(err(
                at,
                format!("functions such as `{name}(...)` are not supported"),
            ));
        }
        let Some(sym) = symbols::lookup(name) else {
            if self.cx.port(name).is_some() {
                return Err(err(
                    at,
                    format!(
                        "expected a field name, found `{name}` (port names are quoted: \"{name}\")"
                    ),
                ));
            }
            return Err(err(
                at,
                format!(
                    "unknown field `{name}`; expected one of: {}",
                    symbols::names()
                ),
            ));
        };
        let next = self.lex.peek()?.clone();
        match next.tok {
            Tok::LParen => Err(err(
                at,
                format!("functions such as `{name}(...)` are not supported"),
            )),
            Tok::LSquare => self.subfield(sym, next.at),
            _ => Ok(Target::whole(sym)),
        }
    }

    /// `[lo]` or `[lo..hi]` after `sym` (the `[` at `at`), checked as OVN's
    /// `parse_field` checks it.
    fn subfield(&mut self, sym: &'static Symbol, at: usize) -> Result<Target, LangError> {
        let name = sym.name;
        match sym.kind {
            Kind::Port(_) => {
                return Err(err(
                    at,
                    format!("cannot select a subfield of string field `{name}`"),
                ));
            }
            Kind::Pred(_) => {
                return Err(err(
                    at,
                    format!("cannot select a subfield of predicate `{name}`"),
                ));
            }
            Kind::Field { .. } => {}
        }
        self.lex.next()?;
        let lo = self.bit()?;
        let hi = if self.lex.peek()?.tok == Tok::Other("..") {
            self.lex.next()?;
            self.bit()?
        } else {
            lo
        };
        let close = self.lex.next()?;
        if close.tok != Tok::Other("]") {
            return Err(err(
                close.at,
                format!("expected `]` or `..`, found {}", close.tok.describe()),
            ));
        }
        let (width, whole) = (sym.width, |lo, hi| lo == 0 && hi + 1 == sym.width);
        if lo > hi {
            return Err(err(at, format!("invalid bit range {lo} to {hi}")));
        }
        if hi >= width {
            return Err(err(
                at,
                format!("cannot select bits {lo} to {hi} of {width}-bit field `{name}`"),
            ));
        }
        if sym.level == Level::Nominal && !whole(lo, hi) {
            return Err(err(
                at,
                format!("cannot select a subfield of nominal field `{name}`"),
            ));
        }
        Ok(Target {
            sym,
            lo,
            width: hi - lo + 1,
        })
    }

    /// A bit number inside `[...]`: a decimal integer, unmasked.
    fn bit(&mut self) -> Result<u32, LangError> {
        let t = self.lex.next()?;
        match t.tok {
            Tok::Int(Const {
                value,
                mask: None,
                format: Format::Decimal,
            }) if value < 128 => Ok(value as u32),
            other => Err(err(
                t.at,
                format!(
                    "expected a bit number (decimal, below 128), found {}",
                    other.describe()
                ),
            )),
        }
    }

    fn field_first(&mut self, name: &str, at: usize) -> Result<(Node, bool), LangError> {
        let target = self.symbol(name, at)?;
        let next = self.lex.peek()?.clone();
        if let Some(r) = Relop::of(&next.tok) {
            self.lex.next()?;
            let set = self.constant_set()?;
            return Ok((self.cmp(target, r, set, next.at)?, false));
        }
        let shown = target.display();
        if target.width == 0 || next.tok == Tok::Other("=") {
            return Err(err(
                next.at,
                format!(
                    "expected a relational operator (== != < <= > >=) after `{shown}`, found {}",
                    next.tok.describe()
                ),
            ));
        }
        if target.width > 1 && !self.not {
            return Err(err(
                at,
                format!("explicit `{shown} != 0` is required to test a multi-bit field against 0"),
            ));
        }
        let zero = Set {
            values: vec![Item::Int(
                Const {
                    value: 0,
                    mask: None,
                    format: Format::Hex,
                },
                at,
            )],
            curlies: false,
            at,
        };
        Ok((self.cmp(target, Relop::Ne, zero, at)?, true))
    }

    fn constant_first(&mut self, first: Token<'_>) -> Result<(Node, bool), LangError> {
        let c1 = self.constant_set_from(first)?;
        let next = self.lex.peek()?.clone();
        let r1 = Relop::of(&next.tok);
        if let ([Item::Int(c, _)], false, None) = (c1.values.as_slice(), c1.curlies, r1)
            && c.format == Format::Decimal
            && c.mask.is_none()
            && c.value <= 1
        {
            return Ok((Node::Bool(c.value == 1), true));
        }
        let Some(r1) = r1 else {
            return Err(err(
                next.at,
                format!(
                    "expected a relational operator (== != < <= > >=), found {}",
                    next.tok.describe()
                ),
            ));
        };
        self.lex.next()?;
        let f = self.lex.next()?;
        let Tok::Id(name) = f.tok else {
            return Err(err(
                f.at,
                format!("expected a field name, found {}", f.tok.describe()),
            ));
        };
        let target = self.symbol(name, f.at)?;
        let next2 = self.lex.peek()?.clone();
        let Some(r2) = Relop::of(&next2.tok) else {
            return Ok((self.cmp(target, r1.turn(), c1, next.at)?, false));
        };
        let lower = matches!(r1, Relop::Lt | Relop::Le) && matches!(r2, Relop::Lt | Relop::Le);
        let upper = matches!(r1, Relop::Gt | Relop::Ge) && matches!(r2, Relop::Gt | Relop::Ge);
        if !lower && !upper {
            return Err(err(
                next2.at,
                "a range must read `x < field < y` or `x > field > y` (each `<` may be `<=`, each `>` `>=`)",
            ));
        }
        self.lex.next()?;
        let c2 = self.constant_set()?;
        let e1 = self.cmp(target, r1.turn(), c1, next.at)?;
        let e2 = self.cmp(target, r2, c2, next2.at)?;
        Ok((Node::And(vec![e1, e2]), false))
    }

    fn constant_set(&mut self) -> Result<Set, LangError> {
        let t = self.lex.next()?;
        self.constant_set_from(t)
    }

    /// A constant, or `{` constants `}` (commas optional; not empty).
    fn constant_set_from(&mut self, first: Token<'_>) -> Result<Set, LangError> {
        let mut set = Set {
            values: Vec::new(),
            curlies: first.tok == Tok::LCurly,
            at: first.at,
        };
        if !set.curlies {
            self.constant(first, &mut set.values)?;
            return Ok(set);
        }
        loop {
            let t = self.lex.next()?;
            self.constant(t, &mut set.values)?;
            if self.lex.peek()?.tok == Tok::Comma {
                self.lex.next()?;
            }
            if self.lex.peek()?.tok == Tok::RCurly {
                self.lex.next()?;
                return Ok(set);
            }
        }
    }

    fn constant(&mut self, t: Token<'_>, out: &mut Vec<Item>) -> Result<(), LangError> {
        match t.tok {
            Tok::Int(c) => {
                self.count(1, t.at)?;
                out.push(Item::Int(c, t.at));
            }
            Tok::Str(s) => {
                let Some(i) = self.cx.port(&s) else {
                    return Err(err(t.at, format!("unknown port {s:?}")));
                };
                self.count(1, t.at)?;
                out.push(Item::Port(i, t.at));
            }
            Tok::AddrSet(name) => {
                let Some(prefixes) = self.cx.address_set(name) else {
                    return Err(err(t.at, format!("unknown address set `${name}`")));
                };
                self.count(prefixes.len(), t.at)?;
                out.extend(prefixes.iter().map(|p| {
                    let v6 = p.addr.is_ipv6();
                    let bits = if v6 { 128 } else { 32 };
                    let full = if v6 { u128::MAX } else { u128::from(u32::MAX) };
                    let mask = if p.len == 0 {
                        0
                    } else {
                        (full << (bits - u32::from(p.len).min(bits))) & full
                    };
                    let c = Const {
                        value: ip_u128(p.addr) & mask,
                        mask: (u32::from(p.len) < bits).then_some(mask),
                        format: if v6 { Format::Ipv6 } else { Format::Ipv4 },
                    };
                    Item::SetAddr(c, t.at)
                }));
            }
            Tok::PortGroup(name) => {
                let Some(ports) = self.cx.group(name) else {
                    return Err(err(t.at, format!("unknown port group `@{name}`")));
                };
                self.count(ports.len(), t.at)?;
                out.extend(ports.iter().map(|&i| Item::Port(i, t.at)));
            }
            Tok::Id(name) if self.cx.port(name).is_some() => {
                return Err(err(
                    t.at,
                    format!(
                        "expected a constant, found `{name}` (port names are quoted: \"{name}\")"
                    ),
                ));
            }
            Tok::End => {
                return Err(err(
                    self.text_len,
                    "expected a constant, found the end of the match",
                ));
            }
            other => {
                return Err(err(
                    t.at,
                    format!(
                        "expected a constant (number, address, \"port\", $set or @group), found {}",
                        other.describe()
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// `lo` or `lo..hi`, as a subfield is written.
fn bit_range(t: Target) -> String {
    let hi = t.lo + t.width - 1;
    if hi == t.lo {
        t.lo.to_string()
    } else {
        format!("{}..{hi}", t.lo)
    }
}

impl Item {
    fn at(&self) -> usize {
        match self {
            Item::Int(_, at) | Item::SetAddr(_, at) | Item::Port(_, at) => *at,
        }
    }
}

impl Parser<'_, '_, '_> {
    /// `sym r set`, checked as OVN's `make_cmp` checks it: types, widths,
    /// which relations the symbol's level allows.
    fn cmp(&mut self, target: Target, r: Relop, set: Set, op_at: usize) -> Result<Node, LangError> {
        self.count(1, op_at)?;
        let sym = target.sym;
        let name = sym.name;
        let ports = matches!(sym.kind, Kind::Port(_));
        if let Some(it) = set.values.iter().find(|it| it.is_string() != ports) {
            let msg = if ports {
                format!("`{name}` is compared with quoted port names or @groups, not numbers")
            } else {
                format!("integer field `{name}` cannot be compared with a port name")
            };
            return Err(err(it.at(), msg));
        }
        let mut values = Vec::with_capacity(set.values.len());
        for it in &set.values {
            match *it {
                Item::Int(c, at) => {
                    // Stricter than OVN, which checks a constant against
                    // the whole field's width and silently drops the bits
                    // a subfield has no room for (`ip6.dst[116] == 2`
                    // would test for 0).
                    let w = c.width();
                    if w > target.width {
                        let what = if target.is_sub() {
                            format!("subfield `{}`", target.display())
                        } else {
                            format!("field `{name}`")
                        };
                        return Err(err(
                            at,
                            format!(
                                "{w}-bit constant is not compatible with {}-bit {what}",
                                target.width
                            ),
                        ));
                    }
                    if matches!(sym.kind, Kind::Pred(_)) && c.mask.is_some() {
                        return Err(err(
                            at,
                            format!("predicate `{name}` is compared with 0 or 1, unmasked"),
                        ));
                    }
                    values.push(Value::Int(c));
                }
                Item::SetAddr(c, at) => match sym.ip_family().filter(|_| !target.is_sub()) {
                    None => {
                        return Err(err(
                            at,
                            format!(
                                "address sets hold IP prefixes: compare them with ip4.src, ip4.dst, ip6.src or ip6.dst, not `{name}`{}",
                                if target.is_sub() { "[...]" } else { "" }
                            ),
                        ));
                    }
                    Some(v6) => {
                        if (c.format == Format::Ipv6) == v6 {
                            values.push(Value::Int(c));
                        }
                    }
                },
                Item::Port(i, _) => values.push(Value::Port(i)),
            }
        }
        if r.ordered() {
            self.check_ordered(sym, &set, &values, op_at)?;
            if target.is_sub() {
                // It resolves to up to two prefixes a bit: bounded as it
                // is read, not once built.
                self.count(2 * target.width as usize, op_at)?;
            }
        }
        if sym.level == Level::Nominal {
            self.check_nominal(sym, r, &values, op_at)?;
        }
        if values.is_empty() {
            return Ok(Node::Bool(r == Relop::Ne));
        }
        Ok(Node::Cmp {
            target,
            relop: r,
            values,
        })
    }

    fn check_ordered(
        &self,
        sym: &Symbol,
        set: &Set,
        values: &[Value],
        op_at: usize,
    ) -> Result<(), LangError> {
        let name = sym.name;
        if set.curlies {
            return Err(err(
                op_at,
                "only == and != may be used with a set of values `{...}`",
            ));
        }
        if sym.level != Level::Ordinal {
            let level = if sym.level == Level::Nominal {
                "nominal"
            } else {
                "Boolean"
            };
            return Err(err(
                op_at,
                format!("only == and != may be used with {level} field `{name}`"),
            ));
        }
        match values {
            [] => Err(err(
                op_at,
                "only == and != may compare a field with an empty set",
            )),
            [Value::Int(c)] if c.mask.is_some() => Err(err(
                set.at,
                "only == and != may be used with masked constants",
            )),
            [_] => Ok(()),
            _ => Err(err(set.at, "an ordered comparison takes exactly one value")),
        }
    }

    fn check_nominal(
        &self,
        sym: &Symbol,
        r: Relop,
        values: &[Value],
        op_at: usize,
    ) -> Result<(), LangError> {
        let name = sym.name;
        if matches!(sym.kind, Kind::Pred(_)) {
            for v in values {
                if let Value::Int(c) = v {
                    let positive = (c.value & 1 != 0) ^ (r == Relop::Ne) ^ self.not;
                    if !positive {
                        return Err(err(
                            op_at,
                            format!(
                                "nominal predicate `{name}` may only be tested positively, e.g. `{name}` or `{name} == 1`, not `!{name}` or `{name} == 0` (as in OVN)"
                            ),
                        ));
                    }
                }
            }
            return Ok(());
        }
        let want = if self.not { Relop::Ne } else { Relop::Eq };
        if r != want {
            return Err(err(
                op_at,
                format!(
                    "nominal field `{name}` may only be tested for equality, counting enclosing `!` (as in OVN)"
                ),
            ));
        }
        Ok(())
    }
}
