//! An unknown flag answered with one sentence naming the flag meant, instead
//! of clap's generic tip and a usage line that is not the command's: the
//! same name spelt with `-`/`_` swapped (`--report-gbits`), the flag whose
//! words contain the ones given (`--use_dm`), or one a typo or two away.

use super::flags::{self, Status};

/// `--Name_X` → `name_x`: how two spellings of one flag compare.
fn key(name: &str) -> String {
    name.trim_start_matches('-')
        .to_ascii_lowercase()
        .replace('-', "_")
}

/// Levenshtein distance (short flag names only, so the quadratic table is fine).
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != *cb)).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}

/// The flag meant by `given` among the long flags `own` (the command's,
/// and perftest's flag table where [`sentence`] adds it; the raw tools'
/// parser asks with theirs).
pub(crate) fn meant<'a>(given: &str, own: &'a [String]) -> Option<&'a str> {
    let k = key(given);
    if k.is_empty() {
        return None;
    }
    let all = || own.iter().map(String::as_str);
    if let Some(c) = all().find(|c| key(c) == k) {
        return Some(c);
    }
    let words: Vec<&str> = k.split('_').filter(|w| !w.is_empty()).collect();
    let has_words = |c: &str| {
        let ck = key(c);
        words.len() > 1 && words.iter().all(|w| ck.split('_').any(|x| x == *w))
    };
    if let Some(c) = all().filter(|c| has_words(c)).min_by_key(|c| c.len()) {
        return Some(c);
    }
    all()
        .map(|c| (distance(&key(c), &k), c))
        .filter(|(d, _)| *d <= 2 && *d < k.len() / 2)
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// The sentence for an unknown argument `given` (as clap quotes it, value
/// included) of `rdmaperf <sub>`, whose long flags are `own`.
pub fn sentence(sub: &str, given: &str, own: &[String]) -> String {
    let flag = given.split('=').next().unwrap_or(given);
    let mut names: Vec<String> = own.to_vec();
    names.extend(flags::PERFTEST_FLAGS.iter().map(|f| f.long.to_string()));
    let cmd = if sub.is_empty() {
        "rdmaperf".to_string()
    } else {
        format!("rdmaperf {sub}")
    };
    let help = format!("`{cmd} --help` lists the flags it takes");
    if !flag.starts_with("--") {
        return format!("{cmd}: unknown flag {flag}; {help}\n");
    }
    let Some(m) = meant(flag, &names) else {
        return format!("{cmd}: unknown flag {flag}; {help}\n");
    };
    let why = match flags::by_long(m).map(|f| f.status) {
        Some(Status::Refused(why)) if !own.iter().any(|o| o == m) => {
            format!("; rdmaperf refuses that one too (--{m}: {why})")
        }
        _ => String::new(),
    };
    format!("{cmd}: unknown flag {flag}: the flag meant is --{m}{why}; {help}\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    fn own() -> Vec<String> {
        [
            "report_gbits",
            "use-srq",
            "use_cuda",
            "use_hugepages",
            "size",
            "post",
        ]
        .map(String::from)
        .to_vec()
    }

    #[test]
    fn names_the_flag_meant() {
        let s = |g| sentence("write-bw", g, &own());
        let e = s("--report-gbits");
        assert!(
            e.contains("--report-gbits: the flag meant is --report_gbits;"),
            "{e}"
        );
        assert!(s("--use_srq").contains("is --use-srq;"));
        assert!(s("--use-hugepages").contains("is --use_hugepages;"));
        assert!(s("--report_gbit").contains("is --report_gbits;"));
        let e = s("--use_dm");
        assert!(
            e.contains(
                "is --use_ib_dm_dmabuf; rdmaperf refuses that one too (--use_ib_dm_dmabuf: needs"
            ),
            "{e}"
        );
        assert!(!e.contains("--use_cuda"), "{e}");
        let e = s("--frobnicate=3");
        assert!(
            e.starts_with(
                "rdmaperf write-bw: unknown flag --frobnicate; `rdmaperf write-bw --help`"
            ),
            "{e}"
        );
        assert!(s("-Z").contains("unknown flag -Z;"));
    }

    #[test]
    fn distances() {
        assert_eq!(distance("size", "size"), 0);
        assert_eq!(distance("sise", "size"), 1);
        assert_eq!(distance("", "abc"), 3);
    }
}
