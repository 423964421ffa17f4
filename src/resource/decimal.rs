//! Exact decimals for measurements, money and quantities: declared from decimal literals at
//! compile time, checked with rust_decimal (never through a float), answered at the step's
//! scale.

use std::str::FromStr;

use rust_decimal::Decimal as Exact;
use serde_json::Value;

/// How a decimal is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    /// A JSON number with the step's decimals (`-2.25`, `15.0`).
    Measurement,
    /// A string with 2 decimals (`"1250.00"`).
    Money,
    /// A string with 3 decimals (`"2.000"`).
    Quantity,
}

/// Money: at least 0, at most 10 integer digits, 2 decimals.
pub const MONEY: Decimal = spec("0", "9999999999.99", "0.01", Style::Money);
/// A quantity: at least 0, at most 9 integer digits, 3 decimals.
pub const QUANTITY: Decimal = spec("0", "999999999.999", "0.001", Style::Quantity);

/// `min..=max` in multiples of `step`, all as integers of `10^-scale`.
#[derive(Debug, Clone, Copy)]
pub struct Decimal {
    pub min: i64,
    pub max: i64,
    pub step: i64,
    pub scale: u32,
    pub style: Style,
}

/// Parses a decimal literal at compile time: `(mantissa, scale)`.
const fn literal(text: &str) -> (i64, u32) {
    let bytes = text.as_bytes();
    let (mut i, negative) = if !bytes.is_empty() && bytes[0] == b'-' { (1, true) } else { (0, false) };
    let (mut mantissa, mut scale, mut fraction) = (0i64, 0u32, false);
    while i < bytes.len() {
        let b = bytes[i];
        if b == b'.' {
            assert!(!fraction, "two decimal points");
            fraction = true;
        } else {
            assert!(b.is_ascii_digit(), "not a decimal literal");
            mantissa = mantissa * 10 + (b - b'0') as i64;
            if fraction {
                scale += 1;
            }
        }
        i += 1;
    }
    (if negative { -mantissa } else { mantissa }, scale)
}

const fn rescaled((mantissa, scale): (i64, u32), to: u32) -> i64 {
    mantissa * 10i64.pow(to - scale)
}

/// A decimal declaration from literals (`spec("-30", "30", "0.25", Measurement)`).
pub const fn spec(min: &str, max: &str, step: &str, style: Style) -> Decimal {
    let (min, max, step) = (literal(min), literal(max), literal(step));
    let mut scale = min.1;
    if max.1 > scale {
        scale = max.1;
    }
    if step.1 > scale {
        scale = step.1;
    }
    Decimal {
        min: rescaled(min, scale),
        max: rescaled(max, scale),
        step: rescaled(step, scale),
        scale,
        style,
    }
}

impl Decimal {
    fn bound(&self, mantissa: i64) -> Exact {
        Exact::new(mantissa, self.scale)
    }

    pub fn min_value(&self) -> Exact {
        self.bound(self.min)
    }

    pub fn max_value(&self) -> Exact {
        self.bound(self.max)
    }

    pub fn step_value(&self) -> Exact {
        self.bound(self.step)
    }

    /// Checks a JSON number or numeric string; answers it at the declared scale.
    pub fn check(&self, name: &str, value: &Value) -> Result<Value, String> {
        let exact = of(value).ok_or_else(|| format!("The {name} must be a number."))?;
        if self.min >= 0 && value.as_str().is_some_and(|s| s.starts_with('-')) {
            return Err(format!("The {name} may not be negative."));
        }
        let (min, max, step) = (self.min_value(), self.max_value(), self.step_value());
        if exact < min || exact > max {
            return Err(match self.style {
                Style::Measurement => format!("The {name} must be between {min} and {max}."),
                _ if exact < min => format!("The {name} may not be negative."),
                _ => format!("The {name} is too large."),
            });
        }
        if self.style != Style::Measurement && exact.normalize().scale() > self.scale {
            return Err(format!("The {name} may have at most {} decimal places.", self.scale));
        }
        if !(exact % step).is_zero() {
            return Err(format!("The {name} must be a multiple of {}.", step.normalize()));
        }
        Ok(self.answer(exact))
    }

    /// A value the server computed, rounded to the declared scale (half away from zero):
    /// answered when it lies within the bounds, else `Err` with the largest allowed value.
    pub fn fit(&self, value: Exact) -> Result<Value, Exact> {
        let rounded =
            value.round_dp_with_strategy(self.scale, rust_decimal::RoundingStrategy::MidpointAwayFromZero);
        if rounded < self.min_value() || rounded > self.max_value() {
            return Err(self.max_value());
        }
        Ok(self.answer(rounded))
    }

