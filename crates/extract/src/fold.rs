//! Integer constant folding: the value of a template argument such as `BM * 2` or
//! `kStages - 1` from the constants in scope (`constexpr int BM = 128;`, `#define`,
//! `-D`). Only integer arithmetic on names whose values are known; anything else is
//! reported by name, never guessed.

use std::collections::BTreeMap;

/// Named integer constants, later definitions shadowing earlier ones.
#[derive(Debug, Clone, Default)]
pub struct Constants {
    values: BTreeMap<String, String>,
}

/// Why an expression has no value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unfolded {
    /// A name with no known definition (or one that does not fold).
    Unknown(String),
    /// Something this folder does not evaluate (a call, a cast to a type, a float).
    Unsupported(String),
    /// Division or remainder by zero, or an overflow.
    Arithmetic(String),
}

impl std::fmt::Display for Unfolded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unfolded::Unknown(n) => write!(f, "`{n}` has no known integer value"),
            Unfolded::Unsupported(t) => write!(
                f,
                "`{t}` is not an integer constant expression this folder evaluates"
            ),
            Unfolded::Arithmetic(t) => write!(f, "`{t}` divides by zero or overflows"),
        }
    }
}

impl Constants {
    /// Defines (or redefines) `name` as the expression `text`.
    pub fn define(&mut self, name: &str, text: &str) {
        self.values.insert(name.to_owned(), text.trim().to_owned());
    }

    /// The value of `text`.
    pub fn fold(&self, text: &str) -> Result<i64, Unfolded> {
        self.fold_depth(text, 0)
    }

    fn fold_depth(&self, text: &str, depth: usize) -> Result<i64, Unfolded> {
        if depth > 32 {
            return Err(Unfolded::Unsupported(text.to_owned()));
        }
        let tokens = tokenize(text).ok_or_else(|| Unfolded::Unsupported(text.to_owned()))?;
        let mut p = Parser {
            tokens: &tokens,
            at: 0,
            constants: self,
            depth,
            text,
        };
        let v = p.ternary()?;
        if p.at != tokens.len() {
            return Err(Unfolded::Unsupported(text.to_owned()));
        }
        Ok(v)
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Int(i64),
    Name(String),
    Op(&'static str),
}

const OPS: [&str; 23] = [
    "<<", ">>", "<=", ">=", "==", "!=", "&&", "||", "::", "+", "-", "*", "/", "%", "(", ")", "<",
    ">", "?", ":", "!", "&", "|",
];

fn tokenize(text: &str) -> Option<Vec<Token>> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i] as char;
        if c.is_whitespace() {
            i += 1;
        } else if c.is_ascii_digit() {
            let start = i;
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'\'') {
                i += 1;
            }
            let raw: String = text[start..i].chars().filter(|c| *c != '\'').collect();
            let digits = raw.trim_end_matches(['u', 'U', 'l', 'L']);
            let v = if let Some(hex) = digits.strip_prefix("0x").or(digits.strip_prefix("0X")) {
                i64::from_str_radix(hex, 16).ok()?
            } else {
                digits.parse().ok()?
            };
            out.push(Token::Int(v));
        } else if c.is_ascii_alphabetic() || c == '_' {
            let start = i;
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                i += 1;
            }
            out.push(Token::Name(text[start..i].to_owned()));
        } else {
            let op = OPS.iter().find(|op| text[i..].starts_with(**op))?;
            out.push(Token::Op(op));
            i += op.len();
        }
    }
    // `a::b` reads as one qualified name.
    let mut merged: Vec<Token> = Vec::new();
    let mut k = 0;
    while k < out.len() {
        if let (Some(Token::Name(a)), Some(Token::Op("::")), Some(Token::Name(b))) =
            (merged.last().cloned(), out.get(k), out.get(k + 1))
        {
            merged.pop();
            merged.push(Token::Name(format!("{a}::{b}")));
            k += 2;
            continue;
        }
        merged.push(out[k].clone());
        k += 1;
    }
    Some(merged)
}

struct Parser<'a> {
    tokens: &'a [Token],
    at: usize,
    constants: &'a Constants,
    depth: usize,
    text: &'a str,
}

