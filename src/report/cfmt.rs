//! A small C `printf` emulator, so perftest's format strings can be reproduced
//! byte for byte (field widths, `-` padding, `%#x` prefixes, `%g`, `nan`).
//!
//! Supported: flags `-+ 0#`, width, `.precision`, length modifiers `hh h l ll j z t L q`,
//! conversions `d i u x X o f F e E g G s c %`. `*` widths are not supported (perftest
//! does not use them). Missing or mismatched arguments never panic: a missing argument
//! prints as empty, a mismatched one is converted the way a C cast would.
//! Deviation: `%#g` follows C99 where glibc has a rounding-carry bug (glibc prints
//! `1.e+06` for `%#g` of 999999.5); perftest never uses `%#g`.

use std::fmt::Write as _;

/// One printf argument.
#[derive(Clone, Copy, Debug)]
pub enum Arg<'a> {
    /// Signed integer (`%d`, `%i`).
    I(i64),
    /// Unsigned integer (`%u`, `%x`, `%lu`, `PRIu64`).
    U(u64),
    /// Floating point (`%f`, `%lf`, `%e`, `%g`).
    F(f64),
    /// String (`%s`).
    S(&'a str),
}

impl Arg<'_> {
    fn as_u64(self) -> u64 {
        match self {
            Arg::I(v) => v as u64,
            Arg::U(v) => v,
            Arg::F(v) => v as u64,
            Arg::S(_) => 0,
        }
    }
    fn as_f64(self) -> f64 {
        match self {
            Arg::I(v) => v as f64,
            Arg::U(v) => v as f64,
            Arg::F(v) => v,
            Arg::S(_) => 0.0,
        }
    }
}

#[derive(Default, Clone, Copy)]
struct Spec {
    left: bool,
    plus: bool,
    space: bool,
    zero: bool,
    alt: bool,
    width: usize,
    prec: Option<usize>,
    /// Integer size in bits for d/u/x (C's default-promoted int is 32).
    bits: u32,
}

/// Formats `args` according to the C format string `fmt`.
pub fn sprintf(fmt: &str, args: &[Arg<'_>]) -> String {
    let mut out = String::with_capacity(fmt.len() + 16);
    let mut args = args.iter().copied();
    let b = fmt.as_bytes();
    let mut i = 0;
    let mut lit = 0;
    while i < b.len() {
        if b[i] != b'%' {
            i += 1;
            continue;
        }
        out.push_str(&fmt[lit..i]);
        let (s, at) = parse_spec(b, i + 1);
        i = at;
        if i >= b.len() {
            lit = b.len();
            break;
        }
        let conv = b[i] as char;
        i += 1;
        lit = i;
        convert(&mut out, &s, conv, &mut args);
    }
    out.push_str(&fmt[lit.min(b.len())..]);
    out
}

/// A conversion's flags, width, precision and length modifier, from `b[i..]`; returns the
/// spec and the index of the conversion character.
fn parse_spec(b: &[u8], mut i: usize) -> (Spec, usize) {
    let mut s = Spec {
        bits: 32,
        ..Spec::default()
    };
    while i < b.len() {
        match b[i] {
            b'-' => s.left = true,
            b'+' => s.plus = true,
            b' ' => s.space = true,
            b'0' => s.zero = true,
            b'#' => s.alt = true,
            _ => break,
        }
        i += 1;
    }
    (s.width, i) = digits(b, i);
    if i < b.len() && b[i] == b'.' {
        let (p, at) = digits(b, i + 1);
        s.prec = Some(p);
        i = at;
    }
    while i < b.len() && matches!(b[i], b'h' | b'l' | b'j' | b'z' | b't' | b'L' | b'q') {
        s.bits = match (b[i], s.bits) {
            (b'h', 16) => 8,
            (b'h', _) => 16,
            _ => 64,
        };
        i += 1;
    }
    (s, i)
}

/// A decimal number at `b[i..]` (0 when none; saturating), and the index after it.
fn digits(b: &[u8], mut i: usize) -> (usize, usize) {
    let mut n = 0usize;
    while i < b.len() && b[i].is_ascii_digit() {
        n = n.saturating_mul(10).saturating_add((b[i] - b'0') as usize);
        i += 1;
    }
    (n, i)
}

/// One conversion, taking its argument (if any) from `args`.
fn convert<'a>(out: &mut String, s: &Spec, conv: char, args: &mut impl Iterator<Item = Arg<'a>>) {
    match conv {
        '%' => out.push('%'),
        'd' | 'i' => signed(out, s, args.next()),
        'u' | 'x' | 'X' | 'o' => unsigned(out, s, conv, args.next()),
        'f' | 'F' | 'e' | 'E' | 'g' | 'G' => {
            let v = args.next().map_or(0.0, Arg::as_f64);
            float_field(out, s, conv, v);
        }
        's' => {
            let v = match args.next() {
                Some(Arg::S(v)) => v,
                _ => "",
            };
            let v = match s.prec {
                Some(p) => truncate_bytes(v, p),
                None => v,
            };
            pad(out, s, v, false);
        }
        'c' => {
            let v = args.next().map_or(0, Arg::as_u64) as u8 as char;
            pad(out, s, v.encode_utf8(&mut [0; 4]), false);
        }
        _ => {
            // Unknown conversion: C leaves it undefined; keep the text visible.
            out.push('%');
            out.push(conv);
        }
    }
}