    /// The value as answered: measurements as numbers, money and quantities as strings.
    pub fn answer(&self, exact: Exact) -> Value {
        let mut exact = exact;
        exact.rescale(self.scale);
        // -0.00 reads badly and compares wrongly as text.
        if exact.is_zero() {
            exact.set_sign_positive(true);
        }
        let text = exact.to_string();
        match self.style {
            Style::Measurement => serde_json::from_str(&text).unwrap_or(Value::String(text)),
            Style::Money | Style::Quantity => Value::String(text),
        }
    }
}

/// A decimal in plain digits (`-2.25`, `1250`): an optional `-`, digits, and digits after a
/// point if there is one; no `+`, no exponent, no NaN or infinity, no spaces (the API
/// description's pattern).
pub fn parse(text: &str) -> Option<Exact> {
    let digits = text.strip_prefix('-').unwrap_or(text);
    let (whole, fraction) = digits.split_once('.').unwrap_or((digits, "0"));
    let plain = !whole.is_empty()
        && !fraction.is_empty()
        && whole.bytes().chain(fraction.bytes()).all(|b| b.is_ascii_digit());
    if !plain {
        return None;
    }
    Exact::from_str_exact(text).ok()
}

/// A JSON value read as an exact decimal, when it is one: a numeric string as [`parse`]
/// reads it, or a JSON number as written (`1.5`, `2e-3`), never through a float.
pub fn of(value: &Value) -> Option<Exact> {
    match value {
        Value::Number(n) => {
            let text = n.to_string();
            if text.contains(['e', 'E']) { Exact::from_scientific(&text).ok() } else { parse(&text) }
        }
        Value::String(s) => parse(s),
        _ => None,
    }
}

/// Reads a decimal inside rules: `FromStr` for literals in code.
pub fn exact(text: &str) -> Exact {
    Exact::from_str(text).expect("a decimal literal")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const SPHERE: Decimal = spec("-30", "30", "0.25", Style::Measurement);
    const PRICE: Decimal = spec("0", "9999999999.99", "0.01", Style::Money);
    const PUPIL: Decimal = spec("1", "10", "0.5", Style::Measurement);

    #[test]
    fn literals_become_integers_at_one_scale() {
        assert_eq!((SPHERE.min, SPHERE.max, SPHERE.step, SPHERE.scale), (-3000, 3000, 25, 2));
        assert_eq!((PRICE.max, PRICE.scale), (999_999_999_999, 2));
    }

    #[test]
    fn steps_and_ranges_are_checked_exactly() {
        assert_eq!(SPHERE.check("sphere", &json!("-2.25")).unwrap().to_string(), "-2.25");
        assert_eq!(SPHERE.check("sphere", &json!(-2.5)).unwrap().to_string(), "-2.50");
        assert!(SPHERE.check("sphere", &json!(1.13)).unwrap_err().contains("multiple of 0.25"));
        assert!(SPHERE.check("sphere", &json!("30.25")).unwrap_err().contains("between"));
        assert!(SPHERE.check("sphere", &json!("1e1")).is_err(), "no exponents in strings");
        assert_eq!(SPHERE.check("sphere", &json!(2.5e0)).unwrap().to_string(), "2.50");
        for loose in [" 1.5", "+1.5", ".5", "5.", "1,5", ""] {
            assert!(SPHERE.check("sphere", &json!(loose)).is_err(), "{loose:?}");
        }
        assert!(SPHERE.check("sphere", &json!("abc")).is_err());
        assert!(SPHERE.check("sphere", &json!(true)).is_err());
        assert_eq!(PUPIL.check("pupil", &json!(3)).unwrap().to_string(), "3.0");
        assert_eq!(SPHERE.check("sphere", &json!("-0")).unwrap().to_string(), "0.00");
    }

    #[test]
    fn money_is_a_fixed_scale_string() {
        assert_eq!(PRICE.check("price", &json!(1250)).unwrap(), json!("1250.00"));
        assert_eq!(PRICE.check("price", &json!("0.1")).unwrap(), json!("0.10"));
        assert!(PRICE.check("price", &json!("12.345")).unwrap_err().contains("2 decimal places"));
        assert!(PRICE.check("price", &json!(-1)).unwrap_err().contains("negative"));
        assert!(PRICE.check("price", &json!("-0")).unwrap_err().contains("negative"));
        assert_eq!(PRICE.check("price", &json!("1.500")).unwrap(), json!("1.50"), "zeros past the scale");
        // A value a float would round: kept to the cent.
        assert_eq!(PRICE.check("price", &json!("9999999999.99")).unwrap(), json!("9999999999.99"));
    }
}
