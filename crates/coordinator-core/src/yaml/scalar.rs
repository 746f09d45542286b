//! The YAML 1.2 core schema's typing of scalars: a plain scalar is null,
//! a boolean, an integer (decimal, `0x`, `0o`), a float or else a string; a
//! quoted one is a string; an explicit core tag (`!!str`, `!!int`, …) types
//! it, and a value that does not fit its tag is refused.

use saphyr_parser::ScalarStyle;

use super::NodeValue;

/// Types a scalar by the YAML 1.2 core schema; `None` when an explicit tag does not fit.
pub(super) fn scalar(text: &str, style: ScalarStyle, tag: Option<&str>) -> Option<NodeValue> {
    let plain = matches!(style, ScalarStyle::Plain);
    match tag {
        Some("tag:yaml.org,2002:str") | Some("!!str") => return Some(NodeValue::String(text.to_owned())),
        Some("tag:yaml.org,2002:int") | Some("!!int") => return int(text).map(NodeValue::Number),
        Some("tag:yaml.org,2002:float") | Some("!!float") => {
            return float(text).or_else(|| int(text)).map(NodeValue::Number);
        }
        Some("tag:yaml.org,2002:bool") | Some("!!bool") => return boolean(text).map(NodeValue::Bool),
        Some("tag:yaml.org,2002:null") | Some("!!null") => return null(text).then_some(NodeValue::Null),
        Some(_) => return None,
        None => {}
    }
    if !plain {
        return Some(NodeValue::String(text.to_owned()));
    }
    if null(text) {
        return Some(NodeValue::Null);
    }
    if let Some(b) = boolean(text) {
        return Some(NodeValue::Bool(b));
    }
    if let Some(n) = int(text).or_else(|| float(text)) {
        return Some(NodeValue::Number(n));
    }
    Some(NodeValue::String(text.to_owned()))
}

fn null(text: &str) -> bool {
    matches!(text, "" | "~" | "null" | "Null" | "NULL")
}

fn boolean(text: &str) -> Option<bool> {
    match text {
        "true" | "True" | "TRUE" => Some(true),
        "false" | "False" | "FALSE" => Some(false),
        _ => None,
    }
}

fn int(text: &str) -> Option<serde_json::Number> {
    let (negative, digits) = match text.as_bytes().first()? {
        b'-' => (true, &text[1..]),
        b'+' => (false, &text[1..]),
        _ => (false, text),
    };
    let (radix, digits) = if let Some(d) = digits.strip_prefix("0x") {
        (16, d)
    } else if let Some(d) = digits.strip_prefix("0o") {
        (8, d)
    } else {
        (10, digits)
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    let magnitude = u64::from_str_radix(digits, radix).ok()?;
    if negative {
        let value = 0i64.checked_sub_unsigned(magnitude)?;
        Some(value.into())
    } else {
        Some(magnitude.into())
    }
}

fn float(text: &str) -> Option<serde_json::Number> {
    let body = text.strip_prefix(['-', '+']).unwrap_or(text);
    let mut saw_digit = false;
    for c in body.chars() {
        match c {
            '0'..='9' => saw_digit = true,
            '.' | 'e' | 'E' | '-' | '+' => {}
            _ => return None,
        }
    }
    if !saw_digit {
        return None;
    }
    let value: f64 = text.parse().ok()?;
    serde_json::Number::from_f64(value)
}