/// `%d`/`%i`: the value cut to its C size, then sign, width and precision.
fn signed(out: &mut String, s: &Spec, a: Option<Arg<'_>>) {
    let v = a.map_or(0, |a| match a {
        Arg::I(v) => v,
        other => other.as_u64() as i64,
    });
    let v = match s.bits {
        8 => v as i8 as i64,
        16 => v as i16 as i64,
        32 => v as i32 as i64,
        _ => v,
    };
    let sign = sign_of(v < 0, s);
    int_field(out, s, sign, "", &v.unsigned_abs().to_string());
}

/// `%u`/`%x`/`%X`/`%o`: the value cut to its C size, in its base, with `#`'s prefix.
fn unsigned(out: &mut String, s: &Spec, conv: char, a: Option<Arg<'_>>) {
    let v = a.map_or(0, Arg::as_u64);
    let v = match s.bits {
        8 => v as u8 as u64,
        16 => v as u16 as u64,
        32 => v as u32 as u64,
        _ => v,
    };
    let (digits, prefix) = match conv {
        'u' => (v.to_string(), ""),
        'x' => (format!("{v:x}"), if s.alt && v != 0 { "0x" } else { "" }),
        'X' => (format!("{v:X}"), if s.alt && v != 0 { "0X" } else { "" }),
        _ => {
            let d = format!("{v:o}");
            // '#' makes the first digit a 0.
            let d = if s.alt && !d.starts_with('0') {
                format!("0{d}")
            } else {
                d
            };
            (d, "")
        }
    };
    int_field(out, s, "", prefix, &digits);
}

fn truncate_bytes(v: &str, n: usize) -> &str {
    if v.len() <= n {
        return v;
    }
    let mut end = n;
    while !v.is_char_boundary(end) {
        end -= 1;
    }
    &v[..end]
}

/// Pads `body` to the field width. `numeric_zero`: zero padding is allowed and
/// goes after `sign_len` leading bytes of `body`.
fn pad(out: &mut String, s: &Spec, body: &str, numeric_zero: bool) {
    pad_signed(out, s, body, if numeric_zero { Some(0) } else { None });
}

fn pad_signed(out: &mut String, s: &Spec, body: &str, zero_after: Option<usize>) {
    let n = body.chars().count();
    if n >= s.width {
        out.push_str(body);
        return;
    }
    let fill = s.width - n;
    if s.left {
        out.push_str(body);
        out.extend(std::iter::repeat(' ').take(fill));
    } else if let (true, Some(at)) = (s.zero, zero_after) {
        out.push_str(&body[..at]);
        out.extend(std::iter::repeat('0').take(fill));
        out.push_str(&body[at..]);
    } else {
        out.extend(std::iter::repeat(' ').take(fill));
        out.push_str(body);
    }
}

fn int_field(out: &mut String, s: &Spec, sign: &str, prefix: &str, digits: &str) {
    let mut body = String::with_capacity(s.width.max(24));
    body.push_str(sign);
    body.push_str(prefix);
    match s.prec {
        // C: precision 0 with value 0 prints no digits (octal '#' keeps its "0").
        Some(0) if digits == "0" => {}
        Some(p) if p > digits.len() => {
            body.extend(std::iter::repeat('0').take(p - digits.len()));
            body.push_str(digits);
        }
        _ => body.push_str(digits),
    }
    // The '0' flag is ignored when a precision is given.
    let zero_at = s.prec.is_none().then_some(sign.len() + prefix.len());
    pad_signed(out, s, &body, zero_at);
}

/// printf's sign column: '-' for a negative value, else '+' with the `+`
/// flag, ' ' with the space flag, or nothing.
fn sign_of(negative: bool, s: &Spec) -> &'static str {
    if negative {
        "-"
    } else if s.plus {
        "+"
    } else if s.space {
        " "
    } else {
        ""
    }
}