impl Parser<'_> {
    fn eat(&mut self, op: &str) -> bool {
        if self.tokens.get(self.at) == Some(&Token::Op(leak(op))) {
            self.at += 1;
            true
        } else {
            false
        }
    }

    fn unsupported(&self) -> Unfolded {
        Unfolded::Unsupported(self.text.trim().to_owned())
    }

    fn ternary(&mut self) -> Result<i64, Unfolded> {
        let c = self.binary(0)?;
        if self.eat("?") {
            let a = self.ternary()?;
            if !self.eat(":") {
                return Err(self.unsupported());
            }
            let b = self.ternary()?;
            return Ok(if c != 0 { a } else { b });
        }
        Ok(c)
    }

    fn binary(&mut self, level: usize) -> Result<i64, Unfolded> {
        const LEVELS: [&[&str]; 9] = [
            &["||"],
            &["&&"],
            &["|"],
            &["&"],
            &["==", "!="],
            &["<", ">", "<=", ">="],
            &["<<", ">>"],
            &["+", "-"],
            &["*", "/", "%"],
        ];
        if level == LEVELS.len() {
            return self.unary();
        }
        let mut left = self.binary(level + 1)?;
        'outer: loop {
            for op in LEVELS[level] {
                if self.eat(op) {
                    let right = self.binary(level + 1)?;
                    left = apply(op, left, right)
                        .ok_or_else(|| Unfolded::Arithmetic(self.text.trim().to_owned()))?;
                    continue 'outer;
                }
            }
            return Ok(left);
        }
    }

    fn unary(&mut self) -> Result<i64, Unfolded> {
        if self.eat("-") {
            return self
                .unary()?
                .checked_neg()
                .ok_or_else(|| Unfolded::Arithmetic(self.text.to_owned()));
        }
        if self.eat("+") {
            return self.unary();
        }
        if self.eat("!") {
            return Ok(i64::from(self.unary()? == 0));
        }
        if self.eat("(") {
            let v = self.ternary()?;
            if !self.eat(")") {
                return Err(self.unsupported());
            }
            return Ok(v);
        }
        match self.tokens.get(self.at).cloned() {
            Some(Token::Int(v)) => {
                self.at += 1;
                Ok(v)
            }
            Some(Token::Name(name)) => {
                self.at += 1;
                if self.tokens.get(self.at) == Some(&Token::Op("(")) {
                    return Err(self.unsupported());
                }
                match name.as_str() {
                    "true" => return Ok(1),
                    "false" => return Ok(0),
                    _ => {}
                }
                let short = name.rsplit("::").next().unwrap_or(&name);
                let text = self
                    .constants
                    .values
                    .get(&name)
                    .or_else(|| self.constants.values.get(short))
                    .ok_or_else(|| Unfolded::Unknown(name.clone()))?;
                self.constants
                    .fold_depth(text, self.depth + 1)
                    .map_err(|e| match e {
                        Unfolded::Unsupported(_) => Unfolded::Unknown(name.clone()),
                        other => other,
                    })
            }
            _ => Err(self.unsupported()),
        }
    }
}

/// The `&'static str` of an operator (every operator this parser eats is in OPS).
fn leak(op: &str) -> &'static str {
    OPS.iter().find(|o| **o == op).copied().unwrap_or("")
}

fn apply(op: &str, a: i64, b: i64) -> Option<i64> {
    Some(match op {
        "||" => i64::from(a != 0 || b != 0),
        "&&" => i64::from(a != 0 && b != 0),
        "|" => a | b,
        "&" => a & b,
        "==" => i64::from(a == b),
        "!=" => i64::from(a != b),
        "<" => i64::from(a < b),
        ">" => i64::from(a > b),
        "<=" => i64::from(a <= b),
        ">=" => i64::from(a >= b),
        "<<" => a.checked_shl(u32::try_from(b).ok()?)?,
        ">>" => a.checked_shr(u32::try_from(b).ok()?)?,
        "+" => a.checked_add(b)?,
        "-" => a.checked_sub(b)?,
        "*" => a.checked_mul(b)?,
        "/" => a.checked_div(b)?,
        "%" => a.checked_rem(b)?,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn constants(pairs: &[(&str, &str)]) -> Constants {
        let mut c = Constants::default();
        for (n, v) in pairs {
            c.define(n, v);
        }
        c
    }

    #[test]
    fn folds_integer_expressions_through_named_constants() {
        let c = constants(&[
            ("BM", "128"),
            ("kStages", "BM / 32 - 1"),
            ("kHidden", "1024"),
        ]);
        assert_eq!(c.fold("BM"), Ok(128));
        assert_eq!(c.fold("kStages * (BM + 8)"), Ok(3 * 136));
        assert_eq!(c.fold("kHidden * 6"), Ok(6144));
        assert_eq!(c.fold("1 << 4 | 1"), Ok(17));
        assert_eq!(c.fold("BM >= 64 ? 2 : 1"), Ok(2));
        assert_eq!(c.fold("0x10 + 1'000u"), Ok(1016));
        assert_eq!(c.fold("ns::BM"), Ok(128));
        assert_eq!(c.fold("-(BM - 129)"), Ok(1));
    }

    #[test]
    fn names_what_it_cannot_fold() {
        let c = constants(&[("A", "B + 1"), ("F", "sizeof(float)")]);
        assert_eq!(c.fold("A"), Err(Unfolded::Unknown("B".into())));
        assert_eq!(c.fold("F"), Err(Unfolded::Unknown("F".into())));
        assert_eq!(c.fold("2.5"), Err(Unfolded::Unsupported("2.5".into())));
        assert_eq!(
            c.fold("4 / (2 - 2)"),
            Err(Unfolded::Arithmetic("4 / (2 - 2)".into()))
        );
        // A definition that refers to itself does not loop.
        let c = constants(&[("X", "X + 1")]);
        assert!(c.fold("X").is_err());
    }
}
