//! Kubernetes resource quantities (`10Gi`, `500M`, `1.5Ti`, `1e9`) as whole bytes, for
//! comparing a snapshot's `restoreSize` with a PVC's requested storage.
//!
//! The grammar is apimachinery's (`k8s.io/apimachinery/pkg/api/resource/quantity.go`):
//! an optional sign, digits with an optional decimal point, then a binary suffix
//! (`Ki Mi Gi Ti Pi Ei`), a decimal one (`n u m "" k M G T P E`) or an exponent (`e3`,
//! `E-2`). A fraction of a byte rounds up: a size is never read as smaller than written.

/// Why a quantity cannot be read as a size.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuantityError {
    #[error("{0:?} is not a quantity (digits, then a suffix such as Gi or G)")]
    Syntax(String),
    #[error("{0:?} is negative: not a size")]
    Negative(String),
    #[error("{0:?} is out of the range of a size in bytes")]
    OutOfRange(String),
}

/// The longest quantity text read; the API server's own are far shorter.
const MAX_LEN: usize = 64;

/// Whole bytes of a quantity (rounded up).
pub fn bytes(q: &str) -> Result<u128, QuantityError> {
    let syntax = || QuantityError::Syntax(q.to_owned());
    if q.is_empty() || q.len() > MAX_LEN {
        return Err(syntax());
    }
    let (negative, rest) = match q.as_bytes()[0] {
        b'-' => (true, &q[1..]),
        b'+' => (false, &q[1..]),
        _ => (false, q),
    };
    let number_end = rest
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(rest.len());
    let (number, suffix) = rest.split_at(number_end);
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    if (whole.is_empty() && fraction.is_empty()) || fraction.contains('.') {
        return Err(syntax());
    }
    // value = digits / 10^frac_digits × base^power
    let digits: String = [whole, fraction].concat();
    let out_of_range = || QuantityError::OutOfRange(q.to_owned());
    let mantissa: u128 = digits.parse().map_err(|_| out_of_range())?;
    let frac_digits = u32::try_from(fraction.len()).map_err(|_| syntax())?;
    let (base, power): (u128, i32) = match suffix {
        "Ki" => (1024, 1),
        "Mi" => (1024, 2),
        "Gi" => (1024, 3),
        "Ti" => (1024, 4),
        "Pi" => (1024, 5),
        "Ei" => (1024, 6),
        "n" => (10, -9),
        "u" => (10, -6),
        "m" => (10, -3),
        "" => (10, 0),
        "k" => (10, 3),
        "M" => (10, 6),
        "G" => (10, 9),
        "T" => (10, 12),
        "P" => (10, 15),
        "E" => (10, 18),
        s if s.starts_with(['e', 'E']) => {
            let exp: i32 = s[1..]
                .parse()
                .ok()
                .filter(|_| s[1..].bytes().any(|b| b.is_ascii_digit()))
                .ok_or_else(syntax)?;
            (10, exp)
        }
        _ => return Err(syntax()),
    };
    if negative && mantissa != 0 {
        return Err(QuantityError::Negative(q.to_owned()));
    }
    let mut numerator = mantissa;
    let mut denominator: u128 = 10u128.checked_pow(frac_digits).ok_or_else(out_of_range)?;
    let scale = base
        .checked_pow(power.unsigned_abs())
        .ok_or_else(out_of_range)?;
    if power >= 0 {
        numerator = numerator.checked_mul(scale).ok_or_else(out_of_range)?;
    } else {
        denominator = denominator.checked_mul(scale).ok_or_else(out_of_range)?;
    }
    Ok(numerator.div_ceil(denominator))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binary_decimal_and_exponent_forms_are_whole_bytes() {
        for (q, want) in [
            ("0", 0),
            ("1", 1),
            ("64Mi", 64 << 20),
            ("10Gi", 10 << 30),
            ("1.5Gi", 3 << 29),
            ("1Ki", 1024),
            ("1Ti", 1 << 40),
            ("1Pi", 1 << 50),
            ("1Ei", 1 << 60),
            ("500M", 500_000_000),
            ("1G", 1_000_000_000),
            ("2k", 2000),
            ("1T", 1_000_000_000_000),
            ("1P", 1_000_000_000_000_000),
            ("1E", 1_000_000_000_000_000_000),
            ("1e9", 1_000_000_000),
            ("1E3", 1000),
            ("+5", 5),
            ("0.5", 1),
            (".5Ki", 512),
            ("5.", 5),
            ("1500m", 2),
            ("1u", 1),
            ("1n", 1),
            ("3e-1", 1),
            ("-0", 0),
            ("0.000Gi", 0),
        ] {
            assert_eq!(bytes(q), Ok(want), "{q}");
        }
    }

    #[test]
    fn anything_else_is_refused_by_name() {
        for q in [
            "", "Gi", "1.2.3", "1GiB", "1 Gi", "ten", "1e", "1e+", "1ee3", "1Gi ", "..", ".",
        ] {
            assert_eq!(bytes(q), Err(QuantityError::Syntax(q.to_owned())), "{q:?}");
        }
        assert_eq!(bytes("-1Gi"), Err(QuantityError::Negative("-1Gi".into())));
        for q in [
            "1e40",
            "99999999999999999999999999999999999999999",
            "1e-100",
        ] {
            assert_eq!(
                bytes(q),
                Err(QuantityError::OutOfRange(q.to_owned())),
                "{q}"
            );
        }
        assert!(matches!(
            bytes(&"1".repeat(65)),
            Err(QuantityError::Syntax(_))
        ));
    }

    #[test]
    fn a_size_compares_across_forms() {
        assert!(bytes("10Gi").unwrap() > bytes("10G").unwrap());
        assert_eq!(bytes("1024Mi"), bytes("1Gi"));
        assert_eq!(bytes("1073741824"), bytes("1Gi"));
    }
}