fn float_field(out: &mut String, s: &Spec, conv: char, v: f64) {
    let upper = conv.is_ascii_uppercase();
    let sign = sign_of(v.is_sign_negative(), s);
    if !v.is_finite() {
        let word = match (v.is_nan(), upper) {
            (true, false) => "nan",
            (true, true) => "NAN",
            (false, false) => "inf",
            (false, true) => "INF",
        };
        pad(out, s, &format!("{sign}{word}"), false);
        return;
    }
    let a = v.abs();
    let prec = s.prec.unwrap_or(6);
    let mut body = String::from(sign);
    match conv.to_ascii_lowercase() {
        'f' => {
            let _ = write!(body, "{a:.prec$}");
            if s.alt && prec == 0 {
                body.push('.');
            }
        }
        'e' => body.push_str(&fmt_e(a, prec, s.alt, upper)),
        _ => body.push_str(&fmt_g(a, prec, s.alt, upper)),
    }
    pad_signed(out, s, &body, Some(sign.len()));
}

/// `%e` of a non-negative finite value.
fn fmt_e(a: f64, prec: usize, alt: bool, upper: bool) -> String {
    let r = format!("{a:.prec$e}"); // e.g. "1.234560e5", "0.0e0"
    let (mant, exp) = r.split_once('e').unwrap_or((&r, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let mut m = mant.to_string();
    if alt && prec == 0 {
        m.push('.');
    }
    let e = if upper { 'E' } else { 'e' };
    let es = if exp < 0 { '-' } else { '+' };
    format!("{m}{e}{es}{:02}", exp.unsigned_abs())
}

/// `%g` of a non-negative finite value (C99 7.21.6.1 rules).
fn fmt_g(a: f64, prec: usize, alt: bool, upper: bool) -> String {
    let p = if prec == 0 { 1 } else { prec };
    // The exponent X is that of the %e conversion with precision P-1 (after rounding).
    let x: i32 = if a == 0.0 {
        0
    } else {
        let r = format!("{:.*e}", p - 1, a);
        r.split_once('e').map_or(0, |(_, e)| e.parse().unwrap_or(0))
    };
    let mut body = if (x as i64) < p as i64 && x >= -4 {
        let fp = (p as i64 - 1 - x as i64) as usize;
        format!("{a:.fp$}")
    } else {
        fmt_e(a, p - 1, alt, upper)
    };
    if !alt {
        // Strip trailing zeros of the fraction (and a dangling '.').
        let (num, exp) = match body.find(['e', 'E']) {
            Some(k) => (body[..k].to_string(), body[k..].to_string()),
            None => (body.clone(), String::new()),
        };
        let num = if num.contains('.') {
            num.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            num
        };
        body = num + &exp;
    } else if !body.contains('.') {
        match body.find(['e', 'E']) {
            Some(k) => body.insert(k, '.'),
            None => body.push('.'),
        }
    }
    body
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CString;

    /// Calls libc's snprintf with one argument.
    fn c1(fmt: &str, a: Arg<'_>) -> String {
        let f = CString::new(fmt).unwrap();
        let mut buf = vec![0u8; 512];
        let n = match a {
            // SAFETY: buf is 512 writable bytes; the format consumes exactly one
            // argument of the passed C type (the test picks matching pairs).
            Arg::F(v) => unsafe { libc::snprintf(buf.as_mut_ptr().cast(), 512, f.as_ptr(), v) },
            // SAFETY: as above; a 64-bit value is passed for l/ll conversions.
            Arg::U(v) => unsafe { libc::snprintf(buf.as_mut_ptr().cast(), 512, f.as_ptr(), v) },
            // SAFETY: as above.
            Arg::I(v) => unsafe { libc::snprintf(buf.as_mut_ptr().cast(), 512, f.as_ptr(), v) },
            Arg::S(v) => {
                let s = CString::new(v).unwrap();
                // SAFETY: as above; `s` is a NUL-terminated string alive for the call.
                unsafe { libc::snprintf(buf.as_mut_ptr().cast(), 512, f.as_ptr(), s.as_ptr()) }
            }
        };
        assert!(n >= 0 && (n as usize) < 512);
        buf.truncate(n as usize);
        String::from_utf8(buf).unwrap()
    }

    fn floats() -> Vec<f64> {
        let mut v = vec![
            0.0,
            -0.0,
            0.1,
            0.005,
            0.015,
            0.025,
            0.125,
            0.375,
            1.005,
            2.675,
            0.0999999,
            0.09999999999,
            0.1000001,
            0.5,
            1.5,
            2.5,
            -2.5,
            9.995,
            9.9999999,
            99.995,
            11716.84,
            11715.97,
            0.187456,
            0.1874565,
            1e-7,
            5e-7,
            4.9999999e-7,
            123456789.0,
            1e15,
            1e16,
            1.7976931348623157e308,
            5e-324,
            -1.25,
            -0.001,
            96.06,
            1e21,
            3.0e-5,
            0.0001,
            0.00001,
            123456.5,
            1234567.0,
            100000.0,
            999999.5,
            f64::NAN,
            -f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
        ];
        // A deterministic sweep of awkward values (xorshift).
        let mut x: u64 = 0x9E3779B97F4A7C15;
        for _ in 0..400 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let m = (x % 10_000_000) as f64;
            let e = ((x >> 40) % 16) as i32 - 8;
            v.push(m * 10f64.powi(e) / 7.0);
            v.push((x % 100_000) as f64 / 1000.0 + 0.005);
        }
        v
    }

    #[test]
    fn floats_match_libc() {
        let fmts = [
            "%-7.2lf", "%-7.6lf", "%.2f", "%-3.2f", "%7.2f", "%f", "%.0f", "%#.0f", "%+.3f",
            "% .3f", "%010.3f", "%-010.3f", "%g", "%.3g", "%.0g", "%10.4g", "%G", "%e", "%.3e",
            "%E", "%#.0e", "%lf", "%.10f", "%-12.1f|",
        ];
        for f in fmts {
            for &v in &floats() {
                assert_eq!(
                    sprintf(f, &[Arg::F(v)]),
                    c1(f, Arg::F(v)),
                    "fmt {f} value {v:e}"
                );
            }
        }
    }

    #[test]
    fn ints_match_libc() {
        let vals: [u64; 12] = [
            0,
            1,
            7,
            15,
            255,
            0x1234,
            65535,
            65536,
            0xdeadbeef,
            u32::MAX as u64,
            0x7f12_3456_7000,
            u64::MAX,
        ];
        let fmts64 = [
            "%lu", "%-7lu", "%-10lu", "%#016llx", "%016llx", "%llx", "%#llX", "%lo", "%#lo",
            "%20lu|", "%.5lu", "%.0lu", "%-#18lx|",
        ];
        for f in fmts64 {
            for &v in &vals {
                assert_eq!(
                    sprintf(f, &[Arg::U(v)]),
                    c1(f, Arg::U(v)),
                    "fmt {f} value {v}"
                );
            }
        }
        // 32-bit conversions: pass values C would see as unsigned int.
        let fmts32 = [
            "%#04x", "%#06x", "%#08x", "%02d", "%d", "%u", "%x", "%05d", "%-5d|",
        ];
        for f in fmts32 {
            for &v in &vals {
                let v32 = v as u32 as u64;
                let c = c1(f, Arg::U(v32));
                assert_eq!(sprintf(f, &[Arg::U(v32)]), c, "fmt {f} value {v32}");
            }
        }
        for v in [-1i64, -42, 0, 42, i32::MIN as i64, i32::MAX as i64] {
            for f in ["%d", "%5d", "%-5d|", "%05d", "%+d", "% d", "%.3d"] {
                assert_eq!(
                    sprintf(f, &[Arg::I(v)]),
                    c1(f, Arg::I(v)),
                    "fmt {f} value {v}"
                );
            }
            for f in ["%ld", "%08ld"] {
                assert_eq!(
                    sprintf(f, &[Arg::I(v)]),
                    c1(f, Arg::I(v)),
                    "fmt {f} value {v}"
                );
            }
        }
        assert_eq!(sprintf("%hu", &[Arg::U(70000)]), "4464");
    }

    #[test]
    fn strings_and_literals() {
        for (f, v) in [
            ("%s", "mlx5_0"),
            ("%-10s|", "RC"),
            ("%10s|", "RC"),
            ("%.3s", "abcdef"),
        ] {
            assert_eq!(sprintf(f, &[Arg::S(v)]), c1(f, Arg::S(v)));
        }
        assert_eq!(sprintf("CPU_Util[%%]\t\n", &[]), "CPU_Util[%]\t\n");
        assert_eq!(
            sprintf("%s: %02d:%02d", &[Arg::S("GID"), Arg::U(254), Arg::U(3)]),
            "GID: 254:03"
        );
        // Missing arguments and a dangling '%' do not panic.
        assert_eq!(sprintf("a %d b %s c", &[]), "a 0 b  c");
        assert_eq!(sprintf("x%", &[]), "x");
    }
}
