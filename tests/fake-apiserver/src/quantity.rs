//! Kubernetes resource quantities (`500m`, `1`, `2Gi`, `512Mi`, `1G`, `1e3`).
//!
//! Values are kept as integers in thousandths of the unit ("milli-units"), so CPU
//! comes out in millicores and memory in thousandths of a byte; helpers round up
//! the way `Quantity.MilliValue()` / `Quantity.Value()` do.

/// Parses a quantity into milli-units (`"500m"` → 500, `"1"` → 1000,
/// `"1Ki"` → 1_024_000). Returns `None` for anything kube-apiserver would reject.
pub fn parse_milli(input: &str) -> Option<i128> {
    let s = input.trim();
    if s.is_empty() {
        return None;
    }
    let (negative, s) = match s.as_bytes()[0] {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    let number_end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (number, suffix) = s.split_at(number_end);
    if number.is_empty() || number == "." || number.matches('.').count() > 1 {
        return None;
    }
    // Mantissa as an integer with a decimal exponent.
    let mut mantissa: i128 = 0;
    let mut exp10: i32 = 0;
    let mut after_dot = false;
    for c in number.chars() {
        if c == '.' {
            after_dot = true;
            continue;
        }
        let digit = i128::from(c.to_digit(10)? as u8);
        mantissa = mantissa.checked_mul(10)?.checked_add(digit)?;
        if after_dot {
            exp10 -= 1;
        }
    }
    let mut binary: i128 = 1;
    match suffix {
        "" => {}
        "n" => exp10 -= 9,
        "u" => exp10 -= 6,
        "m" => exp10 -= 3,
        "k" => exp10 += 3,
        "M" => exp10 += 6,
        "G" => exp10 += 9,
        "T" => exp10 += 12,
        "P" => exp10 += 15,
        "E" => exp10 += 18,
        "Ki" => binary = 1 << 10,
        "Mi" => binary = 1 << 20,
        "Gi" => binary = 1 << 30,
        "Ti" => binary = 1 << 40,
        "Pi" => binary = 1 << 50,
        "Ei" => binary = 1 << 60,
        other => {
            // Decimal exponent form: 1e3, 1E-3.
            let rest = other.strip_prefix(['e', 'E'])?;
            let e: i32 = rest.parse().ok()?;
            exp10 = exp10.checked_add(e)?;
        }
    }
    // milli-units: value * 1000
    exp10 += 3;
    let mut value = mantissa.checked_mul(binary)?;
    if exp10 >= 0 {
        value = value.checked_mul(10i128.checked_pow(u32::try_from(exp10).ok()?)?)?;
    } else {
        let div = 10i128.checked_pow(u32::try_from(-exp10).ok()?)?;
        // Round up like Quantity.MilliValue().
        value = (value + div - 1) / div;
    }
    Some(if negative { -value } else { value })
}

/// CPU in millicores (`"500m"` → 500, `"2"` → 2000).
pub fn cpu_millis(input: &str) -> Option<i64> {
    parse_milli(input).and_then(|v| i64::try_from(v).ok())
}

/// Memory (or any plain count) in whole units, rounded up (`"2Gi"` → 2147483648).
pub fn whole_units(input: &str) -> Option<i64> {
    parse_milli(input).and_then(|v| i64::try_from((v + 999).div_euclid(1000)).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu() {
        assert_eq!(cpu_millis("500m"), Some(500));
        assert_eq!(cpu_millis("1"), Some(1000));
        assert_eq!(cpu_millis("0.5"), Some(500));
        assert_eq!(cpu_millis("1.5"), Some(1500));
        assert_eq!(cpu_millis("100m"), Some(100));
        assert_eq!(cpu_millis("1e3"), Some(1_000_000));
        assert_eq!(cpu_millis("1k"), Some(1_000_000));
        assert_eq!(cpu_millis("250000u"), Some(250));
        assert_eq!(cpu_millis("1n"), Some(1)); // rounds up
    }

    #[test]
    fn memory() {
        assert_eq!(whole_units("2Gi"), Some(2 * 1024 * 1024 * 1024));
        assert_eq!(whole_units("512Mi"), Some(512 * 1024 * 1024));
        assert_eq!(whole_units("1G"), Some(1_000_000_000));
        assert_eq!(whole_units("128974848"), Some(128_974_848));
        assert_eq!(whole_units("129e6"), Some(129_000_000));
        assert_eq!(whole_units("1.5Gi"), Some(1_610_612_736));
        assert_eq!(whole_units("110"), Some(110));
    }

    #[test]
    fn rejects_garbage() {
        for bad in ["", "abc", "1.2.3", "Gi", "1Zi", "1e", ".", "--1"] {
            assert_eq!(parse_milli(bad), None, "{bad}");
        }
    }
}
