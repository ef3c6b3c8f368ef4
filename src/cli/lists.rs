//! The comma lists some flags take (`-W` counter names, `--cpus` CPU
//! lists), checked while the flags are resolved. They live in `cli`, not
//! with the tool modules that use them, so that `cli::params` imports
//! nothing from `tool` (which imports `cli::params`).

/// Checks a `-W` list: names relative to the port's sysfs folder.
pub fn parse_list(list: &str) -> Result<Vec<String>, String> {
    let names: Vec<String> = list.split(',').map(|s| s.trim().to_string()).collect();
    for n in &names {
        if n.is_empty() || n.starts_with('/') || n.split('/').any(|c| c == ".." || c.is_empty()) {
            return Err(format!(
                "-W {list}: '{n}' is not a counter name; give paths under \
                 /sys/class/infiniband/<dev>/ports/<port>/, e.g. hw_counters/sent_pkts, separated by commas"
            ));
        }
    }
    Ok(names)
}

/// Parse a Linux CPU list ("0-3,8,10-11").
pub fn parse_cpu_list(s: &str) -> Result<Vec<usize>, String> {
    let mut out = Vec::new();
    for part in s.trim().split(',').filter(|p| !p.is_empty()) {
        let bad = || format!("'{s}' is not a CPU list: use e.g. 0-3,8 (part '{part}')");
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (usize, usize) = (
                    a.trim().parse().map_err(|_| bad())?,
                    b.trim().parse().map_err(|_| bad())?,
                );
                if a > b {
                    return Err(bad());
                }
                out.extend(a..=b);
            }
            None => out.push(part.trim().parse().map_err(|_| bad())?),
        }
    }
    if out.is_empty() {
        return Err(format!("'{s}' names no CPU"));
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_stay_under_the_port() {
        assert_eq!(
            parse_list("hw_counters/sent_pkts,counters/port_xmit_data").unwrap(),
            vec!["hw_counters/sent_pkts", "counters/port_xmit_data"]
        );
        for bad in ["/etc/passwd", "../../x", "a//b", ""] {
            assert!(parse_list(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpu_list("0-3,8").unwrap(), vec![0, 1, 2, 3, 8]);
        assert_eq!(parse_cpu_list("5\n").unwrap(), vec![5]);
        assert_eq!(parse_cpu_list("3,1,1").unwrap(), vec![1, 3]);
        assert!(parse_cpu_list("4-2")
            .unwrap_err()
            .contains("not a CPU list"));
        assert!(parse_cpu_list("x").is_err());
        assert!(parse_cpu_list("").is_err());
    }
}
